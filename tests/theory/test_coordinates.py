"""Noise coordinates: round trips, Jacobians, density transport, extreme inputs and bad input.

Reference values come from mpmath at 40 digits (closed forms of docs/THEORY.md section 1),
centred finite differences and adaptive quadrature (scipy.integrate.quad).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import example, given, target
from hypothesis import strategies as st
from scipy import integrate

from noisealloc.theory import coordinates as C
from noisealloc.theory import tolerances as tol

NAMES = tuple(C.COORDINATES)


def lam_window(name, lo=-50.0, hi=50.0):
    """[lo, hi] intersected with the coordinate's documented accurate range."""
    a, b = C.COORDINATES[name].lam_accurate
    return max(lo, a), min(hi, b)


# --- independent 40-digit references ------------------------------------------------


def lam_exact(name: str, u) -> mp.mpf:
    """lambda(u) from the textbook definitions, in mpmath (>= 40 digits; more inside mp.diff)."""
    with mp.workdps(max(40, mp.mp.dps)):
        u = mp.mpf(u)
        if name == "lambda":
            return u
        if name == "sigma":
            return -2 * mp.log(u)
        if name == "log-sigma":
            return -2 * u
        if name == "t-linear":
            b0, b1 = mp.mpf(C.LINEAR_BETA_MIN), mp.mpf(C.LINEAR_BETA_MAX)
            B = b0 * u + (b1 - b0) * u * u / 2
            return -mp.log(mp.expm1(B))  # abar = e^-B, lambda = log(abar/(1-abar))
        if name == "t-cosine":
            s = mp.mpf(C.COSINE_S)
            f = lambda t: mp.cos((t + s) / (1 + s) * mp.pi / 2) ** 2  # noqa: E731
            abar = f(u) / f(0)
            return mp.log(abar / (1 - abar))
        if name == "t-edm":
            rho = mp.mpf(C.EDM_RHO)
            smax, smin = mp.mpf(C.EDM_SIGMA_MAX), mp.mpf(C.EDM_SIGMA_MIN)
            sigma = (smax ** (1 / rho) + u * (smin ** (1 / rho) - smax ** (1 / rho))) ** rho
            return -2 * mp.log(sigma)
        if name == "t-rf":
            return 2 * mp.log((1 - u) / u)
    raise AssertionError(name)


@pytest.mark.parametrize("name", NAMES)
def test_to_lam_matches_mpmath_definition(name):
    """to_lam at float points in the training range equals the 40-digit textbook map."""
    c = C.COORDINATES[name]
    lams = np.linspace(-12.0, 12.0, 25)
    us = c.from_lam(lams)
    for u in us:
        got = float(c.to_lam(u))
        want = float(lam_exact(name, float(u)))
        assert abs(got - want) <= 64 * tol.EPS * max(1.0, abs(want)), (name, u, got, want)


@pytest.mark.parametrize("name", NAMES)
def test_dlam_du_matches_mpmath_derivative(name):
    c = C.COORDINATES[name]
    for u in c.from_lam(np.linspace(-11.0, 11.0, 12)):
        with mp.workdps(40):
            want = float(mp.diff(lambda x: lam_exact(name, x), mp.mpf(float(u))))
        got = float(c.dlam_du(u))
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"{name} at u={u}")


def test_reference_helper_is_not_vacuous():
    """lam_exact disagrees with a deliberately wrong map (guards the oracle itself)."""
    u = 0.3
    assert abs(float(lam_exact("t-rf", u)) - float(C.to_lam(u, "t-linear"))) > 1.0


# --- round trips ----------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@given(x=st.floats(0.0, 1.0))
@example(x=0.0)
@example(x=1.0)
def test_lam_u_lam_roundtrip(name, x):
    """lambda -> u -> lambda to 1e-10 relative (to max(1, |lambda|)) on |lambda| <= 50 within lam_accurate."""
    lo, hi = lam_window(name)
    lam = lo + x * (hi - lo)
    back = float(C.to_lam(C.from_lam(lam, name), name))
    err = abs(back - lam) / max(1.0, abs(lam))
    target(err, label=f"roundtrip {name}")
    assert err <= tol.COORD_ROUNDTRIP_RTOL, (name, lam, back)


