"""Schedules of the masked process (docs/THEORY.md section 7.6): entropic schedules in a stated
coordinate, heuristics against their closed-form densities, h from losses, mask rates, JSON export.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import integrate, stats

from noisealloc.theory import tolerances as tol
from noisealloc.theory.masked import MarkovChain, get_masked_coordinate, keep_probability, mask_rate
from noisealloc.theory.masked import schedules as S
from noisealloc.theory.schedules.io import load_json
from noisealloc.theory.schedules.samplers import NumpySampler

LAM = np.linspace(-12.0, 12.0, 97)
LAMBDA = get_masked_coordinate("lambda")


@pytest.fixture(scope="module")
def exact_h():
    return MarkovChain([[0.9, 0.1], [0.3, 0.7]], L=12).exact_information(LAM).entropy_rate.value


def test_sqrt_law_coordinate_covariance(exact_h):
    """Built in eps and moved to lambda, the square-root law is the lambda-law times |deps/dlam|^(1/2)."""
    in_lam = S.masked_schedule_from_rate(LAM, exact_h).schedule
    in_eps = S.masked_schedule_from_rate(LAM, exact_h, coordinate="eps").schedule.to(LAMBDA)
    x = np.linspace(-11.5, 11.5, 47)
    ratio = in_eps.pdf(x) / (in_lam.pdf(x) * np.sqrt(keep_probability(x) * mask_rate(x)))
    # piecewise-linear tabulation on the 0.25-spaced grid: ~1e-2 between knots; at the knots exact
    knots = LAM[4:-4:4]
    r_knots = in_eps.pdf(knots) / (in_lam.pdf(knots) * np.sqrt(keep_probability(knots) * mask_rate(knots)))
    np.testing.assert_allclose(r_knots / r_knots.mean(), 1.0, rtol=1e-2)
    assert np.all(np.isfinite(ratio))


def test_entropy_rule_is_coordinate_free(exact_h):
    """p proportional to h is the same law in every coordinate (h transports as a density)."""
    a = S.masked_schedule_from_rate(LAM, exact_h, rule="entropy").schedule
    b = S.masked_schedule_from_rate(LAM, exact_h, rule="entropy", coordinate="t-masked-cosine").schedule.to(LAMBDA)
    knots = LAM[8:-8:8]
    np.testing.assert_allclose(b.pdf(knots), a.pdf(knots), rtol=2e-2)


def test_heuristics_have_their_closed_form_densities():
    lin, cos, uni = S.masked_linear(), S.masked_cosine(), S.masked_uniform_lambda()
    x = np.linspace(-11.0, 11.0, 23)
    a, e = keep_probability(x), mask_rate(x)
    mass_lin = float(mask_rate(-12.0) - mask_rate(12.0))
    # the density is evaluated through eps = t, whose float64 resolution near 1 costs ~eps_mach/alpha
    # relative (2e-12 at lambda = -11)
    np.testing.assert_allclose(lin.pdf(x), a * e / mass_lin, rtol=1e-10)
    # cosine time t = (2/pi) arccos(alpha): |dt/dlam| = (2/pi) alpha sqrt(eps / (1 + alpha))
    dt = (2 / math.pi) * a * np.sqrt(e / (1 + a))
    mass_cos, _ = integrate.quad(lambda v: (2 / math.pi) * keep_probability(v) * math.sqrt(
        mask_rate(v) / (1 + keep_probability(v))), -12.0, 12.0, epsabs=1e-14, epsrel=1e-13)
    np.testing.assert_allclose(cos.pdf(x), dt / mass_cos, rtol=1e-10)
    np.testing.assert_allclose(uni.pdf(x), 1.0 / 24.0, rtol=1e-14)
    for s in (lin, cos, uni):
        val, _ = integrate.quad(lambda v: float(s.pdf(v)), -12.0, 12.0, limit=200)
        assert abs(val - 1.0) <= tol.DENSITY_INTEGRAL_ATOL


def test_linear_schedule_gives_uniform_mask_rates():
    eps = S.sample_mask_rates(S.masked_linear(lam_min=-30.0, lam_max=30.0), 20000, rng=0)
    assert stats.kstest(eps, "uniform").pvalue > tol.KS_ALPHA


def test_rate_from_losses_is_alpha_times_loss():
    info = MarkovChain([[0.9, 0.1], [0.3, 0.7]], L=12).exact_information(LAM)
    h, se = S.masked_rate_from_losses(LAM, info.loss.value, np.full(LAM.shape, 0.1))
    np.testing.assert_allclose(h, info.entropy_rate.value, rtol=8 * tol.EPS)
    np.testing.assert_allclose(se, 0.1 * keep_probability(LAM), rtol=4 * tol.EPS)
    res = S.masked_schedule_from_losses(LAM, info.loss.value)
    ref = S.masked_schedule_from_rate(LAM, info.entropy_rate.value)
    np.testing.assert_allclose(res.pdf, ref.pdf, rtol=1e-12)
    assert res.method == "losses"


def test_schedule_from_model():
    res = S.masked_schedule_from_model(MarkovChain([[0.9, 0.1], [0.3, 0.7]], L=12), LAM, n_samples=200, rng=0,
                                       coordinate="t-masked")
    assert res.method == "monte-carlo" and res.schedule.coordinate.name == "t-masked"
    assert np.all(res.h_stderr >= 0) and np.any(res.h_stderr > 0)


@pytest.mark.parametrize("which", ["entropic-eps", "linear", "cosine", "uniform"])
def test_json_roundtrip_and_samplers(tmp_path, exact_h, which):
    sched = {"entropic-eps": S.masked_schedule_from_rate(LAM, exact_h, coordinate="eps").schedule,
             "linear": S.masked_linear(), "cosine": S.masked_cosine(coordinate="t-masked-cosine"),
             "uniform": S.masked_uniform_lambda()}[which]
    path = S.save_masked_json(sched, tmp_path / "s.json", n=1025)
    meta = json.loads(path.read_text())["meta"]
    assert meta["process"] == "masked" and meta["built_in_coordinate"] == sched.coordinate.name
    back = load_json(path)
    assert back.coordinate.name == "lambda"
    x = np.linspace(-11.5, 11.5, 31)
    np.testing.assert_allclose(back.pdf(x), sched.to(LAMBDA).pdf(x), rtol=2e-3)
    lam = NumpySampler(path)(5000, np.random.default_rng(0))
    eps = S.mask_rates(lam)
    assert np.all((eps > 0) & (eps < 1))


def test_refusals(exact_h):
    with pytest.raises(ValueError, match=r"coordinate must be one of 'lambda', 'eps'"):
        S.masked_schedule_from_rate(LAM, exact_h, coordinate="sigma")
    with pytest.raises(ValueError, match=r"loss must be >= 0"):
        S.masked_rate_from_losses([0.0, 1.0], [1.0, -1.0])
    with pytest.raises(ValueError, match=r"loss"):
        S.masked_rate_from_losses([0.0, 1.0], [1.0])
    with pytest.raises(ValueError):
        S.masked_linear(lam_min=1.0, lam_max=-1.0)
    with pytest.raises(ValueError):  # eps(-40) rounds to 1: outside the open domain of the coordinate
        S.masked_schedule_from_rate(np.linspace(-40.0, 0.0, 9), np.ones(9), coordinate="eps")


def test_maskgit_cosine_is_maskgit_rule_and_differs_from_the_specified_cosine():
    """MaskGIT: a fraction cos(pi r / 2) masked with r uniform, i.e. (2/pi) arccos(eps) is uniform."""
    eps = S.sample_mask_rates(S.maskgit_cosine(lam_min=-30.0, lam_max=30.0), 20000, rng=3)
    assert stats.kstest(2 / math.pi * np.arccos(eps), "uniform").pvalue > tol.KS_ALPHA
    spec = S.sample_mask_rates(S.masked_cosine(lam_min=-30.0, lam_max=30.0), 20000, rng=3)
    assert stats.kstest(2 / math.pi * np.arccos(spec), "uniform").pvalue < tol.KS_ALPHA
    # alpha = cos(pi t / 2) with t uniform: (2/pi) arccos(1 - eps) is uniform instead
    assert stats.kstest(2 / math.pi * np.arccos(1 - spec), "uniform").pvalue > tol.KS_ALPHA
