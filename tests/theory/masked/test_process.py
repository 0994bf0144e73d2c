"""The masked forward process: alpha/eps in both tails, lambda <-> eps <-> t, coordinates, density
transport, masking a batch, bad input (docs/THEORY.md section 7.1).

References are mpmath at 40 digits and adaptive quadrature.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import example, given, settings, target
from hypothesis import strategies as st
from scipy import integrate

from helpers.strategies import examples
from noisealloc.theory import tolerances as tol
from noisealloc.theory.masked import process as P

NAMES = tuple(P.MASKED_COORDINATES)


def sigmoid_mp(lam) -> mp.mpf:
    with mp.workdps(max(40, mp.mp.dps)):
        return 1 / (1 + mp.exp(-mp.mpf(lam)))


def lam_exact(name: str, u: float) -> mp.mpf:
    """lambda(u) from the textbook definitions (>= 40 digits; more inside mp.diff)."""
    with mp.workdps(max(40, mp.mp.dps)):
        u = mp.mpf(u)
        if name in ("eps", "t-masked"):
            return mp.log((1 - u) / u)
        if name == "t-masked-cosine":
            a = mp.cos(mp.pi * u / 2)
            return mp.log(a / (1 - a))
        if name == "t-maskgit":
            e = mp.sin(mp.pi * u / 2)
            return mp.log((1 - e) / e)
    raise AssertionError(name)


# --- alpha and eps ---------------------------------------------------------------------


@pytest.mark.parametrize("lam", [-1e4, -745.0, -40.0, 0.0, 40.0, 745.0, 1e4, -np.inf, np.inf])
def test_alpha_eps_finite_at_extremes(lam):
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow to 0 is the right answer
        a, e = P.keep_probability(lam), P.mask_rate(lam)
        la, le = P.log_keep_probability(lam), P.log_mask_rate(lam)
    assert np.isfinite(a) and np.isfinite(e) and 0.0 <= a <= 1.0 and 0.0 <= e <= 1.0
    assert not np.isnan(la) and not np.isnan(le)
    if np.isfinite(lam):
        assert np.isfinite(la) and np.isfinite(le)


@settings(max_examples=examples(60))
@given(lam=st.floats(-700.0, 700.0))
@example(lam=-700.0)
@example(lam=700.0)
@example(lam=0.0)
def test_alpha_eps_match_mpmath(lam):
    """Both probabilities to a few ulps relative (not absolute) in both tails, and alpha + eps = 1."""
    a, e = float(P.keep_probability(lam)), float(P.mask_rate(lam))
    ra, re = float(sigmoid_mp(lam)), float(sigmoid_mp(-lam))
    err = max(abs(a - ra) / ra, abs(e - re) / re)
    target(err, label="relative error of sigmoid")
    assert err <= 8 * tol.EPS, (lam, a, e)
    assert abs(a + e - 1.0) <= 2 * tol.EPS


def test_reference_is_not_vacuous():
    """The mpmath reference sees the error of the naive 1 - alpha in the upper tail."""
    naive = 1.0 - float(P.keep_probability(40.0))
    assert abs(naive - float(sigmoid_mp(-40.0))) / float(sigmoid_mp(-40.0)) > 8 * tol.EPS


# --- lambda <-> eps <-> t ---------------------------------------------------------------


@settings(max_examples=examples(60))
@given(lam=st.floats(-15.0, 700.0))
@example(lam=-15.0)
@example(lam=700.0)
def test_lam_eps_lam_roundtrip(lam):
    back = float(P.lam_from_mask_rate(P.mask_rate(lam)))
    err = abs(back - lam) / max(1.0, abs(lam))
    target(err, label="lam -> eps -> lam")
    assert err <= tol.COORD_ROUNDTRIP_RTOL, (lam, back)


@settings(max_examples=examples(60))
@given(eps=st.floats(1e-300, 1.0, exclude_max=True))
def test_eps_lam_eps_roundtrip(eps):
    back = float(P.mask_rate(P.lam_from_mask_rate(eps)))
    assert abs(back - eps) <= tol.COORD_ROUNDTRIP_RTOL * eps, (eps, back)


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
@settings(max_examples=examples(40))
@given(t=st.floats(1e-12, 1.0 - 1e-6))
def test_t_lam_t_roundtrip(schedule, t):
    back = float(P.t_from_lam(P.lam_from_t(t, schedule), schedule))
    err = abs(back - t) / t
    target(err, label=f"t roundtrip {schedule}")
    assert err <= tol.COORD_ROUNDTRIP_RTOL, (t, back)


def test_linear_time_is_mask_rate():
    t = np.array([0.1, 0.5, 0.9])
    np.testing.assert_allclose(P.mask_rate(P.lam_from_t(t)), t, rtol=4 * tol.EPS)
    np.testing.assert_allclose(P.keep_probability(P.lam_from_t(t, "cosine")), np.cos(np.pi * t / 2), rtol=8 * tol.EPS)


@pytest.mark.parametrize("name", NAMES)
def test_to_lam_matches_mpmath(name):
    c = P.MASKED_COORDINATES[name]
    for u in c.from_lam(np.linspace(-12.0, 12.0, 25)):
        got, want = float(c.to_lam(u)), float(lam_exact(name, float(u)))
        assert abs(got - want) <= 64 * tol.EPS * max(1.0, abs(want)), (name, u, got, want)


@pytest.mark.parametrize("name", NAMES)
def test_dlam_du_matches_mpmath_derivative(name):
    c = P.MASKED_COORDINATES[name]
    for u in c.from_lam(np.linspace(-11.0, 11.0, 12)):
        with mp.workdps(40):
            want = float(mp.diff(lambda v: lam_exact(name, v), mp.mpf(float(u))))
        np.testing.assert_allclose(float(c.dlam_du(u)), want, rtol=1e-12, err_msg=f"{name} at u={u}")
        assert c.increasing is False and float(c.dlam_du(u)) < 0


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=examples(40))
@given(x=st.floats(0.0, 1.0))
def test_coordinate_roundtrip_on_documented_range(name, x):
    c = P.MASKED_COORDINATES[name]
    lo, hi = c.lam_accurate
    lam = lo + x * (hi - lo)
    back = float(c.to_lam(c.from_lam(lam)))
    assert abs(back - lam) <= tol.COORD_ROUNDTRIP_RTOL * max(1.0, abs(lam)), (name, lam, back)


# --- density transport ------------------------------------------------------------------


def test_uniform_linear_time_is_logistic_in_lambda():
    lam = np.linspace(-20.0, 20.0, 41)
    p = P.transport_pdf_to_lam(lambda t: np.ones_like(t), lam, "t-masked")
    np.testing.assert_allclose(p, P.keep_probability(lam) * P.mask_rate(lam), rtol=8 * tol.EPS)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=examples(20))
@given(mu=st.floats(-6.0, 6.0), sd=st.floats(0.3, 2.0))
def test_transported_density_integrates_to_one(name, mu, sd):
    pdf = lambda lam: np.exp(-0.5 * ((np.asarray(lam) - mu) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))  # noqa: E731
    c = P.MASKED_COORDINATES[name]
    ends = np.sort(c.from_lam(np.array([mu - 10 * sd, mu + 10 * sd])))
    brk = np.sort(c.from_lam(mu + sd * np.array([-3.0, -1.0, 0.0, 1.0, 3.0])))
    val, _ = integrate.quad(lambda u: float(P.transport_pdf_from_lam(pdf, u, name)), ends[0], ends[1],
                            points=brk, limit=200, epsabs=1e-12, epsrel=1e-12)
    assert abs(val - 1.0) <= tol.DENSITY_INTEGRAL_ATOL, (name, mu, sd, val)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=examples(40))
@given(x=st.floats(0.0, 1.0))
def test_density_roundtrip(name, x):
    """lambda -> u -> lambda reproduces a density to 1e-10 relative (docs/THEORY.md section 1)."""
    lam = -12.0 + 24.0 * x
    pdf = lambda v: np.exp(-0.5 * ((np.asarray(v) - 0.5) / 3.0) ** 2)  # noqa: E731
    p_u = lambda u: P.transport_pdf_from_lam(pdf, u, name)  # noqa: E731
    back = float(P.transport_pdf_to_lam(p_u, lam, name))
    assert abs(back - float(pdf(lam))) <= tol.COORD_ROUNDTRIP_RTOL * float(pdf(lam)) * max(1.0, abs(lam))


def test_get_masked_coordinate():
    assert P.get_masked_coordinate("lambda").name == "lambda"
    assert P.get_masked_coordinate("eps") is P.MASKED_COORDINATES["eps"]
    with pytest.raises(ValueError, match=r"coordinate must be one of 'lambda', 'eps'.*got 'sigma'"):
        P.get_masked_coordinate("sigma")


def test_masked_coordinates_are_not_in_the_gaussian_registry():
    from noisealloc.theory.coordinates import COORDINATES

    assert not set(P.MASKED_COORDINATES) & set(COORDINATES)


# --- masking ---------------------------------------------------------------------------


def test_mask_tokens_rates_and_symbol():
    x = np.zeros((4000, 50), dtype=int)
    z = P.mask_tokens(x, 0.0, 3, rng=1)
    assert set(np.unique(z)) == {0, 3}
    frac = float(np.mean(z == 3))
    assert abs(frac - 0.5) <= tol.MC_NSIGMA * math.sqrt(0.25 / x.size)
    lam = np.where(np.arange(4000) < 2000, -1e4, 1e4)
    z = P.mask_tokens(x, lam, 3, rng=2)
    assert np.all(z[:2000] == 3) and np.all(z[2000:] == 0)


def test_mask_tokens_same_seed_same_output():
    x = np.random.default_rng(0).integers(0, 5, (20, 30))
    np.testing.assert_array_equal(P.mask_tokens(x, 0.3, 5, rng=7), P.mask_tokens(x, 0.3, 5, rng=7))
    assert not np.array_equal(P.mask_tokens(x, 0.3, 5, rng=7), P.mask_tokens(x, 0.3, 5, rng=8))


def test_masks_are_nested_across_levels():
    u = np.random.default_rng(3).random((10, 40))
    m_lo, m_hi = P.masks_from_uniforms(u, -1.0), P.masks_from_uniforms(u, 1.0)
    assert np.all(m_hi <= m_lo)  # a token visible at the noisier level stays visible


# --- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize("tokens,V,match", [
    ([[0, 1], [1, 2]], 2, r"tokens must be < V = 2"),
    ([[0, -1]], 2, r"tokens must be >= 0"),
    ([[0.5, 1.0]], 2, r"tokens must hold integers"),
    ([[0, 1], [1]], 2, r"tokens must be a rectangular"),
    ([0, 1], 2, r"tokens must be a non-empty two-dimensional"),
    ([[True, False]], 2, r"tokens must hold integers"),
    ([[0, 0]], 1, r"V must be an integer >= 2"),
    ([[0, 0]], 2.0, r"V must be an integer >= 2"),
])
def test_check_tokens_refusals(tokens, V, match):
    with pytest.raises(ValueError, match=match):
        P.mask_tokens(tokens, 0.0, V, rng=0)


def test_other_refusals():
    with pytest.raises(ValueError, match=r"eps must lie in \[0, 1\]; got 1.5"):
        P.lam_from_mask_rate(1.5)
    with pytest.raises(ValueError, match=r"lam must not be NaN"):
        P.mask_rate(np.nan)
    with pytest.raises(ValueError, match=r"schedule must be 'linear' or 'cosine'"):
        P.lam_from_t(0.5, "sine")
    with pytest.raises(ValueError, match=r"u must lie in the open domain"):
        P.lam_from_t(1.0)
    with pytest.raises(ValueError, match=r"lam must be a scalar or have one level per string"):
        P.mask_tokens([[0, 1], [1, 0]], [0.0, 1.0, 2.0], 2, rng=0)


@pytest.mark.parametrize("name", NAMES)
def test_du_dlam_accurate_in_both_tails(name):
    """du/dlam from lambda directly, against mpmath, on [-40, 40] (where u itself is within an ulp of 1)."""
    c = P.MASKED_COORDINATES[name]

    def u_of(lam):
        a = sigmoid_mp(lam)
        if name == "t-masked-cosine":
            return 2 * mp.acos(a) / mp.pi
        if name == "t-maskgit":
            return 2 * mp.asin(1 - a) / mp.pi
        return 1 - a

    for lam in np.linspace(-40.0, 40.0, 17):
        with mp.workdps(40):
            want = float(mp.diff(lambda v: u_of(v), mp.mpf(float(lam))))
        np.testing.assert_allclose(float(c.du_dlam(lam)), want, rtol=64 * tol.EPS, err_msg=f"{name} at {lam}")
