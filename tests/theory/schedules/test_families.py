"""Schedule library and evaluation weights (issue 2, acceptance items 2-4).

Independent oracles: scipy.stats (truncnorm, lognorm, laplace), closed-form
inverse maps written here with numpy, mpmath at 40 digits for deep tails,
sympy for the EDM moments, adaptive quadrature for normalisation.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
import sympy as sp
from hypothesis import example, given, settings, target
from hypothesis import strategies as st
from helpers.strategies import examples
from scipy import integrate, stats

from noisealloc.theory import coordinates as C
from noisealloc.theory import schedules as S
from noisealloc.theory import tolerances as tol
from noisealloc.theory import weights as W

COORDS = ("lambda", "sigma", "log-sigma", "t-linear", "t-cosine", "t-edm", "t-rf")
NAMES = S.BUILTIN_NAMES


def build(name, coordinate="lambda", lam_min=-12.0, lam_max=12.0):
    return S.builtin_schedules(lam_min, lam_max, coordinate=coordinate)[name]


def quad_mass(s):
    lo, hi = s.interval
    pts = np.asarray(s.ppf(np.array([1e-6, 1e-3, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999, 1 - 1e-6])))
    pts = np.unique(pts[(pts > lo) & (pts < hi)])
    val, _ = integrate.quad(s.pdf, lo, hi, points=pts, limit=400, epsabs=1e-13, epsrel=1e-13)
    return val


# --- independent reference CDFs in lambda -----------------------------------------------


def _t_cosine_closed_form(lam):
    # abar = sigmoid(lam) = cos^2(theta)/cos^2(theta0)  =>  theta = arccos(sqrt(abar) cos theta0)
    s = C.COSINE_S
    th0 = s / (1 + s) * math.pi / 2
    theta = np.arccos(np.sqrt(1.0 / (1.0 + np.exp(-lam))) * math.cos(th0))
    return theta / (math.pi / 2) * (1 + s) - s


def _t_linear_closed_form(lam):
    # abar = exp(-B(t)) = sigmoid(lam)  =>  B = log(1 + e^-lam); positive root of the quadratic B(t) = B
    b0, b1 = C.LINEAR_BETA_MIN, C.LINEAR_BETA_MAX
    B = np.log1p(np.exp(-lam))
    return (-b0 + np.sqrt(b0 * b0 + 2 * (b1 - b0) * B)) / (b1 - b0)


def reference_cdf(name, lo=-12.0, hi=12.0):
    if name == "uniform_lambda":
        return lambda x: (x - lo) / (hi - lo)
    if name in ("edm_lognormal", "logit_normal_sd3"):
        mu, sd = (2.4, 2.4) if name == "edm_lognormal" else (0.0, 2.0)
        return stats.truncnorm((lo - mu) / sd, (hi - mu) / sd, loc=mu, scale=sd).cdf
    if name == "laplace_lambda":
        L = stats.laplace(0.0, 0.5)
        return lambda x: (L.cdf(x) - L.cdf(lo)) / (L.cdf(hi) - L.cdf(lo))
    if name == "cosine":
        t_lo, t_hi = _t_cosine_closed_form(hi), _t_cosine_closed_form(lo)
        return lambda x: (t_hi - _t_cosine_closed_form(x)) / (t_hi - t_lo)
    if name == "linear_beta_uniform_t":
        t_lo, t_hi = _t_linear_closed_form(hi), min(1.0, _t_linear_closed_form(lo))
        return lambda x: (t_hi - _t_linear_closed_form(x)) / (t_hi - t_lo)
    raise AssertionError(name)


def test_reference_cdfs_are_not_vacuous():
    """The reference CDFs tell the schedules apart (a test helper that always agreed would be useless)."""
    x = np.linspace(-11, 11, 23)
    for a in NAMES:
        for b in NAMES:
            if a != b:
                assert np.max(np.abs(reference_cdf(a)(x) - reference_cdf(b)(x))) > 0.05, (a, b)


# --- normalisation (acceptance 2: transported densities integrate to 1) ----------------


@pytest.mark.parametrize("coordinate", COORDS)
@pytest.mark.parametrize("name", NAMES)
def test_density_integrates_to_one(name, coordinate):
    s = build(name, coordinate)
    assert abs(quad_mass(s) - 1.0) <= tol.DENSITY_INTEGRAL_ATOL


@pytest.mark.parametrize("name", NAMES)
def test_cdf_matches_independent_reference(name):
    s = build(name)
    x = np.linspace(*s.interval, 2001)
    np.testing.assert_allclose(s.cdf(x), reference_cdf(name)(x), rtol=0, atol=1e-12)
    # the density is the derivative of the reference CDF (centred differences)
    xi = x[1:-1]
    h = 1e-5
    fd = (reference_cdf(name)(xi + h) - reference_cdf(name)(xi - h)) / (2 * h)
    np.testing.assert_allclose(s.pdf(xi), fd, rtol=1e-5, atol=1e-9)


# --- quantile round trips (acceptance 2: ppf(cdf(x)) == x) ------------------------------


def base_resolution(s, x):
    """Move of x caused by rounding the base coordinate of a transported schedule: 2 ulp(u) |dx/du|.

    A schedule defined in cosine time cannot tell apart points closer than one float64 step of t.
    """
    x = np.asarray(x, dtype=np.float64)
    if not isinstance(s, S.TransportedSchedule):
        return np.zeros_like(x)
    cb, c = s.base.coordinate, s.coordinate
    u = cb.from_lam(c.to_lam(x))
    return 2.0 * np.spacing(np.abs(u)) * np.abs(cb.dlam_du(u)) / np.abs(c.dlam_du(x))


def interval_strategy():
    # lam_min >= -30: the cosine and rectified-flow time maps are accurate to 1e-10 only there
    # (Coordinate.lam_accurate); schedules defined in those coordinates inherit the limit.
    return st.tuples(st.floats(-30.0, -0.5), st.floats(0.5, 50.0))


@given(name=st.sampled_from(NAMES), coordinate=st.sampled_from(COORDS), ends=interval_strategy(),
       x=st.floats(0.0, 1.0))
@example(name="edm_lognormal", coordinate="sigma", ends=(-30.0, 50.0), x=1.0)
@example(name="cosine", coordinate="lambda", ends=(-30.0, 50.0), x=0.0)
def test_ppf_cdf_roundtrip(name, coordinate, ends, x):
    s = build(name, coordinate, *ends)
    lo, hi = s.interval
    u = lo + x * (hi - lo)
    q, sf, p = float(s.cdf(u)), float(s.sf(u)), float(s.pdf(u))
    assert abs(q + sf - 1.0) <= 4 * tol.EPS
    assert p > 0
    if sf >= 1e-8:  # the level q is resolved in float64
        err = abs(float(s.ppf(q)) - u)
        bound = (tol.COORD_ROUNDTRIP_RTOL * max(1.0, abs(u)) + tol.PPF_ROUNDTRIP_EPS_FACTOR * tol.EPS * q / p
                 + float(base_resolution(s, u)))
        target(err / bound, label="ppf(cdf)")
        assert err <= bound, (s, u, q, err, bound)
    if q >= 1e-8:
        err = abs(float(s.isf(sf)) - u)
        bound = (tol.COORD_ROUNDTRIP_RTOL * max(1.0, abs(u)) + tol.PPF_ROUNDTRIP_EPS_FACTOR * tol.EPS * sf / p
                 + float(base_resolution(s, u)))
        assert err <= bound, (s, u, sf, err, bound)


@given(name=st.sampled_from(NAMES), coordinate=st.sampled_from(COORDS), ends=interval_strategy(),
       q=st.floats(0.0, 1.0))
@example(name="uniform_lambda", coordinate="t-cosine", ends=(-30.0, 50.0), q=1e-12)
def test_cdf_ppf_roundtrip(name, coordinate, ends, q):
    s = build(name, coordinate, *ends)
    u = s.ppf(q)
    assert s.interval[0] <= u <= s.interval[1]
    # Rounding u to float64 alone moves the level by up to p(u) * ulp(u) / 2 (large where a
    # time coordinate squeezes much mass against t = 1).
    resolution = lambda v: 2.0 * float(s.pdf(v)) * float(np.spacing(abs(v)))  # noqa: E731
    err = abs(float(s.cdf(u)) - q)
    target(err, label="cdf(ppf)")
    assert err <= tol.QUANTILE_ROUNDTRIP_ATOL + resolution(u)
    v = s.isf(q)
    assert abs(float(s.sf(v)) - q) <= tol.QUANTILE_ROUNDTRIP_ATOL + resolution(v)


@pytest.mark.parametrize("coordinate", COORDS)
@pytest.mark.parametrize("name", NAMES)
def test_end_points_and_monotonicity(name, coordinate):
    s = build(name, coordinate)
    lo, hi = s.interval
    assert s.ppf(0.0) == lo and s.ppf(1.0) == hi and s.isf(0.0) == hi and s.isf(1.0) == lo
    assert s.cdf(lo) == 0.0 and s.cdf(hi) == 1.0
    assert s.pdf(lo - 1e-9 * max(1, abs(lo))) == 0.0 and s.pdf(hi + 1e-9 * max(1, abs(hi))) == 0.0
    x = np.linspace(lo, hi, 5001)
    assert np.all(np.diff(s.cdf(x)) >= 0)
    assert np.all(s.pdf(x) > 0)
    lam_lo, lam_hi = s.lam_interval
    assert lam_hi <= 12.0 + 1e-12 and lam_lo >= -12.0 - 1e-12


# --- samplers (acceptance 3) ----------------------------------------------------------


@pytest.mark.parametrize("coordinate", COORDS)
@pytest.mark.parametrize("name", NAMES)
def test_ks_sample_against_own_cdf(name, coordinate):
    seed = 1000 + 10 * NAMES.index(name) + COORDS.index(coordinate)
    s = build(name, coordinate)
    x = s.sample(10**5, rng=seed)
    assert x.shape == (10**5,) and x.dtype == np.float64
    assert np.all((x >= s.interval[0]) & (x <= s.interval[1]))
    res = stats.kstest(x, s.cdf)
    assert res.pvalue > tol.KS_ALPHA, (name, coordinate, res)


@pytest.mark.parametrize("name", NAMES)
def test_ks_sample_against_independent_cdf(name):
    """Inverse-CDF samples against a CDF that the schedule code did not compute."""
    x = build(name).sample(10**5, rng=2000 + NAMES.index(name))
    res = stats.kstest(x, reference_cdf(name))
    assert res.pvalue > tol.KS_ALPHA, (name, res)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_samples(name):
    s = build(name, "sigma")
    a = s.sample(1000, rng=7)
    b = s.sample(1000, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, s.sample(1000, rng=8))


def test_distribution_sample_same_seed():
    law = S.edm_lognormal().untruncated
    np.testing.assert_array_equal(law.sample(500, rng=3), law.sample(500, rng=3))


# --- EDM log-normal moments (acceptance 3) -----------------------------------------------


def test_edm_lognormal_untruncated_moments_analytic():
    """ln sigma ~ N(P_mean, P_std^2) and lambda = -2 ln sigma: sympy.stats gives the exact moments."""
    from sympy.stats import E, Normal, variance

    log_sigma = Normal("log_sigma", sp.Rational(-6, 5), sp.Rational(6, 5))
    mean, var = E(-2 * log_sigma), variance(-2 * log_sigma)
    assert mean == sp.Rational(12, 5) and var == sp.Rational(144, 25)
    m, sd = S.edm_lognormal_moments()
    assert m == pytest.approx(2.4, rel=1e-15) and sd == pytest.approx(2.4, rel=1e-15)
    law = S.edm_lognormal().untruncated
    assert law.mean == pytest.approx(2.4, rel=1e-15) and law.std == pytest.approx(2.4, rel=1e-15)


def test_edm_lognormal_moments_by_quadrature_in_sigma():
    """E[lambda] and Var[lambda] from the density in sigma of a practically untruncated schedule."""
    s = S.edm_lognormal(lam_min=-60.0, lam_max=60.0, coordinate="sigma")  # mass outside: ~1e-100
    lam = lambda sig: -2.0 * math.log(sig)  # noqa: E731
    # sigma spans e^-30 .. e^30: integrate piecewise between geometrically spaced break points
    edges = np.geomspace(*s.interval, 241)
    m0 = m1 = m2 = 0.0
    for a, b in zip(edges[:-1], edges[1:]):
        m0 += integrate.quad(s.pdf, a, b, epsabs=1e-15, epsrel=1e-13)[0]
        m1 += integrate.quad(lambda x: lam(x) * s.pdf(x), a, b, epsabs=1e-15, epsrel=1e-13)[0]
        m2 += integrate.quad(lambda x: (lam(x) - 2.4) ** 2 * s.pdf(x), a, b, epsabs=1e-15, epsrel=1e-13)[0]
    assert abs(m0 - 1.0) < 1e-10
    assert abs(m1 - 2.4) < 1e-9 and abs(math.sqrt(m2) - 2.4) < 1e-9


@pytest.mark.parametrize("coordinate", ["lambda", "log-sigma"])
def test_edm_lognormal_moments_by_sampling(coordinate):
    n = 10**5
    s = S.edm_lognormal(lam_min=-60.0, lam_max=60.0, coordinate=coordinate)
    lam = C.to_lam(s.sample(n, rng=31 + len(coordinate)), coordinate)
    se_mean = 2.4 / math.sqrt(n)
    se_std = 2.4 / math.sqrt(2 * (n - 1))  # normal data
    assert abs(lam.mean() - 2.4) <= tol.MC_NSIGMA * se_mean
    assert abs(lam.std(ddof=1) - 2.4) <= tol.MC_NSIGMA * se_std
    u = S.edm_lognormal().untruncated.sample(n, rng=5)
    assert abs(u.mean() - 2.4) <= tol.MC_NSIGMA * se_mean
    assert abs(u.std(ddof=1) - 2.4) <= tol.MC_NSIGMA * se_std


def test_truncated_edm_moments_match_scipy_truncnorm():
    s = S.edm_lognormal()
    ref = stats.truncnorm((-12 - 2.4) / 2.4, (12 - 2.4) / 2.4, loc=2.4, scale=2.4)
    m, sd = s.lam_moments()
    assert m == pytest.approx(ref.mean(), rel=1e-10) and sd == pytest.approx(ref.std(), rel=1e-10)
    m, sd = S.uniform_lambda().to("t-rf").lam_moments()
    assert abs(m) < 1e-12 and sd == pytest.approx(24 / math.sqrt(12), rel=1e-12)


# --- densities in other coordinates against textbook formulas -----------------------------


def test_edm_in_log_sigma_and_sigma_is_lognormal():
    s = S.edm_lognormal()
    mass = stats.norm(2.4, 2.4).cdf(12) - stats.norm(2.4, 2.4).cdf(-12)
    assert s.mass == pytest.approx(mass, rel=1e-13)
    ls = s.to("log-sigma")
    x = np.linspace(*ls.interval, 301)
    np.testing.assert_allclose(ls.pdf(x), stats.norm(-1.2, 1.2).pdf(x) / mass, rtol=1e-12)
    sg = s.to("sigma")
    x = np.geomspace(*sg.interval, 301)[1:-1]
    np.testing.assert_allclose(sg.pdf(x), stats.lognorm(s=1.2, scale=math.exp(-1.2)).pdf(x) / mass, rtol=1e-11)


def test_logit_normal_in_rectified_flow_time():
    s = S.logit_normal_sd3(m=0.3, s=0.8)
    t_s = s.to("t-rf")
    t = np.linspace(*t_s.interval, 301)[1:-1]
    logit = np.log(t / (1 - t))
    want = np.exp(-0.5 * ((logit - 0.3) / 0.8) ** 2) / (0.8 * math.sqrt(2 * math.pi) * t * (1 - t))
    lam_lo, lam_hi = -12.0, 12.0  # logit t = -lam/2
    mass = stats.norm(0.3, 0.8).cdf(-lam_lo / 2) - stats.norm(0.3, 0.8).cdf(-lam_hi / 2)
    np.testing.assert_allclose(t_s.pdf(t), want / mass, rtol=1e-11)


def test_cosine_is_uniform_in_cosine_time_and_linear_ends_at_t1():
    c = S.cosine().to("t")
    t = np.linspace(*c.interval, 101)
    np.testing.assert_allclose(c.pdf(t), 1.0 / (c.interval[1] - c.interval[0]), rtol=1e-14)
    lin = S.linear_beta_uniform_t(coordinate="t-linear")
    assert lin.interval[1] == 1.0
    assert lin.lam_interval[0] == pytest.approx(-math.log(math.expm1(0.1 + 0.5 * 19.9)), rel=1e-14)
    with pytest.raises(ValueError, match="does not meet the support"):
        S.linear_beta_uniform_t(lam_min=-30.0, lam_max=-20.0)


def test_to_returns_base_and_flips_cdf():
    s = S.laplace_lambda()
    assert s.to("sigma").to("t-rf").to("lambda") is s
    sg = s.to("sigma")
    x = np.geomspace(*sg.interval, 97)[1:-1]
    lam = C.to_lam(x, "sigma")
    np.testing.assert_allclose(sg.cdf(x), s.sf(lam), rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(sg.cdf(x), 1.0 - s.cdf(lam), rtol=0, atol=1e-15)


# --- tails ----------------------------------------------------------------------------------


def _mp_normal_sf(z):
    return mp.erfc(mp.mpf(z) / mp.sqrt(2)) / 2


@pytest.mark.parametrize("lo,hi", [(30.0, 50.0), (-50.0, -30.0), (8.0, 9.0)])
def test_truncated_normal_tail_accuracy(lo, hi):
    """Deep-tail truncation: cdf, sf, pdf and ppf to 1e-12 relative against mpmath.

    150 digits, because the reference itself subtracts numbers that agree to ~60 digits.
    ppf is checked where the level is <= 1/2 (q = cdf) and isf where the survival is <= 1/2:
    a level near 1 does not determine the point in float64.
    """
    s = S.TruncatedSchedule(S.Normal(2.4, 2.4), lo, hi)
    with mp.workdps(150):
        za, zb = (mp.mpf(lo) - mp.mpf("2.4")) / mp.mpf("2.4"), (mp.mpf(hi) - mp.mpf("2.4")) / mp.mpf("2.4")
        Z = _mp_normal_sf(za) - _mp_normal_sf(zb)
        for x in np.linspace(lo, hi, 9)[1:-1]:
            z = (mp.mpf(x) - mp.mpf("2.4")) / mp.mpf("2.4")
            cdf = (_mp_normal_sf(za) - _mp_normal_sf(z)) / Z
            sf = (_mp_normal_sf(z) - _mp_normal_sf(zb)) / Z
            pdf = mp.npdf(z) / mp.mpf("2.4") / Z
            assert float(s.cdf(x)) == pytest.approx(float(cdf), rel=1e-12)
            assert float(s.sf(x)) == pytest.approx(float(sf), rel=1e-12)
            assert float(s.pdf(x)) == pytest.approx(float(pdf), rel=1e-12)
            if cdf <= 0.5:
                assert float(s.ppf(float(cdf))) == pytest.approx(x, rel=1e-12)
            if sf <= 0.5:
                assert float(s.isf(float(sf))) == pytest.approx(x, rel=1e-12)


def test_truncated_laplace_tail_accuracy():
    s = S.laplace_lambda(lam_min=20.0, lam_max=30.0)
    with mp.workdps(40):
        F = lambda x: 1 - mp.exp(-mp.mpf(x) / mp.mpf("0.5")) / 2  # noqa: E731  (x > 0)
        Z = F(30) - F(20)
        for x in [20.5, 22.0, 25.0, 29.0]:
            assert float(s.cdf(x)) == pytest.approx(float((F(x) - F(20)) / Z), rel=1e-12)
            assert float(s.sf(x)) == pytest.approx(float((F(30) - F(x)) / Z), rel=1e-12)


# --- truncation ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_truncate_renormalises(name):
    s = build(name, "sigma")
    lo, hi = s.interval
    a, b = float(s.ppf(0.2)), float(s.ppf(0.9))
    t = s.truncate(a, b)
    assert t.interval == (a, b)
    x = np.linspace(a, b, 51)
    np.testing.assert_allclose(t.pdf(x), s.pdf(x) / 0.7, rtol=1e-10)
    np.testing.assert_allclose(t.cdf(x), (s.cdf(x) - 0.2) / 0.7, rtol=0, atol=1e-12)
    assert abs(quad_mass(t) - 1.0) <= tol.DENSITY_INTEGRAL_ATOL
    assert t.pdf(0.5 * (lo + a)) == 0.0
    # a truncated family re-truncates its untruncated law (no wrapper of a wrapper)
    e = S.edm_lognormal()
    tt = e.truncate(-1.0, 1.0)
    assert isinstance(tt, S.TruncatedSchedule) and tt.untruncated is e.untruncated and tt.interval == (-1.0, 1.0)
    ref = stats.truncnorm((-1 - 2.4) / 2.4, (1 - 2.4) / 2.4, loc=2.4, scale=2.4)
    np.testing.assert_allclose(tt.cdf(np.linspace(-1, 1, 11)), ref.cdf(np.linspace(-1, 1, 11)), rtol=0, atol=1e-14)


@pytest.mark.parametrize("bad", [(3.0, -3.0), (1.0, 1.0), (-20.0, 0.0), (float("nan"), 1.0)])
def test_truncate_bad_interval(bad):
    with pytest.raises(ValueError, match="interval"):
        S.uniform_lambda().truncate(*bad)


# --- tabulated schedules ----------------------------------------------------------------------


@st.composite
def tables(draw, max_knots=25):
    k = draw(st.integers(2, max_knots))
    x0 = draw(st.floats(-20.0, 20.0))
    gaps = draw(st.lists(st.floats(1e-3, 2.0), min_size=k - 1, max_size=k - 1))
    f = draw(st.lists(st.floats(1e-6, 1e3), min_size=k, max_size=k))
    return x0 + np.concatenate([[0.0], np.cumsum(gaps)]), np.array(f)


@given(tab=tables(), x=st.floats(0.0, 1.0))
@example(tab=(np.array([0.0, 1.0]), np.array([1e-6, 1e3])), x=1e-9)
def test_tabulated_exact_cdf_and_inverse(tab, x):
    knots, f = tab
    s = S.TabulatedSchedule(knots, f)
    fn = f / np.sum(0.5 * (f[:-1] + f[1:]) * np.diff(knots))
    np.testing.assert_allclose(s.pdf_values, fn, rtol=1e-13)
    np.testing.assert_allclose(s.cdf_values, integrate.cumulative_trapezoid(fn, knots, initial=0.0),
                               rtol=1e-12, atol=1e-15)
    lo, hi = s.interval
    u = lo + x * (hi - lo)
    # exact CDF against adaptive quadrature of the piecewise-linear density
    ref = integrate.quad(s.pdf, lo, u, points=knots[(knots > lo) & (knots < u)], limit=200,
                         epsabs=1e-14, epsrel=1e-13)[0] if u > lo else 0.0
    assert abs(float(s.cdf(u)) - ref) <= 1e-11
    q, sf, p = float(s.cdf(u)), float(s.sf(u)), float(s.pdf(u))
    assert abs(q + sf - 1) <= 8 * tol.EPS
    err = abs(float(s.ppf(q)) - u)
    bound = tol.COORD_ROUNDTRIP_RTOL * max(1.0, abs(u)) + tol.PPF_ROUNDTRIP_EPS_FACTOR * tol.EPS * q / p
    target(err / bound, label="tabulated ppf(cdf)")
    assert err <= bound
    err = abs(float(s.isf(sf)) - u)
    assert err <= tol.COORD_ROUNDTRIP_RTOL * max(1.0, abs(u)) + tol.PPF_ROUNDTRIP_EPS_FACTOR * tol.EPS * sf / p


@given(tab=tables(12), q=st.floats(0.0, 1.0))
def test_tabulated_cdf_of_ppf(tab, q):
    s = S.TabulatedSchedule(*tab)
    assert abs(float(s.cdf(s.ppf(q))) - q) <= tol.QUANTILE_ROUNDTRIP_ATOL


def test_tabulated_ks_and_transport():
    s = S.TabulatedSchedule([-3.0, -1.0, 0.5, 2.0, 4.0], [0.2, 1.0, 0.3, 0.8, 0.05], coordinate="lambda", name="tab")
    x = s.sample(10**5, rng=77)
    assert stats.kstest(x, s.cdf).pvalue > tol.KS_ALPHA
    sg = s.to("t-rf")
    assert abs(quad_mass(sg) - 1.0) <= tol.DENSITY_INTEGRAL_ATOL
    assert stats.kstest(sg.sample(10**5, rng=78), sg.cdf).pvalue > tol.KS_ALPHA


@pytest.mark.parametrize("name", NAMES)
def test_tabulate_follows_exact_density(name):
    s = build(name, "t-cosine")
    tab = s.tabulate(513)
    ratio = tab.pdf_values / s.pdf(tab.knots)
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-12)  # pdf values are the exact ones, rescaled
    x = np.linspace(*s.interval, 4001)
    err513 = np.max(np.abs(tab.cdf(x) - s.cdf(x)))
    err2049 = np.max(np.abs(s.tabulate(2049).cdf(x) - s.cdf(x)))
    # piecewise-linear interpolation: O(h^2) in smooth parts; the 1/t end spikes of some
    # densities in cosine time make 513 knots good to ~1e-3 only
    assert err513 < 1e-3 and (err2049 < err513 / 3 or err513 < 1e-12), (err513, err2049)
    lam_tab = build(name).tabulate(513)
    assert np.max(np.abs(lam_tab.cdf(x := np.linspace(-12, 12, 4001)) - build(name).cdf(x))) < 1e-4
    assert tab.coordinate is s.coordinate and tab.name == s.name
    assert tab.tabulate() is tab


@pytest.mark.parametrize(
    "knots,pdf,match",
    [
        ([0.0, 1.0, 2.0], [1.0, 0.0, 1.0], "pdf_values must be > 0"),
        ([0.0, 1.0, 2.0], [1.0, -2.0, 1.0], "pdf_values must be > 0"),
        ([0.0, 1.0, 2.0], [1.0, np.nan, 1.0], "pdf_values must be finite"),
        ([0.0, 1.0, 2.0], [1.0, np.inf, 1.0], "pdf_values must be finite"),
        ([0.0, 2.0, 1.0], [1.0, 1.0, 1.0], "knots must be strictly increasing"),
        ([0.0, 0.0, 1.0], [1.0, 1.0, 1.0], "knots must be strictly increasing"),
        ([0.0, 1.0, np.inf], [1.0, 1.0, 1.0], "knots must be finite"),
        ([0.0], [1.0], "at least 2"),
        ([0.0, 1.0], [1.0, 1.0, 1.0], "shape of knots"),
    ],
)
def test_tabulated_bad_input(knots, pdf, match):
    with pytest.raises(ValueError, match=match):
        S.TabulatedSchedule(knots, pdf)


def test_tabulated_outside_coordinate_domain():
    with pytest.raises(ValueError, match=r"interval must lie inside the open domain \(0.0, 1.0\).*'t-cosine'"):
        S.TabulatedSchedule([0.0, 0.5], [1.0, 1.0], coordinate="t")


# --- bad input of the built-ins and the API (acceptance 4) -----------------------------------


@pytest.mark.parametrize("fn", [S.uniform_lambda, S.edm_lognormal, S.cosine, S.linear_beta_uniform_t,
                                S.logit_normal_sd3, S.laplace_lambda])
def test_builtin_bad_interval_and_coordinate(fn):
    with pytest.raises(ValueError, match=r"\[lam_min, lam_max\] must satisfy lo < hi.*got \(3.0, -3.0\)"):
        fn(lam_min=3.0, lam_max=-3.0)
    with pytest.raises(ValueError, match=r"\[lam_min, lam_max\] must satisfy lo < hi.*got \(1.0, 1.0\)"):
        fn(lam_min=1.0, lam_max=1.0)
    with pytest.raises(ValueError, match=r"\[lam_min, lam_max\] must be finite"):
        fn(lam_min=-np.inf, lam_max=1.0)
    with pytest.raises(ValueError, match=r"coordinate must be one of 'lambda', 'sigma'.*got 'time'"):
        fn(coordinate="time")


def test_parameter_and_call_errors():
    with pytest.raises(ValueError, match="P_std must be > 0"):
        S.edm_lognormal(P_std=0.0)
    with pytest.raises(ValueError, match="b must be > 0"):
        S.laplace_lambda(b=-1.0)
    with pytest.raises(ValueError, match="s must be > 0"):
        S.logit_normal_sd3(s=0.0)
    s = S.cosine()
    with pytest.raises(ValueError, match=r"q must lie in \[0, 1\]; got 1.5"):
        s.ppf([0.2, 1.5])
    with pytest.raises(ValueError, match="u must not contain NaN"):
        s.pdf(np.nan)
    with pytest.raises(ValueError, match="n must be >= 0"):
        s.sample(-1, rng=0)
    with pytest.raises(TypeError, match="n must be an integer"):
        s.sample(2.5, rng=0)
    with pytest.raises(ValueError, match="spacing must be one of 'uniform', 'quantile', 'both'"):
        s.tabulate(10, spacing="log")
    with pytest.raises(ValueError, match="n must be >= 2 knots"):
        s.tabulate(1)
    # log-space truncation: 60 standard deviations out is still a proper density (mass e^-1800)
    far = S.TruncatedSchedule(S.Normal(0.0, 1.0), 60.0, 70.0)
    assert far.mass == 0.0 and float(far.ppf(far.cdf(60.01))) == pytest.approx(60.01, rel=1e-12)


@pytest.mark.parametrize("coordinate", COORDS)
def test_extreme_interval_finite(coordinate):
    """lam = +-50 (the widest supported training interval) gives finite answers everywhere."""
    for s in S.builtin_schedules(-50.0, 50.0, coordinate=coordinate).values():
        lo, hi = s.interval
        x = np.array([lo, 0.5 * (lo + hi), hi])
        for v in (s.pdf(x), s.cdf(x), s.sf(x), s.ppf(np.array([0.0, 1e-12, 0.5, 1 - 1e-12, 1.0])), s.sample(100, rng=0)):
            assert np.all(np.isfinite(v))
        assert np.all(s.pdf(x) > 0)
        assert all(np.isfinite(s.lam_interval))


# --- evaluation weights -------------------------------------------------------------------------


@given(lam=st.floats(-50.0, 50.0))
def test_weights_closed_forms(lam):
    assert W.elbo_weight(lam) == pytest.approx(0.5 * math.exp(lam), rel=1e-14)
    assert W.min_snr_weight(lam, gamma=5.0) == pytest.approx(0.5 * min(math.exp(lam), 5.0), rel=1e-14)
    assert W.uniform_weight(lam) == 1.0
    # Kingma & Gao (2023) effective EDM weight w = N(lam; 2.4, 2.4^2) (e^-lam + sd^2)/sd^2 on the eps-loss,
    # moved to the x0-loss by W = 1/2 e^lam w.
    sd = 0.5
    w_kg = stats.norm(2.4, 2.4).pdf(lam) * (math.exp(-lam) + sd**2) / sd**2
    want = 0.5 * math.exp(lam) * w_kg
    got = W.edm_weight(lam)
    assert got >= 0
    if want > 1e-300:
        assert got == pytest.approx(want, rel=1e-12)


def test_edm_weight_is_edm_loss_in_lambda():
    """EDM's loss E_{ln sigma ~ N}[lambda(sigma) mse] equals 2 * int W_EDM mse dlam (change of variables)."""
    mse = lambda lam: 1.0 / (1.0 + math.exp(lam))  # noqa: E731  (x0 ~ N(0, 1): mmse = 1/(1+snr))
    sd, Pm, Ps = 0.5, -1.2, 1.2
    edm = integrate.quad(lambda s: stats.norm(Pm, Ps).pdf(s) * (math.exp(2 * s) + sd**2) / (math.exp(2 * s) * sd**2)
                         * mse(-2 * s), -15, 12, limit=200, epsrel=1e-12)[0]
    ours = integrate.quad(lambda lam: W.edm_weight(lam) * mse(lam), -24, 30, limit=200, epsrel=1e-12)[0]
    assert edm == pytest.approx(2 * ours, rel=1e-9)


