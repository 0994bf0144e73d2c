"""Exact rates of finite laws under masking (docs/THEORY.md sections 7.2 and 7.4).

Oracles: closed forms of the product law and of the stationary Markov chain (independent of the finite
law's matching), and a brute-force enumeration of masks and strings (tests/helpers/masked_oracle.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.masked_oracle import brute_force_coefficients, brute_force_values
from helpers.strategies import examples
from noisealloc.theory import tolerances as tol
from noisealloc.theory.masked import FiniteLaw, MarkovChain, ProductLaw
from noisealloc.theory.masked.information import masked_budget_check
from noisealloc.theory.masked.process import mask_rate

CHAIN_P = [[0.9, 0.1], [0.3, 0.7]]
LEVELS9 = np.linspace(-8.0, 8.0, 9)


@pytest.fixture(scope="module")
def chain():
    return MarkovChain(CHAIN_P, L=12)


@pytest.fixture(scope="module")
def chain_law(chain):
    return chain.finite_law()


def z_scores(est, exact):
    """(estimate - exact) / stderr, NaN where the standard error is 0 (all draws gave the same value)."""
    se = np.asarray(est.stderr)
    diff = np.asarray(est.value) - np.asarray(exact)
    return np.where(se > 0, diff / np.where(se > 0, se, 1.0), np.nan)


def test_z_scores_helper_fires():
    from noisealloc.theory.estimates import Estimate

    e = Estimate([1.0, 2.0, 3.0], [0.1, 0.0, 0.5], "monte-carlo")
    np.testing.assert_allclose(z_scores(e, [0.6, 5.0, 3.0]), [4.0, np.nan, 0.0])


# --- (a) product law: exact, sample by sample ---------------------------------------------


def test_product_law_finite_values_equal_closed_form():
    """Every sample of the enumerated product law has S = sum_l H(p_l) and H(X|z) = sum_masked H(p_l)."""
    law = ProductLaw([[0.2, 0.8], [0.5, 0.5], [0.1, 0.9], [0.6, 0.4], [0.05, 0.95]])
    fl = law.finite_law()
    rng = np.random.default_rng(0)
    x = fl.sample_strings(200, rng=rng)
    mask = rng.random(x.shape) < 0.5
    H_f, per_f = fl.sample_values(x, mask)
    H_p, per_p = law.sample_values(x, mask)
    np.testing.assert_allclose(per_f, per_p, rtol=0, atol=tol.MASKED_EXACT_ATOL)
    np.testing.assert_allclose(H_f, H_p, rtol=0, atol=tol.MASKED_EXACT_ATOL)
    np.testing.assert_allclose(fl.entropy, law.entropy, rtol=tol.MASKED_EXACT_ATOL)
    info = fl.information(LEVELS9, n_samples=300, rng=1)
    exact = law.exact_information(LEVELS9)
    np.testing.assert_allclose(info.erasure_entropy.value, exact.erasure_entropy.value, atol=tol.MASKED_EXACT_ATOL)
    np.testing.assert_allclose(info.entropy_rate.value, exact.entropy_rate.value, atol=tol.MASKED_EXACT_ATOL)
    assert np.all(info.erasure_entropy.stderr <= tol.MASKED_EXACT_ATOL)
    assert np.all(np.abs(np.nan_to_num(z_scores(info.conditional_entropy, exact.conditional_entropy.value)))
                  <= tol.MC_NSIGMA)


def test_product_law_closed_form_identities():
    law = ProductLaw([[0.3, 0.3, 0.4], [0.9, 0.05, 0.05]])
    lam = np.array([-3.0, 0.0, 2.0])
    info = law.exact_information(lam)
    a, e = 1 / (1 + np.exp(-lam)), 1 / (1 + np.exp(lam))
    np.testing.assert_allclose(info.entropy_rate.value, a * e * law.entropy, rtol=4 * tol.EPS)
    np.testing.assert_allclose(info.loss.value, info.entropy_rate.value / a, rtol=8 * tol.EPS)
    np.testing.assert_allclose(info.conditional_entropy.value, e * law.entropy, rtol=4 * tol.EPS)


# --- (b) Markov chain: model, finite law and closed form -------------------------------------


def test_markov_closed_form_matches_brute_force():
    """The closed form of MarkovChain.exact_information against plain enumeration (L = 4, V = 3)."""
    P = np.array([[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    ch = MarkovChain(P, L=4)
    fl = ch.finite_law()
    lam = np.array([-4.0, -1.0, 0.0, 1.5, 5.0])
    H, S = brute_force_values(fl.strings, fl.weights, 3, lam)
    ex = ch.exact_information(lam)
    np.testing.assert_allclose(ex.erasure_entropy.value, S, rtol=tol.MASKED_EXACT_RTOL)
    np.testing.assert_allclose(ex.conditional_entropy.value, H, rtol=tol.MASKED_EXACT_RTOL)
    assert abs(ch.entropy - fl.entropy) <= tol.MASKED_EXACT_ATOL


def test_markov_forward_backward_equals_finite_law_per_sample(chain, chain_law):
    rng = np.random.default_rng(5)
    x = chain.sample_strings(300, rng=rng)
    mask = rng.random(x.shape) < 0.6
    H_c, per_c = chain.sample_values(x, mask)
    H_f, per_f = chain_law.sample_values(x, mask)
    np.testing.assert_allclose(per_c, per_f, rtol=0, atol=tol.MASKED_EXACT_ATOL)
    np.testing.assert_allclose(H_c, H_f, rtol=0, atol=tol.MASKED_EXACT_ATOL)


@pytest.mark.parametrize("which", ["model", "finite"])
def test_markov_rates_within_4_se_of_closed_form(chain, chain_law, which):
    """Acceptance (b): V = 2, L = 12, 9 levels on [-8, 8]; h, S, H and L* within 4 standard errors."""
    model = chain if which == "model" else chain_law
    info = model.information(LEVELS9, n_samples=1000, rng=11)
    exact = chain.exact_information(LEVELS9)
    for name in ("conditional_entropy", "erasure_entropy", "entropy_rate", "loss"):
        z = z_scores(getattr(info, name), getattr(exact, name).value)
        assert np.all(np.isfinite(z)) and np.all(np.abs(z) <= tol.MC_NSIGMA), (which, name, z.round(2))


@pytest.mark.parametrize("which", ["model", "finite"])
def test_markov_budget(chain, chain_law, which):
    model = chain if which == "model" else chain_law
    check = model.budget_check(np.linspace(-24.0, 24.0, 97), n_samples=200, rng=3)
    assert check.holds, check.message
    assert abs(check.value - chain.entropy) <= tol.MC_NSIGMA * check.stderr + check.abs_error + check.tail_bound
    assert check.tail_bound < 1e-8


# --- (c) standard-error coverage ---------------------------------------------------------------


def _coverage(model, exact, seeds, n_samples):
    zs = []
    for seed in seeds:
        info = model.information(LEVELS9, n_samples=n_samples, rng=seed)
        zs.append([z_scores(getattr(info, q), getattr(exact, q).value)
                   for q in ("conditional_entropy", "entropy_rate")])
    return np.array(zs)  # (seeds, 2, levels)


def test_stderr_coverage_fast(chain):
    """z-scores of 24 seeds x 9 levels x 2 quantities: mean ~ 0, spread ~ 1 (fast tier)."""
    z = _coverage(chain, chain.exact_information(LEVELS9), range(24), 150)
    assert np.isfinite(z).sum() >= 0.9 * z.size
    assert abs(np.nanmean(z)) <= 0.35, np.nanmean(z)
    assert 0.75 <= np.nanstd(z) <= 1.3, np.nanstd(z)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["model", "finite"])
def test_stderr_coverage_many_seeds(chain, chain_law, which):
    """200 seeds: overall mean within 0.15 of 0, spread within 10 % of 1, every level's spread in [0.8, 1.2]."""
    model = chain if which == "model" else chain_law
    z = _coverage(model, chain.exact_information(LEVELS9), range(200), 200)
    assert np.isfinite(z).sum() >= 0.9 * z.size
    assert abs(np.nanmean(z)) <= 0.15, np.nanmean(z)
    assert 0.9 <= np.nanstd(z) <= 1.1, np.nanstd(z)
    per_level = np.nanstd(z, axis=0)
    assert np.all((per_level >= 0.8) & (per_level <= 1.2)), per_level.round(2)


