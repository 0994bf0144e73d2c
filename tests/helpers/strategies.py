"""Hypothesis strategies for data models (shared by the posterior-engine tests; names are stable).

* ``dirac_mixtures(dim=1, min_atoms=2, max_atoms=4)``: ``DiracMixture`` with atoms in
  ``[-2, 2]^dim``, pairwise distances >= 0.1, weights in ``[0.05, 1]`` (normalised).
* ``gaussian_manifolds(max_dim=4)``: ``GaussianManifold`` with a random orthonormal basis
  (QR of a Gaussian matrix), ``k`` in ``[1, D]``, variances in ``[0.05, 5]``.
* ``lams(lo=-6, hi=6)``: a finite log-SNR level.
* ``examples(n)``: the example count of a test whose ``ci`` budget is ``n``, scaled by the active
  hypothesis profile (``fuzz`` multiplies it; see tests/conftest.py).
"""

from __future__ import annotations

import numpy as np
from hypothesis import assume, settings
from hypothesis import strategies as st

from noisealloc.theory.models.dirac import DiracMixture
from noisealloc.theory.models.gaussian import GaussianManifold

__all__ = ["dirac_mixtures", "gaussian_manifolds", "lams", "examples"]

#: ``max_examples`` of the ``ci`` profile; a test's own budget is scaled by the active profile's ratio to it.
CI_MAX_EXAMPLES = 40


def examples(n: int) -> int:
    """Hypothesis example count for a test whose budget under the ``ci`` profile is ``n``.

    A bare ``@settings(max_examples=15)`` pins the count whatever the profile, so the ``fuzz``
    profile could never search longer; this scales ``n`` by the active profile's ``max_examples``
    relative to ``ci``'s (1x under ``ci``, 50x under ``fuzz``).
    """
    factor = settings.default.max_examples / CI_MAX_EXAMPLES
    return max(1, int(round(n * factor)))


def lams(lo=-6.0, hi=6.0):
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


@st.composite
def dirac_mixtures(draw, dim=1, min_atoms=2, max_atoms=4, min_sep=0.1):
    k = draw(st.integers(min_atoms, max_atoms))
    coords = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)
    atoms = np.array(draw(st.lists(st.lists(coords, min_size=dim, max_size=dim), min_size=k, max_size=k)))
    d = np.sqrt(((atoms[:, None, :] - atoms[None, :, :]) ** 2).sum(-1)) + np.eye(k) * 10
    assume(d.min() >= min_sep)
    w = np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=k, max_size=k)))
    return DiracMixture(atoms, w)


@st.composite
def gaussian_manifolds(draw, max_dim=4):
    d = draw(st.integers(1, max_dim))
    k = draw(st.integers(1, d))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, k)))
    var = np.array(draw(st.lists(st.floats(0.05, 5.0), min_size=k, max_size=k)))
    mean = rng.standard_normal(d)
    return GaussianManifold(mean, q, var)