def test_weights_extreme_and_registry():
    for lam in (-50.0, 50.0):
        for name in W.WEIGHT_NAMES:
            v = W.get_weight(name)(lam)
            assert np.isfinite(v) and v >= 0
    assert W.get_weight("min_snr", gamma=2.0)(10.0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"weight must be one of 'elbo', 'edm', 'min_snr', 'uniform'; got 'snr'"):
        W.get_weight("snr")


def test_weights_bad_input():
    with pytest.raises(ValueError, match="gamma must be > 0"):
        W.min_snr_weight(0.0, gamma=-1.0)
    with pytest.raises(ValueError, match="gamma must be > 0"):
        W.get_weight("min_snr", gamma=-5.0)
    with pytest.raises(ValueError, match="sigma_data must be > 0"):
        W.edm_weight(0.0, sigma_data=0.0)
    with pytest.raises(ValueError, match="P_std must be > 0"):
        W.edm_weight(0.0, P_std=-1.0)
    with pytest.raises(ValueError, match="values must be >= 0"):
        W.tabulated_weight([0.0, 1.0], [1.0, -0.5])
    with pytest.raises(ValueError, match="lam must not contain NaN"):
        W.elbo_weight(np.nan)
    neg = W.Weight("neg", lambda lam: -np.ones_like(np.asarray(lam, dtype=float)))
    with pytest.raises(ValueError, match="weight 'neg' must be >= 0"):
        neg(0.0)
    tw = W.tabulated_weight([0.0, 2.0], [1.0, 3.0])
    assert tw(1.0) == pytest.approx(2.0)


