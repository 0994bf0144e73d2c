"""Entropic schedules, the independent-learner factor and the online estimator (issue 7)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from noisealloc.theory.coordinates import get_coordinate
from noisealloc.theory.models.dirac import DiracMixture
from noisealloc.theory.schedules.entropic import (
    H_FLOOR,
    EntropicScheduleResult,
    entropic_pdf_values,
    entropic_schedule,
    independent_learner_factor,
    schedule_from_model,
    schedule_from_rate,
)
from noisealloc.theory.models.gaussian import GaussianManifold
from noisealloc.theory.schedules.online import EntropyRateEstimator, tv_distance_piecewise_linear
from helpers.strategies import examples

LAM = np.linspace(-10, 10, 201)


def _gauss_h(lam, s):
    # docs/THEORY.md section 2, written out independently of the library.
    e = np.exp(lam)[:, None]
    return 0.5 * np.sum(e * s / (1 + e * s), axis=1)


@given(s=st.lists(st.floats(0.01, 10), min_size=1, max_size=3).map(np.array),
       coord=st.sampled_from(["lambda", "log-sigma", "t-edm", "t-linear"]))
def test_sqrt_law_is_optimal_and_coordinate_covariant(s, coord):
    """Theorem 2: the sqrt-entropic density minimises the independent-learner factor (= 1) in its own coordinate,
    and the law in u moved to lambda equals p_lambda ∝ sqrt(h |du/dlam|) (not sqrt(h))."""
    h = _gauss_h(LAM, s)
    u, p = entropic_pdf_values(LAM, h, coordinate=coord)
    c = get_coordinate(coord)
    lam_u = c.to_lam(u)
    h_u = np.interp(lam_u, LAM, h) * np.abs(c.dlam_du(u))
    f_opt = independent_learner_factor(u, h_u, p)
    assert abs(f_opt - 1.0) < 1e-9
    # Any perturbation loses (Cauchy-Schwarz): multiply by a positive bump.
    bump = 1.0 + 0.5 * np.sin(np.linspace(0, 3, u.size)) ** 2
    assert independent_learner_factor(u, h_u, p * bump) > 1.0 + 1e-6
    # Covariance: the u-law moved to lambda is proportional to sqrt(h * |du/dlam|).
    sched = entropic_schedule(LAM, h, coordinate=coord)
    lam_mid = LAM[20:-20]
    p_lam = sched.to("lambda").pdf(lam_mid)
    expected = np.sqrt(h[20:-20] * np.abs(c.du_dlam(lam_mid)))
    ratio = p_lam / expected
    # piecewise-linear interpolation in u: agreement to the interpolation error of a 201-point grid
    assert np.max(np.abs(ratio / np.median(ratio) - 1)) < 2e-2


def test_sqrt_law_in_lambda_differs_from_law_in_sigma():
    """The square-root law is not invariant under a change of coordinate (docs/THEORY.md 4 (b))."""
    h = _gauss_h(LAM, np.array([1.0]))
    a = entropic_schedule(LAM, h, coordinate="lambda").to("lambda")
    b = entropic_schedule(LAM, h, coordinate="log-sigma").to("lambda")
    # log-sigma is affine in lambda, so these agree ...
    np.testing.assert_allclose(a.pdf(LAM[1:-1]), b.pdf(LAM[1:-1]), rtol=1e-10)
    c = entropic_schedule(LAM, h, coordinate="t-edm").to("lambda")
    # ... while the EDM time is not, and the law moves.
    assert np.max(np.abs(c.pdf(LAM[5:-5]) / a.pdf(LAM[5:-5]) - 1)) > 0.1


def test_floor_mixes_uniform_and_rules():
    h = _gauss_h(LAM, np.array([2.0]))
    u, p0 = entropic_pdf_values(LAM, h)
    _, p1 = entropic_pdf_values(LAM, h, floor=0.2)
    np.testing.assert_allclose(p1, 0.8 * p0 + 0.2 / (u[-1] - u[0]), rtol=1e-13)
    _, pe = entropic_pdf_values(LAM, h, rule="entropy")
    np.testing.assert_allclose(pe, h / np.trapezoid(h, LAM), rtol=1e-12)


def test_extreme_profiles_stay_finite():
    lam = np.linspace(-50, 50, 1001)
    h = 0.5 * np.exp(lam - np.logaddexp(0, lam))  # Gaussian s = 1, spans e^-50 .. 0.5
    u, p = entropic_pdf_values(lam, h)
    assert np.all(np.isfinite(p)) and np.all(p > 0)
    assert abs(np.trapezoid(p, u) - 1) < 1e-12


@pytest.mark.parametrize("kwargs, match", [
    (dict(lam=[0, 1, 1], h=[1, 1, 1]), "strictly increasing"),
    (dict(lam=[0, 1, 2], h=[1, -1, 1]), "h must be >= 0"),
    (dict(lam=[0, 1, 2], h=[1, np.nan, 1]), "h must be finite"),
    (dict(lam=[0, 1, 2], h=[1, 1, 1], rule="cube-root"), "rule must be one of"),
    (dict(lam=[0, 1, 2], h=[1, 1, 1], floor=1.0), r"floor must lie in \[0, 1\)"),
    (dict(lam=[0, 1, 2], h=[0, 1, 0]), "pass floor > 0"),
    (dict(lam=[0, 1, 2], h=[1, 1, 1], coordinate="beta"), "coordinate must be one of"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        entropic_pdf_values(**kwargs)


def test_tv_distance_matches_quadrature():
    from scipy.integrate import quad

    rng = np.random.default_rng(0)
    u = np.sort(rng.uniform(0, 3, 9))
    p, q = rng.uniform(0.1, 2, (2, 9))
    d = p - q
    cross = d[:-1] * d[1:] < 0
    roots = u[:-1][cross] + np.diff(u)[cross] * d[:-1][cross] / (d[:-1][cross] - d[1:][cross])
    ref = 0.5 * quad(lambda x: abs(np.interp(x, u, p) - np.interp(x, u, q)), u[0], u[-1],
                     points=np.sort(np.r_[u[1:-1], roots]), limit=500, epsabs=1e-14)[0]
    assert abs(tv_distance_piecewise_linear(u, p, q) - ref) < 1e-11


# ---- model -> entropic schedule, the one pipeline ----------------------------------------

#: Three atoms 2 apart: h = e^lam mmse / 2 underflows to exactly 0 in float64 above lam ~ 10.
UNDERFLOW = DiracMixture(np.array([[-2.0], [0.0], [2.0]]))


def _gauss_model(s):
    d = len(s)
    return GaussianManifold(np.zeros(d + 1), np.eye(d + 1)[:, :d], s)


def test_pipeline_from_a_closed_form_model_is_the_schedule_of_its_exact_h():
    s = np.array([2.0, 0.3])
    res = schedule_from_model(_gauss_model(s), LAM, coordinate="t-edm")
    assert isinstance(res, EntropicScheduleResult)
    np.testing.assert_allclose(res.h, _gauss_h(LAM, s), rtol=1e-13)
    assert res.method == "closed-form" and np.all(res.h_stderr == 0) and res.h_stderr.shape == LAM.shape
    assert (res.rule, res.coordinate, res.floor, res.h_floor) == ("sqrt-entropy", "t-edm", 0.0, H_FLOOR)
    u, p = entropic_pdf_values(LAM, _gauss_h(LAM, s), coordinate="t-edm")
    np.testing.assert_allclose(res.u, u, rtol=1e-14)
    np.testing.assert_allclose(res.pdf, p, rtol=1e-12)
    np.testing.assert_array_equal(res.schedule.knots, res.u)
    assert res.schedule.coordinate.name == "t-edm" and res.schedule.name == "sqrt-entropy"


def test_pipeline_floors_an_underflowed_h_and_never_samples_there():
    lam = np.linspace(-12.0, 12.0, 129)
    h = UNDERFLOW.entropy_rate(lam).value
    assert np.any(h == 0), "the test needs a profile that underflows"
    with pytest.raises(ValueError, match="vanishes"):  # the unfloored construction refuses it
        entropic_pdf_values(lam, h)
    res = schedule_from_model(UNDERFLOW, lam)
    np.testing.assert_array_equal(res.h, h)  # h is reported as estimated, the floor is separate
    np.testing.assert_array_equal(res.h_floored, np.maximum(h, H_FLOOR))
    zero = h == 0
    assert np.all(res.pdf > 0)
    assert np.max(res.pdf[zero]) < 1e-140 * np.max(res.pdf)
    # the sampler puts no mass beyond the last level where h is positive
    last = lam[np.flatnonzero(~zero)[-1] + 1]
    assert res.schedule.sf(last) < 1e-140
    with pytest.raises(ValueError, match="vanishes"):  # h_floor = 0 keeps h as given
        schedule_from_model(UNDERFLOW, lam, h_floor=0.0)


def test_pipeline_passes_monte_carlo_options_only_where_they_matter():
    lam = np.linspace(-6.0, 6.0, 9)
    # quadrature (atoms on a line): n_samples and rng change nothing
    a = schedule_from_model(UNDERFLOW, lam)
    b = schedule_from_model(UNDERFLOW, lam, n_samples=64, rng=3)
    np.testing.assert_array_equal(a.pdf, b.pdf)
    # Monte Carlo (16 atoms spanning 8 dimensions): the seed fixes the schedule, another seed moves it
    mc = DiracMixture(np.random.default_rng(0).standard_normal((16, 8)))
    assert mc.choose_method() == "monte-carlo"
    r1 = schedule_from_model(mc, lam, n_samples=128, rng=1)
    r2 = schedule_from_model(mc, lam, n_samples=128, rng=1)
    r3 = schedule_from_model(mc, lam, n_samples=128, rng=2)
    assert r1.method == "monte-carlo" and r1.estimate.n_samples == 128
    np.testing.assert_array_equal(r1.pdf, r2.pdf)
    assert not np.array_equal(r1.pdf, r3.pdf)
    assert np.all(r1.h_stderr > 0)
    # the same profile under another rule or coordinate: no new estimate, same as the direct construction
    e = r1.with_rule("entropy", coordinate="log-sigma", floor=0.1)
    np.testing.assert_array_equal(e.h, r1.h)
    assert e.estimate is r1.estimate and (e.rule, e.coordinate, e.floor) == ("entropy", "log-sigma", 0.1)
    _, p = entropic_pdf_values(lam, r1.h_floored, rule="entropy", coordinate="log-sigma", floor=0.1)
    np.testing.assert_array_equal(e.pdf, p)
    assert e.schedule.name == "entropy+floor0.1"


_PROFILE = st.lists(st.one_of(st.just(0.0), st.floats(1e-300, 1e3)), min_size=3, max_size=40).filter(
    lambda v: max(v) > 0)


@given(h=_PROFILE, coord=st.sampled_from(["lambda", "log-sigma", "t-edm", "sigma"]),
       rule=st.sampled_from(["sqrt-entropy", "entropy"]), floor=st.sampled_from([0.0, 0.05]))
@settings(max_examples=examples(40))
def test_schedule_from_rate_is_the_entropic_density_of_the_floored_profile(h, coord, rule, floor):
    lam = np.linspace(-10.0, 10.0, len(h))
    h = np.asarray(h)
    res = schedule_from_rate(lam, h, rule=rule, coordinate=coord, floor=floor)
    u, p = entropic_pdf_values(lam, np.maximum(h, H_FLOOR), rule=rule, coordinate=coord, floor=floor)
    np.testing.assert_array_equal(res.pdf, p)
    np.testing.assert_array_equal(res.h, h)
    assert np.all(res.pdf > 0) and abs(np.trapezoid(res.pdf, res.u) - 1) < 1e-12
    assert res.method == "given" and res.estimate is None


class _NoEstimate:
    """A model whose estimate must not be reached: bad options are refused first."""

    def entropy_rate(self, lam, coordinate="lambda"):
        raise AssertionError("entropy_rate was called although the options were invalid")


@pytest.mark.parametrize("kwargs, match", [
    (dict(lam=[0.0, 1.0, 1.0]), "lam must be strictly increasing"),
    (dict(lam=[0.0]), "lam must hold at least 2 levels"),
    (dict(lam=[0.0, np.inf]), "lam must be finite"),
    (dict(lam=[0.0, 1.0], rule="cube-root"), "rule must be one of"),
    (dict(lam=[0.0, 1.0], floor=-0.1), r"floor must lie in \[0, 1\)"),
    (dict(lam=[0.0, 1.0], h_floor=-1e-300), "h_floor must be a finite number >= 0"),
    (dict(lam=[0.0, 1.0], h_floor=np.nan), "h_floor must be a finite number >= 0"),
    (dict(lam=[0.0, 1.0], coordinate="beta"), "coordinate must be one of"),
])
def test_pipeline_refuses_bad_options_before_estimating(kwargs, match):
    with pytest.raises(ValueError, match=match):
        schedule_from_model(_NoEstimate(), **kwargs)


def test_schedule_from_rate_refuses_bad_profiles():
    with pytest.raises(ValueError, match="h must be finite"):
        schedule_from_rate([0.0, 1.0], [1.0, np.nan])
    with pytest.raises(ValueError, match="h must have shape"):
        schedule_from_rate([0.0, 1.0, 2.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="h must be positive somewhere"):
        schedule_from_rate([0.0, 1.0], [0.0, 0.0], h_floor=0.0)


# ---- online estimator ---------------------------------------------------------------

def _stream(rng, s, n_batches, batch=256, lam_min=-8.0, lam_max=8.0, noise=True):
    """Per-example x0 losses of the exact Gaussian-manifold denoiser: |r|^2 with r_i ~ N(0, mmse_i)."""
    for _ in range(n_batches):
        lam = rng.uniform(lam_min, lam_max, batch)
        mm = s[None, :] / (1 + np.exp(lam)[:, None] * s[None, :])
        loss = np.sum(mm * rng.standard_normal((batch, s.size)) ** 2, axis=1) if noise else mm.sum(1)
        yield lam, loss


@settings(max_examples=examples(15))
@given(max_change=st.floats(0.01, 0.5), floor=st.floats(0.0, 0.3), seed=st.integers(0, 2**16),
       forgetting=st.floats(0.5, 1.0))
def test_online_schedule_never_moves_more_than_max_change(max_change, floor, seed, forgetting):
    rng = np.random.default_rng(seed)
    est = EntropyRateEstimator(-8, 8, n_bins=16, floor=floor, max_change=max_change, forgetting=forgetting,
                               knots=65)
    prev = est.pdf_values
    for lam, loss in _stream(rng, np.array([1.0, 0.1]), 12, batch=64):
        est.update(lam, loss)
        sched = est.schedule()
        now = sched.pdf_values
        tv = tv_distance_piecewise_linear(est.knots, now, prev)
        assert tv <= max_change * (1 + 1e-9) + 1e-12, (tv, max_change)
        prev = now


def test_online_estimator_converges_to_the_exact_profile():
    s = np.array([1.0, 0.1])
    rng = np.random.default_rng(5)
    est = EntropyRateEstimator(-8, 8, n_bins=32, floor=0.0, max_change=1.0, forgetting=1.0, knots=129)
    for lam, loss in _stream(rng, s, 400, batch=512):
        est.update(lam, loss)
    sched = est.schedule()
    exact = entropic_schedule(est.knots, _gauss_h(est.knots, s))
    lam = np.linspace(-8, 8, 2001)
    w1 = np.trapezoid(np.abs(sched.cdf(lam) - exact.cdf(lam)), lam)
    assert w1 < 0.1, f"W1 to the exact sqrt-entropic schedule {w1:.3g}"


def test_online_estimator_is_deterministic_and_validates():
    runs = []
    for _ in range(2):
        est = EntropyRateEstimator(-8, 8, n_bins=8)
        for lam, loss in _stream(np.random.default_rng(1), np.array([1.0]), 5):
            est.update(lam, loss)
        runs.append(est.schedule().pdf_values)
    np.testing.assert_array_equal(*runs)
    est = EntropyRateEstimator(-8, 8)
    with pytest.raises(ValueError, match=r"lam must lie in \[-8.0, 8.0\]"):
        est.update([9.0], [1.0])
    with pytest.raises(ValueError, match="loss must be >= 0"):
        est.update([0.0], [-1.0])
    with pytest.raises(ValueError, match="max_change must lie in"):
        EntropyRateEstimator(max_change=0)
    with pytest.raises(ValueError, match="parameterisation must be one of"):
        EntropyRateEstimator(parameterisation="score")


# ----------------------------------------------------------------------------- the law rule (issue 25)


def test_law_auto_rule_reads_the_loaders_mark():
    from noisealloc.theory.models.datasets import load_data
    from noisealloc.theory.models.dirac import DiracMixture
    from noisealloc.theory.schedules.entropic import resolve_law

    assert resolve_law(load_data("digits")).law == "smoothed"
    assert resolve_law(load_data("dirac:K=4,D=1")).law == "empirical"
    assert resolve_law(load_data("gaussian:D=4,k=2")).law == "exact"
    atoms = np.arange(6.0).reshape(3, 2)
    assert resolve_law(DiracMixture(atoms)).law == "empirical"
    assert resolve_law(DiracMixture(atoms, sample_of_continuous_law=True)).law == "smoothed"
    assert resolve_law(load_data("digits"), "empirical").law == "empirical"
    with pytest.raises(ValueError, match="population law already"):
        resolve_law(load_data("circle:D=2"), "smoothed")
    with pytest.raises(ValueError, match="equally weighted"):
        resolve_law(DiracMixture(atoms, [0.2, 0.3, 0.5]), "smoothed")
    with pytest.raises(ValueError, match="law"):
        resolve_law(DiracMixture(atoms), "population")


def test_loss_factor_one_convention():
    """F = 1 for the square-root law itself, > 1 otherwise, inf (efficiency 0) for a schedule that starves a
    level where h > 0, and finite when it starves only levels where h = 0."""
    from noisealloc.theory.schedules.builtin import uniform_lambda
    from noisealloc.theory.schedules.entropic import schedule_from_rate, schedule_loss_factor

    lam = np.linspace(-6.0, 6.0, 241)
    h = 0.5 / (1.0 + np.exp(-lam))  # a Gaussian-like rise to a plateau
    sq = schedule_from_rate(lam, h).schedule
    one = schedule_loss_factor(lam, h, sq)
    assert abs(one.factor - 1.0) < 1e-6 and abs(one.efficiency - 1.0) < 1e-6 and one.covered == 1.0
    uni = schedule_loss_factor(lam, h, uniform_lambda(lam_min=-6.0, lam_max=6.0))
    assert uni.factor > 1.01 and 0.0 < uni.efficiency < 1.0
    part = schedule_loss_factor(lam, h, uniform_lambda(lam_min=-2.0, lam_max=6.0))
    assert part.factor == float("inf") and part.efficiency == 0.0 and 0.0 < part.covered < 1.0
    h0 = np.where(lam <= -2.0, 0.0, h)  # zero up to the schedule's left end, -2.0 (a grid point)
    ok = schedule_loss_factor(lam, h0, uniform_lambda(lam_min=-2.0, lam_max=6.0))
    assert np.isfinite(ok.factor) and ok.factor >= 1.0


def test_online_estimator_of_the_masked_process_takes_h_from_alpha_times_the_loss():
    """Fed exact masked losses L = eps S of a product law (S constant, docs/THEORY.md §7), the estimator's
    target is the square-root law of h = alpha eps S: sqrt(alpha eps), normalised on the interval."""
    from noisealloc.theory.schedules.online import EntropyRateEstimator

    est = EntropyRateEstimator(-8.0, 8.0, n_bins=32, process="masked", forgetting=1.0, floor=0.0, max_change=1.0)
    gen = np.random.default_rng(0)
    for _ in range(40):
        lam = gen.uniform(-8.0, 8.0, 256)
        est.update(lam, 7.0 / (1.0 + np.exp(lam)))  # eps S with S = 7 nats
    lam = est.knots
    target = est.target()
    expect = 1.0 / (2.0 * np.cosh(lam / 2.0))  # sqrt(alpha eps) = 1 / (e^{lam/2} + e^{-lam/2})
    expect /= np.trapezoid(expect, lam)
    inner = np.abs(lam) <= 6.0  # the fit's ends extrapolate
    np.testing.assert_allclose(target[inner], expect[inner], rtol=0.05)
    with pytest.raises(ValueError, match="parameterisation must be 'x0' for the masked process"):
        EntropyRateEstimator(process="masked", parameterisation="eps")
    with pytest.raises(ValueError, match="process must be 'gaussian' or 'masked'"):
        EntropyRateEstimator(process="uniform")