# --- (d) every level finite ---------------------------------------------------------------------


def test_extreme_levels_are_finite(chain, chain_law):
    lam = np.array([-1e4, -50.0, 0.0, 50.0, 1e4])
    for model in (chain, chain_law, ProductLaw([[0.5, 0.5]] * 3)):
        info = model.information(lam, n_samples=50, rng=0)
        for q in ("conditional_entropy", "erasure_entropy", "entropy_rate", "loss"):
            est = getattr(info, q)
            assert np.all(np.isfinite(est.value)) and np.all(np.isfinite(est.stderr)), (q, est.value)
        np.testing.assert_allclose(info.conditional_entropy.value[0], model.entropy, rtol=tol.MASKED_EXACT_RTOL)
        assert info.conditional_entropy.value[-1] == 0.0 and info.entropy_rate.value[-1] == 0.0
    ex = chain.exact_information(lam)
    assert np.all(np.isfinite(ex.entropy_rate.value)) and ex.entropy_rate.value[0] == 0.0


# --- (e) the area theorem on random small finite laws, by exact enumeration of masks -------------


@st.composite
def small_laws(draw):
    V = draw(st.integers(2, 3))
    L = draw(st.integers(1, 5))
    K = draw(st.integers(1, min(8, V ** L)))
    codes = draw(st.lists(st.integers(0, V ** L - 1), min_size=K, max_size=K, unique=True))
    strings = np.array([[(c // V ** j) % V for j in range(L)] for c in codes])
    w = np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=K, max_size=K)))
    return strings, w / w.sum(), V


@settings(max_examples=examples(30))
@given(law=small_laws())
def test_area_theorem_by_enumeration(law):
    """h >= 0, -dH/dlam = alpha eps S, and int h dlam = H(pi) exactly (Beta integrals of the mask sums)."""
    strings, w, V = law
    H_coef, S_coef, budget = brute_force_coefficients(strings, w, V)
    entropy = -float(np.sum(w * np.log(w)))
    assert np.all(S_coef >= 0)
    assert abs(budget - entropy) <= tol.MASKED_EXACT_ATOL * max(1.0, entropy)
    # dH/deps = S (the area theorem): derivative of the polynomial in eps at a few rates
    L = strings.shape[1]
    c = np.arange(L + 1)
    for e in (0.2, 0.5, 0.9):
        dbasis = c * e ** np.maximum(c - 1, 0) * (1 - e) ** (L - c) - (L - c) * e ** c * (1 - e) ** np.maximum(L - c - 1, 0)
        basis = e ** c * (1 - e) ** (L - c)
        assert abs(dbasis @ H_coef - basis @ S_coef) <= tol.MASKED_EXACT_ATOL * max(1.0, entropy)


@settings(max_examples=examples(20))
@given(law=small_laws(), seed=st.integers(0, 2 ** 16))
def test_finite_law_per_sample_values_match_enumeration(law, seed):
    """FiniteLaw's GEMM route and its incremental sweep against plain filtering, sample by sample."""
    from helpers.masked_oracle import entropy

    strings, w, V = law
    fl = FiniteLaw(strings, V, weights=w)
    rng = np.random.default_rng(seed)
    x = fl.sample_strings(6, rng=rng)
    u = rng.random(x.shape)
    eps = mask_rate(np.array([-3.0, -0.5, 0.0, 1.0, 4.0]))
    for e, (H_s, per_s) in zip(eps, fl._level_sweep(x, u, eps)):
        mask = u < e
        H_d, per_d = fl.sample_values(x, mask)
        for i in range(x.shape[0]):
            vis = np.flatnonzero(~mask[i])
            post = [wk for s, wk in zip(strings, w) if np.all(s[vis] == x[i, vis])]
            assert abs(H_d[i] - entropy(post)) <= tol.MASKED_EXACT_ATOL
            for l in range(strings.shape[1]):
                others = vis[vis != l]
                tok = np.zeros(V)
                for s, wk in zip(strings, w):
                    if np.all(s[others] == x[i, others]):
                        tok[s[l]] += wk
                assert abs(per_d[i, l] - entropy(tok)) <= tol.MASKED_EXACT_ATOL
        np.testing.assert_allclose(H_s, H_d, atol=tol.MASKED_EXACT_ATOL)
        np.testing.assert_allclose(per_s, per_d, atol=tol.MASKED_EXACT_ATOL)


def test_oracle_fires_on_a_wrong_law():
    """The brute-force oracle tells a product law from a correlated one (it is not vacuous)."""
    pl = ProductLaw([[0.5, 0.5], [0.5, 0.5]])
    _, S_prod, budget = brute_force_coefficients(pl.finite_law().strings, pl.finite_law().weights, 2)
    assert abs(budget - 2 * math.log(2)) <= tol.MASKED_EXACT_ATOL
    _, S_copy, _ = brute_force_coefficients(np.array([[0, 0], [1, 1]]), np.array([0.5, 0.5]), 2)
    assert abs(S_copy[0] - S_prod[0]) > 0.1  # copies: the other token reveals everything when visible


# --- sweep, seeds, duplicates ------------------------------------------------------------------


def test_information_same_seed_same_output(chain_law):
    a = chain_law.information(LEVELS9, n_samples=64, rng=9)
    b = chain_law.information(LEVELS9, n_samples=64, rng=9)
    np.testing.assert_array_equal(a.entropy_rate.value, b.entropy_rate.value)
    assert a.samples.seed == 9


def test_unsorted_levels_give_the_same_values(chain_law):
    lam = np.array([3.0, -2.0, 0.5])
    a = chain_law.information(lam, n_samples=64, rng=4)
    b = chain_law.information(np.sort(lam), n_samples=64, rng=4)
    np.testing.assert_allclose(a.entropy_rate.value, b.entropy_rate.value[[2, 0, 1]], atol=tol.MASKED_EXACT_ATOL)


def test_duplicates_merge_and_count_path_matches_weights():
    rng = np.random.default_rng(0)
    S = rng.integers(0, 3, (60, 4))
    uniform_rows = FiniteLaw(S, 3)
    _, inv, counts = np.unique(S, axis=0, return_inverse=True, return_counts=True)
    weighted = FiniteLaw(np.unique(S, axis=0), 3, weights=counts / counts.sum())
    assert uniform_rows.K == weighted.K < 60
    x = uniform_rows.sample_strings(40, rng=1)
    mask = rng.random(x.shape) < 0.5
    for a, b in zip(uniform_rows.sample_values(x, mask), weighted.sample_values(x, mask)):
        np.testing.assert_allclose(a, b, atol=tol.MASKED_EXACT_ATOL)
    assert abs(uniform_rows.entropy - weighted.entropy) <= tol.MASKED_EXACT_ATOL


def test_budget_check_fails_on_a_wrong_entropy(chain):
    samples = chain.information_samples(np.linspace(-24.0, 24.0, 97), n_samples=200, rng=3)
    good = masked_budget_check(samples, chain.entropy, float(chain.marginal_entropies.sum()))
    bad = masked_budget_check(samples, chain.entropy + 0.5, float(chain.marginal_entropies.sum()))
    assert good.holds and not bad.holds and "> tolerance" in bad.message


# --- (f) refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,match", [
    (dict(strings=[[0, 1], [1, 2]], V=2), r"strings must be < V = 2"),
    (dict(strings=[[0, -1]], V=2), r"strings must be >= 0"),
    (dict(strings=[[0.5, 1.0]], V=2), r"strings must hold integers"),
    (dict(strings=[[0, 1], [1]], V=2), r"strings must be a rectangular"),
    (dict(strings=[[0, 0]], V=1), r"V must be an integer >= 2"),
    (dict(strings=[[0, 1], [1, 0]], V=2, weights=[0.5, 0.6]), r"weights must sum to 1"),
    (dict(strings=[[0, 1], [1, 0]], V=2, weights=[1.5, -0.5]), r"weights must be >= 0"),
    (dict(strings=[[0, 1], [1, 0]], V=2, weights=[1.0]), r"weights must have shape \(2,\)"),
    (dict(strings=[[0, 1], [1, 0]], V=2, weights=[np.nan, 1.0]), r"weights must be finite"),
])
def test_finite_law_refusals(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FiniteLaw(**kwargs)


def test_other_refusals(chain_law):
    with pytest.raises(ValueError, match=r"lam must be finite"):
        chain_law.information([0.0, np.nan], n_samples=10, rng=0)
    with pytest.raises(ValueError, match=r"n_samples must be >= 1"):
        chain_law.information([0.0], n_samples=0, rng=0)
    with pytest.raises(ValueError, match=r"mask must be a boolean array"):
        chain_law.sample_values(np.zeros((1, 12), dtype=int), np.zeros((1, 12)))
    with pytest.raises(ValueError, match=r"x must be strings of the law"):
        FiniteLaw([[0, 0]], 2).sample_values([[1, 1]], [[False, False]])
    with pytest.raises(ValueError, match=r"P rows must sum to 1"):
        MarkovChain([[0.5, 0.6], [0.5, 0.5]], L=3)
    with pytest.raises(ValueError, match=r"P must be square"):
        MarkovChain([[0.5, 0.5]], L=3)
    with pytest.raises(ValueError, match=r"marginals must hold finite probabilities"):
        ProductLaw([[1.5, -0.5]])
    with pytest.raises(ValueError, match=r"V\*\*L must be <="):
        MarkovChain(CHAIN_P, L=40).finite_law()


@pytest.mark.parametrize("which", ["model", "finite"])
def test_three_state_chain_both_routes(which):
    """V = 3, L = 6: forward-backward and GEMM matching agree with the closed form within 4 s.e."""
    P = np.array([[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    ch = MarkovChain(P, L=6)
    model = ch if which == "model" else ch.finite_law()
    lam = np.linspace(-6.0, 6.0, 7)
    info, ex = model.information(lam, n_samples=1500, rng=1), ch.exact_information(lam)
    for name in ("conditional_entropy", "entropy_rate"):
        z = z_scores(getattr(info, name), getattr(ex, name).value)
        assert np.all(np.abs(z) <= tol.MC_NSIGMA), (name, z.round(2))


def test_single_position_is_exact_with_a_rounding_floor():
    """L = 1: every quantity is exact for every draw; the reported error is the rounding floor, z ~ 0."""
    pl = ProductLaw([[0.3, 0.7]])
    lam = np.array([-3.0, 0.0, 3.0])
    info, ex = pl.finite_law().information(lam, n_samples=100, rng=0), pl.exact_information(lam)
    for name in ("conditional_entropy", "entropy_rate"):
        z = z_scores(getattr(info, name), getattr(ex, name).value)
        assert np.all(np.abs(z) <= 1.0), (name, z)
        assert np.all(getattr(info, name).stderr <= 10 * tol.MASKED_ROUNDING_RTOL * getattr(ex, name).value)


@pytest.mark.parametrize("which", ["model", "finite"])
def test_budget_by_strata(chain, chain_law, which):
    """H(pi) = (1/(L+1)) sum_c E[S | c masked]: no quadrature, no tails (acceptance (b), second route)."""
    model = chain if which == "model" else chain_law
    check = model.budget_by_strata(n_samples=400, rng=2)
    assert check.holds, check.message
    assert check.abs_error == 0.0 and check.tail_bound == 0.0 and check.stderr > 0


def test_budget_by_strata_is_exact_for_a_product_law():
    pl = ProductLaw([[0.2, 0.8], [0.5, 0.5], [0.1, 0.9]])
    check = pl.finite_law().budget_by_strata(n_samples=30, rng=0)
    assert abs(check.value - pl.entropy) <= tol.MASKED_EXACT_ATOL and check.holds