@pytest.mark.parametrize("name", NAMES)
@given(x=st.floats(0.0, 1.0))
def test_lam_u_lam_roundtrip_wide(name, x):
    """The same on the whole documented range lam_accurate (clipped to |lambda| <= 700)."""
    lo, hi = lam_window(name, -700.0, 700.0)
    lam = lo + x * (hi - lo)
    back = float(C.to_lam(C.from_lam(lam, name), name))
    assert abs(back - lam) <= tol.COORD_ROUNDTRIP_RTOL * max(1.0, abs(lam)), (name, lam, back)


@pytest.mark.parametrize("name", ["t-cosine", "t-rf"])
def test_conditioning_beyond_lam_accurate_is_as_documented(name):
    """Below lam_accurate the round-trip error is the float64 resolution of t near 1: about eps / (1 - t)."""
    lam = np.linspace(-50.0, -30.0, 401)
    t = C.from_lam(lam, name)
    back = C.to_lam(t, name)
    # |dlambda/dlog(1-t)| -> 2 as t -> 1 for both maps; a half-ulp of t moves lambda by <= 2 * (eps/2)/(1-t).
    bound = 4.0 * tol.EPS / (1.0 - t)
    assert np.all(np.abs(back - lam) <= bound)
    assert np.all(np.isfinite(back))


STRATEGY_U = {
    "lambda": st.floats(-50.0, 50.0),
    "sigma": st.floats(-300.0, 300.0).map(math.exp),
    "log-sigma": st.floats(-25.0, 25.0),
    "t-linear": st.floats(1e-300, 10.0),
    "t-cosine": st.floats(1e-300, 1.0, exclude_max=True),
    "t-edm": st.floats(-1e3, C.COORDINATES["t-edm"].domain[1], exclude_max=True),
    "t-rf": st.floats(1e-300, 1.0, exclude_max=True),
}


@pytest.mark.parametrize("name", NAMES)
@given(data=st.data())
def test_u_lam_u_roundtrip_natural_domain(name, data):
    """u -> lambda -> u on the natural domain; relative to |u|, or to max(1, |u|) where u can cross 0."""
    u = data.draw(STRATEGY_U[name])
    c = C.COORDINATES[name]
    lam = c.to_lam(u)
    assert np.isfinite(lam)
    back = float(c.from_lam(lam))
    scale = max(1.0, abs(u)) if name in ("lambda", "log-sigma", "t-edm") else abs(u)
    err = abs(back - u) / scale
    target(err, label=f"u roundtrip {name}")
    assert err <= tol.COORD_ROUNDTRIP_RTOL, (name, u, back)


# --- Jacobians -----------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@given(x=st.floats(0.0, 1.0))
def test_jacobian_matches_centred_difference(name, x):
    lo, hi = lam_window(name, -50.0, 50.0)
    lam = lo + x * (hi - lo)
    c = C.COORDINATES[name]
    u = float(c.from_lam(lam))
    dlo, dhi = c.domain
    room = min(u - dlo, dhi - u)
    h = tol.FD_REL_STEP * min(max(abs(u), 1e-300), room)
    fd = (float(c.to_lam(u + h)) - float(c.to_lam(u - h))) / ((u + h) - (u - h))
    an = float(c.dlam_du(u))
    err = abs(fd - an) / abs(an)
    target(err, label=f"jacobian {name}")
    assert err <= tol.FD_RTOL, (name, lam, u, fd, an)
    # du/dlam is the reciprocal, with the orientation's sign
    np.testing.assert_allclose(float(c.du_dlam(lam)) * an, 1.0, rtol=1e-12)
    assert (an > 0) == c.increasing


# --- density transport ---------------------------------------------------------------


def normal_pdf(mu, sd):
    return lambda lam: np.exp(-0.5 * ((np.asarray(lam) - mu) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))


