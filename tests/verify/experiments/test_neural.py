"""Tests of the JAX training stack (verify/experiments/neural.py; issue 14 item 1).

The runs share one network configuration (batch size, step size), so the step compiles once per
session; each test is then a few hundred steps of a tiny MLP.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers.strategies import examples

pytest.importorskip("jax")  # the [train] extra; the module below imports it

from noisealloc.theory.schedules.data_scale import data_scale
from noisealloc.theory.models.datasets import dirac_atoms
from noisealloc.theory.models.dirac import DiracMixture
from noisealloc.theory.schedules.online import EntropyRateEstimator
from noisealloc.theory.schedules.builtin import edm_lognormal, uniform_lambda
from noisealloc.theory.tolerances import MC_NSIGMA
from noisealloc.verify.experiments import neural as N
from noisealloc.verify.experiments.heldout import make_heldout_set, paired_difference

LAM = (-6.0, 6.0)
BATCH, LR = 64, 3e-3
#: float32 network against float64 formulas: a few float32 ulps of O(1) quantities.
FLOAT32_RTOL = 1e-5


@pytest.fixture(scope="module")
def model():
    atoms, w = dirac_atoms(4, 8, 1.0, seed=0)
    return DiracMixture(atoms, w)


@pytest.fixture(scope="module")
def net(model):
    return N.MLPDenoiser(model.dim, data_scale(model), width=64, depth=2)


@pytest.fixture(scope="module")
def hset(model):
    return make_heldout_set(model.sample_x0(200, rng=1), *LAM, levels=25, rng=2, bayes=model)


@pytest.fixture(scope="module")
def run(model, net, hset):
    return N.train_denoiser(net, model, uniform_lambda(lam_min=LAM[0], lam_max=LAM[1]), steps=300,
                            batch_size=BATCH, learning_rate=LR, seed=0, heldout=hset, eval_steps=[0, 300])


@settings(max_examples=examples(30), deadline=None)
@given(lam=st.floats(-30, 30), s=st.floats(0.05, 20.0))
def test_preconditioning_gives_unit_variance_input_and_target(lam, s):
    c_skip, c_out, c_in, c_noise = N.edm_preconditioning(lam, s)
    sig2 = np.exp(-lam)
    # c_in^2 (s^2 + sigma^2) = 1 and Var((x0 - c_skip x) / c_out) = 1 for data of variance s^2.
    np.testing.assert_allclose(c_in**2 * (s * s + sig2), 1.0, rtol=1e-12)
    np.testing.assert_allclose(((1 - c_skip) ** 2 * s * s + c_skip**2 * sig2) / c_out**2, 1.0, rtol=1e-12)
    np.testing.assert_allclose(c_noise, 0.25 * np.log(np.exp(-lam / 2)), rtol=1e-12, atol=1e-15)


def test_preconditioning_inside_the_network_is_the_float64_formula():
    import jax
    import jax.numpy as jnp

    lam = np.linspace(-20, 20, 41)
    ref = N.edm_preconditioning(lam, 0.7)
    got = jax.jit(lambda l: N._precond(jnp, l, 0.7))(jnp.asarray(lam, jnp.float32))
    for r, g in zip(ref, got):
        np.testing.assert_allclose(np.asarray(g, np.float64), r, rtol=FLOAT32_RTOL, atol=1e-30)


@pytest.mark.parametrize("make", [lambda: N.MLPDenoiser(6, 0.8, width=16, depth=2),
                                  lambda: N.ConvDenoiser(8, 0.8, channels=(4, 8))])
def test_untrained_network_is_the_skip_path(make):
    """The output layer starts at zero, so D = c_skip x: the Bayes denoiser of N(0, s^2 I)."""
    net = make()
    params = net.init(0)
    gen = np.random.default_rng(0)
    x = gen.standard_normal((5, net.dim))
    lam = gen.uniform(-5, 5, 5)
    out = np.asarray(N.denoiser_function(net, params)(x, lam), np.float64)
    c_skip = N.edm_preconditioning(lam, net.sigma_data)[0]
    np.testing.assert_allclose(out, c_skip[:, None] * x, rtol=FLOAT32_RTOL, atol=1e-6)
    assert out.shape == x.shape


def test_training_lowers_the_heldout_loss(run):
    first, last = run.heldout
    diff, se = paired_difference(first, last)
    assert diff > MC_NSIGMA * se, (diff, se)
    assert last.gap_nats < first.gap_nats
    assert run.train_loss.shape == (300,) and np.all(np.isfinite(run.train_loss))
    np.testing.assert_array_equal(run.eval_steps, [0, 300])


def test_timings_are_reported_separately(run):
    assert run.step_time > 0 and run.eval_time > 0 and run.compile_time >= 0
    assert 0 <= run.compile_share < 1


def test_same_seed_same_run_other_seed_other_run(model, net, hset, run):
    sched = uniform_lambda(lam_min=LAM[0], lam_max=LAM[1])
    again = N.train_denoiser(net, model, sched, steps=300, batch_size=BATCH, learning_rate=LR, seed=0,
                             heldout=hset, eval_steps=[0, 300])
    np.testing.assert_array_equal(again.train_loss, run.train_loss)
    np.testing.assert_array_equal(again.nats, run.nats)
    other = N.train_denoiser(net, model, sched, steps=20, batch_size=BATCH, learning_rate=LR, seed=1)
    assert not np.array_equal(other.train_loss, run.train_loss[:20])
    assert again.compile_time < run.compile_time + 1.0  # cached: no second compile of the same step


def test_schedules_share_examples_and_noise_at_a_seed(model, net):
    """Paired design: at one seed, the first step's loss differs between schedules only through the levels;
    with one schedule tabulated two ways the runs coincide."""
    a = uniform_lambda(lam_min=-4.0, lam_max=4.0)
    b = a.tabulate(257)
    ra = N.train_denoiser(net, model, a, steps=5, batch_size=BATCH, learning_rate=LR, seed=3)
    rb = N.train_denoiser(net, model, b, steps=5, batch_size=BATCH, learning_rate=LR, seed=3)
    np.testing.assert_allclose(ra.train_loss, rb.train_loss, rtol=1e-4)


def test_schedule_in_another_coordinate_is_moved_to_lambda():
    sched = edm_lognormal(lam_min=-6.0, lam_max=6.0).to("log_sigma")
    lam = N.draw_lam(sched, 2000, np.random.default_rng(0))
    assert lam.min() >= -6.0 and lam.max() <= 6.0
    # EDM log-normal: lambda ~ N(2.4, 2.4^2) truncated; the mean is pulled toward 0 by the truncation.
    assert 0.5 < lam.mean() < 2.4


def test_online_estimator_is_fed_and_moves_the_schedule(model, net, hset):
    est = EntropyRateEstimator(*LAM, n_bins=16, max_change=0.2)
    r = N.train_denoiser(net, model, est, steps=200, batch_size=BATCH, learning_rate=LR, seed=0,
                         heldout=hset, eval_steps=[200], online_refresh=50)
    assert r.schedule == "online-sqrt-entropy"
    assert r.online_refreshes == 4
    assert est.n_updates == 200  # every step's per-example losses reached the estimator
    pdf = r.final_levels.pdf(np.linspace(*LAM, 9))
    assert np.ptp(pdf) > 0.1 * pdf.mean()  # moved away from the initial uniform density
    assert np.isfinite(r.nats[0])


@pytest.mark.slow
def test_conv_denoiser_trains_on_small_images():
    gen = np.random.default_rng(0)
    imgs = np.clip(gen.standard_normal((64, 64)) * 0.5, -1, 1)
    net = N.ConvDenoiser(8, 0.5, channels=(4, 8))
    hs = make_heldout_set(imgs[:16], -4.0, 4.0, levels=5, rng=0)
    r = N.train_denoiser(net, imgs[16:], uniform_lambda(lam_min=-4.0, lam_max=4.0), steps=5, batch_size=8,
                         seed=0, heldout=hs, eval_steps=[5])
    assert r.network == "cnn-4-8" and r.train_loss.shape == (5,) and np.isfinite(r.nats[0])


@pytest.mark.parametrize("kwargs, needle", [
    (dict(steps=0), "steps must be >= 1"),
    (dict(steps=2, learning_rate=-1.0), "learning_rate must be"),
    (dict(steps=2, eval_steps=[3]), "eval_steps must lie in"),
    (dict(steps=2, eval_steps=[1], heldout=None), "eval_steps needs a held-out set"),
    (dict(steps=2, levels=object()), "levels must be a schedule"),
    (dict(steps=2, data=np.zeros((5, 3))), r"data must have shape \(N, 8\)"),
    (dict(steps=2, online_refresh=0), "online_refresh must be >= 1"),
])
def test_bad_input_raises_value_error(model, net, kwargs, needle):
    args = dict(data=model, levels=uniform_lambda(lam_min=-1.0, lam_max=1.0))
    args.update(kwargs)
    with pytest.raises(ValueError, match=needle):
        N.train_denoiser(net, args.pop("data"), args.pop("levels"), **args)


@pytest.mark.parametrize("call, needle", [
    (lambda: N.edm_preconditioning(0.0, 0.0), "sigma_data must be"),
    (lambda: N.MLPDenoiser(0, 1.0), "dim must be >= 1"),
    (lambda: N.ConvDenoiser(7, 1.0), "side must be an even"),
    (lambda: N.fourier_frequencies(0), "n_freqs must be >= 1"),
])
def test_bad_configuration_raises_value_error(call, needle):
    with pytest.raises(ValueError, match=needle):
        call()


# ------------------------------------------------------------------ the training recipe (issue 26 item 1)
def _flat(params) -> np.ndarray:
    import jax

    return np.concatenate([np.ravel(a) for a in jax.tree_util.tree_leaves(params)]).astype(np.float64)


def _train(model, net, steps, **kw):
    return N.train_denoiser(net, model, uniform_lambda(lam_min=LAM[0], lam_max=LAM[1]), steps=steps,
                            batch_size=BATCH, learning_rate=LR, seed=3, **kw)


def test_warmup_scales_the_first_step(model, net):
    # Adam's first update moves a parameter with a non-negligible gradient by the step size times
    # g / (|g| + eps): the largest move is the step size, i.e. lr / warmup at the first of `warmup` steps.
    theta0 = _flat(net.init(np.random.default_rng([3, 0])))
    for warm in (1, 8):
        r = _train(model, net, 1, warmup=warm if warm > 1 else None, ema_halflife=0)
        move = np.max(np.abs(_flat(r.params) - theta0))
        assert move == pytest.approx(LR / warm, rel=1e-3), warm


def test_the_online_estimator_sees_unweighted_losses(model, net):
    # The first step's per-example losses are computed before any update, from the same network and draws:
    # whatever the loss weight, they are the plain x0 losses, so they agree across weights.
    first = {w: _train(model, net, 1, loss_weight=w).train_loss[0] for w in ("edm", "elbo", "none")}
    assert first["edm"] == first["elbo"] == first["none"]
    later = {w: _train(model, net, 30, loss_weight=w).train_loss[-1] for w in ("edm", "none")}
    assert later["edm"] != later["none"]  # the weight does change the training


def test_the_evaluated_weights_are_the_moving_average(model, net):
    # Raw weights after 1 and 2 steps (an average with half-life 0 is the raw weights; the average never
    # enters training, so the trajectories agree), against the average by its formula with beta_k =
    # min(2^(-1/h), (1 + k)/(10 + k)) and h so large that the second term decides.
    theta = [_flat(net.init(np.random.default_rng([3, 0])))]
    theta += [_flat(_train(model, net, k, ema_halflife=0, warmup=1).params) for k in (1, 2)]
    avg = _flat(_train(model, net, 2, ema_halflife=1e9, warmup=1).params)
    b1, b2 = 2 / 11, 3 / 12
    expect = b2 * (b1 * theta[0] + (1 - b1) * theta[1]) + (1 - b2) * theta[2]
    np.testing.assert_allclose(avg, expect, rtol=0, atol=1e-6)


@pytest.mark.parametrize("kwargs, needle", [
    ({"loss_weight": "snr"}, "loss_weight must be one of"),
    ({"warmup": 0}, "warmup must be >= 1"),
    ({"ema_halflife": -1.0}, "ema_halflife must be"),
])
def test_bad_recipe_raises_value_error(model, net, kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        _train(model, net, 2, **kwargs)
