r"""Masked (absorbing) diffusion trained by Adam on JAX: the discrete counterpart of regime (iii) (docs/THEORY.md §7).

A string :math:`x_0 \in \{0..V-1\}^L` is observed at log-odds level :math:`\lambda` as :math:`z`, each token kept
with probability :math:`\alpha = \mathrm{sigmoid}(\lambda)` and replaced by the mask symbol ``V`` otherwise.  A
denoiser maps :math:`(z, \lambda)` to per-position logits over the :math:`V` tokens; its masked
cross-entropy at one example is

.. math:: \mathrm{CE}(z, \lambda) = -\sum_{l:\,z^l = V} \log p_\theta(x_0^l \mid z, \lambda)
          \quad\text{(nats per string)},

whose expectation :math:`L(\lambda)` is at least :math:`L^*(\lambda) = h(\lambda)/\alpha`, and the negative ELBO
is :math:`\int \alpha L\,d\lambda \ge H(\pi)` (§7, loss identity).

Two denoisers share the interface ``init(rng)``, ``apply(params, z, lam) -> logits (B, L, V)`` and a level
embedding (Fourier features of :math:`-\lambda/8`, as :mod:`noisealloc.verify.experiments.neural`):

* :class:`MaskedMLP`: an MLP over the flattened one-hot tokens with a mask channel (``V + 1`` values);
* :class:`MaskedTransformer`: a small pre-norm transformer over token + position embeddings.

Both output layers start at zero (uniform predictions).  Training (:func:`train_masked`) runs the shared
loop of :func:`~noisealloc.verify.experiments.neural.training_loop` (Adam with warm-up, a weight average,
the online estimator) on the weighted loss :math:`w(\lambda)\,\mathrm{CE}`, with the weights of
:data:`MASKED_LOSS_WEIGHTS`:

* ``"elbo"`` (default, the practice of MDLM and MD4): :math:`w = \alpha(\lambda)/p(\lambda)`, :math:`p` the
  density in :math:`\lambda` of the schedule the level was drawn from; the batch loss is then an unbiased
  estimate of the negative ELBO :math:`\int\alpha L\,d\lambda` whatever the schedule, which only changes its
  variance (MDLM and MD4 write it with :math:`t` uniform and the weight :math:`-\alpha'(t)/(1-\alpha(t))`);
* ``"alpha"`` (the allocation view of docs/THEORY.md §4): :math:`w = \alpha`, so the schedule weights the
  levels as it does in the Gaussian experiment.

The held-out metric (:func:`make_masked_heldout_set`, :func:`masked_heldout_nelbo`) is the negative ELBO on
:math:`[\lambda_{min}, \lambda_{max}]` on a fixed grid, one fixed set of uniforms per test string shared by
every level (nested masks) and by every schedule, in nats per string and bits per token.

Randomness: NumPy generators seeded ``[seed, 0]`` (weights), ``[seed, 1]`` (strings), ``[seed, 2]``
(levels) and ``[seed, 3]`` (mask uniforms): at one seed every schedule starts from the same network and sees
the same strings and uniforms.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from noisealloc.theory._optional import require

jax = require("jax", "masked denoiser training")
jnp = require("jax.numpy", "masked denoiser training")

from noisealloc.theory.errors import as_generator, check_count, check_interval
from noisealloc.theory.weights import MASKED_LOSS_WEIGHTS
from noisealloc.verify.experiments import neural as N

__all__ = [
    "MaskedMLP",
    "MaskedTransformer",
    "MaskedHeldoutSet",
    "MaskedHeldoutLoss",
    "make_masked_heldout_set",
    "masked_heldout_nelbo",
    "train_masked",
    "level_density",
]

#: Rows (string, level pairs) per forward pass of an evaluation, unless the network sets ``eval_chunk``.
EVAL_CHUNK = 1024


def _check_vl(V, L):
    V, L = check_count(V, "V"), check_count(L, "L")
    if V < 2 or L < 1:
        raise ValueError(f"V must be >= 2 and L >= 1; got V={V}, L={L}")
    return V, L


def _embed(n_freqs: int, lam):
    freqs = jnp.asarray(N.fourier_frequencies(n_freqs), N.NET_DTYPE)
    arg = 2.0 * np.pi * (-lam / 8.0)[:, None] * freqs[None, :]
    return jnp.concatenate([jnp.cos(arg), jnp.sin(arg)], axis=1)


@dataclass(frozen=True)
class MaskedMLP:
    r"""MLP masked denoiser: one-hot tokens with a mask channel, flattened, ``depth`` SiLU layers of ``width``.

    Layer :math:`l` computes :math:`h_{l+1} = \mathrm{silu}(W_l h_l + b_l + E_l\gamma(\lambda))`; the output
    layer (zero at initialisation) gives :math:`L \times V` logits.

    Parameters
    ----------
    V, L : int
        Vocabulary size (mask symbol ``V``) and string length.
    width, depth, n_freqs : int
        Hidden units, hidden layers and Fourier frequencies of the level embedding.
    """

    V: int
    L: int
    width: int = 256
    depth: int = 3
    n_freqs: int = 16

    def __post_init__(self):
        _check_vl(self.V, self.L)
        for name in ("width", "depth", "n_freqs"):
            if check_count(getattr(self, name), name) < 1:
                raise ValueError(f"{name} must be >= 1; got {getattr(self, name)!r}")

    @property
    def name(self) -> str:
        """Short label, e.g. ``"mlp-256x3"``."""
        return f"mlp-{self.width}x{self.depth}"

    def init(self, rng=None) -> dict:
        """Initial weights (NumPy float32), LeCun-normal, output layer zero."""
        gen = as_generator(rng)
        e = 2 * self.n_freqs
        hidden, fan_in = [], self.L * (self.V + 1)
        for _ in range(self.depth):
            hidden.append({"x": N._dense_init(gen, fan_in, self.width), "emb": N._dense_init(gen, e, self.width)})
            fan_in = self.width
        return {"hidden": hidden, "out": N._dense_init(gen, self.width, self.L * self.V, zero=True)}

    def apply(self, params, z, lam):
        """Logits, shape (B, L, V), float32, for tokens ``z`` (B, L) (values 0..V, V = mask) at levels ``lam`` (B,)."""
        lam = jnp.asarray(lam, N.NET_DTYPE)
        h = jax.nn.one_hot(z, self.V + 1, dtype=N.NET_DTYPE).reshape(z.shape[0], -1)
        emb = _embed(self.n_freqs, lam)
        for layer in params["hidden"]:
            h = jax.nn.silu(N._dense(layer["x"], h) + N._dense(layer["emb"], emb))
        return N._dense(params["out"], h).reshape(z.shape[0], self.L, self.V)


def _ln(p, x):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * p["g"] + p["b"]


def _ln_init(d):
    return {"g": np.ones((d,), np.float32), "b": np.zeros((d,), np.float32)}


@dataclass(frozen=True)
class MaskedTransformer:
    r"""Small pre-norm transformer masked denoiser (bidirectional attention, no causal mask).

    Input :math:`E[z^l] + P[l] + W\gamma(\lambda)` (token, position and level embeddings, width ``d_model``);
    ``layers`` blocks :math:`x \leftarrow x + \mathrm{Attn}(\mathrm{LN}(x))`,
    :math:`x \leftarrow x + \mathrm{MLP}(\mathrm{LN}(x))` (``heads`` heads, hidden ``4 d_model``, SiLU); logits
    :math:`\mathrm{LN}(x) W_{out}` with :math:`W_{out}` zero at initialisation.

    Parameters
    ----------
    V, L : int
    d_model, heads, layers, n_freqs : int
        ``d_model`` divisible by ``heads``.

    Notes
    -----
    On a CPU the step time grows faster than the batch once a batch's activations leave the cache: at
    L = 64, ``d_model`` 32, 2 heads, 2 layers and one XLA thread, a training step took 6.8 ms at batch 16,
    12.9 ms at 32 and 59 ms at 64 (2026-12-05).  Figure 7 trains it at batch 32, and evaluations run in
    chunks of :attr:`eval_chunk` strings.
    """

    V: int
    L: int
    d_model: int = 32
    heads: int = 2
    layers: int = 2
    n_freqs: int = 16
    #: Strings per forward pass of an evaluation (see Notes).
    eval_chunk: ClassVar[int] = 32

    def __post_init__(self):
        _check_vl(self.V, self.L)
        for name in ("d_model", "heads", "layers", "n_freqs"):
            if check_count(getattr(self, name), name) < 1:
                raise ValueError(f"{name} must be >= 1; got {getattr(self, name)!r}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model must be divisible by heads; got d_model={self.d_model}, heads={self.heads}")

    @property
    def name(self) -> str:
        """Short label, e.g. ``"transformer-64x2"``."""
        return f"transformer-{self.d_model}x{self.layers}"

    def init(self, rng=None) -> dict:
        """Initial weights (NumPy float32), LeCun-normal (embeddings unit normal / sqrt(d)), output zero."""
        gen = as_generator(rng)
        d = self.d_model
        blocks = [{"ln1": _ln_init(d), "qkv": N._dense_init(gen, d, 3 * d), "o": N._dense_init(gen, d, d),
                   "ln2": _ln_init(d), "up": N._dense_init(gen, d, 4 * d), "down": N._dense_init(gen, 4 * d, d)}
                  for _ in range(self.layers)]
        return {"tok": (gen.standard_normal((self.V + 1, d)) / np.sqrt(d)).astype(np.float32),
                "pos": (gen.standard_normal((self.L, d)) / np.sqrt(d)).astype(np.float32),
                "emb": N._dense_init(gen, 2 * self.n_freqs, d), "blocks": blocks, "ln": _ln_init(d),
                "out": N._dense_init(gen, d, self.V, zero=True)}

    def apply(self, params, z, lam):
        """Logits, shape (B, L, V), float32."""
        lam = jnp.asarray(lam, N.NET_DTYPE)
        b, L, d, h = z.shape[0], self.L, self.d_model, self.heads
        e = d // h
        # The residual stream is kept as (B*L, d): XLA's CPU backward of a dense layer applied to a 3-D array
        # (contracting batch and position) took 4-5x longer than the same product on the 2-D array.
        x = (params["tok"][z] + params["pos"][None]
             + N._dense(params["emb"], _embed(self.n_freqs, lam))[:, None, :]).reshape(b * L, d)
        for blk in params["blocks"]:
            qkv = N._dense(blk["qkv"], _ln(blk["ln1"], x)).reshape(b, L, 3 * d)
            heads = []
            # one batched (B, L, L) product per head: the (B, heads, L, L) einsum's backward was 3x slower here
            for i in range(h):
                q, k, v = (qkv[..., j * d + i * e:j * d + (i + 1) * e] for j in range(3))
                att = jax.nn.softmax(jnp.matmul(q, jnp.swapaxes(k, 1, 2)) / np.sqrt(e), axis=-1)
                heads.append(att @ v)
            x = x + N._dense(blk["o"], jnp.concatenate(heads, axis=-1).reshape(b * L, d))
            x = x + N._dense(blk["down"], jax.nn.silu(N._dense(blk["up"], _ln(blk["ln2"], x))))
        return N._dense(params["out"], _ln(params["ln"], x)).reshape(b, L, self.V)


def _masked_ce(net, params, x0, lam, u):
    """Per-example masked cross-entropy (nats per string), float32: mask where u < eps = sigmoid(-lam)."""
    mask = u < jax.nn.sigmoid(-lam)[:, None]
    z = jnp.where(mask, net.V, x0)
    logp = jax.nn.log_softmax(net.apply(params, z, lam), axis=-1)
    ce = -jnp.take_along_axis(logp, x0[..., None], axis=-1)[..., 0]
    return jnp.sum(jnp.where(mask, ce, 0.0), axis=1)


# ----------------------------------------------------------------------------- held-out metric
@dataclass(frozen=True)
class MaskedHeldoutSet:
    r"""A frozen masked evaluation set: test strings, one set of uniforms each, a log-odds grid and its weights.

    Attributes
    ----------
    lam : ndarray, shape (m,)
    weights : ndarray, shape (m,)
        Trapezoid weight times :math:`\alpha(\lambda_j)`.
    x0 : ndarray, shape (n, L), int
    u : ndarray, shape (n, L), float32
        Position :math:`l` of string :math:`i` is masked at level :math:`\lambda_j` iff
        :math:`u_{il} < \mathrm{sigmoid}(-\lambda_j)` (nested masks across levels).
    """

    lam: np.ndarray
    weights: np.ndarray
    x0: np.ndarray
    u: np.ndarray

    @property
    def n(self) -> int:
        return int(self.x0.shape[0])

    @property
    def L(self) -> int:
        return int(self.x0.shape[1])


def make_masked_heldout_set(strings, lam_min: float, lam_max: float, *, levels: int = 33, rng=None) -> MaskedHeldoutSet:
    """A frozen evaluation set on ``levels`` uniform log-odds levels of ``[lam_min, lam_max]``.

    Parameters
    ----------
    strings : array_like, shape (n, L), int
        Test strings (never trained on), n >= 2.
    lam_min, lam_max : float
    levels : int
        Grid levels, >= 2.
    rng : Generator, int or None
        Seed of the uniforms.

    Returns
    -------
    MaskedHeldoutSet
    """
    from noisealloc.theory.masked.process import keep_probability
    from noisealloc.verify.experiments.heldout import trapezoid_weights

    x0 = np.asarray(strings)
    if x0.ndim != 2 or x0.shape[0] < 2 or not np.issubdtype(x0.dtype, np.integer):
        raise ValueError(f"strings must be an integer array (n >= 2, L); got shape {x0.shape}, dtype {x0.dtype}")
    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
    m = check_count(levels, "levels")
    if m < 2:
        raise ValueError(f"levels must be >= 2; got {levels!r}")
    lam = np.linspace(lo, hi, m)
    u = as_generator(rng).random(x0.shape, dtype=np.float32)
    return MaskedHeldoutSet(lam, trapezoid_weights(lam) * keep_probability(lam), x0.astype(np.int32), u)


@dataclass(frozen=True)
class MaskedHeldoutLoss:
    r"""The held-out negative ELBO on a frozen set: nats per string and bits per token, with standard errors.

    Attributes
    ----------
    nats, nats_se : float
        Mean over the test strings of :math:`\ell_i` (nats per string) and its standard error.
    bits_per_token, bits_per_token_se : float
        The same divided by :math:`L \ln 2`.
    per_level_ce, per_level_ce_se : ndarray, shape (m,)
        Mean masked cross-entropy per string at each level, and its standard error.
    lam : ndarray, shape (m,)
        The levels.
    """

    nats: float
    nats_se: float
    bits_per_token: float
    bits_per_token_se: float
    per_level_ce: np.ndarray
    per_level_ce_se: np.ndarray
    lam: np.ndarray


@functools.lru_cache(maxsize=16)
def _jitted_ce(net):
    return jax.jit(lambda p, x0, lam, u: _masked_ce(net, p, x0, lam, u))


def masked_heldout_nelbo(net, params, hset: MaskedHeldoutSet) -> MaskedHeldoutLoss:
    r"""Negative ELBO on :math:`[\lambda_{min}, \lambda_{max}]`: :math:`\ell_i = \sum_j w_j\,\alpha_j\,\mathrm{CE}_i(\lambda_j)`.

    Mean over the test strings and its standard error; bits per token :math:`\bar\ell / (L \ln 2)`.  The
    cross-entropies are float32 network outputs summed in float64.

    Parameters
    ----------
    net : MaskedMLP or MaskedTransformer
    params : dict
        Its weights.
    hset : MaskedHeldoutSet

    Returns
    -------
    MaskedHeldoutLoss
    """
    ce_fn = _jitted_ce(net)
    n, m = hset.n, hset.lam.size
    rows = m * n
    chunk = min(int(getattr(net, "eval_chunk", EVAL_CHUNK)), rows)
    lam32 = hset.lam.astype(np.float32)
    flat = np.empty(rows)
    # (level, string) pairs in fixed-size chunks (the last one padded), so one compiled shape serves them all
    for start in range(0, rows, chunk):
        idx = np.arange(start, start + chunk) % rows
        i, j = idx % n, idx // n
        out = np.asarray(ce_fn(params, hset.x0[i], lam32[j], hset.u[i]), dtype=np.float64)
        stop = min(start + chunk, rows)
        flat[start:stop] = out[:stop - start]
    ce = flat.reshape(m, n)
    if not np.all(np.isfinite(ce)):
        raise ValueError("the network gave non-finite cross-entropies on the held-out set")
    per = hset.weights @ ce
    root = np.sqrt(n)
    nats, se = float(per.mean()), float(per.std(ddof=1) / root)
    ln2L = np.log(2.0) * hset.L
    return MaskedHeldoutLoss(nats, se, nats / ln2L, se / ln2L, ce.mean(axis=1), ce.std(axis=1, ddof=1) / root,
                             hset.lam.copy())


# ----------------------------------------------------------------------------- training
def level_density(schedule, lam) -> np.ndarray:
    r"""Density :math:`p(\lambda)` per unit log-odds of a schedule at levels ``lam`` (its coordinate's Jacobian applied).

    Parameters
    ----------
    schedule : Schedule
        Any schedule of the toolkit (``pdf(u)`` in its coordinate).
    lam : ndarray

    Returns
    -------
    ndarray
    """
    coord = getattr(schedule, "coordinate", None)
    if coord is None or getattr(coord, "name", "lambda") == "lambda":
        return np.asarray(schedule.pdf(lam), dtype=np.float64)
    from noisealloc.theory.masked.process import transport_pdf_to_lam

    u = coord.from_lam(lam)
    return np.asarray(transport_pdf_to_lam(np.asarray(schedule.pdf(u), float), lam, coord), dtype=np.float64)


def _check_weight(kind) -> str:
    if kind not in MASKED_LOSS_WEIGHTS:
        raise ValueError(f"loss_weight must be one of {', '.join(MASKED_LOSS_WEIGHTS)}; got {kind!r}")
    return kind


STEP_CACHE: dict = {}


def _compiled_step(net, batch_size: int, lr: float, warmup: int):
    key = (net, int(batch_size), float(lr), int(warmup))
    if key not in STEP_CACHE:
        opt = N.adam_with_warmup(lr, warmup)

        def loss_fn(p, x0, lam, u, w):
            per = _masked_ce(net, p, x0, lam, u)
            return jnp.mean(w * per), per

        def step(p, state, ema, x0, lam, u, w, decay):
            (_, per), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, x0, lam, u, w)
            updates, state = opt.update(grads, state, p)
            p = N.optax.apply_updates(p, updates)
            return p, state, N.ema_update(ema, p, decay), per

        p_shape = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), net.init(0))
        opt_init_c = jax.jit(opt.init).lower(p_shape).compile()
        s_shape = jax.eval_shape(opt.init, p_shape)
        vec = jax.ShapeDtypeStruct((batch_size,), N.NET_DTYPE)
        STEP_CACHE[key] = (opt_init_c, jax.jit(step, donate_argnums=(0, 1, 2)).lower(
            p_shape, s_shape, p_shape, jax.ShapeDtypeStruct((batch_size, net.L), jnp.int32), vec,
            jax.ShapeDtypeStruct((batch_size, net.L), N.NET_DTYPE), vec,
            jax.ShapeDtypeStruct((), N.NET_DTYPE)).compile())
    return STEP_CACHE[key]


def train_masked(net, data, levels, *, steps: int, batch_size: int = 128, learning_rate: float = 1e-3, seed: int = 0,
                 heldout: MaskedHeldoutSet | None = None, eval_steps=(), online_refresh: int = 25,
                 loss_weight: str = "elbo", warmup: int | None = None,
                 ema_halflife: float | None = None) -> "N.TrainingRun":
    r"""Train a masked denoiser with Adam on :math:`w(\lambda)\,\mathrm{CE}`, levels from a schedule or the online estimator.

    Parameters
    ----------
    net : MaskedMLP or MaskedTransformer
    data : array_like (N, L) of int, or a law with ``sample_strings(n, rng=...)``
        Training strings (rows drawn uniformly with replacement) or a law to draw fresh strings from.
    levels : schedule or EntropyRateEstimator
        An estimator made with ``process="masked"`` is fed the per-example cross-entropies.
    steps, batch_size, learning_rate, seed, eval_steps, online_refresh, warmup, ema_halflife
        As :func:`~noisealloc.verify.experiments.neural.train_denoiser`.
    heldout : MaskedHeldoutSet, optional
    loss_weight : {"elbo", "alpha"}
        Module docstring.

    Returns
    -------
    TrainingRun
        :class:`~noisealloc.verify.experiments.neural.TrainingRun`, its ``heldout`` holding a
        :class:`MaskedHeldoutLoss` per evaluation step and ``train_loss`` the masked cross-entropy.

    References
    ----------
    docs/THEORY.md §7 (loss identity, training experiment); Sahoo et al. (2024), MDLM; Shi et al. (2024), MD4.
    """
    from noisealloc.theory.masked.process import keep_probability

    r = N.check_recipe(steps=steps, batch_size=batch_size, learning_rate=learning_rate, online_refresh=online_refresh,
                       warmup=warmup, ema_halflife=ema_halflife, eval_steps=eval_steps, levels=levels)
    weight = _check_weight(loss_weight)
    if r.eval_steps.size and heldout is None:
        raise ValueError("eval_steps needs a held-out set (heldout=make_masked_heldout_set(...))")
    if heldout is not None and heldout.L != net.L:
        raise ValueError(f"heldout has strings of length {heldout.L}; the network expects {net.L}")
    sample = _string_sampler(data, net)
    seed = int(seed)
    data_gen, level_gen, noise_gen = (np.random.default_rng([seed, j]) for j in (1, 2, 3))
    t0 = time.perf_counter()
    opt_init_c, step_c = _compiled_step(net, r.batch_size, r.learning_rate, r.warmup)
    compile_time = time.perf_counter() - t0

    def draw(_k, schedule):
        x0 = sample(r.batch_size, data_gen)
        lam = N.draw_lam(schedule, r.batch_size, level_gen)
        u = noise_gen.random((r.batch_size, net.L), dtype=np.float32)
        alpha = keep_probability(lam)
        w = alpha / level_density(schedule, lam) if weight == "elbo" else alpha
        return lam, (x0, lam.astype(np.float32), u, w.astype(np.float32))

    loop = N.training_loop(net.init(np.random.default_rng([seed, 0])), opt_init_c, step_c, draw, levels, r,
                           lambda p: masked_heldout_nelbo(net, p, heldout))
    return N.TrainingRun(
        network=net.name, schedule=N.levels_source_name(levels), seed=seed, steps=r.steps, batch_size=r.batch_size,
        learning_rate=r.learning_rate, loss_weight=weight, warmup=r.warmup, train_loss=loop.train_loss,
        eval_steps=r.eval_steps, heldout=tuple(loop.results), compile_time=compile_time,
        step_time=loop.train_time / r.steps, eval_time=loop.eval_time, online_refreshes=loop.refreshes,
        params=loop.params, final_levels=loop.schedule, ema_halflife=r.ema_halflife)


def _string_sampler(data, net):
    if hasattr(data, "sample_strings"):
        if int(data.L) != net.L or int(data.V) != net.V:
            raise ValueError(f"data has V={data.V}, L={data.L}; the network expects V={net.V}, L={net.L}")
        return lambda n, gen: np.asarray(data.sample_strings(n, rng=gen), dtype=np.int32)
    arr = np.asarray(data)
    if arr.ndim != 2 or arr.shape[1] != net.L or arr.shape[0] < 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"data must be an integer array (N >= 1, {net.L}); got shape {arr.shape}, dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() >= net.V:
        raise ValueError(f"data tokens must lie in 0..{net.V - 1}; got {int(arr.min())}..{int(arr.max())}")
    arr = arr.astype(np.int32)
    return lambda n, gen: arr[gen.integers(0, arr.shape[0], n)]