@pytest.mark.parametrize("name", NAMES)
@given(mu=st.floats(-8.0, 8.0), sd=st.floats(0.3, 2.0))
def test_transported_density_integrates_to_one(name, mu, sd):
    """p_u(u) = p_lam(lam(u)) |dlam/du| integrates to 1 over the image of [mu - 10 sd, mu + 10 sd]."""
    c = C.COORDINATES[name]
    ends = np.sort(c.from_lam(np.array([mu - 10 * sd, mu + 10 * sd])))
    pdf = normal_pdf(mu, sd)
    brk = np.sort(c.from_lam(mu + sd * np.array([-3.0, -1.0, 0.0, 1.0, 3.0])))
    val, _ = integrate.quad(lambda u: float(C.transport_pdf_from_lam(pdf, u, name)), ends[0], ends[1],
                            points=brk, limit=200, epsabs=1e-12, epsrel=1e-12)
    # mass of N(mu, sd) outside +-10 sd is 1.5e-23
    assert abs(val - 1.0) <= tol.DENSITY_INTEGRAL_ATOL, (name, mu, sd, val)


@pytest.mark.parametrize("name", NAMES)
@given(x=st.floats(0.0, 1.0))
def test_density_roundtrip_lam_u_lam(name, x):
    """Moving a density to u and back reproduces it to 1e-10 relative (docs/THEORY.md section 1)."""
    lo, hi = lam_window(name, -50.0, 50.0)
    lam = lo + x * (hi - lo)
    pdf = normal_pdf(0.5, 3.0)
    p_u = lambda u: C.transport_pdf_from_lam(pdf, u, name)  # noqa: E731
    back = float(C.transport_pdf_to_lam(p_u, lam, name))
    want = float(pdf(lam))
    if want < 1e-290:  # pure underflow; nothing to compare
        return
    assert abs(back - want) <= tol.COORD_ROUNDTRIP_RTOL * want * max(1.0, abs(lam)), (name, lam, back, want)


# --- VP / VE helpers ---------------------------------------------------------------------


@given(lam=st.floats(-700.0, 700.0))
def test_vp_alpha_sigma(lam):
    alpha, sigma = C.vp_alpha_sigma(lam)
    assert 0.0 <= alpha <= 1.0 and 0.0 <= sigma <= 1.0
    assert abs(alpha**2 + sigma**2 - 1.0) <= 4 * tol.EPS
    if alpha > 0 and sigma > 0:
        back = float(C.lam_from_alpha_sigma(alpha, sigma))
        assert abs(back - lam) <= tol.COORD_ROUNDTRIP_RTOL * max(1.0, abs(lam))


def test_edm_sigma_roundtrip():
    lam = np.linspace(-50, 50, 101)
    np.testing.assert_allclose(C.lam_from_edm_sigma(C.edm_sigma(lam)), lam, rtol=0, atol=1e-13)


# --- extreme and bad input --------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("lam", [-50.0, 50.0])
def test_extreme_lam_finite(name, lam):
    c = C.get_coordinate(name)
    u = c.from_lam(lam)
    assert np.isfinite(u) and c.domain[0] < u < c.domain[1]
    assert np.isfinite(c.to_lam(u)) and np.isfinite(c.dlam_du(u)) and np.isfinite(c.du_dlam(lam))
    assert c.du_dlam(lam) != 0


def test_alias_t_is_cosine():
    assert C.get_coordinate("t") is C.COORDINATES["t-cosine"]
    assert C.get_coordinate(C.COORDINATES["sigma"]) is C.COORDINATES["sigma"]


def test_unknown_coordinate_names_argument_and_allowed_values():
    with pytest.raises(ValueError, match=r"coordinate must be one of .*'lambda'.*'t-rf'.*got 'time'"):
        C.get_coordinate("time")
    with pytest.raises(ValueError, match="coordinate must be one of"):
        C.to_lam(0.5, "snr")


@pytest.mark.parametrize("name,u", [("sigma", -1.0), ("t-cosine", 1.0), ("t-rf", 0.0), ("t-linear", 0.0),
                                    ("t-edm", 2.0)])
def test_outside_domain_raises(name, u):
    with pytest.raises(ValueError, match=r"u must lie in the open domain"):
        C.to_lam(u, name)
    with pytest.raises(ValueError, match=r"u must lie in the open domain"):
        C.dlam_du(u, name)


def test_nan_lam_raises():
    with pytest.raises(ValueError, match="lam must not be NaN"):
        C.from_lam(np.array([0.0, np.nan]), "sigma")
