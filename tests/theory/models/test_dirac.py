"""DiracMixture: mpmath references (1-D, 2-D), identities, limits and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from noisealloc.theory.models.dirac import DiracMixture
from noisealloc.theory.tolerances import BUDGET_ATOL_QUAD, FD_RTOL, QUAD_RTOL
from noisealloc.theory.information.budget import budget_integral
from noisealloc.theory.information.i_mmse import i_mmse_check

import helpers.mpmath_refs as R
from helpers.strategies import dirac_mixtures, examples, lams

LAMS = [-8.0, -2.0, 0.0, 2.0, 8.0]
ATOMS_1D, W_1D = [-1.0, -0.2, 0.05, 0.9], [0.1, 0.4, 0.3, 0.2]
ATOMS_2D, W_2D = [[0.0, 0.0], [0.13, 0.04], [0.03, 0.12]], [0.3, 0.45, 0.25]


@pytest.mark.parametrize("lam", [LAMS[0], LAMS[2], LAMS[4]] + [pytest.param(v, marks=pytest.mark.slow) for v in (LAMS[1], LAMS[3])])
def test_1d_against_mpmath(lam):
    m = DiracMixture(ATOMS_1D, W_1D)
    info = m.information(lam)
    ref_mmse, ref_h = R.dirac_1d(ATOMS_1D, W_1D, lam)
    assert info.mmse.method == "quadrature"
    np.testing.assert_allclose(info.mmse.value, float(ref_mmse), rtol=QUAD_RTOL)
    np.testing.assert_allclose(info.conditional_entropy.value, float(ref_h), rtol=QUAD_RTOL)
    assert info.mmse.error_check < QUAD_RTOL


@pytest.mark.slow
@pytest.mark.parametrize("lam", LAMS)
def test_2d_against_mpmath(lam):
    m = DiracMixture(ATOMS_2D, W_2D)
    info = m.information(lam)
    ref_mmse, ref_h, err = R.dirac_2d(ATOMS_2D, W_2D, lam)
    assert info.mmse.method == "quadrature"
    np.testing.assert_allclose(info.mmse.value, float(ref_mmse), rtol=QUAD_RTOL)
    np.testing.assert_allclose(info.conditional_entropy.value, float(ref_h), rtol=QUAD_RTOL)


def test_2d_nested_rule_matches_1d_on_a_rotated_line():
    """The 2-D nested rule on collinear atoms (forced, rotated off the axes) equals the 1-D rule."""
    from noisealloc.theory.posterior.dirac_quadrature import _quad_1d, _quad_2d

    t = np.array([-0.4, 0.1, 0.35])
    u = np.array([np.cos(0.7), np.sin(0.7)])
    mu2 = np.array([0.2, -0.1]) + t[:, None] * u
    lp = np.log(np.array([0.2, 0.5, 0.3]))
    lam = np.array([-2.0, 3.0, 7.0])
    v1, _, _ = _quad_1d(t, lp, lam, 1e-11)
    v2, _, _ = _quad_2d(mu2, lp, lam, 1e-11)
    np.testing.assert_allclose(v2, v1, rtol=QUAD_RTOL)


def test_projection_to_span():
    m3 = DiracMixture([[1.0, 0.0, 2.0], [1.0, 0.5, 2.0], [1.0, 1.3, 2.0]])
    m1 = DiracMixture([0.0, 0.5, 1.3])
    a, b = m3.information([0.0, 4.0]), m1.information([0.0, 4.0])
    assert a.mmse.method == "projected-quadrature"
    np.testing.assert_allclose(a.mmse.value, b.mmse.value, rtol=QUAD_RTOL)
    np.testing.assert_allclose(a.conditional_entropy.value, b.conditional_entropy.value, rtol=QUAD_RTOL)


@given(dirac_mixtures(dim=1), lams(-5, 5))
def test_i_mmse_1d(model, lam):
    chk = i_mmse_check(model, np.array([lam]))
    # centred FD of H (accurate to ~1e-14) with step ~6e-6 |lam|: rounding ~1e-9 absolute
    assert abs(chk.fd[0] - chk.rate[0]) <= FD_RTOL * chk.rate[0] + 1e-8, chk


@settings(max_examples=examples(10))
@given(dirac_mixtures(dim=1))
def test_budget_1d(model):
    res = budget_integral(model, -40.0, 40.0, rtol=1e-10)
    tail = float(model.conditional_entropy(40.0).value) + model.entropy - float(model.conditional_entropy(-40.0).value)
    assert abs(res.value + tail - model.entropy) < BUDGET_ATOL_QUAD
    assert abs(res.value - model.entropy) < BUDGET_ATOL_QUAD


def test_limits_and_extreme_levels():
    m = DiracMixture(ATOMS_1D, W_1D)
    info = m.information([-50.0, 50.0])
    h = info.conditional_entropy.value
    assert np.all(np.isfinite(h)) and np.all(np.isfinite(info.mmse.value))
    np.testing.assert_allclose(h[0], m.entropy, rtol=1e-12)
    assert h[1] == 0.0
    rate = m.entropy_rate([-50.0, 50.0]).value
    assert np.all(np.isfinite(rate)) and rate[1] == 0.0
    # lam -> -inf: mmse -> total variance of the atoms
    var = np.sum(m.weights * (m.atoms[:, 0] - m.weights @ m.atoms[:, 0]) ** 2)
    np.testing.assert_allclose(info.mmse.value[0], var, rtol=1e-12)


def test_transport_of_entropy_rate():
    m = DiracMixture(ATOMS_1D, W_1D)
    lam = np.array([-3.0, 0.0, 2.5])
    h = m.entropy_rate(lam).value
    sig = np.exp(-lam / 2)
    np.testing.assert_allclose(m.entropy_rate(lam, "sigma").value, m.mmse(lam).value / sig**3, rtol=1e-12)
    np.testing.assert_allclose(m.entropy_rate(lam, "log-sigma").value, 2 * h, rtol=1e-12)


def test_denoiser_and_cov_against_direct_formula():
    m = DiracMixture(ATOMS_2D, W_2D)
    x = np.array([[0.05, 0.05], [1.0, -2.0]])
    lam = 3.0
    l = np.log(W_2D) - ((x[:, None, :] - np.array(ATOMS_2D)[None]) ** 2).sum(-1) / (2 * np.exp(-lam))
    w = np.exp(l - l.max(1, keepdims=True)); w /= w.sum(1, keepdims=True)
    mean = w @ np.array(ATOMS_2D)
    np.testing.assert_allclose(m.denoiser(x, lam), mean, rtol=1e-12)
    np.testing.assert_allclose(np.exp(m.log_posterior_weights(x, lam)), w, rtol=1e-12)
    dev = np.array(ATOMS_2D)[None] - mean[:, None]
    np.testing.assert_allclose(m.posterior_cov(x, lam), np.einsum("nk,nki,nkj->nij", w, dev, dev), rtol=1e-10, atol=1e-15)


@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 2**16), K=st.integers(44, 80), D=st.integers(16, 40), lam=st.floats(-10.0, 25.0),
       rank=st.sampled_from(["full", "low"]))
def test_blocked_denoiser_matches_reference_atom_kernel(seed, K, D, lam, rank):
    """Large mixtures route the denoiser through the blocked GEMM engine; the per-point
    reference-atom kernel (an independent formulation) must give the same posterior mean."""
    rng = np.random.default_rng(seed)
    atoms = rng.standard_normal((K, D)) + 3.0  # off-centre: the expansions must not lose digits to it
    if rank == "low":  # atoms on a 12-dim affine subspace: the span coordinates differ from the original ones
        atoms = 3.0 + rng.standard_normal((K, 12)) @ np.linalg.qr(rng.standard_normal((D, 12)))[0].T
    m = DiracMixture(atoms, rng.uniform(0.2, 1.0, K))
    assert m._span[2].size >= 512  # the blocked route is taken
    x = atoms[rng.integers(0, K, 9)] + np.exp(-lam / 2) * rng.standard_normal((9, D))
    got = m.denoiser(x, lam)
    ref = m._posterior(x, np.full(9, lam))[1]
    scale = np.max(np.abs(atoms - atoms.mean(0)))
    # both routes: logits to ~1e-12 nats relative to their size; the mean moves by w-error x atom spread
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-11 * scale)


def test_blocked_denoiser_is_per_point_when_levels_differ():
    rng = np.random.default_rng(3)
    atoms = rng.standard_normal((64, 16))
    m = DiracMixture(atoms)
    x = atoms[:5] + 0.3 * rng.standard_normal((5, 16))
    lams = np.array([-2.0, 0.0, 1.0, 3.0, 6.0])
    got = m.denoiser(x, lams)
    for i, l in enumerate(lams):
        np.testing.assert_allclose(got[i], m.denoiser(x[i:i + 1], l)[0], rtol=0, atol=1e-12)


def test_sampling_seed():
    m = DiracMixture(ATOMS_2D, W_2D)
    a = m.sample_x(1.0, 5, rng=3)
    b = m.sample_x(1.0, 5, rng=3)
    np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize(
    "atoms, weights, match",
    [
        ([[np.nan], [1.0]], None, "atoms"),
        ([[np.inf], [1.0]], None, "atoms"),
        ([[0.0], [1.0]], [-0.5, 1.5], "weights"),
        ([[0.0], [1.0]], [0.0, 0.0], "weights"),
        ([[0.0], [1.0]], [0.5, 0.3, 0.2], "weights"),
        (np.zeros((2, 2, 2)), None, "atoms"),
    ],
)
def test_bad_input(atoms, weights, match):
    with pytest.raises(ValueError, match=match):
        DiracMixture(atoms, weights)


def test_bad_lam_and_method():
    m = DiracMixture(ATOMS_1D, W_1D)
    with pytest.raises(ValueError, match="lam"):
        m.mmse(np.nan)
    with pytest.raises(ValueError, match="method"):
        m.mmse(0.0, method="simpson")
