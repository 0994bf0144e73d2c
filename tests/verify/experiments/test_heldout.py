"""Tests of the held-out diffusion loss (verify/experiments/heldout.py, docs/THEORY.md §6.6; issue 14 item 2)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import quad
from helpers.strategies import examples, gaussian_manifolds

from noisealloc.theory.models.dirac import DiracMixture
from noisealloc.theory.models.gaussian import GaussianManifold
from noisealloc.theory.tolerances import MC_NSIGMA, QUAD_RTOL
from noisealloc.verify.experiments.heldout import (
    HeldoutSet,
    heldout_loss,
    make_heldout_set,
    split_train_test,
    trapezoid_weights,
)

LAM_MIN, LAM_MAX, LEVELS = -8.0, 8.0, 81


@pytest.fixture(scope="module")
def gauss():
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((6, 3)))
    return GaussianManifold(np.array([0.3, -0.2, 0.1, 0.0, 0.5, -0.4]), q, np.array([2.0, 0.5, 0.1]))


@pytest.fixture(scope="module")
def gauss_set(gauss):
    return make_heldout_set(gauss.sample_x0(4000, rng=1), LAM_MIN, LAM_MAX, levels=LEVELS, rng=2)


def _closed_form(model, lo=LAM_MIN, hi=LAM_MAX) -> float:
    # I-MMSE: (1/2) int e^lam mmse dlam = I(hi) - I(lo), with I in closed form.
    return float(model.mutual_information(hi).value - model.mutual_information(lo).value)


def _grid_bias(model, hs: HeldoutSet) -> float:
    """Trapezoid value of the closed-form integrand on the set's grid minus the exact integral."""
    return float(np.sum(hs.weights * model.mmse(hs.lam).value)) - _closed_form(model, hs.lam[0], hs.lam[-1])


def test_closed_form_reference_is_the_integral(gauss):
    # The reference itself, by an independent route (adaptive quadrature of 1/2 e^lam mmse).
    ref, _ = quad(lambda l: 0.5 * np.exp(l) * float(gauss.mmse(l).value), LAM_MIN, LAM_MAX, limit=200)
    np.testing.assert_allclose(_closed_form(gauss), ref, rtol=QUAD_RTOL)


def test_exact_denoiser_matches_closed_form_within_standard_error(gauss, gauss_set):
    res = heldout_loss(gauss.denoiser, gauss_set)
    ref = _closed_form(gauss)
    # The grid's own bias must be negligible against the Monte-Carlo error, or the check would test
    # the trapezoid rule instead of the estimator.
    assert abs(_grid_bias(gauss, gauss_set)) < 0.1 * res.nats_se
    assert res.nats_se > 0
    assert abs(res.nats - ref) <= MC_NSIGMA * res.nats_se, (res.nats, ref, res.nats_se)
    np.testing.assert_allclose(res.nats_per_dim, res.nats / 6, rtol=1e-15)
    np.testing.assert_allclose(res.bits_per_dim, res.nats / (6 * np.log(2.0)), rtol=1e-15)
    np.testing.assert_allclose(res.bits_per_dim_se, res.nats_se / (6 * np.log(2.0)), rtol=1e-15)
    # Per level: the MSE of the exact denoiser is the closed-form mmse, within its standard error.
    z = (res.per_level_mse - gauss.mmse(gauss_set.lam).value) / res.per_level_mse_se
    assert np.all(np.abs(z) <= MC_NSIGMA), np.abs(z).max()


def test_wrong_denoiser_is_rejected(gauss, gauss_set):
    res = heldout_loss(lambda x, lam: 0.9 * gauss.denoiser(x, lam), gauss_set)
    assert abs(res.nats - _closed_form(gauss)) > MC_NSIGMA * res.nats_se


@settings(max_examples=examples(10), deadline=None)
@given(model=gaussian_manifolds(max_dim=4), seed=st.integers(0, 2**31 - 1))
def test_estimator_is_unbiased_for_the_grid_integral(model, seed):
    """On any Gaussian manifold, the exact denoiser's metric is the grid sum of the closed-form mmse
    (the estimator's expectation), within its standard error."""
    gen = np.random.default_rng(seed)
    hs = make_heldout_set(model.sample_x0(800, rng=gen), -6.0, 6.0, levels=25, rng=gen)
    res = heldout_loss(model.denoiser, hs)
    expected = float(np.sum(hs.weights * model.mmse(hs.lam).value))
    assert abs(res.nats - expected) <= MC_NSIGMA * res.nats_se


