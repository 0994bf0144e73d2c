"""Tests of masked-diffusion training (verify/experiments/masked_training.py, masked_efficiency.py; issue 27 item 4).

Reference values are written here from the formulas of docs/THEORY.md §7: the held-out negative ELBO of
the untrained (uniform) denoiser from the mask counts, the linear schedule's density from alpha eps, the
Markov chain's floor against H(pi) and the tail bound.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")

from noisealloc.theory.masked.information import tail_bound  # noqa: E402
from noisealloc.theory.masked.schedules import masked_linear, masked_uniform_lambda  # noqa: E402
from noisealloc.verify.experiments import masked_efficiency as E  # noqa: E402
from noisealloc.verify.experiments import masked_training as M  # noqa: E402

STRINGS = np.random.default_rng(0).integers(0, 2, size=(40, 16))


@pytest.mark.parametrize("make", [lambda: M.MaskedMLP(2, 16, width=32, depth=2),
                                  lambda: M.MaskedTransformer(2, 16, d_model=16, heads=2, layers=1)])
def test_untrained_denoiser_scores_log_v_per_masked_token(make):
    # Zero output layer: uniform predictions, CE = (number masked) log V per string; the metric is then
    # sum_j w_j alpha_j mean_i #{l : u_il < eps_j} log 2, computed here from the set's own uniforms.
    net = make()
    hs = M.make_masked_heldout_set(STRINGS, -6.0, 6.0, levels=7, rng=1)
    got = M.masked_heldout_nelbo(net, net.init(0), hs)
    eps = 1.0 / (1.0 + np.exp(hs.lam))
    counts = np.array([(hs.u < e).sum(axis=1).mean() for e in eps])
    assert got.nats == pytest.approx(float(hs.weights @ counts) * np.log(2.0), rel=1e-6)
    assert got.bits_per_token == pytest.approx(got.nats / (16 * np.log(2.0)), rel=1e-12)
    np.testing.assert_allclose(got.per_level_ce, counts * np.log(2.0), rtol=1e-6)


def _reference_transformer(net, params, z, lam):
    """The docstring's formula in float64 numpy: embeddings, pre-norm blocks of multi-head attention
    (softmax(q k^T / sqrt(d_head)) v per head, heads concatenated) and a SiLU MLP, a final norm and the output layer."""
    P = {k: v for k, v in params.items()}
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731

    def ln(p, x):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * f64(p["g"]) + f64(p["b"])

    def dense(p, x):
        return x @ f64(p["w"]) + f64(p["b"])

    silu = lambda x: x / (1.0 + np.exp(-x))  # noqa: E731
    freqs = np.asarray(M.N.fourier_frequencies(net.n_freqs), np.float64)
    arg = 2.0 * np.pi * (-np.asarray(lam, np.float64) / 8.0)[:, None] * freqs[None, :]
    emb = np.concatenate([np.cos(arg), np.sin(arg)], axis=1)
    x = f64(P["tok"])[z] + f64(P["pos"])[None] + dense(P["emb"], emb)[:, None, :]
    d, h = net.d_model, net.heads
    e = d // h
    for blk in P["blocks"]:
        q, k, v = np.split(dense(blk["qkv"], ln(blk["ln1"], x)), 3, axis=-1)
        out = []
        for i in range(h):
            s = q[..., i * e:(i + 1) * e] @ np.swapaxes(k[..., i * e:(i + 1) * e], 1, 2) / np.sqrt(e)
            a = np.exp(s - s.max(-1, keepdims=True))
            out.append((a / a.sum(-1, keepdims=True)) @ v[..., i * e:(i + 1) * e])
        x = x + dense(blk["o"], np.concatenate(out, axis=-1))
        x = x + dense(blk["down"], silu(dense(blk["up"], ln(blk["ln2"], x))))
    return dense(P["out"], ln(P["ln"], x))


def test_transformer_logits_match_the_formula_in_float64():
    net = M.MaskedTransformer(3, 12, d_model=16, heads=4, layers=2, n_freqs=4)
    params = net.init(3)
    gen = np.random.default_rng(4)
    params["out"]["w"] = (0.3 * gen.standard_normal(params["out"]["w"].shape)).astype(np.float32)
    z = gen.integers(0, 4, size=(5, 12))
    lam = gen.normal(scale=4.0, size=5)
    got = np.asarray(net.apply(params, z, lam.astype(np.float32)), np.float64)
    np.testing.assert_allclose(got, _reference_transformer(net, params, z, lam), rtol=2e-4, atol=2e-5)


def test_heldout_nelbo_is_the_weighted_sum_of_per_level_cross_entropies():
    # a non-trivial network (random output layer): the chunked evaluation equals a direct loop over levels
    net = M.MaskedTransformer(2, 16, d_model=16, heads=2, layers=1)
    params = net.init(0)
    params["out"]["w"] = (0.5 * np.random.default_rng(1).standard_normal(params["out"]["w"].shape)).astype(np.float32)
    hs = M.make_masked_heldout_set(STRINGS[:37], -5.0, 5.0, levels=5, rng=2)  # 185 pairs: a padded last chunk
    got = M.masked_heldout_nelbo(net, params, hs)
    ce = np.empty((5, 37))
    for j, lam in enumerate(hs.lam):
        mask = hs.u < 1.0 / (1.0 + np.exp(lam))
        logits = _reference_transformer(net, params, np.where(mask, 2, hs.x0), np.full(37, lam))
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        ce[j] = np.where(mask, -np.take_along_axis(logp, hs.x0[..., None], -1)[..., 0], 0.0).sum(1)
    per = hs.weights @ ce
    assert got.nats == pytest.approx(per.mean(), rel=1e-4)
    assert got.nats_se == pytest.approx(per.std(ddof=1) / np.sqrt(37), rel=1e-3)
    np.testing.assert_allclose(got.per_level_ce, ce.mean(1), rtol=1e-4)


def test_linear_schedule_density_is_alpha_eps():
    # alpha = 1 - t with t uniform is, in lambda, the logistic density alpha eps; on [lo, hi] it is
    # normalised by sigmoid(hi) - sigmoid(lo).
    lam = np.linspace(-9.5, 9.5, 41)
    a = 1.0 / (1.0 + np.exp(-lam))
    expect = a * (1.0 - a) / (1.0 / (1.0 + np.exp(-10.0)) - 1.0 / (1.0 + np.exp(10.0)))
    np.testing.assert_allclose(M.level_density(masked_linear(lam_min=-10.0, lam_max=10.0), lam), expect, rtol=2e-3)
    np.testing.assert_allclose(M.level_density(masked_uniform_lambda(lam_min=-10.0, lam_max=10.0), lam), 1 / 20.0,
                               rtol=1e-9)


def test_training_lowers_the_heldout_nelbo_and_seeds_pair():
    # strings of a sticky chain: neighbours predict a masked token, so there is something to learn
    chain = E.prepare_masked("markov:V=2,L=16,stay=0.9").exact
    net = M.MaskedMLP(2, 16, width=32, depth=2)
    hs = M.make_masked_heldout_set(chain.sample_strings(64, rng=5), -6.0, 6.0, levels=9, rng=1)
    kw = dict(steps=60, batch_size=32, learning_rate=3e-3, heldout=hs, eval_steps=[0, 60])
    a = M.train_masked(net, chain, masked_linear(lam_min=-6.0, lam_max=6.0), seed=0, **kw)
    b = M.train_masked(net, chain, masked_linear(lam_min=-6.0, lam_max=6.0), seed=0, **kw)
    assert a.heldout[-1].nats < a.heldout[0].nats
    assert a.heldout[-1].nats == b.heldout[-1].nats  # one seed, one run
    c = M.train_masked(net, chain, masked_linear(lam_min=-6.0, lam_max=6.0), seed=0, loss_weight="alpha", **kw)
    assert c.train_loss[0] == a.train_loss[0]  # the per-example CE is unweighted: the online estimator's input
    assert c.heldout[-1].nats != a.heldout[-1].nats  # the weight changes training


def test_markov_cell_reports_its_floor_below_the_entropy():
    r = E.cell_masked(data="markov:V=2,L=16,stay=0.9", schedule="online", steps=30, batch_size=16, width=16, depth=1,
                      checkpoints=2, eval_levels=9, eval_n=32, online_refresh=5)
    h, floor = r["entropy_nats"], r["bayes_nats"]
    # the exact denoiser's negative ELBO on [-10, 10] is H(-10) - H(10): below H(pi) by at most the tail bound
    assert 0.0 <= h - floor <= tail_bound(16 * np.log(2.0), -10.0, 10.0)
    assert min(r["nats"]) > floor and r["first_refresh"] == 5 and r["online_refreshes"] == 6
    assert r["dim"] == 16 and r["eval_n_used"] == 32 and r["h_source"] == "exact"


@pytest.mark.parametrize("call, needle", [
    (lambda: M.train_masked(M.MaskedMLP(2, 16), STRINGS, masked_linear(), steps=2, loss_weight="edm"),
     "loss_weight must be one of elbo, alpha"),
    (lambda: E.masked_network("rnn", 2, 16), "network must be 'mlp' or 'transformer'"),
    (lambda: E.make_masked_levels(E.prepare_masked("markov:V=2,L=8,stay=0.9"), "sqrt-empirical", -5.0, 5.0),
     "needs a sample of strings"),
    (lambda: E.prepare_masked("digits"), "takes digits-binarised"),
    (lambda: M.MaskedTransformer(2, 16, d_model=10, heads=4), "divisible by heads"),
    (lambda: M.train_masked(M.MaskedMLP(2, 16), STRINGS + 2, masked_linear(), steps=2), "tokens must lie in 0..1"),
])
def test_bad_input_raises_value_error(call, needle):
    with pytest.raises(ValueError, match=needle):
        call()
