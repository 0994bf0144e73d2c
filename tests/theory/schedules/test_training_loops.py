"""Issue 13 item 6: noise levels of a real training loop drawn from an exported schedule and from the online
estimator, through noisealloc.theory.schedules.samplers (JAX here; PyTorch where installed)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from noisealloc.theory.schedules import samplers
from noisealloc.theory.models.dirac import DiracMixture
from noisealloc.theory.schedules.entropic import schedule_from_model
from noisealloc.theory.schedules.online import EntropyRateEstimator
from noisealloc.theory.schedules.io import load_json, save_json

STEPS = 200
BATCH = 64
LAM_MIN, LAM_MAX = -8.0, 8.0
ATOMS = np.array([[-3.0], [-1.0], [1.0], [3.0]])  # 1-D: the exact h by boundary-split quadrature is cheap


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The sqrt-entropic schedule of the 4-atom law, exported as a user would (schedule.json)."""
    res = schedule_from_model(DiracMixture(ATOMS), np.linspace(LAM_MIN, LAM_MAX, 65))
    path = tmp_path_factory.mktemp("loop") / "schedule.json"
    save_json(res.schedule, path)
    return path


def _heldout(rng_seed=123, n=512):
    rng = np.random.default_rng(rng_seed)
    x0 = ATOMS[rng.integers(0, 4, n)]
    lam = np.linspace(LAM_MIN, LAM_MAX, n)
    eps = rng.standard_normal(x0.shape)
    return x0, lam, eps


@pytest.mark.slow  # a JAX start-up, two compilations and 200 steps: ~20-40 s on a loaded 2-core machine
@pytest.mark.skipif(importlib.util.find_spec("jax") is None or importlib.util.find_spec("optax") is None,
                    reason="jax and optax are not installed")
@pytest.mark.parametrize("source", ["exported schedule", "online estimator"])
def test_jax_training_loop_draws_its_noise_levels_from_noisealloc(exported, source):
    import jax
    import jax.numpy as jnp
    import optax

    def init(key, widths=(2, 32, 32, 1)):
        params = []
        for k, (a, b) in zip(jax.random.split(key, len(widths) - 1), zip(widths[:-1], widths[1:])):
            params.append((jax.random.normal(k, (a, b)) / np.sqrt(a), jnp.zeros(b)))
        return params

    def denoise(params, x, lam):
        sigma2 = jnp.exp(-lam)
        h = jnp.concatenate([x / jnp.sqrt(1.0 + sigma2)[:, None], (lam / 8.0)[:, None]], axis=1)
        for w, b in params[:-1]:
            h = jnp.tanh(h @ w + b)
        w, b = params[-1]
        return h @ w + b

    def per_example_loss(params, x0, lam, eps):
        x = x0 + jnp.exp(-0.5 * lam)[:, None] * eps
        return jnp.sum((denoise(params, x, lam) - x0) ** 2, axis=1)  # x0-prediction loss per example

    opt = optax.adam(3e-3)

    @jax.jit
    def step(params, state, x0, lam, eps):
        def mean_loss(p):
            per = per_example_loss(p, x0, lam, eps)
            return jnp.mean(per), per

        (_, per), grads = jax.value_and_grad(mean_loss, has_aux=True)(params)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, per

    hx0, hlam, heps = (jnp.asarray(a, dtype=jnp.float32) for a in _heldout())
    params = init(jax.random.PRNGKey(0))
    state = opt.init(params)
    before = float(jnp.mean(per_example_loss(params, hx0, hlam, heps)))
    rng = np.random.default_rng(0)
    key = jax.random.PRNGKey(1)
    est = EntropyRateEstimator(LAM_MIN, LAM_MAX, n_bins=16, forgetting=0.98, max_change=0.2)
    sampler = samplers.JaxSampler(exported if source == "exported schedule" else est.schedule())
    lo, hi = sampler.table.knots[0], sampler.table.knots[-1]
    drawn = []
    for t in range(STEPS):
        key, sub = jax.random.split(key)
        lam = sampler(sub, BATCH).astype(jnp.float32)
        x0 = jnp.asarray(ATOMS[rng.integers(0, 4, BATCH)], dtype=jnp.float32)
        eps = jnp.asarray(rng.standard_normal((BATCH, 1)), dtype=jnp.float32)
        params, state, per = step(params, state, x0, lam, eps)
        drawn.append(np.asarray(lam))
        if source == "online estimator":
            samplers.feed_estimator(est, lam, per)  # jax arrays straight from the step
            if (t + 1) % 20 == 0:
                sampler = samplers.JaxSampler(est.schedule())
    after = float(jnp.mean(per_example_loss(params, hx0, hlam, heps)))
    drawn = np.concatenate(drawn)
    assert np.all(np.isfinite(drawn)) and np.all((drawn >= lo - 1e-5) & (drawn <= hi + 1e-5))
    assert after < 0.75 * before, (before, after)  # it trains (the Bayes floor is far above 0)
    if source == "online estimator":
        assert est.n_updates == STEPS
        # the estimator has moved away from its uniform start
        assert np.ptp(est.pdf_values) > 0.01 * est.pdf_values.mean()
    else:
        # the levels follow the exported schedule (KS against its exact CDF, float32 draws)
        from scipy import stats

        assert stats.kstest(drawn, load_json(exported).cdf).pvalue > 1e-3


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_torch_training_loop_draws_its_noise_levels_from_noisealloc(exported):
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).double()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    sampler = samplers.TorchSampler(exported)
    est = EntropyRateEstimator(LAM_MIN, LAM_MAX, n_bins=16)
    gen = torch.Generator().manual_seed(0)
    atoms = torch.tensor(ATOMS)
    hx0, hlam, heps = (torch.tensor(a) for a in _heldout())

    def per_example(x0, lam, eps):
        x = x0 + torch.exp(-0.5 * lam)[:, None] * eps
        inp = torch.cat([x / torch.sqrt(1 + torch.exp(-lam))[:, None], (lam / 8)[:, None]], dim=1)
        return ((net(inp) - x0) ** 2).sum(1)

    with torch.no_grad():
        before = float(per_example(hx0, hlam, heps).mean())
    for t in range(STEPS):
        lam = sampler(BATCH, gen)
        x0 = atoms[torch.randint(0, 4, (BATCH,), generator=gen)]
        per = per_example(x0, lam, torch.randn(BATCH, 1, generator=gen, dtype=torch.float64))
        opt.zero_grad()
        per.mean().backward()
        opt.step()
        samplers.feed_estimator(est, lam, per)  # a tensor that requires grad: detached inside
        if (t + 1) % 20 == 0:
            sampler = samplers.TorchSampler(est.schedule())
    with torch.no_grad():
        after = float(per_example(hx0, hlam, heps).mean())
    assert after < 0.75 * before and est.n_updates == STEPS
