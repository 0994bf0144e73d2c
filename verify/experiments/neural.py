r"""Neural denoisers trained by Adam on JAX (CPU): regime (iii) of docs/THEORY.md §6.6.

Two denoiser families share one parameterisation, EDM-style preconditioning at the data scale
(Karras et al. 2022, "Elucidating the design space of diffusion-based generative models", Table 1;
ideas only).  With :math:`\sigma = e^{-\lambda/2}` (VE scaling, :math:`x = x_0 + \sigma\varepsilon`)
and :math:`s` = ``sigma_data`` the per-coordinate data standard deviation,

.. math::

    D_\theta(x, \lambda) = c_{skip}\,x + c_{out}\,F_\theta(c_{in}\,x,\; c_{noise}), \qquad
    c_{skip} = \frac{s^2}{s^2+\sigma^2},\;
    c_{out} = \frac{\sigma s}{\sqrt{s^2+\sigma^2}},\;
    c_{in} = \frac{1}{\sqrt{s^2+\sigma^2}},\;
    c_{noise} = \tfrac14\ln\sigma = -\lambda/8 ,

so that the network input and its regression target both have unit variance at every level when the
data have scale :math:`s`.  The level enters through Fourier features of :math:`c_{noise}`,
:math:`\gamma = (\cos 2\pi f_j c_{noise}, \sin 2\pi f_j c_{noise})_j` with log-spaced frequencies,
added (through a learned projection) to every hidden layer:

* :class:`MLPDenoiser`: a multilayer perceptron on flat vectors (any dimension D);
* :class:`ConvDenoiser`: a small two-resolution convolutional network for square images
  (28 x 28 for MNIST), with a skip connection across the down/up-sampling.

Training (:func:`train_denoiser`) minimises the weighted x0 loss
:math:`w(\lambda)\,\|D_\theta(x, \lambda) - x_0\|^2` (summed over coordinates, mean over the batch)
with Adam (optax) at a fixed batch size for a fixed number of steps, the step size raised linearly
from 0 over a warm-up and constant after it, as EDM and k-diffusion train.  The loss weights
(:data:`noisealloc.theory.weights.LOSS_WEIGHTS`, :func:`~noisealloc.theory.weights.loss_weight`): EDM's :math:`w = 1/c_{out}^2 = (s^2+\sigma^2)/(\sigma s)^2`,
which makes the regression target of :math:`F_\theta` unit-weighted at every level (the practice of
the preconditioned denoiser); the ELBO weight :math:`w = \tfrac12 e^\lambda` of the held-out metric (an
ablation); and the unweighted x0 loss :math:`w = 1`.  The noise levels come from any schedule object of the toolkit (anything with
``sample(n, rng=Generator)``; a schedule in another coordinate is moved to :math:`\lambda`) or from an
:class:`~noisealloc.theory.schedules.online.EntropyRateEstimator`, which is updated with the per-example losses
of every step and re-queried for its schedule every ``online_refresh`` steps.  Randomness: four NumPy
generators seeded ``[seed, 0]`` (initial weights), ``[seed, 1]`` (data indices), ``[seed, 2]``
(levels) and ``[seed, 3]`` (noise, float32); so at a given seed every schedule starts from the same
network and sees the same examples and the same noise draws (paired runs).  JAX's own generator is
not used: on the 2-core CPU its threefry kernels took seconds to compile per array shape, more than
the training runs themselves, while host-side draws cost microseconds per step.

The network computes in float32 (what makes it fast on CPU); the held-out metric
(:mod:`noisealloc.verify.experiments.heldout`) is formed in float64 from its outputs.  The training step is
``jax.jit``-compiled ahead of time, so its compile time is measured separately from the step time.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory._optional import require

# JAX and optax are the [train] extra: importing this module without them is a one-line error naming it
jax = require("jax", "neural denoiser training")
jnp = require("jax.numpy", "neural denoiser training")
optax = require("optax", "neural denoiser training")

from noisealloc.theory.errors import as_float_array, as_generator, check_count, check_finite
from noisealloc.theory.weights import check_loss_weight, log_loss_weight
from noisealloc.verify.experiments.heldout import HeldoutLoss, HeldoutSet, heldout_loss

__all__ = [
    "edm_preconditioning",
    "fourier_frequencies",
    "MLPDenoiser",
    "ConvDenoiser",
    "TrainingRun",
    "train_denoiser",
    "denoiser_function",
    "levels_source_name",
    "Recipe",
    "check_recipe",
    "adam_with_warmup",
    "ema_update",
    "training_loop",
    "LoopResult",
    "draw_lam",
]

#: Network dtype: float32 is ~2x faster than float64 on CPU and ample for the x0 regression; the
#: held-out metric is accumulated in float64 from the float32 outputs.
NET_DTYPE = jnp.float32
#: Rows per forward pass when a trained network is evaluated on a held-out set (bounds memory).
EVAL_CHUNK = 2048


def _precond(xp, lam, s):
    # Written with logaddexp so that no factor overflows for |lam| up to ~80 in float32.
    a = lam + 2.0 * xp.log(s)
    half_log1p = 0.5 * xp.logaddexp(0.0, a)      # log sqrt(1 + s^2 e^lam)
    c_skip = 1.0 / (1.0 + xp.exp(-a))            # s^2 / (s^2 + sigma^2)
    c_out = s * xp.exp(-half_log1p)              # sigma s / sqrt(s^2 + sigma^2)
    c_in = xp.exp(0.5 * lam - half_log1p)        # 1 / sqrt(s^2 + sigma^2)
    c_noise = -lam / 8.0                          # (1/4) log sigma
    return c_skip, c_out, c_in, c_noise


def edm_preconditioning(lam, sigma_data: float):
    r"""EDM's preconditioning factors at log-SNR :math:`\lambda` for data of scale :math:`s`.

    .. math::

        c_{skip} = \frac{s^2}{s^2+\sigma^2},\quad c_{out} = \frac{\sigma s}{\sqrt{s^2+\sigma^2}},\quad
        c_{in} = \frac{1}{\sqrt{s^2+\sigma^2}},\quad c_{noise} = \tfrac14 \ln\sigma,
        \qquad \sigma = e^{-\lambda/2}.

    They make the network input :math:`c_{in}x` and the target :math:`(x_0 - c_{skip}x)/c_{out}`
    of unit variance when the data have per-coordinate variance :math:`s^2`:
    :math:`c_{in}^2(s^2+\sigma^2) = 1` and :math:`(1-c_{skip})^2 s^2 + c_{skip}^2\sigma^2 = c_{out}^2`.

    Parameters
    ----------
    lam : float or array_like
        Log-SNR levels (float64).
    sigma_data : float
        :math:`s > 0`, per-coordinate standard deviation of the data.

    Returns
    -------
    c_skip, c_out, c_in, c_noise : ndarray
        Each of the shape of ``lam``, float64.

    References
    ----------
    Karras et al. (2022), EDM, Table 1; docs/THEORY.md §1 (VE scaling) and §6.6 (iii).

    Examples
    --------
    >>> c_skip, c_out, c_in, c_noise = edm_preconditioning(0.0, 1.0)   # sigma = s = 1
    >>> [round(float(v), 6) for v in (c_skip, c_out, c_in, c_noise)]
    [0.5, 0.707107, 0.707107, -0.0]
    """
    lam = check_finite(as_float_array(lam, "lam"), "lam")
    s = _sigma_data(sigma_data)
    return tuple(np.asarray(v, dtype=np.float64) for v in _precond(np, lam, s))


def fourier_frequencies(n_freqs: int) -> np.ndarray:
    r"""Log-spaced frequencies :math:`f_j` (cycles per unit of :math:`c_{noise}`) of the level embedding.

    From 1/4 to 8 cycles per unit of :math:`c_{noise} = -\lambda/8`, i.e. periods from 32 down to
    1 unit of :math:`\lambda`: the coarsest sees the whole training interval, the finest lets
    features specialise to one unit of log-SNR.

    Parameters
    ----------
    n_freqs : int
        Number of frequencies, >= 1 (the embedding has ``2 * n_freqs`` entries).

    Returns
    -------
    ndarray, shape (n_freqs,)

    Examples
    --------
    >>> [round(float(f), 6) for f in fourier_frequencies(3)]
    [0.25, 1.414214, 8.0]
    """
    n = check_count(n_freqs, "n_freqs")
    if n < 1:
        raise ValueError(f"n_freqs must be >= 1; got {n_freqs!r}")
    return np.geomspace(0.25, 8.0, n) if n > 1 else np.array([1.0])


def _sigma_data(value) -> float:
    try:
        s = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"sigma_data must be a finite number > 0; got {value!r}") from None
    if not np.isfinite(s) or s <= 0:
        raise ValueError(f"sigma_data must be a finite number > 0; got {value!r}")
    return s


def _dense_init(gen, fan_in: int, fan_out: int, *, zero: bool = False):
    # LeCun-normal weights keep unit-variance inputs at unit variance through a layer.
    if zero:
        w = np.zeros((fan_in, fan_out), np.float32)
    else:
        w = (gen.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32)
    return {"w": w, "b": np.zeros((fan_out,), np.float32)}


def _dense(p, h):
    return h @ p["w"] + p["b"]


def _embed(freqs, c_noise):
    arg = 2.0 * np.pi * c_noise[:, None] * freqs[None, :]
    return jnp.concatenate([jnp.cos(arg), jnp.sin(arg)], axis=1)


@dataclass(frozen=True)
class MLPDenoiser:
    r"""Multilayer perceptron denoiser with a level embedding and EDM preconditioning.

    :math:`F_\theta`: ``depth`` hidden layers of ``width`` SiLU units; layer :math:`l` computes
    :math:`h_{l+1} = \mathrm{silu}(W_l h_l + b_l + E_l\gamma)` with :math:`\gamma` the Fourier
    embedding of :math:`c_{noise}`; the output layer is zero at initialisation, so the untrained
    denoiser is :math:`c_{skip}x` (the Bayes denoiser of a Gaussian of variance :math:`s^2`).

    Parameters
    ----------
    dim : int
        Data dimension D.
    sigma_data : float
        Per-coordinate data scale :math:`s` of the preconditioning.
    width, depth : int
        Hidden units per layer and number of hidden layers.
    n_freqs : int
        Fourier frequencies of the embedding (:func:`fourier_frequencies`).
    """

    dim: int
    sigma_data: float
    width: int = 128
    depth: int = 3
    n_freqs: int = 16

    def __post_init__(self):
        for name in ("dim", "width", "depth", "n_freqs"):
            if check_count(getattr(self, name), name) < 1:
                raise ValueError(f"{name} must be >= 1; got {getattr(self, name)!r}")
        _sigma_data(self.sigma_data)

    @property
    def name(self) -> str:
        """Short label, e.g. ``"mlp-128x3"``."""
        return f"mlp-{self.width}x{self.depth}"

    def init(self, rng=None) -> dict:
        """Initial parameters (a dict of NumPy float32 arrays), LeCun-normal, output layer zero.

        Parameters
        ----------
        rng : numpy.random.Generator, int or None
            Seed of the weights.

        Returns
        -------
        dict
        """
        gen = as_generator(rng)
        e = 2 * self.n_freqs
        hidden, fan_in = [], self.dim
        for _ in range(self.depth):
            hidden.append({"x": _dense_init(gen, fan_in, self.width), "emb": _dense_init(gen, e, self.width)})
            fan_in = self.width
        return {"hidden": hidden, "out": _dense_init(gen, self.width, self.dim, zero=True)}

    def apply(self, params, x, lam):
        r""":math:`D_\theta(x, \lambda)` for a batch, in float32.

        Parameters
        ----------
        params : dict
            From :meth:`init` (or training).
        x : array, shape (B, D)
        lam : array, shape (B,)

        Returns
        -------
        jax.Array, shape (B, D)
        """
        x = jnp.asarray(x, NET_DTYPE)
        lam = jnp.asarray(lam, NET_DTYPE)
        c_skip, c_out, c_in, c_noise = _precond(jnp, lam, self.sigma_data)
        emb = _embed(jnp.asarray(fourier_frequencies(self.n_freqs), NET_DTYPE), c_noise)
        h = c_in[:, None] * x
        for layer in params["hidden"]:
            h = jax.nn.silu(_dense(layer["x"], h) + _dense(layer["emb"], emb))
        return c_skip[:, None] * x + c_out[:, None] * _dense(params["out"], h)


def _conv_init(gen, k: int, c_in: int, c_out: int, *, zero: bool = False):
    fan_in = k * k * c_in
    if zero:
        w = np.zeros((k, k, c_in, c_out), np.float32)
    else:
        w = (gen.standard_normal((k, k, c_in, c_out)) / np.sqrt(fan_in)).astype(np.float32)
    return {"w": w, "b": np.zeros((c_out,), np.float32)}


def _conv(p, h, stride: int = 1):
    out = jax.lax.conv_general_dilated(h, p["w"], (stride, stride), "SAME",
                                       dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return out + p["b"]


@dataclass(frozen=True)
class ConvDenoiser:
    r"""Small convolutional denoiser for square single-channel images (e.g. 28 x 28), EDM-preconditioned.

    :math:`F_\theta`: two 3x3 convolutions at full resolution (``channels[0]`` maps), a stride-2
    convolution and a 3x3 convolution at half resolution (``channels[1]``), nearest-neighbour
    upsampling, concatenation with the full-resolution maps, a 3x3 convolution and a zero-initialised
    1x1 output convolution; SiLU activations, and a per-channel bias from the level embedding after
    the first convolution of each resolution.  Images enter flattened (row-major), as the data sets
    of :mod:`noisealloc.theory.models.datasets` hold them.

    Parameters
    ----------
    side : int
        Image side (images are ``side * side`` flat vectors); even.
    sigma_data : float
        Per-coordinate data scale :math:`s`.
    channels : tuple of int
        Feature maps at full and half resolution.
    n_freqs : int
        Fourier frequencies of the embedding.
    """

    side: int
    sigma_data: float
    channels: tuple = (16, 32)
    n_freqs: int = 16

    def __post_init__(self):
        side = check_count(self.side, "side")
        if side < 2 or side % 2:
            raise ValueError(f"side must be an even integer >= 2; got {self.side!r}")
        if len(self.channels) != 2 or min(int(c) for c in self.channels) < 1:
            raise ValueError(f"channels must be two positive integers; got {self.channels!r}")
        _sigma_data(self.sigma_data)

    @property
    def dim(self) -> int:
        """Flat dimension ``side ** 2``."""
        return self.side * self.side

    @property
    def name(self) -> str:
        """Short label, e.g. ``"cnn-16-32"``."""
        return f"cnn-{self.channels[0]}-{self.channels[1]}"

    def init(self, rng=None) -> dict:
        """Initial parameters (a dict of NumPy float32 arrays), LeCun-normal, output convolution zero.

        Parameters
        ----------
        rng : numpy.random.Generator, int or None
            Seed of the weights.

        Returns
        -------
        dict
        """
        c1, c2 = (int(c) for c in self.channels)
        e = 2 * self.n_freqs
        gen = as_generator(rng)
        return {
            "in": _conv_init(gen, 3, 1, c1), "emb1": _dense_init(gen, e, c1),
            "full": _conv_init(gen, 3, c1, c1),
            "down": _conv_init(gen, 3, c1, c2), "emb2": _dense_init(gen, e, c2),
            "half": _conv_init(gen, 3, c2, c2),
            "up": _conv_init(gen, 3, c1 + c2, c1),
            "out": _conv_init(gen, 1, c1, 1, zero=True),
        }

    def apply(self, params, x, lam):
        r""":math:`D_\theta(x, \lambda)` for a batch of flat images, in float32.

        Parameters
        ----------
        params : dict
        x : array, shape (B, side * side)
        lam : array, shape (B,)

        Returns
        -------
        jax.Array, shape (B, side * side)
        """
        x = jnp.asarray(x, NET_DTYPE)
        lam = jnp.asarray(lam, NET_DTYPE)
        c_skip, c_out, c_in, c_noise = _precond(jnp, lam, self.sigma_data)
        emb = _embed(jnp.asarray(fourier_frequencies(self.n_freqs), NET_DTYPE), c_noise)
        b = x.shape[0]
        img = (c_in[:, None] * x).reshape(b, self.side, self.side, 1)
        h1 = jax.nn.silu(_conv(params["in"], img) + _dense(params["emb1"], emb)[:, None, None, :])
        h1 = jax.nn.silu(_conv(params["full"], h1))
        h2 = jax.nn.silu(_conv(params["down"], h1, 2) + _dense(params["emb2"], emb)[:, None, None, :])
        h2 = jax.nn.silu(_conv(params["half"], h2))
        up = jnp.repeat(jnp.repeat(h2, 2, axis=1), 2, axis=2)
        h = jax.nn.silu(_conv(params["up"], jnp.concatenate([h1, up], axis=-1)))
        f = _conv(params["out"], h).reshape(b, self.dim)
        return c_skip[:, None] * x + c_out[:, None] * f


@dataclass(frozen=True)
class TrainingRun:
    r"""Outcome of one training run (one network, data set, level source and seed).

    Attributes
    ----------
    network, schedule : str
        Labels of the network and of the level source.
    seed, steps, batch_size : int
    learning_rate : float
        Adam's step size after the warm-up.
    loss_weight : str
        The training loss weight (:func:`~noisealloc.theory.weights.loss_weight`).
    warmup : int
        Warm-up steps of the step size.
    train_loss : ndarray, shape (steps,)
        Batch mean of the *unweighted* per-example loss at each step (float64 of the float32 values): the x0
        loss :math:`\|D - x_0\|^2` here, the masked cross-entropy for
        :func:`~noisealloc.verify.experiments.masked_training.train_masked`.
    eval_steps : ndarray of int, shape (E,)
        Steps after which the held-out loss was measured (0 = the initial network).
    heldout : tuple of HeldoutLoss (or MaskedHeldoutLoss)
        The held-out metric at each of ``eval_steps`` (empty without a held-out set).
    compile_time : float
        Seconds spent tracing and compiling the initialisation and the training step (ahead of time,
        kept out of ``step_time``); 0 when an earlier run with the same network, batch size and step
        size already compiled them (they are cached per process).
    step_time : float
        Mean wall-clock seconds per training step after compilation (level sampling, data transfer
        and the step itself; held-out evaluations excluded).
    eval_time : float
        Seconds spent in held-out evaluations (including the compile of the forward pass).
    online_refreshes : int
        Times the online estimator's schedule was re-queried (0 for a fixed schedule).
    params : dict
        Final *averaged* parameters (the exponential moving average that is evaluated; NumPy float32).
    final_levels : object
        The schedule in use at the end (the online estimator's last schedule, or the fixed one).
    ema_halflife : float
        Half-life in steps of the evaluated weight average (0: the raw weights).
    """

    network: str
    schedule: str
    seed: int
    steps: int
    batch_size: int
    learning_rate: float
    loss_weight: str
    warmup: int
    train_loss: np.ndarray
    eval_steps: np.ndarray
    heldout: tuple
    compile_time: float
    step_time: float
    eval_time: float
    online_refreshes: int = 0
    params: dict = field(default=None, repr=False, compare=False)
    final_levels: object = field(default=None, repr=False, compare=False)
    ema_halflife: float = 0.0

    @property
    def nats(self) -> np.ndarray:
        """Held-out loss (nats per example) at ``eval_steps``, shape (E,)."""
        return np.array([h.nats for h in self.heldout])

    @property
    def nats_se(self) -> np.ndarray:
        """Its standard error over the test examples, shape (E,)."""
        return np.array([h.nats_se for h in self.heldout])

    @property
    def compile_share(self) -> float:
        """Fraction of compile plus training-step time spent compiling the step."""
        total = self.compile_time + self.step_time * self.steps
        return self.compile_time / total if total > 0 else 0.0


def levels_source_name(levels) -> str:
    """Label of a level source: a schedule's ``name``, or ``"online-<rule>"`` for an estimator.

    Parameters
    ----------
    levels : schedule object or EntropyRateEstimator

    Returns
    -------
    str
    """
    if _is_online(levels):
        return f"online-{levels.rule}"
    return str(getattr(levels, "name", type(levels).__name__))


def _is_online(levels) -> bool:
    return hasattr(levels, "update") and hasattr(levels, "schedule") and callable(levels.schedule)


def draw_lam(schedule, n: int, gen) -> np.ndarray:
    """``n`` levels in :math:`\\lambda` from a schedule (moved from its coordinate), float64.

    Parameters
    ----------
    schedule : Schedule
        Anything with ``sample(n, rng=Generator)``; a ``coordinate`` other than ``lambda`` is moved to it.
    n : int
    gen : numpy.random.Generator

    Returns
    -------
    ndarray, shape (n,)
    """
    u = np.asarray(schedule.sample(n, rng=gen), dtype=np.float64).reshape(n)
    coord = getattr(schedule, "coordinate", None)
    if coord is not None and getattr(coord, "name", "lambda") != "lambda":
        u = np.asarray(coord.to_lam(u), dtype=np.float64)
    return u


@functools.lru_cache(maxsize=32)
def _jitted_apply(net):
    # One compiled forward pass per network configuration (nets are frozen, hashable dataclasses), so
    # repeated held-out evaluations during training do not recompile.
    return jax.jit(net.apply)


def denoiser_function(net, params):
    r"""A NumPy-callable ``D(x, lam) -> ndarray`` of a network (jit-compiled, float32 inside).

    Parameters
    ----------
    net : MLPDenoiser or ConvDenoiser
    params : dict

    Returns
    -------
    callable
        ``f(x, lam)`` with ``x`` of shape (n, D) and ``lam`` a float or shape (n,), returning
        float32 ``ndarray`` of shape (n, D) (evaluated in chunks of ``EVAL_CHUNK`` rows).
    """
    apply = _jitted_apply(net)

    def f(x, lam):
        x = np.asarray(x, dtype=np.float32)
        lam = np.broadcast_to(np.asarray(lam, dtype=np.float32), (x.shape[0],))
        out = [np.asarray(apply(params, x[i:i + EVAL_CHUNK], lam[i:i + EVAL_CHUNK]))
               for i in range(0, x.shape[0], EVAL_CHUNK)]
        return np.concatenate(out) if out else np.zeros_like(x)

    return f


def train_denoiser(net, data, levels, *, steps: int, batch_size: int = 128, learning_rate: float = 1e-3,
                   seed: int = 0, heldout: HeldoutSet | None = None, eval_steps=(),
                   online_refresh: int = 50, loss_weight: str = "edm", warmup: int | None = None,
                   ema_halflife: float | None = None) -> TrainingRun:
    r"""Train a denoiser with Adam on the weighted x0 loss, levels from a schedule or the online estimator.

    Each step draws ``batch_size`` examples (rows of ``data`` uniformly with replacement, or fresh
    draws of a data model), levels :math:`\lambda_i` from the level source and noise
    :math:`\varepsilon_i \sim N(0, I)`, and takes one Adam step on

    .. math:: \frac1B\sum_i w(\lambda_i)\,\|D_\theta(x_{0,i} + e^{-\lambda_i/2}\varepsilon_i, \lambda_i) - x_{0,i}\|^2

    with the step size :math:`\eta_k = \eta\,\min(1, k/k_w)` (linear warm-up over :math:`k_w` steps).
    The held-out loss is measured on the exponential moving average of the weights, as diffusion models
    are evaluated (EDM, k-diffusion): :math:`\bar\theta_k = \beta_k\bar\theta_{k-1} + (1-\beta_k)\theta_k` with
    :math:`\beta_k = \min(2^{-1/k_{1/2}}, (1+k)/(10+k))` (the second term keeps the first steps from
    being dominated by the initial weights), :math:`k_{1/2}` the half-life in steps.

    Parameters
    ----------
    net : MLPDenoiser or ConvDenoiser
    data : array_like, shape (N, D), or a data model with ``sample_x0(n, rng=...)``
        The training split (never the held-out one) or an infinite-data law.
    levels : schedule object or EntropyRateEstimator
        ``levels.sample(n, rng=Generator)`` gives levels in the schedule's coordinate (moved to
        :math:`\lambda`); an :class:`~noisealloc.theory.schedules.online.EntropyRateEstimator` is fed every
        step's per-example losses and its schedule re-read every ``online_refresh`` steps.
    steps, batch_size : int
        Training steps and examples per step (fixed: equal compute across schedules).
    learning_rate : float
        Adam's step size.
    seed : int
        Seeds every random stream (module docstring).
    heldout : HeldoutSet, optional
        Frozen evaluation set of :mod:`noisealloc.verify.experiments.heldout`.
    eval_steps : iterable of int
        Steps in ``[0, steps]`` after which the held-out loss is measured (needs ``heldout``).
    online_refresh : int
        Steps between re-reads of the online estimator's schedule.
    loss_weight : str
        :math:`w(\lambda)`, one of :data:`~noisealloc.theory.weights.LOSS_WEIGHTS`
        (:func:`~noisealloc.theory.weights.loss_weight`); the same for every schedule.
    warmup : int, optional
        Warm-up steps :math:`k_w` (default ``max(1, steps // 20)``: 5 % of the run).
    ema_halflife : float, optional
        Half-life :math:`k_{1/2}` in steps of the weight average that is evaluated (default
        ``steps / 50``, at least 1); ``0`` evaluates the raw weights.

    Returns
    -------
    TrainingRun

    References
    ----------
    docs/THEORY.md §4 (x0 loss, allocation), §6.6 (iii); Kingma & Ba (2015), Adam; Karras et al. (2022),
    EDM (loss weight, learning-rate ramp-up).
    """
    r = check_recipe(steps=steps, batch_size=batch_size, learning_rate=learning_rate, online_refresh=online_refresh,
                     warmup=warmup, ema_halflife=ema_halflife, eval_steps=eval_steps, levels=levels)
    weight = check_loss_weight(loss_weight)
    if r.eval_steps.size and heldout is None:
        raise ValueError("eval_steps needs a held-out set (heldout=make_heldout_set(...))")
    if heldout is not None and heldout.dim != net.dim:
        raise ValueError(f"heldout has dimension {heldout.dim}; the network expects {net.dim}")
    seed = int(seed)
    sample_x0 = _data_sampler(data, net.dim)
    data_gen = np.random.default_rng([seed, 1])
    level_gen = np.random.default_rng([seed, 2])
    noise_gen = np.random.default_rng([seed, 3])
    t0 = time.perf_counter()
    opt_init_c, step_c = _compiled_step(net, r.batch_size, r.learning_rate, weight, r.warmup)
    compile_time = time.perf_counter() - t0

    def draw(_k, schedule):
        x0 = sample_x0(r.batch_size, data_gen)
        lam = draw_lam(schedule, r.batch_size, level_gen)
        eps = noise_gen.standard_normal((r.batch_size, net.dim), dtype=np.float32)
        return lam, (x0, lam.astype(np.float32), eps)

    loop = training_loop(net.init(np.random.default_rng([seed, 0])), opt_init_c, step_c, draw, levels, r,
                         lambda p: heldout_loss(denoiser_function(net, p), heldout))
    return TrainingRun(
        network=net.name, schedule=levels_source_name(levels), seed=seed, steps=r.steps, batch_size=r.batch_size,
        learning_rate=r.learning_rate, loss_weight=weight, warmup=r.warmup, train_loss=loop.train_loss,
        eval_steps=r.eval_steps, heldout=tuple(loop.results), compile_time=compile_time,
        step_time=loop.train_time / r.steps, eval_time=loop.eval_time, online_refreshes=loop.refreshes,
        params=loop.params, final_levels=loop.schedule, ema_halflife=r.ema_halflife,
    )


@dataclass(frozen=True)
class Recipe:
    """The checked training options every training loop shares (:func:`check_recipe`).

    Attributes
    ----------
    steps, batch_size : int
    learning_rate : float
        After the warm-up.
    online_refresh : int
        Steps between re-reads of an online estimator's schedule.
    warmup : int
        Warm-up steps of the step size.
    ema_halflife : float
        Half-life in steps of the evaluated weight average (0: the raw weights).
    beta : float
        The average's decay per step, :math:`2^{-1/k_{1/2}}` (0 without an average).
    eval_steps : ndarray of int
        Sorted distinct evaluation steps in ``[0, steps]``.
    online : bool
        The level source is an online estimator.
    """

    steps: int
    batch_size: int
    learning_rate: float
    online_refresh: int
    warmup: int
    ema_halflife: float
    beta: float
    eval_steps: np.ndarray
    online: bool


def check_recipe(*, steps, batch_size, learning_rate, online_refresh, warmup, ema_halflife, eval_steps,
                 levels) -> Recipe:
    """Check the options of a training run (one line per bad value, naming it) and fill the defaults.

    Defaults: ``warmup = max(1, steps // 20)`` (5 % of the run), ``ema_halflife = max(1, steps / 50)``.

    Parameters
    ----------
    steps, batch_size : int
        Run length and examples per step (>= 1).
    learning_rate : float
        Step size after the warm-up (> 0).
    online_refresh : int
        Steps between re-reads of an online estimator's schedule (>= 1).
    warmup : int or None
        Warm-up steps (>= 1; may exceed ``steps``: a run cut short of its warm-up).
    ema_halflife : float or None
        Half-life in steps of the evaluated weight average (>= 0; 0: the raw weights).
    eval_steps : iterable of int
        Evaluation steps in ``[0, steps]``.
    levels : schedule or EntropyRateEstimator
        The level source.

    Returns
    -------
    Recipe
    """
    steps = check_count(steps, "steps")
    batch_size = check_count(batch_size, "batch_size")
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps and batch_size must be >= 1; got steps={steps}, batch_size={batch_size}")
    lr = float(learning_rate)
    if not np.isfinite(lr) or lr <= 0:
        raise ValueError(f"learning_rate must be a finite number > 0; got {learning_rate!r}")
    refresh = check_count(online_refresh, "online_refresh")
    if refresh < 1:
        raise ValueError(f"online_refresh must be >= 1; got {online_refresh!r}")
    half = max(1.0, steps / 50) if ema_halflife is None else float(ema_halflife)
    if not (np.isfinite(half) and half >= 0):
        raise ValueError(f"ema_halflife must be a finite number of steps >= 0; got {ema_halflife!r}")
    warm = max(1, steps // 20) if warmup is None else check_count(warmup, "warmup")
    if warm < 1:
        raise ValueError(f"warmup must be >= 1 step; got {warmup!r}")
    ev = np.unique(np.asarray(list(eval_steps), dtype=int))
    if ev.size and (ev[0] < 0 or ev[-1] > steps):
        raise ValueError(f"eval_steps must lie in [0, steps={steps}]; got {ev.tolist()}")
    online = _is_online(levels)
    if not online and not hasattr(levels, "sample"):
        raise ValueError(f"levels must be a schedule with sample(n, rng=...) or an EntropyRateEstimator; "
                         f"got {type(levels).__name__}")
    return Recipe(steps, batch_size, lr, refresh, warm, half, 0.5 ** (1.0 / half) if half > 0 else 0.0, ev, online)


def adam_with_warmup(learning_rate: float, warmup: int):
    """Adam whose step size rises linearly to ``learning_rate`` over ``warmup`` updates, then stays there.

    optax counts updates from 0: the first update moves at ``learning_rate / warmup``, the ``warmup``-th at
    ``learning_rate``.

    Parameters
    ----------
    learning_rate : float
    warmup : int
        Updates of the linear ramp (1: no ramp).

    Returns
    -------
    optax.GradientTransformation
    """
    lr, w = float(learning_rate), int(warmup)
    return optax.adam(optax.linear_schedule(lr / w, lr, max(w - 1, 1)) if w > 1 else lr)


def ema_update(ema, params, decay):
    r""":math:`\bar\theta \leftarrow d\,\bar\theta + (1 - d)\,\theta`, leaf by leaf (inside a jitted step).

    Parameters
    ----------
    ema, params : pytree
        The average and the current weights (same structure).
    decay : scalar
        :math:`d \in [0, 1)`.

    Returns
    -------
    pytree
        The new average.
    """
    return jax.tree_util.tree_map(lambda e, q: decay * e + (1.0 - decay) * q, ema, params)


@dataclass
class LoopResult:
    """What :func:`training_loop` returns: the averaged weights, the losses, the evaluations and timings.

    Attributes
    ----------
    params : dict
        The final weight average (NumPy arrays).
    train_loss : ndarray, shape (steps,)
        Batch mean of the per-example losses the step returned, per step.
    results : list
        ``evaluate(params)`` at each evaluation step, in order.
    train_time, eval_time : float
        Seconds of training steps and of evaluations.
    refreshes : int
        Times an online estimator's schedule was re-read.
    schedule : object
        The schedule in use at the end.
    """

    params: dict
    train_loss: np.ndarray
    results: list
    train_time: float
    eval_time: float
    refreshes: int
    schedule: object


def training_loop(init_params, opt_init_c, step_c, draw, levels, recipe: Recipe, evaluate) -> LoopResult:
    r"""The training loop every experiment shares: steps, online re-estimation, weight average, evaluations.

    At step :math:`k = 1..K`: ``lam, args = draw(k, schedule)``; one compiled step
    ``params, state, ema, per = step_c(params, state, ema, *args, decay_k)`` with the average's decay
    :math:`\beta_k = \min(\beta, (1 + k)/(10 + k))`; an online estimator is fed the previous step's
    ``(lam, per)`` and re-read every ``recipe.online_refresh`` steps; ``evaluate(ema)`` runs after the
    steps of ``recipe.eval_steps`` (step 0: the initial weights), outside the timed training.

    Parameters
    ----------
    init_params : dict
        Initial weights (NumPy arrays).
    opt_init_c, step_c : callable
        Compiled optimiser initialisation and step.
    draw : callable
        ``draw(k, schedule) -> (lam (B,) float64, args tuple)``.
    levels : schedule or EntropyRateEstimator
    recipe : Recipe
    evaluate : callable
        ``evaluate(params) -> result`` (any object; collected in order).

    Returns
    -------
    LoopResult
        ``train_loss`` is the batch mean of ``per`` at each step (float64).
    """
    params = jax.device_put(init_params)
    opt_state = opt_init_c(params)
    ema = jax.tree_util.tree_map(lambda a: a.copy(), params)
    online = recipe.online
    schedule = levels.schedule() if online else levels
    results, losses = [], []
    eval_time, n_refresh = 0.0, 0
    pending = None  # (lam, per-example loss) of the previous step, fed to the estimator one step late
    eval_steps = set(int(e) for e in recipe.eval_steps)

    def run_eval(p):
        nonlocal eval_time
        t = time.perf_counter()
        results.append(evaluate(p))
        eval_time += time.perf_counter() - t

    if 0 in eval_steps:
        run_eval(ema)
    t_train = 0.0
    t = time.perf_counter()
    for k in range(1, recipe.steps + 1):
        lam, args = draw(k, schedule)
        decay = np.float32(min(recipe.beta, (1.0 + k) / (10.0 + k)))
        params, opt_state, ema, per = step_c(params, opt_state, ema, *args, decay)
        losses.append(per)
        if online:
            if pending is not None:
                levels.update(pending[0], np.asarray(pending[1], dtype=np.float64))
            pending = (lam, per)
            if k % recipe.online_refresh == 0:
                schedule = levels.schedule()
                n_refresh += 1
        if k in eval_steps:
            jax.block_until_ready(params)
            t_train += time.perf_counter() - t
            run_eval(ema)
            t = time.perf_counter()
    jax.block_until_ready(params)
    t_train += time.perf_counter() - t
    if online and pending is not None:
        levels.update(pending[0], np.asarray(pending[1], dtype=np.float64))
    train_loss = np.array([float(np.mean(np.asarray(v, dtype=np.float64))) for v in losses])
    return LoopResult(jax.tree_util.tree_map(np.asarray, ema), train_loss, results, t_train, eval_time, n_refresh,
                      schedule)


#: Compiled (optimizer init, step) per (network, batch size, step size) in this process.  A sweep's
#: cells (schedules x seeds) on one network then compile once: the step depends on neither the seed
#: nor the schedule (they enter as arguments).  A benchmark drops an entry to time a fresh compile.
STEP_CACHE: dict = {}


def _compiled_step(net, batch_size: int, lr: float, weight: str = "edm", warmup: int = 1):
    key = (net, int(batch_size), float(lr), weight, int(warmup))
    if key not in STEP_CACHE:
        STEP_CACHE[key] = _build_step(net, batch_size, lr, weight, warmup)
    return STEP_CACHE[key]


def _build_step(net, batch_size: int, lr: float, weight: str = "edm", warmup: int = 1):
    """Ahead-of-time compiled Adam initialisation and step of one (network, batch size, step size, loss
    weight, warm-up); the step returns the per-example *unweighted* x0 loss (the online estimator's input)."""
    opt = adam_with_warmup(lr, warmup)
    s = float(net.sigma_data)

    def loss_fn(p, x0, lam, eps):
        x = x0 + jnp.exp(-0.5 * lam)[:, None] * eps
        per = jnp.sum((net.apply(p, x, lam) - x0) ** 2, axis=1)
        return jnp.mean(jnp.exp(log_loss_weight(lam, weight, s, xp=jnp)) * per), per

    def step(p, state, ema, x0, lam, eps, decay):
        (_, per), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, x0, lam, eps)
        updates, state = opt.update(grads, state, p)
        p = optax.apply_updates(p, updates)
        return p, state, ema_update(ema, p, decay), per

    p_shape = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, NET_DTYPE), net.init(0))
    opt_init_c = jax.jit(opt.init).lower(p_shape).compile()
    s_shape = jax.eval_shape(opt.init, p_shape)
    batch = jax.ShapeDtypeStruct((batch_size, net.dim), NET_DTYPE)
    step_c = jax.jit(step, donate_argnums=(0, 1, 2)).lower(
        p_shape, s_shape, p_shape, batch, jax.ShapeDtypeStruct((batch_size,), NET_DTYPE), batch,
        jax.ShapeDtypeStruct((), NET_DTYPE)).compile()
    return opt_init_c, step_c


def _data_sampler(data, dim: int):
    if hasattr(data, "sample_x0"):
        if int(getattr(data, "dim", dim)) != dim:
            raise ValueError(f"data has dimension {data.dim}; the network expects {dim}")
        return lambda n, gen: np.asarray(data.sample_x0(n, rng=gen), dtype=np.float32)
    arr = check_finite(as_float_array(data, "data", ndim=2), "data")
    if arr.shape[1] != dim:
        raise ValueError(f"data must have shape (N, {dim}) to match the network; got {arr.shape}")
    if arr.shape[0] < 1:
        raise ValueError("data must hold at least one training example")
    arr32 = arr.astype(np.float32)
    return lambda n, gen: arr32[gen.integers(0, arr32.shape[0], n)]