def test_docstring_examples_run():
    import doctest

    from noisealloc.theory.schedules import base, builtin, laws

    for module in (base, builtin, laws, W):
        res = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert res.attempted > 0 and res.failed == 0, (module.__name__, res)


@pytest.mark.slow
@pytest.mark.parametrize("coordinate", COORDS)
def test_quantile_roundtrip_dense_grid(coordinate):
    """Thorough version of the round-trip properties: every built-in on dense grids incl. both end regions."""
    for s in S.builtin_schedules(-30.0, 50.0, coordinate=coordinate).values():
        lo, hi = s.interval
        x = np.concatenate([np.linspace(lo, hi, 20001), lo + (hi - lo) * np.logspace(-15, 0, 300),
                            hi - (hi - lo) * np.logspace(-15, 0, 300)])
        x = np.clip(x, lo, hi)
        F, Sv, p = s.cdf(x), s.sf(x), s.pdf(x)
        assert np.all(np.abs(F + Sv - 1) <= 4 * tol.EPS)
        base = tol.COORD_ROUNDTRIP_RTOL * np.maximum(1.0, np.abs(x)) + base_resolution(s, x)
        ok = Sv >= 1e-8
        err = np.abs(s.ppf(F[ok]) - x[ok])
        assert np.all(err <= base[ok] + tol.PPF_ROUNDTRIP_EPS_FACTOR * tol.EPS * F[ok] / p[ok]), s
        ok = F >= 1e-8
        err = np.abs(s.isf(Sv[ok]) - x[ok])
        assert np.all(err <= base[ok] + tol.PPF_ROUNDTRIP_EPS_FACTOR * tol.EPS * Sv[ok] / p[ok]), s
        q = np.concatenate([np.linspace(0, 1, 10001), np.logspace(-16, -1, 100), 1 - np.logspace(-16, -1, 100)])
        u = s.ppf(q)
        res = 2.0 * s.pdf(u) * np.spacing(np.abs(u))
        assert np.all(np.abs(s.cdf(u) - q) <= tol.QUANTILE_ROUNDTRIP_ATOL + res), s


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_ks_million_samples_against_independent_cdf(name):
    x = build(name).sample(10**6, rng=3000 + NAMES.index(name))
    assert stats.kstest(x, reference_cdf(name)).pvalue > tol.KS_ALPHA


