"""Hypothesis strategies for the theorem tests (documented, bounded ranges).

* :func:`dirac_1d`: 1-D Dirac mixtures, ``K`` in [2, 4] atoms in [-3, 3] at least 0.8 apart
  (so the quadrature is fast and h > 1e-8 over a useful range), weights in [0.1, 1] normalised.
* :func:`dirac_1d_duplicated`: the same, with one atom repeated (two atoms at one point:
  the "distinct atoms" assumption of the budget identity dropped).
* :func:`gaussian_manifolds`: ``D`` in [1, 3], ``k`` in [1, D], variances in [0.1, 4], random
  orthonormal basis, mean in [-1, 1]^D.
* :func:`cost_profiles`: positive per-cell costs ``a`` (length 4..30, values in [1e-3, 10]).
* :func:`indefinite_quadratics`: per-level quadratic losses with symmetric, possibly indefinite
  Hessians (eigenvalues in [-1, 2]) whose uniform mixture is positive definite (the convexity of
  Theorem 1' dropped).
* :func:`coordinates`: a non-affine coordinate name ('sigma', 't-cosine', 't-linear', 't-edm').
"""

from __future__ import annotations

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

__all__ = ["dirac_1d", "dirac_1d_duplicated", "gaussian_manifolds", "cost_profiles", "indefinite_quadratics",
           "coordinates", "seeds"]

seeds = st.integers(0, 2**31 - 1)
coordinates = st.sampled_from(["sigma", "t-cosine", "t-linear", "t-edm"])


def _positions(rng, K):
    gaps = rng.uniform(0.8, 2.0, size=K - 1)
    x = np.concatenate([[0.0], np.cumsum(gaps)])
    x = x - x.mean()
    return np.clip(x, -3.0, 3.0)


@st.composite
def dirac_1d(draw, k_min: int = 2, k_max: int = 4):
    from noisealloc.theory.models.dirac import DiracMixture

    K = draw(st.integers(k_min, k_max))
    rng = np.random.default_rng(draw(seeds))
    x = _positions(rng, K)
    assume(np.all(np.diff(x) >= 0.8 - 1e-12))
    w = rng.uniform(0.1, 1.0, size=K)
    return DiracMixture(x[:, None], w / w.sum())


@st.composite
def dirac_1d_duplicated(draw):
    from noisealloc.theory.models.dirac import DiracMixture

    K = draw(st.integers(2, 3))
    rng = np.random.default_rng(draw(seeds))
    x = _positions(rng, K)
    j = draw(st.integers(0, K - 1))
    # Identical atoms are merged by DiracMixture (one point of the law), so the dropped assumption is
    # built as a pair 1e-12 apart: resolved only near lam = 2 log(1e12) ~ 55, beyond the interval.
    x = np.concatenate([x, [x[j] + 1e-12]])
    w = rng.uniform(0.1, 1.0, size=K + 1)
    return DiracMixture(x[:, None], w / w.sum())


@st.composite
def gaussian_manifolds(draw):
    from noisealloc.theory.models.gaussian import GaussianManifold

    D = draw(st.integers(1, 3))
    k = draw(st.integers(1, D))
    rng = np.random.default_rng(draw(seeds))
    basis, _ = np.linalg.qr(rng.standard_normal((D, k)))
    s = rng.uniform(0.1, 4.0, size=k)
    return GaussianManifold(rng.uniform(-1, 1, size=D), basis, s)


@st.composite
def cost_profiles(draw, n_min: int = 4, n_max: int = 30):
    n = draw(st.integers(n_min, n_max))
    rng = np.random.default_rng(draw(seeds))
    return np.exp(rng.uniform(np.log(1e-3), np.log(10.0), size=n))


@st.composite
def indefinite_quadratics(draw):
    """``(H, b, p)``: Hessians (n, m, m) with eigenvalues in [-1, 2], targets (n, m), allocation with full support."""
    m = draw(st.integers(1, 3))
    n = draw(st.integers(m + 3, 12))
    rng = np.random.default_rng(draw(seeds))
    Q = np.linalg.qr(rng.standard_normal((n, m, m)))[0]
    ev = rng.uniform(-1.0, 2.0, size=(n, m))
    H = np.einsum("nij,nj,nkj->nik", Q, ev, Q)
    b = rng.uniform(-1, 1, size=(n, m))
    p = rng.uniform(0.1, 1.0, size=n)
    p /= p.sum()
    assume(np.linalg.eigvalsh(np.einsum("i,ijk->jk", p, H))[0] > 0.05)
    return H, b, p
