"""The I-MMSE identity for Monte-Carlo models (issue 12 item 2): integrated per draw, with standard errors.

The identity H(a) - H(b) = int_a^b 1/2 e^lam mmse dlam holds in expectation for every draw of common
random numbers' estimators, so its residual has mean 0 and a standard error computed from the draws.
The default tier checks one instance and that a broken identity is caught; the slow tier checks the
coverage of the standard error over many seeds (z-scores with mean ~0 and spread ~1).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from noisealloc.theory.models.datasets import load_data
from noisealloc.theory.information.i_mmse import IMMSEMonteCarloCheck, i_mmse_check
from noisealloc.theory.tolerances import MC_NSIGMA

LAM = np.array([-2.0, -1.0, 0.0, 1.0, 2.0, 3.0])


def _mixture():
    return load_data("dirac:K=5,D=3,sep=2,seed=0")


def test_three_dimensional_mixture_satisfies_the_identity_within_its_standard_error():
    m = _mixture()
    assert m.monte_carlo and m.discrete
    chk = i_mmse_check(m, LAM, n_samples=4096, rng=0)
    assert isinstance(chk, IMMSEMonteCarloCheck)
    assert chk.holds, chk.message
    assert np.all(chk.stderr > 0) and np.all(np.abs(chk.z) <= MC_NSIGMA)
    # the standard error is small against the quantities compared: the check has power
    assert np.all(chk.stderr < 0.02 * np.abs(chk.difference) + 1e-3)


class _Scaled:
    """A model whose mmse is 25 % too large (h inconsistent with H): the identity fails."""

    def __init__(self, model, factor):
        self.model, self.factor = model, factor
        self.monte_carlo, self.discrete = model.monte_carlo, model.discrete

    def information_samples(self, lam, **kw):
        smp = self.model.information_samples(lam, **kw)
        return dataclasses.replace(smp, mmse=smp.mmse * self.factor)


def test_a_broken_identity_is_caught():
    chk = i_mmse_check(_Scaled(_mixture(), 1.25), LAM, n_samples=4096, rng=0)
    assert not chk.holds and np.max(np.abs(chk.z)) > MC_NSIGMA, chk.message


def test_bad_input():
    with pytest.raises(ValueError, match="at least 2 strictly increasing"):
        i_mmse_check(_mixture(), [1.0], n_samples=256)
    with pytest.raises(ValueError, match="at least 2 strictly increasing"):
        i_mmse_check(_mixture(), [1.0, 0.0], n_samples=256)


@pytest.mark.slow
@pytest.mark.parametrize("spec, lam", [("dirac:K=5,D=3,sep=2,seed=0", LAM), ("digits", np.array([-2.0, 0.0, 2.0, 4.0]))])
def test_standard_error_coverage_over_seeds(spec, lam):
    """100 seeds: per interval the z-scores have mean within +-0.3 and standard deviation in [0.8, 1.25]."""
    m = load_data(spec)
    z = np.array([i_mmse_check(m, lam, n_samples=1024, rng=seed).z for seed in range(100)])
    mean, sd = z.mean(axis=0), z.std(axis=0, ddof=1)
    print(f"\n{spec}: intervals {[(float(a), float(b)) for a, b in zip(lam[:-1], lam[1:])]}\n  z mean {np.round(mean, 3)}\n  z sd   {np.round(sd, 3)}")
    assert np.all(np.abs(mean) <= 0.3), mean
    assert np.all((sd >= 0.8) & (sd <= 1.25)), sd