# ------------------------------------------------------------------ training loss weights (issue 26 item 1)
@settings(max_examples=examples(60), deadline=None)
@given(lam=st.floats(-30.0, 30.0), s=st.floats(0.05, 20.0))
def test_edm_loss_weight_is_one_over_c_out_squared(lam, s):
    """EDM's training weight is 1/c_out^2 of its preconditioning, c_out = sigma s / sqrt(s^2 + sigma^2)
    (Karras et al. 2022, Table 1), written here from that formula in mpmath."""
    import mpmath as mp

    from noisealloc.theory.weights import loss_weight

    with mp.workdps(40):
        sigma2 = mp.e ** (-mp.mpf(lam))
        c_out2 = sigma2 * s * s / (s * s + sigma2)
        expect = float(1 / c_out2)
    assert loss_weight(lam, "edm", s) == pytest.approx(expect, rel=1e-13)
    assert loss_weight(lam, "elbo", s) == pytest.approx(0.5 * float(mp.e ** mp.mpf(lam)), rel=1e-13)
    assert loss_weight(lam, "none", s) == 1.0


def test_loss_weights_at_extreme_levels():
    from noisealloc.theory.weights import log_loss_weight, loss_weight

    assert loss_weight(-1000.0, "edm", 0.5) == pytest.approx(4.0, rel=1e-15)   # 1/s^2: sigma is huge
    assert loss_weight(-1000.0, "elbo") == 0.0
    lw = log_loss_weight(np.array([1000.0, -1000.0]), "edm", 0.5)
    assert np.all(np.isfinite(lw)) and lw[0] == pytest.approx(1000.0)
    with pytest.raises(ValueError, match=r"lam = 1000.0 makes the 'edm' loss weight overflow"):
        loss_weight([0.0, 1000.0], "edm", 0.5)
    with pytest.raises(ValueError, match="loss_weight must be one of"):
        loss_weight(0.0, "snr")
