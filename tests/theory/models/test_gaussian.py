"""GaussianManifold closed forms vs sympy; plateau k/2; mixture Monte Carlo; bad input."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given

from noisealloc.theory.models.gaussian import GaussianManifold, GaussianManifoldMixture
from noisealloc.theory.models.dirac import DiracMixture
from noisealloc.theory.tolerances import MC_NSIGMA

from helpers.strategies import gaussian_manifolds, lams


def _sympy_forms(s_vals):
    lam = sp.Symbol("lam", real=True)
    snr = sp.exp(lam)
    # I = 1/2 log det(I + snr Sigma) for a Gaussian channel (textbook), Sigma = diag(s)
    i_expr = sp.Rational(1, 2) * sp.log(sp.Matrix.diag(*[1 + snr * sp.nsimplify(s) for s in s_vals]).det())
    h_expr = sp.diff(i_expr, lam)
    return lam, i_expr, h_expr


def test_closed_forms_against_sympy():
    s_vals = [2.0, 0.25, 7.5]
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((5, 3)))
    g = GaussianManifold(np.ones(5), q, s_vals)
    lam, i_expr, h_expr = _sympy_forms(s_vals)
    for l in [-8.0, -2.0, 0.0, 2.0, 8.0, 30.0]:
        i_ref = float(i_expr.subs(lam, l).evalf(30))
        h_ref = float(h_expr.subs(lam, l).evalf(30))
        np.testing.assert_allclose(g.mutual_information(l).value, i_ref, rtol=1e-13)
        np.testing.assert_allclose(g.entropy_rate(l).value, h_ref, rtol=1e-13)
        # mmse = 2 e^-lam h (I-MMSE)
        np.testing.assert_allclose(g.mmse(l).value, float((2 * sp.exp(-lam) * h_expr).subs(lam, l).evalf(30)), rtol=1e-13)


def test_extreme_levels():
    g = GaussianManifold([0.0, 0.0, 0.0], [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], [2.0, 0.5])
    h = g.entropy_rate([-50.0, 50.0]).value
    np.testing.assert_allclose(h[1], 1.0, rtol=1e-15)
    np.testing.assert_allclose(h[0], 0.5 * 2.5 * np.exp(-50.0), rtol=1e-12)
    np.testing.assert_allclose(g.mutual_information(-50.0).value, 0.5 * 2.5 * np.exp(-50.0), rtol=1e-12)
    np.testing.assert_allclose(g.mutual_information(50.0).value, 0.5 * (100 + np.log(2.0) + np.log(0.5)), rtol=1e-14)


@given(gaussian_manifolds(), lams(-6, 6))
def test_i_mmse_and_plateau(g, lam):
    s = 1e-5 * max(1.0, abs(lam))
    fd = (g.mutual_information(lam + s).value - g.mutual_information(lam - s).value) / (2 * s)
    np.testing.assert_allclose(fd, g.entropy_rate(lam).value, rtol=1e-6)
    assert abs(float(g.entropy_rate(40.0).value) - g.k / 2) < 1e-12 * g.k + g.k * np.exp(-40.0) * 20 / g.variances.min()


@given(gaussian_manifolds(), lams(-6, 6))
def test_transport(g, lam):
    sig = np.exp(-lam / 2)
    np.testing.assert_allclose(g.entropy_rate(lam, "sigma").value, g.mmse(lam).value / sig**3, rtol=1e-12)


def test_denoiser_is_linear_and_cov():
    q, _ = np.linalg.qr(np.random.default_rng(1).standard_normal((4, 2)))
    g = GaussianManifold(np.zeros(4), q, [1.0, 3.0])
    x = np.random.default_rng(2).standard_normal((6, 4))
    lam = 0.5
    sigma0 = q @ np.diag([1.0, 3.0]) @ q.T
    k = sigma0 @ np.linalg.inv(sigma0 + np.exp(-lam) * np.eye(4))
    np.testing.assert_allclose(g.denoiser(x, lam), x @ k.T, atol=1e-12)
    np.testing.assert_allclose(g.posterior_cov(x, lam)[0], sigma0 - k @ sigma0, atol=1e-12)


def test_mixture_of_diracs_matches_dirac_quadrature():
    comps = [GaussianManifold([a], np.zeros((1, 0)), []) for a in (-0.5, 0.4, 1.0)]
    w = [0.2, 0.5, 0.3]
    mix = GaussianManifoldMixture(comps, w)
    dm = DiracMixture([-0.5, 0.4, 1.0], w)
    lam = np.array([-1.0, 1.0, 3.0])
    est = mix.information(lam, n_samples=20000, rng=7)
    ref = dm.information(lam)
    for key_mix, key_d in (("mmse", "mmse"), ("component_entropy", "conditional_entropy")):
        diff = np.abs(getattr(est, key_mix).value - getattr(ref, key_d).value)
        assert np.all(diff <= MC_NSIGMA * getattr(est, key_mix).stderr), (key_mix, diff, getattr(est, key_mix).stderr)


def test_mixture_seed():
    g = GaussianManifold([0.0, 0.0], [[1.0], [0.0]], [1.0])
    mix = GaussianManifoldMixture([g, GaussianManifold([1.0, 1.0], np.zeros((2, 0)), [])])
    a, b = mix.mmse([0.0, 1.0], rng=5), mix.mmse([0.0, 1.0], rng=5)
    np.testing.assert_array_equal(a.value, b.value)


@pytest.mark.parametrize(
    "mean, basis, var, match",
    [
        ([0.0, 0.0], [[1.0], [1.0]], [1.0], "orthonormal"),
        ([0.0, 0.0], [[1.0], [0.0]], [-1.0], "variances"),
        ([0.0, 0.0], [[1.0], [0.0]], [1.0, 2.0], "variances"),
        ([0.0, 0.0, 0.0], [[1.0], [0.0]], [1.0], "basis"),
        ([np.nan, 0.0], [[1.0], [0.0]], [1.0], "mean"),
    ],
)
def test_bad_input(mean, basis, var, match):
    with pytest.raises(ValueError, match=match):
        GaussianManifold(mean, basis, var)


def test_mixture_bad_input():
    g = GaussianManifold([0.0], [[1.0]], [1.0])
    with pytest.raises(ValueError, match="weights"):
        GaussianManifoldMixture([g, g], [0.5, -0.5])
    with pytest.raises(ValueError, match="dim"):
        GaussianManifoldMixture([g, GaussianManifold([0.0, 0.0], [[1.0], [0.0]], [1.0])])
