"""Information matrices of the denoiser families (issue 4; theory.information_matrices since issue 11): they agree with simulation, structure is right."""

from __future__ import annotations

import numpy as np
import pytest

from noisealloc.theory.information.matrices import (
    bspline_basis,
    build_family_matrices,
    gaussian_linear_matrices,
    gaussian_linear_sympy,
    posterior_weight_matrices,
    spline_matrices,
)


def _dirac():
    from noisealloc.theory.models.dirac import DiracMixture

    return DiracMixture(np.array([[-2.0], [0.0], [1.5], [4.0]]), np.array([0.1, 0.4, 0.3, 0.2]))


def _gaussian():
    from noisealloc.theory.models.gaussian import GaussianManifold

    basis, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((5, 2)))
    return GaussianManifold(np.ones(5), basis, np.array([2.0, 0.3]))


def _simulate(model, lam, features, n, rng):
    """Independent Monte-Carlo route: A = 2 E[psi psi^T], G = 4 E[psi psi^T |x0 - m|^2], per-sample values."""
    x0, x = model.sample_x(lam, n, rng=rng)
    psi = features(x, lam)
    r2 = np.sum((x0 - model.denoiser(x, lam)) ** 2, axis=1)
    a = 2 * psi[:, :, None] * psi[:, None, :]
    g = 4 * psi[:, :, None] * psi[:, None, :] * r2[:, None, None]
    return a, g


def _assert_within_se(est, samples, nsig=4.0):
    mean = samples.mean(0)
    se = samples.std(0, ddof=1) / np.sqrt(samples.shape[0])
    dev = np.abs(est - mean)
    assert np.all(dev <= nsig * se + 1e-12), f"max deviation {np.max(dev / (se + 1e-300)):.2f} standard errors"


@pytest.mark.parametrize("lam", [-3.0, 0.0])
def test_posterior_weight_matrices_match_simulation(lam):
    # Moderate SNR only: at high SNR the G entries are made of rare boundary crossings, where the
    # sample standard error itself is unreliable (see the dense-grid test below).
    model = _dirac()
    prob = posterior_weight_matrices(model, np.array([lam - 1, lam, lam + 1]))
    a, g = _simulate(model, lam, lambda x, l: np.exp(model.log_posterior_weights(x, l)), 200_000,
                     np.random.default_rng(1))
    _assert_within_se(prob.A[1], a)
    _assert_within_se(prob.G[1], g)


