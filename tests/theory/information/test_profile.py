"""The information-profile pipeline (theory/information/profile.py), the data-model protocol (theory/models/protocol.py)
and the one budget and I-MMSE rule each (theory/information/)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from noisealloc.theory.coordinates import get_coordinate
from noisealloc.theory.models.datasets import load_data
from noisealloc.theory.models.dirac import DiracMixture
from noisealloc.theory.posterior.common_random_numbers import stratified_mean_stderr
from noisealloc.theory.estimates import Estimate, InformationEstimates
from noisealloc.theory.models.gaussian import GaussianManifold, GaussianManifoldMixture
from noisealloc.theory.information.budget import BUDGET_RULE, budget_check, budget_check_from_samples, budget_check_on_grid, budget_integral
from noisealloc.theory.information.rates import gregory_weights, grid_quadrature_weights
from noisealloc.theory.information.i_mmse import i_mmse_check
from noisealloc.theory.models.manifolds import Circle
from noisealloc.theory.information.profile import InformationProfile, information_profile
from noisealloc.theory.models.protocol import (
    ContinuousDataModel,
    DataModel,
    DiscreteDataModel,
    MonteCarloDataModel,
    check_data_model,
    monte_carlo_options,
)
from noisealloc.theory.tolerances import (BUDGET_ATOL_QUAD, BUDGET_RTOL, FD_REL_STEP, FD_RTOL, I_MMSE_RATE_FLOOR,
                                          MC_NSIGMA)

from helpers.strategies import examples, gaussian_manifolds

MC_SPEC = "dirac:K=20,D=8,sep=1,seed=0"  # span 8 > 2: Monte Carlo


def _models():
    g = GaussianManifold([0.0, 1.0], [[1.0], [0.0]], [2.0])
    dirac_comp = GaussianManifold([1.0, 1.0], np.zeros((2, 0)), [])
    return {
        "dirac-quadrature": DiracMixture([-1.0, 0.3, 2.0], [0.2, 0.5, 0.3]),
        "dirac-mc": load_data(MC_SPEC),
        "gaussian": g,
        "circle": Circle(1.0),
        "mixture": GaussianManifoldMixture([g, dirac_comp]),
        "mixture-of-diracs": GaussianManifoldMixture(
            [GaussianManifold([a], np.zeros((1, 0)), []) for a in (-0.5, 0.4, 1.0)]),
    }


# ----------------------------------------------------------------------------------------- protocol


@pytest.mark.parametrize("name", list(_models()))
def test_every_model_satisfies_the_protocol(name):
    m = _models()[name]
    check_data_model(m)
    assert isinstance(m, DataModel)
    # structural checks: what the declared flags promise is there
    if m.discrete:
        assert isinstance(m, DiscreteDataModel)
    else:
        assert isinstance(m, ContinuousDataModel)
    if m.monte_carlo:
        assert isinstance(m, MonteCarloDataModel)
    expected = {"dirac-quadrature": (True, False), "dirac-mc": (True, True), "gaussian": (False, False),
                "circle": (False, False), "mixture": (False, True), "mixture-of-diracs": (True, True)}[name]
    assert (bool(m.discrete), bool(m.monte_carlo)) == expected


def test_check_data_model_names_what_is_missing():
    class Half:
        dim, discrete, monte_carlo = 1, True, False

    with pytest.raises(TypeError, match="lacks sample_x0, sample_x, denoiser"):
        check_data_model(Half())

    class NoSamples(GaussianManifold):
        monte_carlo = True  # declares Monte Carlo without the per-sample method

    with pytest.raises(TypeError, match="information_samples"):
        check_data_model(NoSamples([0.0], [[1.0]], [1.0]))

    class BadFlag(GaussianManifold):
        discrete = "no"

    with pytest.raises(TypeError, match="discrete must be a bool"):
        check_data_model(BadFlag([0.0], [[1.0]], [1.0]))


def test_monte_carlo_options_follow_the_declared_flag():
    m = _models()
    assert monte_carlo_options(m["gaussian"], n_samples=10, rng=1) == {}
    assert monte_carlo_options(m["dirac-quadrature"], n_samples=10, rng=1) == {}
    assert monte_carlo_options(m["dirac-mc"], n_samples=10, rng=1) == {"n_samples": 10, "rng": 1}
    assert monte_carlo_options(m["mixture"], n_samples=None, rng=3) == {"rng": 3}
    with pytest.raises(TypeError, match="not a data model"):
        monte_carlo_options(object())


@pytest.mark.parametrize("name", ["gaussian", "circle", "mixture", "dirac-quadrature"])
def test_unknown_options_are_an_error(name):
    m = _models()[name]
    for call in (lambda: m.mmse(0.0, n_sample=5), lambda: m.entropy_rate(0.0, "lambda", seed=1),
                 lambda: m.information(0.0, bogus=True)):
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            call()


def test_deterministic_models_take_no_monte_carlo_options():
    g = _models()["gaussian"]
    with pytest.raises(TypeError, match="n_samples"):
        g.mmse(0.0, n_samples=10)
    with pytest.raises(TypeError, match="rng"):
        _models()["circle"].entropy_rate(0.0, rng=0)


def test_information_returns_the_dataclass():
    for name, m in _models().items():
        opts = monte_carlo_options(m, n_samples=64, rng=0)
        info = m.information(np.array([-1.0, 1.0]), **opts)
        assert isinstance(info, InformationEstimates), name
        assert isinstance(info.mmse, Estimate) and info.mmse.value.shape == (2,)
        assert info.entropy_rate is not None and info.entropy_rate.value.shape == (2,)
        if name in ("mixture", "mixture-of-diracs"):
            assert info.component_entropy is not None and info.mutual_information is not None
        elif m.discrete:
            assert info.conditional_entropy is not None and info.mutual_information is None
        else:
            assert info.mutual_information is not None and info.conditional_entropy is None
    with pytest.raises(TypeError, match="conditional_entropy must be an Estimate"):
        InformationEstimates(mmse=Estimate(np.zeros(1), 0.0, "closed-form"), conditional_entropy=np.zeros(1))


def test_sample_x0_with_component_matches_sample_x0():
    g = GaussianManifold([0.0, 0.0], [[1.0], [0.0]], [1.0])
    mix = GaussianManifoldMixture([g, GaussianManifold([3.0, -1.0], np.zeros((2, 0)), [])], [0.3, 0.7])
    x0 = mix.sample_x0(500, rng=4)
    x0b, lab = mix.sample_x0_with_component(500, rng=4)
    np.testing.assert_array_equal(x0, x0b)
    assert lab.shape == (500,) and set(np.unique(lab)) <= {0, 1}
    np.testing.assert_array_equal(x0b[lab == 1], np.broadcast_to([3.0, -1.0], (int(np.sum(lab == 1)), 2)))
    assert np.all(x0b[lab == 0][:, 1] == 0.0)
    # the labels follow the weights (binomial: 500 * 0.7 = 350 +- 4 sd of ~10)
    assert abs(int(np.sum(lab == 1)) - 350) <= MC_NSIGMA * np.sqrt(500 * 0.21)


# ----------------------------------------------------------------------------------------- budget rule


class _WrongRate(DiracMixture):
    """A Dirac mixture whose entropy rate is 1 % too large: the integral identity must catch it."""

    def entropy_rate(self, lam, coordinate="lambda", **kw):
        e = super().entropy_rate(lam, coordinate, **kw)
        return Estimate(e.value * 1.01, 0.0, e.method)


def test_budget_check_holds_and_reports_the_tails():
    m = DiracMixture([-1.0, 0.3, 2.0], [0.2, 0.5, 0.3])
    b = budget_check(m, -30.0, 30.0)
    assert b.holds and b.integral_holds and b.covers_budget and b.success and b.status == 0
    assert abs(b.error) <= BUDGET_ATOL_QUAD and abs(b.value - m.entropy) <= BUDGET_ATOL_QUAD
    assert b.rule == BUDGET_RULE and b.stderr == 0.0 and b.z is None
    assert b.tolerance == pytest.approx(BUDGET_ATOL_QUAD + b.abs_error, rel=1e-15)
    # a short interval: the identity on [a, b] still holds, the a-priori left-tail bound covers H(pi) - H(a)
    s = budget_check(m, -2.0, 30.0)
    assert s.holds and s.entropy - s.target > 1e-3
    assert s.entropy - s.entropy_at_ends[0] <= s.left_tail_bound
    assert s.left_tail_bound == pytest.approx(0.5 * np.exp(-2.0) * m.total_variance, rel=1e-14)


def test_budget_check_fails_on_a_wrong_rate():
    b = budget_check(_WrongRate([-1.0, 0.3, 2.0], [0.2, 0.5, 0.3]), -30.0, 30.0)
    assert not b.holds and not b.integral_holds and b.covers_budget
    assert abs(b.error) == pytest.approx(0.01 * b.target, rel=1e-6)
    assert "> tolerance" in b.message


def test_budget_check_fails_when_atoms_are_unresolved_at_lam_max():
    # Atoms 1e-4 apart are not resolved at lam = 10 (d^2 e^lam / 8 ~ 3e-5): H(b) is still about the
    # entropy of their split, so the interval does not cover the budget.
    b = budget_check(DiracMixture([0.0, 1e-4, 1.0]), -30.0, 10.0)
    assert b.integral_holds and not b.covers_budget and not b.holds
    assert b.entropy_at_ends[1] == pytest.approx(2 / 3 * np.log(2), rel=1e-3)
    assert "has not reached 0" in b.message


def test_budget_check_merges_coincident_atoms():
    # Three rows, two of them the same point: the law has two atoms of weights 2/3 and 1/3.
    m = DiracMixture([0.0, 0.0, 1.0])
    assert (m.n_atoms, m.n_merged) == (2, 1)
    assert m.entropy == pytest.approx(-(2 / 3) * np.log(2 / 3) - (1 / 3) * np.log(1 / 3), rel=1e-15)
    b = budget_check(m, -30.0, 30.0)
    assert b.holds, b.message


def test_budget_check_needs_discrete_data():
    with pytest.raises(ValueError, match="discrete data"):
        budget_check(GaussianManifold([0.0], [[1.0]], [1.0]))
    with pytest.raises(ValueError, match="lo < hi"):
        budget_check(DiracMixture([0.0, 1.0]), 3.0, 1.0)


def test_budget_integral_stderr_is_filled_for_monte_carlo_models():
    """Named defect: BudgetResult.stderr was always 0 for Monte-Carlo models."""
    m = load_data(MC_SPEC)
    z = []
    for seed in range(6):
        b = budget_integral(m, -14.0, 14.0, n_samples=200, rng=seed, rtol=1e-5)
        assert b.stderr > 0 and b.info == {"seed": seed, "n_samples": 200}
        # beyond [-14, 14] lie ~1/2 e^-14 Var (left) and H(14) ~ 0 (right): the truth is H(pi) to ~1e-5
        z.append((b.value - m.entropy) / b.stderr)
    z = np.array(z)
    assert np.all(np.abs(z) <= MC_NSIGMA), z
    again = budget_integral(m, -14.0, 14.0, n_samples=200, rng=0, rtol=1e-5)
    assert again.value == budget_integral(m, -14.0, 14.0, n_samples=200, rng=0, rtol=1e-5).value


def test_budget_check_monte_carlo_uses_per_sample_differences():
    m = load_data(MC_SPEC)
    b = budget_check(m, -14.0, 14.0, n_samples=200, rng=1, rtol=1e-5)
    assert b.holds and b.difference_stderr > 0 and b.z == pytest.approx(b.error / b.difference_stderr)
    assert b.method == "adaptive Gauss-Kronrod per sample"


def test_budget_check_from_samples_propagates_per_sample():
    m = load_data(MC_SPEC)
    lam = np.linspace(-14.0, 14.0, 41)
    smp = m.information_samples(lam, n_samples=300, rng=2)
    b = budget_check_from_samples(smp, m.entropy, m.total_variance)
    # independent recomputation: per-sample trapezoid integrals of 1/2 e^lam mmse_i, stratified SE
    per = np.trapezoid(0.5 * np.exp(lam)[:, None] * smp.mmse, lam, axis=0)
    diff = per - (smp.entropy[0] - smp.entropy[-1])
    mean, se = stratified_mean_stderr(per, smp.draws.stratum)
    _, se_diff = stratified_mean_stderr(diff, smp.draws.stratum)
    assert b.value == pytest.approx(mean, rel=1e-12)
    assert b.stderr == pytest.approx(se, rel=1e-9) and b.difference_stderr == pytest.approx(se_diff, rel=1e-9)
    trap, simp = grid_quadrature_weights(lam)
    h = 0.5 * np.exp(lam) * smp.mmse.mean(axis=1)
    assert b.abs_error == pytest.approx(abs(trap @ h - simp @ h), rel=1e-9, abs=1e-15)
    assert b.holds and abs(b.value - m.entropy) <= MC_NSIGMA * b.stderr + b.left_tail_bound + b.abs_error
    # summing per-level standard errors (the earlier figure-1 rule) is not the standard error
    summed = np.trapezoid(0.5 * np.exp(lam) * smp.mean_stderr(smp.mmse)[1], lam)
    assert b.stderr < summed
    with pytest.raises(ValueError, match="at least 3 levels"):
        budget_check_from_samples(m.information_samples(lam[:2], n_samples=4, rng=0), m.entropy, m.total_variance)


# ----------------------------------------------------------------------------------------- I-MMSE rule


def test_i_mmse_rule():
    g = GaussianManifold([0.0], [[1.0]], [2.0])
    ok = i_mmse_check(g, [-2.0, 0.0, 2.0])
    assert ok.holds and ok.max_rel_error <= FD_RTOL and ok.tested.all()
    assert ok.step == pytest.approx(FD_REL_STEP * 2.0)

    class Wrong(GaussianManifold):
        def entropy_rate(self, lam, coordinate="lambda"):
            e = super().entropy_rate(lam, coordinate)
            return Estimate(e.value * 1.001, 0.0, "closed-form")

    bad = i_mmse_check(Wrong([0.0], [[1.0]], [2.0]), [0.0])
    assert not bad.holds and bad.max_rel_error == pytest.approx(1e-3, rel=1e-3)
    # levels where h is below the floor are not judged; none judged is not a pass
    m = DiracMixture([-1.0, 1.0])
    far = i_mmse_check(m, [0.0, 40.0])
    assert far.tested.tolist() == [True, False] and far.rate[1] < I_MMSE_RATE_FLOOR
    assert not i_mmse_check(m, [40.0]).holds
    # a Monte-Carlo model is checked in integrated form between levels (tests/theory/information/test_i_mmse.py): one level is refused
    with pytest.raises(ValueError, match="at least 2 strictly increasing levels"):
        i_mmse_check(load_data(MC_SPEC), [0.0])


# ----------------------------------------------------------------------------------------- profile


def test_profile_of_a_quadrature_model():
    m = DiracMixture([-1.0, 0.3, 2.0], [0.2, 0.5, 0.3])
    lam = np.linspace(-12.0, 12.0, 25)
    prof = information_profile(m, lam, i_mmse_levels=[-1.0, 1.0])
    assert isinstance(prof, InformationProfile)
    ref = m.information(lam)
    np.testing.assert_array_equal(prof.mmse.value, ref.mmse.value)
    np.testing.assert_array_equal(prof.conditional_entropy.value, ref.conditional_entropy.value)
    np.testing.assert_array_equal(prof.entropy_rate.value, m.entropy_rate(lam).value)
    np.testing.assert_array_equal(prof.entropy_rate_in("sigma").value, m.entropy_rate(lam, "sigma").value)
    assert prof.method == "quadrature" and prof.discrete and not prof.monte_carlo
    assert prof.entropy == m.entropy and prof.mutual_information is None
    assert prof.budget.holds and prof.budget.interval == (-12.0, 12.0) and prof.i_mmse.holds
    wide = information_profile(m, lam, quadrature_interval=(-30.0, 30.0), budget=True)
    assert wide.budget.interval == (-30.0, 30.0) and wide.i_mmse is None
    assert information_profile(m, lam, budget=False).budget is None


def test_profile_of_a_continuous_model():
    g = GaussianManifold([0.0, 0.0], [[1.0], [0.0]], [2.0])
    lam = np.linspace(-6.0, 6.0, 13)
    prof = information_profile(g, lam, i_mmse_levels=[0.0])
    assert prof.budget is None and prof.conditional_entropy is None and prof.entropy is None
    np.testing.assert_array_equal(prof.mutual_information.value, g.mutual_information(lam).value)
    np.testing.assert_array_equal(prof.entropy_rate.value, g.entropy_rate(lam).value)
    assert prof.method == "closed-form" and prof.i_mmse.holds


def test_profile_of_a_monte_carlo_model_is_seeded_and_matches_the_model():
    m = load_data(MC_SPEC)
    lam = np.linspace(-14.0, 14.0, 29)
    a = information_profile(m, lam, n_samples=256, rng=3, i_mmse_levels=[0.0])
    b = information_profile(m, lam, n_samples=256, rng=3)
    c = information_profile(m, lam, n_samples=256, rng=4)
    np.testing.assert_array_equal(a.entropy_rate.value, b.entropy_rate.value)
    assert a.budget == b.budget and a.seed == 3 and a.n_samples == 256
    assert not np.array_equal(a.entropy_rate.value, c.entropy_rate.value)
    ref = m.entropy_rate(lam, n_samples=256, rng=3)
    np.testing.assert_array_equal(a.entropy_rate.value, ref.value)
    np.testing.assert_array_equal(a.entropy_rate.stderr, ref.stderr)
    np.testing.assert_array_equal(a.conditional_entropy.value, m.conditional_entropy(lam, n_samples=256, rng=3).value)
    assert a.method == "monte-carlo" and a.i_mmse is None  # no finite difference of Monte-Carlo estimates
    assert a.budget.method == "trapezoid on the grid, per sample" and a.budget.holds
    assert a.budget.value == np.trapezoid(a.entropy_rate.value, lam)
    assert a.info["estimator"].startswith("importance") and a.info["n_pairs"] > 0
    # the plain GEMM engine's options
    e = information_profile(m, lam, n_samples=256, rng=3, engine_options={"block_size": 7, "importance": False})
    f = information_profile(m, lam, n_samples=256, rng=3, engine_options={"importance": False})
    assert e.info["block_size"] == 7 and f.info["block_size"] > 0 and f.info["kernel"] in ("numba", "numpy")
    np.testing.assert_allclose(e.mmse.value, f.mmse.value, rtol=1e-12)
    with pytest.raises(ValueError, match="block_size"):
        information_profile(m, lam, n_samples=256, rng=3, engine_options={"block_size": 7})


def test_profile_bad_input():
    m = DiracMixture([-1.0, 1.0])
    with pytest.raises(ValueError, match="lam must be a strictly increasing"):
        information_profile(m, [0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="lam must be a strictly increasing"):
        information_profile(m, [0.0, 1.0])
    with pytest.raises(ValueError, match="lam"):
        information_profile(m, [0.0, np.nan, 1.0])
    with pytest.raises(TypeError, match="engine_options"):
        information_profile(m, [0.0, 1.0, 2.0], engine_options={"block_size": 4})
    with pytest.raises(TypeError, match="not a data model"):
        information_profile(object(), [0.0, 1.0, 2.0])
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        information_profile(load_data(MC_SPEC), [0.0, 1.0, 2.0], n_samples=8, engine_options={"blocksize": 4})


_COORDS = ("sigma", "log-sigma", "t-linear", "t-cosine", "t-edm", "t-rf")


@settings(max_examples=examples(15), deadline=None)
@given(model=gaussian_manifolds(), coordinate=st.sampled_from(_COORDS))
def test_entropy_rate_in_a_coordinate_is_h_times_the_jacobian(model, coordinate):
    """Independent oracle: |dlam/du| = 1 / |du/dlam| by centred differences of u(lam)."""
    lam = np.linspace(-6.0, 6.0, 7)
    prof = information_profile(model, lam)
    hu = prof.entropy_rate_in(coordinate)
    c = get_coordinate(coordinate)
    step = FD_REL_STEP * np.maximum(1.0, np.abs(lam))
    dudl = np.abs((c.from_lam(lam + step) - c.from_lam(lam - step)) / (2 * step))
    np.testing.assert_allclose(hu.value, prof.entropy_rate.value / dudl, rtol=FD_RTOL)
    assert hu.info["coordinate"] == c.name and hu.method == prof.entropy_rate.method


# ------------------------------------------------------------------- budget on the grid's own levels


@pytest.mark.parametrize("order", [2, 4, 6])
def test_gregory_weights_are_exact_for_polynomials_of_degree_order_plus_one(order):
    # Gregory's rule of order p integrates x^d exactly for d <= p + 1 (rounding only) and not d = p + 3;
    # the reference is the closed form, an independent route.
    a, b, n = 0.3, 2.3, 41
    x = np.linspace(a, b, n)
    w = gregory_weights(n, x[1] - x[0], order)
    for d in range(order + 2):
        assert abs(w @ x ** d - (b ** (d + 1) - a ** (d + 1)) / (d + 1)) <= 1e-13 * b ** (d + 1)
    d = order + 3
    assert abs(w @ x ** d - (b ** (d + 1) - a ** (d + 1)) / (d + 1)) > 1e-10
    assert order == 8 or np.all(w > 0)
    with pytest.raises(ValueError, match="needs at least"):
        gregory_weights(2 * order + 1, 0.1, order)


@pytest.mark.slow
def test_budget_on_the_grid_equals_the_adaptive_budget():
    # The grid route reuses the profile's levels; its value must agree with the adaptive Gauss-Kronrod
    # integral (new levels, an independent route) far inside BUDGET_RTOL, and its estimate must bound
    # the actual difference.
    m = DiracMixture([[0.0, 0.0], [2.0, 0.3], [0.7, 1.9]], [0.5, 0.3, 0.2])
    lam = np.linspace(-16.0, 8.0, 171)  # the grid of `noisealloc entropy --levels 171 --lam-min -16 --lam-max 8`
    prof = information_profile(m, lam)
    chk = prof.budget
    assert chk.method.startswith("Gregory") and chk.holds and chk.nfev == lam.size
    ref = budget_check(m, -16.0, 8.0, rtol=1e-10, n_panels=8)
    assert abs(chk.value - ref.value) <= 1e-12 * ref.value
    assert abs(chk.value - ref.value) <= chk.abs_error
    assert chk.abs_error <= BUDGET_RTOL * chk.value
    # the target is the profile's own H at the ends
    assert chk.target == prof.conditional_entropy.value[0] - prof.conditional_entropy.value[-1]
    # half the levels (step 0.29 against 0.57): estimate 2e-7 > BUDGET_RTOL, so new levels are integrated
    coarse = information_profile(m, lam[::2], i_mmse_levels=None)
    assert coarse.budget.method == "adaptive Gauss-Kronrod" and coarse.budget.holds


def test_budget_falls_back_to_adaptive_levels_when_the_grid_cannot_carry_it():
    m = DiracMixture([-1.0, 0.3, 2.0], [0.2, 0.5, 0.3])
    lam = np.linspace(-12.0, 12.0, 25)  # too few levels for the coarse rule
    assert information_profile(m, lam).budget.method == "adaptive Gauss-Kronrod"
    args = dict(entropy=m.entropy, total_variance=m.total_variance, rtol=BUDGET_RTOL)
    # an even number of steps is needed (every other level), a uniform grid, and an estimate within rtol
    lam2 = np.linspace(-12.0, 12.0, 30)
    e2 = m.information(lam2)
    assert budget_check_on_grid(lam2, e2.mmse.value, e2.conditional_entropy.value, 0.0, **args) is None
    lam3 = np.sort(np.concatenate([np.linspace(-12.0, 12.0, 40), [0.05]]))
    e3 = m.information(lam3)
    assert budget_check_on_grid(lam3, e3.mmse.value, e3.conditional_entropy.value, 0.0, **args) is None
    lam4 = np.linspace(-30.0, 30.0, 29)  # step 2.1: h, a bump of width ~2, is not resolved to 1e-8
    e4 = m.information(lam4)
    assert budget_check_on_grid(lam4, e4.mmse.value, e4.conditional_entropy.value, 0.0, **args) is None
    lam5 = np.linspace(-30.0, 30.0, 401)
    e5 = m.information(lam5)
    chk = budget_check_on_grid(lam5, e5.mmse.value, e5.conditional_entropy.value, 0.0, **args)
    assert chk is not None and chk.holds and abs(chk.value - m.entropy) < 1e-9


def test_budget_check_far_right_interval_does_not_cover_the_budget():
    """Issue 28 item 4: on [700, 800] int h = 0 and H(pi) = 1.0986; the left-tail bound 1/2 e^700 Var(P)
    is vacuous there, so the interval must not be said to cover the budget."""
    b = budget_check(DiracMixture([-1.0, 0.5, 2.0]), 700.0, 800.0)
    assert b.integral_holds and abs(b.value) < 1e-12 and b.entropy == pytest.approx(np.log(3), rel=1e-12)
    assert not b.covers_budget and not b.holds
    assert "does not cover the budget" in b.message
