"""Random-matrix checks (docs/THEORY.md §4 (b) (i)-(iv)): formulas against independent routes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from helpers.strategies import examples
from helpers.theorem_strategies import cost_profiles

from noisealloc.theory.tolerances import MC_NSIGMA
from noisealloc.verify.checks import rmt


@settings(max_examples=examples(5), deadline=None)
@given(st.integers(2, 8), st.integers(6, 30), st.integers(0, 2**31 - 1))
def test_ols_excess_matches_simulation(q, extra, seed):
    n = q + extra
    spec = np.random.default_rng(seed).uniform(0.1, 3.0, size=q)  # OLS excess does not depend on it
    v = rmt.simulate_ols(q, n, spec=spec, reps=3000, rng=seed)
    se = v.std(ddof=1) / np.sqrt(v.size)
    assert abs(v.mean() - rmt.ols_excess_exact(q, n)) <= MC_NSIGMA * se


def _mp_variance(c, gamma):
    """c * int x / (x + gamma)^2 dMP_c(x): the isotropic ridge variance limit (Marchenko-Pastur)."""
    a, b = (1 - np.sqrt(c)) ** 2, (1 + np.sqrt(c)) ** 2
    dens = lambda x: np.sqrt(max((b - x) * (x - a), 0.0)) / (2 * np.pi * c * x)  # noqa: E731
    val, _ = integrate.quad(lambda x: x / (x + gamma) ** 2 * dens(x), a, b, epsabs=1e-14, epsrel=1e-12, limit=200)
    return c * val


@pytest.mark.parametrize("q,n,gamma", [(40, 80, 0.1), (40, 40, 0.05), (40, 20, 0.2), (100, 400, 0.01)])
def test_ridge_deterministic_equivalent_isotropic_equals_marchenko_pastur(q, n, gamma):
    de = float(rmt.ridge_variance_de(np.ones(q), n, gamma))
    np.testing.assert_allclose(de, _mp_variance(q / n, gamma), rtol=1e-7)


def test_ridge_deterministic_equivalent_ridgeless_limit():
    q, n = 20, 60
    de = float(rmt.ridge_variance_de(1.0 / np.arange(1, q + 1), n, 1e-12))
    np.testing.assert_allclose(de, q / (n - q), rtol=1e-6)


@settings(max_examples=examples(15), deadline=None)
@given(cost_profiles(), st.integers(2, 20), st.floats(1.2, 50.0))
def test_finite_n_allocation_satisfies_kkt_and_matches_numerics(a, q, r):
    N = r * a.size * (q + 1)
    n = rmt.finite_n_allocation(a, q, N)
    np.testing.assert_allclose(n.sum(), N, rtol=1e-12)
    marginal = a * q / (n - q - 1) ** 2  # KKT: equal marginal value of a sample at every level
    np.testing.assert_allclose(marginal, marginal.mean(), rtol=1e-9)
    n_num = rmt.numerical_finite_n_allocation(a, q, N)
    assert np.max(np.abs(n_num - n)) <= rmt.ALLOC_RTOL * N


def test_convergence_rate_and_checks_hold():
    rep = rmt.check_convergence()
    assert rep.holds
    np.testing.assert_allclose(rep.measured["slope_l1"], -1.0, rtol=0, atol=rmt.CONVERGENCE_SLOPE_ATOL)
    np.testing.assert_allclose(rep.measured["slope_l1_numerical"], -1.0, rtol=0, atol=rmt.CONVERGENCE_SLOPE_ATOL)
    assert rep.tolerance == rmt.CONVERGENCE_SLOPE_ATOL


def test_simulation_is_deterministic():
    a = rmt.simulate_ridge(5, 12, 0.1, reps=50, rng=7)
    b = rmt.simulate_ridge(5, 12, 0.1, reps=50, rng=7)
    np.testing.assert_array_equal(a, b)


def test_bad_input():
    with pytest.raises(ValueError, match="n must exceed q"):
        rmt.ols_excess_exact(10, 11)
    with pytest.raises(ValueError, match="gamma"):
        rmt.ridge_kappa(np.ones(3), 10, 0.0)
    with pytest.raises(ValueError, match="N must exceed"):
        rmt.finite_n_allocation(np.ones(4), 5, 20)


@pytest.mark.slow
def test_rmt_checks_full_tier_hold():
    reps = rmt.rmt_checks(quick=False, rng=0)
    assert set(reps) == {"i.ols", "i.ridge", "ii", "iii", "iv"}
    for k, r in reps.items():
        assert r.holds, (k, r.value, r.message)
