"""The Aitchison-Aitken smoothed law (docs/THEORY.md section 7.5).

Oracles: the same law enumerated as a FiniteLaw (V**L weighted strings), a direct leave-one-out
likelihood by loops over the sample maximised by scipy's bounded scalar search, and the product law
(a single training string smoothed is a product law).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from noisealloc.theory import tolerances as tol
from noisealloc.theory.masked import MarkovChain, ProductLaw, SmoothedLaw, fit_delta


@pytest.fixture(scope="module")
def train():
    return MarkovChain([[0.9, 0.1], [0.3, 0.7]], L=8).sample_strings(60, rng=0)


def direct_loo(strings, delta, V):
    K, L = strings.shape
    total = 0.0
    for i in range(K):
        d = np.delete((strings != strings[i]).sum(axis=1), i)
        total += math.log(np.mean((1 - delta) ** (L - d) * (delta / (V - 1)) ** d))
    return total


def test_delta_is_the_leave_one_out_maximiser(train):
    fit = fit_delta(train, 2)
    ref = minimize_scalar(lambda d: -direct_loo(train, d, 2), bounds=(1e-6, 0.5), method="bounded",
                          options={"xatol": 1e-10})
    assert fit.success and fit.status == 0
    assert abs(fit.delta - ref.x) <= 1e-6 * ref.x
    assert abs(fit.loo_log_likelihood - direct_loo(train, fit.delta, 2)) <= 1e-9 * abs(ref.fun)


def test_delta_fit_three_letters():
    rng = np.random.default_rng(4)
    base = rng.integers(0, 3, (5, 6))
    sample = np.where(rng.random((40, 6)) < 0.2, rng.integers(0, 3, (40, 6)), base[rng.integers(0, 5, 40)])
    fit = fit_delta(sample, 3)
    ref = minimize_scalar(lambda d: -direct_loo(sample, d, 3), bounds=(1e-6, 2 / 3), method="bounded",
                          options={"xatol": 1e-10})
    assert abs(fit.delta - ref.x) <= 1e-5 * ref.x


def test_identical_rows_put_delta_at_the_boundary():
    fit = fit_delta(np.zeros((5, 4), dtype=int), 2)
    assert not fit.success and fit.status == 1 and "boundary" in fit.message


def test_per_sample_values_equal_the_enumerated_law(train):
    law = SmoothedLaw(train, 2)
    fl = law.finite_law()
    rng = np.random.default_rng(1)
    x = law.sample_strings(50, rng=2)
    for p in (0.1, 0.5, 0.9):
        mask = rng.random(x.shape) < p
        H, per = law.sample_values(x, mask)
        assert H is None
        np.testing.assert_allclose(per, fl.sample_values(x, mask)[1], atol=tol.MASKED_EXACT_ATOL)
    np.testing.assert_allclose(law.marginal_entropies, fl.marginal_entropies, atol=tol.MASKED_EXACT_ATOL)
    est = law.entropy
    assert abs(float(est.value) - fl.entropy) <= tol.MC_NSIGMA * float(est.stderr)


def test_one_string_smoothed_is_a_product_law():
    law = SmoothedLaw([[0, 2, 1]], 3, delta=0.3)
    prod = ProductLaw([[0.7, 0.15, 0.15], [0.15, 0.15, 0.7], [0.15, 0.7, 0.15]])
    x = prod.sample_strings(20, rng=0)
    mask = np.random.default_rng(1).random(x.shape) < 0.5
    np.testing.assert_allclose(law.sample_values(x, mask)[1], prod.sample_values(x, mask)[1],
                               atol=tol.MASKED_EXACT_ATOL)
    np.testing.assert_allclose(law.log_prob([[0, 2, 1]]), [3 * math.log(0.7)], rtol=4 * tol.EPS)


def test_smoothing_keeps_the_rate_alive_where_the_empirical_rate_dies(train):
    """Memorisation (section 7.5): at high lambda the empirical h vanishes, the smoothed one does not."""
    lam = np.array([4.0])
    emp = SmoothedLaw(train, 2).support.information(lam, n_samples=300, rng=0)
    smo = SmoothedLaw(train, 2).information(lam, n_samples=300, rng=0)
    assert smo.entropy_rate.value[0] > emp.entropy_rate.value[0] + tol.MC_NSIGMA * (
        smo.entropy_rate.stderr[0] + emp.entropy_rate.stderr[0])
    assert smo.conditional_entropy is None


def test_budget_with_estimated_entropy(train):
    law = SmoothedLaw(train, 2)
    check = law.budget_check(np.linspace(-24.0, 24.0, 97), n_samples=200, rng=5)
    assert check.holds, check.message
    assert check.entropy_stderr > 0


def test_same_seed_same_output(train):
    law = SmoothedLaw(train, 2, delta=0.1)
    a = law.information([0.0, 1.0], n_samples=50, rng=3).entropy_rate.value
    b = law.information([0.0, 1.0], n_samples=50, rng=3).entropy_rate.value
    np.testing.assert_array_equal(a, b)


def test_refusals(train):
    with pytest.raises(ValueError, match=r"delta must lie in"):
        SmoothedLaw(train, 2, delta=0.7)
    with pytest.raises(ValueError, match=r"strings must have at least 2 rows"):
        SmoothedLaw([[0, 1, 1]], 2)
    with pytest.raises(ValueError, match=r"strings must be < V = 2"):
        SmoothedLaw([[0, 2], [1, 1]], 2)
    with pytest.raises(ValueError, match=r"V must be an integer >= 2"):
        fit_delta([[0, 0], [0, 0]], 1)