def test_gap_to_bayes_on_a_dirac_mixture():
    model = DiracMixture(np.random.default_rng(3).standard_normal((5, 8)))
    hs = make_heldout_set(model.sample_x0(600, rng=4), -6.0, 6.0, levels=31, rng=5, bayes=model)
    exact = heldout_loss(model.denoiser, hs)
    assert exact.gap_nats == 0.0 and exact.gap_se == 0.0
    wrong = heldout_loss(lambda x, lam: 0.9 * model.denoiser(x, lam), hs)
    assert wrong.gap_nats > MC_NSIGMA * wrong.gap_se
    # The gap is the loss excess over the Bayes denoiser (orthogonality of the Bayes residual):
    # within the paired standard error of the difference of the two losses.
    diff = sum(hs.weights[i] * (np.sum((0.9 * hs.bayes[i] - hs.x0) ** 2, 1) - np.sum((hs.bayes[i] - hs.x0) ** 2, 1))
               for i in range(hs.lam.size))
    se = diff.std(ddof=1) / np.sqrt(diff.size)
    assert abs((wrong.nats - exact.nats) - wrong.gap_nats) <= MC_NSIGMA * se
    # No Bayes denoiser stored: no gap.
    plain = make_heldout_set(hs.x0, -6.0, 6.0, levels=31, rng=5)
    assert heldout_loss(model.denoiser, plain).gap_nats is None


def test_same_seed_same_set_and_loss():
    x0 = np.random.default_rng(0).standard_normal((50, 3))
    a, b = make_heldout_set(x0, rng=7), make_heldout_set(x0, rng=7)
    np.testing.assert_array_equal(a.eps, b.eps)
    assert a.seed == 7
    f = lambda x, lam: 0.5 * x  # noqa: E731
    assert heldout_loss(f, a).to_dict() == heldout_loss(f, b).to_dict()


@settings(max_examples=examples(20), deadline=None)
@given(lam=st.lists(st.floats(-20, 20, allow_nan=False), min_size=2, max_size=30, unique=True),
       a=st.floats(-5, 5), b=st.floats(-5, 5))
def test_trapezoid_weights_integrate_linear_functions_exactly(lam, a, b):
    lam = np.sort(np.asarray(lam))
    if np.any(np.diff(lam) <= 1e-9):
        return
    w = trapezoid_weights(lam)
    exact = a * (lam[-1] - lam[0]) + 0.5 * b * (lam[-1] ** 2 - lam[0] ** 2)
    scale = (abs(a) + abs(b) * 20) * (lam[-1] - lam[0]) + 1.0
    assert abs(np.sum(w * (a + b * lam)) - exact) <= 1e-12 * scale


def test_split_is_disjoint_and_complete():
    data = np.arange(40.0).reshape(20, 2)
    tr, te = split_train_test(data, 5, rng=1)
    rows = {tuple(r) for r in tr} | {tuple(r) for r in te}
    assert len(tr) == 15 and len(te) == 5 and len(rows) == 20
    assert not ({tuple(r) for r in tr} & {tuple(r) for r in te})


@pytest.mark.parametrize("call, needle", [
    (lambda: make_heldout_set(np.zeros((1, 2))), "x0 must hold >= 2"),
    (lambda: make_heldout_set(np.zeros((4, 2)), levels=1), "levels must be >= 2"),
    (lambda: make_heldout_set(np.zeros((4, 2)), 3.0, 1.0), "lam_min"),
    (lambda: split_train_test(np.zeros((4, 2)), 4), "n_test must lie in"),
    (lambda: trapezoid_weights([1.0, 0.0]), "strictly increasing"),
    (lambda: heldout_loss(lambda x, l: x, "set"), "hset must be a HeldoutSet"),
    (lambda: heldout_loss(lambda x, l: x[:, :1], make_heldout_set(np.zeros((4, 2)))), "must return shape"),
    (lambda: heldout_loss(lambda x, l: x * np.nan, make_heldout_set(np.zeros((4, 2)))), "non-finite"),
])
def test_bad_input_raises_value_error(call, needle):
    with pytest.raises(ValueError, match=needle):
        call()
