"""Property-based tests of every theorem of docs/THEORY.md: its conclusion on generated instances that
satisfy its assumptions, and a dropped assumption for which the search finds a counterexample.

How the counterexample tests work: ``hypothesis.find(strategy, condition)`` searches the strategy
(generated instances, not a hand-picked one) for an instance on which the conclusion FAILS and
returns the simplest such instance (shrunk); it raises ``NoSuchExample`` -- failing the test -- if
the search finds none within its budget.  The instance found is then re-checked in the test body.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from helpers.solver_strategies import psd_curves, quadratic_problems
from helpers.strategies import examples
from helpers.theorem_strategies import (
    coordinates,
    cost_profiles,
    dirac_1d,
    dirac_1d_duplicated,
    gaussian_manifolds,
    indefinite_quadratics,
    seeds,
)

from noisealloc.theory.tolerances import BUDGET_ATOL_QUAD, FD_RTOL, FW_GAP_RTOL, MC_NSIGMA, THETA_STAR_ATOL
from noisealloc.verify import checks
from noisealloc.verify.checks import sandwich as checks_sandwich, theorem1 as checks_theorem1, theorem2 as checks_theorem2
from noisealloc.verify.checks.rmt import finite_n_allocation, sqrt_law_allocation

# No shrinking phase: the first counterexample generated is returned (shrinking would re-run the
# expensive condition many times; the instance is still found by the search, not chosen).
FIND = settings(max_examples=examples(60), database=None, deadline=None, suppress_health_check=list(HealthCheck),
                phases=(Phase.generate,))
FEW = settings(max_examples=examples(8), deadline=None)


# ------------------------------------------------------------------------ I-MMSE and budget (section 2)


@FEW
@given(dirac_1d())
def test_i_mmse_identity_on_random_dirac_mixtures(model):
    r = checks.check_i_mmse(model, np.linspace(-4.0, 4.0, 9))
    assert r.holds, f"I-MMSE relative error {r.value:.3g} > FD_RTOL = {FD_RTOL:g}"


def _budget_gap(model):
    from noisealloc.theory.information.budget import budget_integral

    b = budget_integral(model, -25.0, 25.0, n_panels=4, rtol=1e-7)
    return abs(b.value - model.entropy)


@settings(max_examples=examples(4), deadline=None)
@given(dirac_1d())
def test_budget_identity_on_random_dirac_mixtures(model):
    # atoms >= 0.8 apart: H(25) < 1e-300 and H(pi) - H(-25) ~ e^-25 Var, both far below the tolerance
    assert _budget_gap(model) <= BUDGET_ATOL_QUAD


def test_budget_identity_fails_without_distinct_atoms():
    # Dropped: well-separated atoms.  Two atoms 1e-12 apart are not resolved on [-25, 25], H(25) keeps
    # the entropy of their split > 0, and int h < H(pi).
    found = find(dirac_1d_duplicated(), lambda m: _budget_gap(m) > 1e-3, settings=settings(FIND, max_examples=examples(10)))
    assert _budget_gap(found) > 1e-3


# ------------------------------------------------------------------------ Theorem 1 (atoms)


@settings(max_examples=examples(12), deadline=None)
@given(psd_curves())
def test_theorem1_certified_optimum_within_atom_bound(curve):
    from noisealloc.solvers import solve
    from noisealloc.solvers.algorithms.support import reduce_support

    lam, A = curve
    m = A.shape[1]
    res = solve(A, "L", grid=lam)
    val, gap, _ = checks_theorem1._l_gap(A, np.eye(m), res.weights)  # independent gradient
    assert gap <= FW_GAP_RTOL * val
    red = reduce_support(A, res.weights, "L")
    q = red.weights
    val_q, gap_q, _ = checks_theorem1._l_gap(A, np.eye(m), q)
    assert np.count_nonzero(q) <= m * (m + 1) // 2 + 1
    np.testing.assert_allclose(val_q, val, rtol=1e-9, err_msg="the Caratheodory reduction must keep the value")


def _per_level_problem(blocks):
    """Independent learners: level i informs only its own block of parameters (no sharing)."""
    n, k, _ = blocks.shape
    A = np.zeros((n, n * k, n * k))
    for i in range(n):
        A[i, i * k:(i + 1) * k, i * k:(i + 1) * k] = blocks[i]
    return A


@st.composite
def _blocks(draw):
    n = draw(st.integers(2, 6))
    k = draw(st.integers(1, 2))
    rng = np.random.default_rng(draw(seeds))
    C = rng.uniform(-1, 1, size=(n, k, k))
    return C @ np.swapaxes(C, 1, 2) + 0.1 * np.eye(k)


def test_theorem1_bound_fails_without_shared_parameters():
    # Dropped: one parameter vector theta in R^k shared by all levels.  With per-level
    # parameters (m = n k), the optimum charges every level, beyond k(k+1)/2 + 1 atoms.
    from noisealloc.solvers import solve

    def exceeds(blocks):
        k = blocks.shape[1]
        res = solve(_per_level_problem(blocks), "L")
        return np.count_nonzero(res.weights > 1e-12) > k * (k + 1) // 2 + 1

    found = find(_blocks(), exceeds, settings=FIND)
    assert exceeds(found)


# ------------------------------------------------------------------------ Theorem 1' (population form)


@settings(max_examples=examples(20), deadline=None)
@given(quadratic_problems())
def test_theorem1p_reduction_keeps_theta_star(inst):
    from noisealloc.solvers.theorem1p import reduce_population

    H, b, p = inst
    m = H.shape[1]

    def theta_star(w):
        return np.linalg.solve(np.einsum("i,ijk->jk", w, H), np.einsum("i,ijk,ik->j", w, H, b))

    th = theta_star(p)
    grads = np.einsum("ijk,ik->ij", H, th[None, :] - b)
    q = reduce_population(grads, p).weights
    assert np.count_nonzero(q) <= m + 1
    np.testing.assert_allclose(theta_star(q), th, rtol=0, atol=THETA_STAR_ATOL)


def test_theorem1p_fails_without_convexity():
    # Dropped: convex per-level losses.  The first-order condition still holds at theta*(p) for the
    # reduced q, but with indefinite Hessians theta*(p) can be a saddle of q's mixed loss (not its optimum).
    from noisealloc.solvers.theorem1p import reduce_population

    def saddle(inst):
        H, b, p = inst
        th = np.linalg.solve(np.einsum("i,ijk->jk", p, H), np.einsum("i,ijk,ik->j", p, H, b))
        grads = np.einsum("ijk,ik->ij", H, th[None, :] - b)
        q = reduce_population(grads, p).weights
        return np.linalg.eigvalsh(np.einsum("i,ijk->jk", q, H))[0] < -1e-6

    found = find(indefinite_quadratics(), saddle, settings=FIND)
    assert saddle(found)


# ------------------------------------------------------------------------ Theorem 2 (square-root law)


@pytest.mark.slow
@settings(max_examples=examples(20), deadline=None)
@given(cost_profiles(), seeds)
def test_theorem2_sqrt_law_is_the_minimum(a, seed):
    p_star, v_star = checks.closed_form_sqrt_allocation(a)
    p_num, v_num = checks.numerical_min_allocation(a)
    assert abs(v_num - v_star) <= checks_theorem2.THEOREM2_NUMERIC_RTOL * v_star
    assert v_num >= v_star * (1 - 64 * np.finfo(float).eps * a.size)
    rng = np.random.default_rng(seed)
    for s in (1e-3, 1e-1, 1.0):
        q = p_star * np.exp(s * rng.standard_normal(a.size))
        q /= q.sum()
        assert np.sum(a / q) >= v_star * (1 - 64 * np.finfo(float).eps * a.size)


def test_theorem2_fails_with_finite_sample_costs():
    # Dropped: first-order cost c/n.  With the exact OLS cost q/(n - q - 1) the square-root law
    # is beaten (by > 1%) by the finite-n closed form, or even starves a learner below q + 2 samples.
    def ols(a, q, n):
        return np.inf if np.any(n <= q + 1) else float(np.sum(a * q / (n - q - 1)))

    def beaten(inst):
        a, q, r = inst
        N = r * a.size * (q + 1)
        return ols(a, q, sqrt_law_allocation(a, N)) > 1.01 * ols(a, q, finite_n_allocation(a, q, N))

    found = find(st.tuples(cost_profiles(), st.integers(2, 20), st.floats(1.1, 20.0)), beaten, settings=FIND)
    assert beaten(found)


# ------------------------------------------------------------------------ feature-noise decoupling


@pytest.mark.slow
@settings(max_examples=examples(6), deadline=None)
@given(gaussian_manifolds(), st.floats(-4.0, 4.0), seeds)
def test_decoupling_c_equals_q_mmse_for_gaussian_data(model, lam, seed):
    ratio, se = checks.feature_cost_ratio(model, lam, checks_theorem2.quadratic_features, n=40_000, rng=seed)
    assert abs(ratio - 1) <= MC_NSIGMA * se, f"c/(q mmse) = {ratio:.4f} +- {se:.4f}"


def test_decoupling_fails_when_residual_correlates_with_features():
    # Dropped: residual uncorrelated with the squared features (Dirac mixtures: the residual lives
    # near the decision boundaries).  Departure by more than 6 standard errors.
    def departs(inst):
        model, lam, seed = inst
        ratio, se = checks.feature_cost_ratio(model, lam, checks_theorem2.quadratic_features, n=20_000, rng=seed)
        return se > 0 and abs(ratio - 1) > 6 * se

    found = find(st.tuples(dirac_1d(), st.floats(-3.0, 2.0), seeds), departs, settings=settings(FIND, max_examples=examples(20)))
    assert departs(found)


# ------------------------------------------------------------------------ sandwich vs simulated training


@pytest.mark.slow
@settings(max_examples=examples(5), deadline=None)
@given(gaussian_manifolds(), seeds)
def test_sandwich_matches_simulated_training_when_well_specified(model, seed):
    from noisealloc.solvers import sandwich_value
    from noisealloc.theory.information.matrices import gaussian_linear_matrices as gaussian_linear_problem

    rng = np.random.default_rng(seed)
    lam = np.linspace(-3.0, 3.0, 5)
    p = rng.uniform(0.2, 1.0, size=lam.size)
    p /= p.sum()
    prob = gaussian_linear_problem(model, lam)
    V = sandwich_value(prob.A, prob.G, prob.A_eval, p)
    N = 1000
    sims = checks.simulate_sandwich(prob, p, model, N=N, n_seeds=200, rng=rng)
    se = sims.std(ddof=1) / np.sqrt(sims.size)
    allow = MC_NSIGMA * se + checks_sandwich.SANDWICH_FINITE_N_FACTOR * (prob.m + 1) / N * V
    assert abs(sims.mean() - V) <= allow


def _misspecified_gain(inst):
    r"""One Gaussian direction (variance s), learner D = theta y with ONE gain for all levels
    (the Bayes gain s/(s + sigma^2) varies with lam: misspecified).  Returns (V with the Bayes
    residual, simulated mean of N A_omega/2 (theta_hat - theta*(p))^2, its SE).  The training
    residual theta* y - z carries the approximation error (theta* - g)^2 E y^4 that the Bayes
    residual lacks."""
    s, w, seed = inst
    lam = np.array([-2.0, 0.0, 2.0])
    p = np.asarray(w) / np.sum(w)
    sig2 = np.exp(-lam)
    omega = 0.5 * np.exp(lam)
    Ey2 = s + sig2
    A = 2 * Ey2
    mmse = s * sig2 / (s + sig2)
    G_bayes = 4 * Ey2 * mmse  # Gaussian residual independent of y
    A_eval = np.trapezoid(omega * A, lam)
    A_p, G_p = p @ A, p @ G_bayes
    V = 0.5 * A_eval * G_p / A_p**2
    theta_star = s / (p @ Ey2)
    rng = np.random.default_rng(seed)
    N, S = 1000, 400
    l = rng.choice(lam.size, size=(S, N), p=p)
    z = rng.standard_normal((S, N)) * np.sqrt(s)
    y = z + np.sqrt(sig2[l]) * rng.standard_normal((S, N))
    th = np.sum(y * z, axis=1) / np.sum(y * y, axis=1)
    # the quantity V(p) predicts: N times the quadratic excess around theta*(p), with the
    # evaluation curvature A_omega / 2 (in a well-specified family this is all of R(theta_hat) - R(theta*))
    ex = N * 0.5 * A_eval * (th - theta_star) ** 2
    return V, ex.mean(), ex.std(ddof=1) / np.sqrt(S)


def test_sandwich_fails_for_misspecified_family():
    # Dropped: well-specified family.  The sandwich with the Bayes residual misses the
    # approximation error (and theta*(p) no longer minimises R): simulated training disagrees.
    def disagrees(inst):
        V, mean, se = _misspecified_gain(inst)
        return abs(mean - V) > MC_NSIGMA * se + checks_sandwich.SANDWICH_FINITE_N_FACTOR * 2 / 1000 * V

    strat = st.tuples(st.floats(0.1, 4.0), st.lists(st.floats(0.1, 1.0), min_size=3, max_size=3), seeds)
    found = find(strat, disagrees, settings=settings(FIND, max_examples=examples(30)))
    assert disagrees(found)


# ------------------------------------------------------------------------ coordinate covariance


@settings(max_examples=examples(6), deadline=None)
@given(dirac_1d(), coordinates)
def test_sqrt_law_is_coordinate_covariant(model, coord):
    r = checks.check_coordinate_covariance(model, (coord,), lam=np.linspace(-5.0, 5.0, 81))
    assert r.holds, r.measured


def test_lambda_law_is_suboptimal_for_learners_in_another_coordinate():
    # Dropped: building the law in the learners' own coordinate.  The lambda-law, used by learners
    # uniform in u, loses a factor > 1.01 (the law is not invariant under a change of coordinate).
    def loses(inst):
        model, coord = inst
        r = checks.check_coordinate_covariance(model, (coord,), lam=np.linspace(-5.0, 5.0, 81))
        return r.measured[coord]["factor_lambda_law_in_u"] > 1.01

    found = find(st.tuples(dirac_1d(), coordinates), loses, settings=settings(FIND, max_examples=examples(10)))
    assert loses(found)


# ------------------------------------------------------------------------ reports


def test_check_report_to_dict_is_plain_json():
    import json

    r = checks.CheckReport(name="x", holds=True, measured={"a": np.arange(3.0), "b": np.float64(np.inf)},
                           tolerance=1.0, headline="a")
    d = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert d["measured"]["a"] == [0.0, 1.0, 2.0] and d["measured"]["b"] == "inf"
    assert np.isnan(r.value)  # an array headline is not a number


@pytest.mark.parametrize("check", [checks.check_theorem2, checks.check_decoupling])
def test_checks_are_deterministic(check):
    kw = {"n": 4000} if check is checks.check_decoupling else {"n_perturb": 20}
    a, b = check(rng=3, **kw), check(rng=3, **kw)
    assert a.holds == b.holds
    for k, v in a.measured.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(v, b.measured[k])


def test_checks_reject_bad_input():
    with pytest.raises(ValueError, match="criteria"):
        checks.check_theorem1(criteria=("X",))
    with pytest.raises(ValueError, match="entropy rate vanishes"):
        checks.check_theorem2(lam=np.linspace(-8.0, 40.0, 9))
    from noisealloc.theory.information.matrices import gaussian_linear_matrices as gaussian_linear_problem
    from noisealloc.theory.information.matrices import spline_matrices as spline_problem

    prob = spline_problem(gaussian_linear_problem(checks.default_gaussian(), np.linspace(-2, 2, 5)), 2)
    with pytest.raises(ValueError, match="family"):
        checks.simulate_sandwich(prob, np.full(5, 0.2), checks.default_gaussian(), N=10, n_seeds=2)
