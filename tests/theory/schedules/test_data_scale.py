"""The data scale and the log-SNR shift of heuristic schedules (theory/schedules/data_scale.py, docs/THEORY.md section 5)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

from noisealloc.theory.schedules import data_scale as DS
from noisealloc.theory.models.dirac import DiracMixture
from noisealloc.theory.models.gaussian import GaussianManifold
from noisealloc.theory.schedules.builtin import builtin_schedules
from noisealloc.theory.tolerances import MC_NSIGMA
from helpers.strategies import examples

#: Data scales of the property tests: two decades either side of sigma_data (shifts of about +-9 in lambda).
SCALES = st.floats(5e-3, 50.0, allow_nan=False, allow_infinity=False)


@pytest.fixture(scope="module")
def model():
    return DiracMixture(np.array([[-1.0, 0.5], [1.0, -0.5], [0.0, 1.5]]), weights=np.array([0.5, 0.3, 0.2]))


def test_data_scale_of_a_dirac_mixture_is_its_weighted_per_coordinate_std(model):
    x, w = model.atoms, model.weights
    mean = w @ x
    direct = np.sqrt(np.mean(w @ (x - mean) ** 2))
    assert DS.data_scale(model) == pytest.approx(direct, rel=1e-14)


def test_data_scale_of_a_sampling_model_agrees_with_the_closed_form_and_is_seeded():
    # Gaussian manifold x0 = mu + U z, z ~ N(0, diag(s)): tr Cov = sum(s), so the scale is sqrt(sum(s) / D).
    basis = np.linalg.qr(np.random.default_rng(0).standard_normal((6, 2)))[0]
    g = GaussianManifold(np.full(6, 0.3), basis, [2.0, 0.5])
    exact = np.sqrt(2.5 / 6)
    a = DS.data_scale(g, n_samples=20000, rng=3)
    assert a == DS.data_scale(g, n_samples=20000, rng=3)
    assert a != DS.data_scale(g, n_samples=20000, rng=4)
    # sample variance of a sum of squares: the relative error of s is about sqrt(2 / n) at worst
    assert abs(a / exact - 1) < MC_NSIGMA * np.sqrt(2.0 / 20000)


@given(s=SCALES, sd=st.floats(0.05, 5.0))
@settings(max_examples=examples(30))
def test_shift_is_twice_the_log_ratio_and_additive(s, sd):
    d = DS.heuristic_shift(s, sigma_data=sd)
    assert d == pytest.approx(2 * np.log(s / sd), rel=1e-14, abs=1e-14)
    # scaling the data by c twice adds the shifts: Delta(s c) = Delta(s) + 2 log c
    assert DS.heuristic_shift(2 * s, sigma_data=sd) == pytest.approx(d + 2 * np.log(2.0), rel=1e-13, abs=1e-13)
    assert DS.heuristic_shift(sd, sigma_data=sd) == 0.0


@given(s=SCALES, name=st.sampled_from(["edm_lognormal", "cosine", "logit_normal_sd3", "laplace_lambda"]))
@settings(max_examples=examples(25))
def test_shifted_density_is_the_design_density_moved_and_renormalised(s, name):
    # p(lam) = p_h(lam + Delta) on [lo, hi]: compare with the design-frame schedule built independently on the
    # shifted interval and with its unnormalised shape, and check the grid density integrates to one.
    lo, hi = -8.0, 8.0
    lam = np.linspace(lo, hi, 801)
    p = DS.shifted_heuristic_pdfs(lam, s, names=[name])[name]
    d = 2 * np.log(s / DS.SIGMA_DATA)
    ref = builtin_schedules(lo + d, hi + d)[name]
    np.testing.assert_allclose(p, ref.pdf(lam + d), rtol=1e-12, atol=0)
    mass = np.trapezoid(p, lam)
    if np.max(p) > 1e-8:  # the interval holds the bulk of the heuristic: the trapezoid rule sees one
        assert mass == pytest.approx(1.0, rel=2e-3)


def test_shifted_heuristic_is_the_truncated_shifted_normal():
    # EDM: lambda ~ N(2.4, 2.4^2); moved to data of scale s: N(2.4 - 2 log(s/0.5), 2.4^2) truncated to the interval.
    s, lo, hi = 1.3, -8.0, 8.0
    sch = DS.shifted_heuristic("edm_lognormal", s, lo, hi)
    mu = 2.4 - 2 * np.log(s / 0.5)
    ref = stats.truncnorm((lo - mu) / 2.4, (hi - mu) / 2.4, loc=mu, scale=2.4)
    lam = np.linspace(lo + 0.01, hi - 0.01, 57)
    np.testing.assert_allclose(sch.pdf(lam), ref.pdf(lam), rtol=2e-4)
    assert sch.name == f"edm_lognormal (shifted {2 * np.log(s / 0.5):+.3f})"
    assert sch.coordinate.name == "lambda" and sch.interval == (lo, hi)


def test_shifted_heuristic_and_pdfs_agree_at_the_knots():
    s, lo, hi = 0.37, -6.0, 7.0
    sch = DS.shifted_heuristic("cosine", s, lo, hi, knots=129)
    lam = np.linspace(lo, hi, 129)
    p = DS.shifted_heuristic_pdfs(lam, s, names=["cosine"])["cosine"]
    np.testing.assert_allclose(sch.pdf(lam[1:-1]), p[1:-1] / np.trapezoid(p, lam), rtol=1e-12)


def test_all_names_in_display_order():
    lam = np.linspace(-4.0, 4.0, 9)
    assert list(DS.shifted_heuristic_pdfs(lam, 1.0)) == list(builtin_schedules())


@pytest.mark.parametrize("call, match", [
    (lambda: DS.heuristic_shift(0.0), r"s must be a finite number > 0; got 0\.0"),
    (lambda: DS.heuristic_shift(-1.0), "s must be"),
    (lambda: DS.heuristic_shift(np.nan), "s must be"),
    (lambda: DS.heuristic_shift(1.0, sigma_data=0.0), "sigma_data must be"),
    (lambda: DS.shifted_heuristic("nope", 1.0, -2.0, 2.0), "name must be one of"),
    (lambda: DS.shifted_heuristic("cosine", 1.0, 2.0, -2.0), "lam_min"),
    (lambda: DS.shifted_heuristic("cosine", 1.0, -2.0, 2.0, knots=1), "knots must be >= 2"),
    (lambda: DS.shifted_heuristic_pdfs([0.0, 0.0, 1.0], 1.0), "strictly increasing"),
    (lambda: DS.shifted_heuristic_pdfs([0.0], 1.0), "at least 2"),
    (lambda: DS.data_scale(object()), "model must be a Dirac mixture"),
    (lambda: DS.data_scale(GaussianManifold([0.0, 0.0], [[1.0], [0.0]], [1.0]), n_samples=1), "n_samples must be >= 2"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