@pytest.mark.parametrize("lam", [-3.0, 2.5, 6.0])
def test_posterior_weight_matrices_match_a_dense_grid(lam):
    """Independent deterministic route: trapezoid on 2e6 points over the whole line (written out here)."""
    model = _dirac()
    prob = posterior_weight_matrices(model, np.array([lam - 1, lam, lam + 1]))
    mu, pi, s = model.atoms[:, 0], model.weights, np.exp(-lam / 2)
    y = np.linspace(mu.min() - 15 * s, mu.max() + 15 * s, 2_000_001)
    lw = np.log(pi)[None, :] - (y[:, None] - mu[None, :]) ** 2 / (2 * s * s)
    w = np.exp(lw - lw.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    phi = pi[None, :] * np.exp(-((y[:, None] - mu[None, :]) ** 2) / (2 * s * s)) / np.sqrt(2 * np.pi * s * s)
    r2 = (phi * (mu[None, :] - (w @ mu)[:, None]) ** 2).sum(1)
    dy = y[1] - y[0]
    A_ref = 2 * np.einsum("y,yi,yj->ij", phi.sum(1), w, w) * dy
    G_ref = 4 * np.einsum("y,yi,yj->ij", r2, w, w) * dy
    np.testing.assert_allclose(prob.A[1], A_ref, rtol=0, atol=1e-9 * np.abs(A_ref).max())
    np.testing.assert_allclose(prob.G[1], G_ref, rtol=0, atol=1e-9 * np.abs(G_ref).max())


@pytest.mark.parametrize("lam", [-2.0, 1.0, 4.0])
def test_gaussian_linear_closed_form_matches_simulation(lam):
    # One gain per principal direction: the gradient of the loss in theta_i is -2 psi_i r_i with r_i the
    # residual along u_i, so G_ij = 4 E[psi_i psi_j r_i r_j] (not |r|^2 as for the per-coordinate families).
    model = _gaussian()
    prob = gaussian_linear_matrices(model, np.array([lam - 1, lam, lam + 1]))
    s, U, mu = model.variances, model.basis, model.mean
    sig2 = np.exp(-lam)
    x0, x = model.sample_x(lam, 200_000, rng=np.random.default_rng(2))
    psi = ((x - mu) @ U) * (s / (s + sig2))
    r = (x0 - model.denoiser(x, lam)) @ U
    a = 2 * psi[:, :, None] * psi[:, None, :]
    g = 4 * (psi * r)[:, :, None] * (psi * r)[:, None, :]
    _assert_within_se(prob.A[1], a)
    _assert_within_se(prob.G[1], g)


def test_gaussian_sympy_matches_numeric():
    import sympy as sp

    model = _gaussian()
    M, snr = gaussian_linear_sympy(model.variances)
    prob = gaussian_linear_matrices(model, np.array([-1.0, 0.5]))
    num = np.array(M.subs(snr, sp.exp(sp.Rational(1, 2))).evalf(30), dtype=np.float64)
    np.testing.assert_allclose(num, prob.A[1], rtol=1e-13)


def test_matrices_are_symmetric_psd_and_eval_is_trapezoid():
    prob = posterior_weight_matrices(_dirac(), np.linspace(-6, 6, 25))
    for M in (prob.A, prob.G):
        np.testing.assert_allclose(M, M.transpose(0, 2, 1), atol=0)
        assert np.linalg.eigvalsh(M).min() > -1e-12
    w = 0.5 * np.exp(prob.lam)
    np.testing.assert_allclose(prob.A_eval, np.trapezoid(w[:, None, None] * prob.A, prob.lam, axis=0), rtol=1e-14)
    np.testing.assert_allclose(prob.A_of_lam(prob.lam[3]), prob.A[3], rtol=1e-13)


@pytest.mark.parametrize("J", [1, 2, 3, 4, 7])
def test_bsplines_are_a_partition_of_unity(J):
    lam = np.linspace(-5, 5, 101)
    B = bspline_basis(lam, J, -5, 5)
    assert B.shape == (101, J)
    np.testing.assert_allclose(B.sum(1), 1.0, atol=1e-14)
    assert np.all(B >= -1e-15)


def test_spline_lift_structure():
    base = posterior_weight_matrices(_dirac(), np.linspace(-6, 6, 13))
    one = spline_matrices(base, 1)
    np.testing.assert_allclose(one.A, base.A, rtol=1e-15)
    four = spline_matrices(base, 4)
    assert four.A.shape == (13, 16, 16)
    b = bspline_basis(base.lam[5], 4, -6, 6)[0]
    np.testing.assert_allclose(four.A[5], np.kron(np.outer(b, b), base.A[5]), rtol=1e-14)
    np.testing.assert_allclose(four.A_of_lam(base.lam[5]), four.A[5], rtol=1e-12)


def test_build_problem_errors():
    with pytest.raises(ValueError, match="family must be one of"):
        build_family_matrices(_dirac(), "quadratic", np.linspace(0, 1, 3))
    with pytest.raises(ValueError, match="needs a Gaussian manifold"):
        build_family_matrices(_dirac(), "linear", np.linspace(0, 1, 3))
    with pytest.raises(ValueError, match="needs an integer J"):
        build_family_matrices(_dirac(), "spline:x", np.linspace(0, 1, 3))
    with pytest.raises(ValueError, match="strictly increasing"):
        build_family_matrices(_dirac(), "posterior-weights", np.array([0.0, 0.0, 1.0]))


def _dirac_2d():
    from noisealloc.theory.models.dirac import DiracMixture

    return DiracMixture(np.array([[-1.0, 0.0, 0.5], [1.0, 0.5, 0.5], [0.0, -1.2, 0.5]]), np.array([0.3, 0.3, 0.4]))


def test_posterior_weight_matrices_on_a_plane_match_simulation():
    """Span dimension 2 (Gauss-Hermite tensor rule with the Dirac model's posterior kernel)."""
    model = _dirac_2d()
    lam = -1.0
    prob = posterior_weight_matrices(model, np.array([lam - 1, lam, lam + 1]))
    assert prob.info["span_dim"] == 2 and prob.info["method"].startswith("gauss-hermite")
    a, g = _simulate(model, lam, lambda x, l: np.exp(model.log_posterior_weights(x, l)), 200_000,
                     np.random.default_rng(3))
    _assert_within_se(prob.A[1], a)
    _assert_within_se(prob.G[1], g)


def test_span_dimension_is_the_dirac_models():
    """One rank rule: the family uses DiracMixture.span_dim.  The second singular value here (2.4e-11 of
    5.3) is above the model's relative 1e-12 and below the 1e-10 absolute floor the family used before."""
    from noisealloc.theory.models.dirac import DiracMixture

    line = DiracMixture(np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0], [2.0, 4.0, 6.0 + 1e-10]]))
    collinear = DiracMixture(np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0], [2.0, 4.0, 6.0]]))
    for model, r in ((line, 2), (collinear, 1)):
        prob = posterior_weight_matrices(model, np.linspace(-2, 2, 3))
        assert prob.info["span_dim"] == model.span_dim == r


def test_linear_family_carries_its_exact_form():
    import sympy as sp

    model = _gaussian()
    fm = gaussian_linear_matrices(model, np.array([-1.0, 0.5]))
    A_sym, snr = fm.A_sympy()
    num = np.array(A_sym.subs(snr, sp.exp(sp.Rational(1, 2))).evalf(30), dtype=np.float64)
    np.testing.assert_allclose(num, fm.A[1], rtol=1e-13)
    assert posterior_weight_matrices(_dirac(), np.linspace(-1, 1, 3)).A_sympy is None
