"""Tests of the small-scale training simulation (verify/experiments/random_features.py)."""

from __future__ import annotations

import numpy as np
import pytest

from noisealloc.theory.schedules.data_scale import data_scale, shifted_heuristic
from noisealloc.theory.models.dirac import DiracMixture
from noisealloc.verify.experiments import random_features as T


@pytest.fixture(scope="module")
def model():
    return DiracMixture(np.array([[-1.0, 0.5], [1.0, -0.5], [0.0, 1.5]]))


def test_fit_readout_is_the_weighted_ridge_solution(model):
    gen = np.random.default_rng(1)
    fmap = T.make_feature_map(2, 12, 0.8, rng=2)
    x0 = model.sample_x0(300, rng=gen)
    lam = gen.uniform(-6, 6, 300)
    x = x0 + np.exp(-lam / 2)[:, None] * gen.standard_normal(x0.shape)
    ridge = 1e-2
    theta = T.fit_readout(fmap, x0, x, lam, ridge=ridge)
    # Independent route: least squares on the augmented system of the objective
    # (1/N) sum ||c_skip x + c_out psi theta - x0||^2 + ridge ||theta||^2.
    c_skip, c_out, _ = fmap.precond(lam)
    psi = fmap.features(x, lam)
    Aaug = np.vstack([c_out[:, None] * psi / np.sqrt(300), np.sqrt(ridge) * np.eye(12)])
    baug = np.vstack([(x0 - c_skip[:, None] * x) / np.sqrt(300), np.zeros((12, 2))])
    ref = np.linalg.lstsq(Aaug, baug, rcond=None)[0]
    np.testing.assert_allclose(theta, ref, rtol=1e-8, atol=1e-10)


def test_elbo_gap_equals_direct_quadrature(model):
    fmap = T.make_feature_map(2, 8, 0.8, rng=3)
    theta = np.random.default_rng(4).standard_normal((8, 2))
    ev = T.make_eval_set(model, -4.0, 4.0, levels=9, n=50, rng=5)
    direct = []
    for i, l in enumerate(ev.lam):
        lam_i = np.full(50, l)
        c_skip, c_out, _ = fmap.precond(lam_i)
        d = c_skip[:, None] * ev.x[i] + c_out[:, None] * fmap.features(ev.x[i], lam_i) @ theta
        direct.append(np.mean(np.sum((d - model.denoiser(ev.x[i], l)) ** 2, axis=1)))
    ref = np.trapezoid(0.5 * np.exp(ev.lam) * np.array(direct), ev.lam)
    assert T.elbo_gap(fmap, theta, ev) == pytest.approx(ref, rel=1e-12)


def test_bayes_denoiser_has_zero_gap_reference(model):
    # theta that makes D equal to the skip path only: the gap is then the skip path's error, >= 0,
    # and the eval set's m is the posterior mean (checked against the model at one level).
    ev = T.make_eval_set(model, -2.0, 2.0, levels=3, n=20, rng=0)
    np.testing.assert_allclose(ev.m[1], model.denoiser(ev.x[1], 0.0), rtol=1e-13)
    fmap = T.make_feature_map(2, 4, 1.0, rng=0)
    assert T.elbo_gap(fmap, np.zeros((4, 2)), ev) > 0


def test_samples_to_target_exact_on_power_laws():
    N = np.array([100, 200, 400, 800, 1600])
    g = 50.0 / N  # log-log linear: interpolation is exact
    assert T.samples_to_target(N, g, 50.0 / 300.0) == pytest.approx(300.0, rel=1e-12)
    assert T.samples_to_target(N, g, 1.0) == 100.0
    assert T.samples_to_target(N, g, 1e-3) == float("inf")
    with pytest.raises(ValueError, match="target"):
        T.samples_to_target(N, g, 0.0)


def test_training_curve_same_seed_identical_and_seeds_differ(model):
    ev = T.make_eval_set(model, -6.0, 6.0, levels=9, n=32, rng=0)
    sch = shifted_heuristic("cosine", data_scale(model), -6.0, 6.0)
    a = T.training_curve(model, sch, [32, 64], [0, 1], ev, q=16)
    b = T.training_curve(model, sch, [32, 64], [0, 1], ev, q=16)
    np.testing.assert_array_equal(a.gaps, b.gaps)
    assert a.gaps[0, 0] != a.gaps[0, 1]
    assert a.stderr.shape == (2,) and np.all(a.stderr > 0)


def test_gap_falls_with_more_samples(model):
    # With many samples per feature the variance term shrinks: the mean gap over seeds at N = 4096 is
    # below that at N = 32 (q = 64 features, so N = 32 is deep in the noisy regime).
    ev = T.make_eval_set(model, -6.0, 6.0, levels=13, n=64, rng=0)
    sch = shifted_heuristic("edm_lognormal", data_scale(model), -6.0, 6.0)
    c = T.training_curve(model, sch, [32, 4096], [0, 1, 2], ev, q=64)
    assert c.mean[1] < c.mean[0] - 2 * np.hypot(c.stderr[0], c.stderr[1])


@pytest.mark.parametrize("bad, match", [({"q": 0}, "q must be"), ])
def test_bad_feature_map(bad, match):
    with pytest.raises(ValueError, match=match):
        T.make_feature_map(2, rng=0, s=1.0, **bad)


def test_bad_training_inputs(model):
    ev = T.make_eval_set(model, -2.0, 2.0, levels=3, n=4, rng=0)
    sch = shifted_heuristic("cosine", 1.0, -2.0, 2.0)
    with pytest.raises(ValueError, match="N_values"):
        T.training_curve(model, sch, [], [0], ev, q=4)
    with pytest.raises(ValueError, match="N_values"):
        T.training_curve(model, sch, [0, 4], [0], ev, q=4)
    with pytest.raises(ValueError):
        T.make_eval_set(model, 2.0, -2.0)


def test_training_schedule_is_the_entropic_pipeline_or_the_shifted_heuristic(model):
    from noisealloc.theory.schedules.entropic import schedule_from_model

    lam = np.linspace(-6.0, 6.0, 17)
    ent = T.training_schedule(model, "sqrt-entropic", -6.0, 6.0, h_levels=17)
    ref = schedule_from_model(model, lam).schedule
    np.testing.assert_array_equal(ent.pdf_values, ref.pdf_values)
    assert ent.name == "sqrt-entropic"
    lin = T.training_schedule(model, "entropic", -6.0, 6.0, h_levels=17)
    np.testing.assert_array_equal(lin.pdf_values, schedule_from_model(model, lam, rule="entropy").schedule.pdf_values)
    edm = T.training_schedule(model, "edm_lognormal", -6.0, 6.0)
    np.testing.assert_array_equal(edm.pdf_values,
                                  shifted_heuristic("edm_lognormal", data_scale(model), -6.0, 6.0).pdf_values)
    with pytest.raises(ValueError, match="h_levels must be an integer >= 2"):
        T.training_schedule(model, "sqrt-entropic", -6.0, 6.0, h_levels=1)
    with pytest.raises(ValueError, match="name must be one of"):
        T.training_schedule(model, "nope", -6.0, 6.0)
