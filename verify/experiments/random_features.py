r"""Small-scale training simulation: random-feature denoisers in the lazy regime (docs/THEORY.md sections 4 and 6.6).

A training run draws ``N`` triples :math:`(\lambda_i, x_{0,i}, \varepsilon_i)` with
:math:`\lambda_i \sim p` (the schedule), forms :math:`x_i = x_{0,i} + \sigma_i \varepsilon_i`
(VE scaling, :math:`\sigma = e^{-\lambda/2}`), and fits the readout :math:`\Theta` of a two-layer
network whose first layer is random and frozen (the lazy / kernel regime):

.. math::

    D_\Theta(x, \lambda) = c_{skip}(\lambda)\,x + c_{out}(\lambda)\,\Theta^\top \psi(x, \lambda), \qquad
    \psi(x, \lambda) = \tanh\big(W_x\,c_{in}(\lambda)\,x + W_\lambda\,\gamma(\lambda) + b\big)/\sqrt q,

with EDM's preconditioning at the data scale :math:`s` (:math:`c_{skip} = s^2/(s^2+\sigma^2)`,
:math:`c_{out} = \sigma s/\sqrt{s^2+\sigma^2}`, :math:`c_{in} = 1/\sqrt{s^2+\sigma^2}`) and a Fourier
embedding :math:`\gamma(\lambda) = (\cos(f\pi\lambda/L), \sin(f\pi\lambda/L))_{f=1..F}` that lets
features specialise by noise level.  The readout minimises the x0 loss
:math:`\frac1N\sum_i \|D_\Theta(x_i,\lambda_i) - x_{0,i}\|^2 + \delta\|\Theta\|^2` (ridge, closed form).

Quality is the held-out ELBO gap

.. math:: R(\Theta) = \int_{\lambda_{min}}^{\lambda_{max}} \tfrac12 e^\lambda\,
          E\|D_\Theta(x, \lambda) - m(x, \lambda)\|^2\,d\lambda

with :math:`m` the exact Bayes denoiser of the data model (Dirac / empirical mixtures through the
posterior engine), by the trapezoid rule on a log-SNR grid and Monte Carlo over a fixed held-out set
of :math:`(x_0, \varepsilon)` (the same for every schedule, so comparisons are paired).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.schedules.data_scale import data_scale
from noisealloc.theory.errors import as_generator, check_interval

__all__ = [
    "FeatureMap",
    "EvalSet",
    "TrainingCurve",
    "make_feature_map",
    "make_eval_set",
    "fit_readout",
    "elbo_gap",
    "training_curve",
    "samples_to_target",
    "training_schedule",
]

#: Entropic schedules of the training comparison and their rule (:data:`noisealloc.theory.schedules.entropic.RULES`).
ENTROPIC_SCHEDULES = {"sqrt-entropic": "sqrt-entropy", "entropic": "entropy"}


@dataclass(frozen=True)
class FeatureMap:
    r"""Frozen random first layer and EDM preconditioning of the random-feature denoiser.

    Attributes
    ----------
    W_x : (D, q) ndarray
        Input weights.
    W_lam : (2F, q) ndarray
        Weights of the Fourier embedding :math:`\gamma(\lambda)`.
    b : (q,) ndarray
        Biases.
    freqs : (F,) ndarray
        Embedding frequencies :math:`f = 1..F`.
    half_range : float
        Half the length :math:`L` of the log-SNR range the embedding is periodic on.
    s : float
        Data scale of the preconditioning (per coordinate).
    q : int
        Number of features (property).
    """

    W_x: np.ndarray
    W_lam: np.ndarray
    b: np.ndarray
    freqs: np.ndarray
    half_range: float
    s: float

    @property
    def q(self) -> int:
        """Number of random features."""
        return int(self.b.size)

    def precond(self, lam):
        r"""EDM's :math:`(c_{skip}, c_{out}, c_{in})` at scale :math:`s`, :math:`\sigma^2 = e^{-\lambda}` (shaped like ``lam``)."""
        sig2 = np.exp(-np.asarray(lam, float))
        s2 = self.s ** 2
        return s2 / (s2 + sig2), np.sqrt(sig2) * self.s / np.sqrt(s2 + sig2), 1.0 / np.sqrt(s2 + sig2)

    def features(self, x, lam) -> np.ndarray:
        """:math:`\\psi(x, \\lambda)`, shape (n, q); ``lam`` shape (n,)."""
        lam = np.asarray(lam, float)
        _, _, c_in = self.precond(lam)
        arg = np.pi * lam[:, None] * self.freqs[None, :] / self.half_range
        emb = np.concatenate([np.cos(arg), np.sin(arg)], axis=1)
        return np.tanh((x * c_in[:, None]) @ self.W_x + emb @ self.W_lam + self.b) / np.sqrt(self.q)


def make_feature_map(dim: int, q: int, s: float, *, lam_range=(-10.0, 10.0), freqs: int = 8, rng=None) -> FeatureMap:
    r"""Draw the random first layer: Gaussian weights, input weights scaled by ``2/sqrt(D)``.

    Parameters
    ----------
    dim : int
        Data dimension :math:`D`.
    q : int
        Number of features, >= 1.
    s : float
        Data scale of the preconditioning (:func:`noisealloc.theory.schedules.data_scale.data_scale`).
    lam_range : (float, float)
        Log-SNR range over which the Fourier embedding is periodic.
    freqs : int
        Number of embedding frequencies :math:`F`.
    rng : numpy.random.Generator, int or None
        Randomness of the weights (keyword-only).

    Returns
    -------
    FeatureMap
    """
    gen = as_generator(rng)
    if int(q) < 1:
        raise ValueError(f"q must be an integer >= 1; got {q!r}")
    W_x = gen.standard_normal((int(dim), int(q))) * (2.0 / np.sqrt(dim))
    W_lam = gen.standard_normal((2 * int(freqs), int(q)))
    b = gen.standard_normal(int(q)) * 0.5
    half = 0.5 * (float(lam_range[1]) - float(lam_range[0]))
    return FeatureMap(W_x, W_lam, b, np.arange(1, int(freqs) + 1, dtype=float), half, float(s))


def fit_readout(fmap: FeatureMap, x0, x, lam, *, ridge: float = 1e-4, psi=None) -> np.ndarray:
    r"""Closed-form ridge readout :math:`\Theta` (q, D) of the x0 loss on the training triples.

    .. math:: \Theta = \big(\Psi^\top W \Psi / N + \delta I\big)^{-1} \Psi^\top W T / N, \quad
              W = \mathrm{diag}(c_{out}^2), \quad T = (x_0 - c_{skip} x)/c_{out}.

    Parameters
    ----------
    fmap : FeatureMap
        The frozen first layer.
    x0 : (N, D) ndarray
        Clean training samples.
    x : (N, D) ndarray
        Noisy training samples :math:`x_0 + e^{-\lambda/2}\varepsilon`.
    lam : (N,) ndarray
        Their log-SNR levels.
    ridge : float
        :math:`\delta \ge 0`.
    psi : (N, q) ndarray, optional
        The features :math:`\psi(x, \lambda)` when already computed.

    Returns
    -------
    (q, D) ndarray
        The readout :math:`\Theta`.

    References
    ----------
    docs/THEORY.md §4 (training as noise allocation), §6.6 (i).
    """
    c_skip, c_out, _ = fmap.precond(lam)
    psi = fmap.features(x, lam) if psi is None else psi
    target = (x0 - c_skip[:, None] * x) / c_out[:, None]
    w = c_out ** 2
    n = x0.shape[0]
    M = (psi * w[:, None]).T @ psi / n + ridge * np.eye(fmap.q)
    rhs = (psi * w[:, None]).T @ target / n
    return np.linalg.solve(M, rhs)


@dataclass(frozen=True)
class EvalSet:
    r"""Held-out set: per level ``lam[l]`` the same ``n`` pairs :math:`(x_0, \varepsilon)`; the Bayes denoiser there.

    Attributes
    ----------
    lam : (L,) ndarray
        Log-SNR levels.
    quad : (L,) ndarray
        Trapezoid weight times the ELBO weight :math:`\omega = e^\lambda/2`.
    x : (L, n, D) ndarray
        Noisy held-out samples.
    m : (L, n, D) ndarray
        The exact posterior mean :math:`m(x, \lambda)` at them.
    info : dict
        Sizes (``levels``, ``n``).
    """

    lam: np.ndarray
    quad: np.ndarray
    x: np.ndarray
    m: np.ndarray
    info: dict = field(default_factory=dict, compare=False)


def make_eval_set(model, lam_min: float = -10.0, lam_max: float = 10.0, *, levels: int = 41, n: int = 128,
                  rng=None) -> EvalSet:
    r"""Draw the held-out set and evaluate the exact denoiser on it (common random numbers across levels).

    Parameters
    ----------
    model
        A data model with ``sample_x0`` and an exact ``denoiser`` (a Dirac mixture).
    lam_min, lam_max : float
        Evaluation interval in log-SNR.
    levels : int
        Levels of the trapezoid grid.
    n : int
        Held-out pairs :math:`(x_0, \varepsilon)`, shared by every level.
    rng : numpy.random.Generator, int or None
        Randomness of the held-out pairs (keyword-only).

    Returns
    -------
    EvalSet
    """
    gen = as_generator(rng)
    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
    lam = np.linspace(lo, hi, int(levels))
    x0 = model.sample_x0(int(n), rng=gen)
    eps = gen.standard_normal(x0.shape)
    xs = np.empty((lam.size,) + x0.shape)
    ms = np.empty_like(xs)
    for i, l in enumerate(lam):
        xs[i] = x0 + np.exp(-0.5 * l) * eps
        ms[i] = model.denoiser(xs[i], float(l))
    tw = np.zeros(lam.size)
    dl = np.diff(lam)
    tw[:-1] += dl / 2
    tw[1:] += dl / 2
    return EvalSet(lam, tw * 0.5 * np.exp(lam), xs, ms, {"levels": int(levels), "n": int(n)})


def _eval_parts(fmap: FeatureMap, ev: EvalSet):
    """Per level: the Bayes residual of the skip path and ``c_out * psi`` (independent of the readout)."""
    L, n, _ = ev.x.shape
    parts = []
    for i in range(L):
        lam_i = np.full(n, ev.lam[i])
        c_skip, c_out, _ = fmap.precond(lam_i)
        parts.append((c_skip[0] * ev.x[i] - ev.m[i], c_out[0] * fmap.features(ev.x[i], lam_i)))
    return parts


def elbo_gap(fmap: FeatureMap, theta, ev: EvalSet, *, _parts=None) -> float:
    r"""Held-out ELBO gap :math:`R(\Theta)` (trapezoid in :math:`\lambda`, mean over the held-out pairs).

    .. math:: R(\Theta) \approx \sum_l w_l\,\tfrac12 e^{\lambda_l}\,
              \frac1n \sum_i \|D_\Theta(x_{l,i}, \lambda_l) - m(x_{l,i}, \lambda_l)\|^2

    Parameters
    ----------
    fmap : FeatureMap
    theta : (q, D) ndarray
        The readout.
    ev : EvalSet
        The held-out set.

    Returns
    -------
    float
        :math:`R(\Theta) \ge 0` in nats.

    References
    ----------
    docs/THEORY.md §4 (evaluation risk with the ELBO weight), §6.6.
    """
    parts = _eval_parts(fmap, ev) if _parts is None else _parts
    total = 0.0
    for i, (base, feat) in enumerate(parts):
        total += ev.quad[i] * float(np.mean(np.sum((base + feat @ theta) ** 2, axis=1)))
    return total


@dataclass(frozen=True)
class TrainingCurve:
    """ELBO gaps of one schedule over training-set sizes and seeds.

    Attributes
    ----------
    schedule : str
        The schedule's name.
    N_values : (k,) ndarray of int
        Training-set sizes.
    seeds : (r,) ndarray of int
        Seeds.
    gaps : (k, r) ndarray
        ``gaps[i, j]``: held-out ELBO gap at ``N_values[i]`` and seed ``seeds[j]`` (nats).
    mean, stderr : (k,) ndarray
        Mean over seeds and its standard error (properties; 0 with one seed).
    """

    schedule: str
    N_values: np.ndarray
    seeds: np.ndarray
    gaps: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        """Mean gap over seeds, per ``N``."""
        return self.gaps.mean(axis=1)

    @property
    def stderr(self) -> np.ndarray:
        """Standard error of :attr:`mean` (``ddof = 1``; zeros with a single seed)."""
        k = self.gaps.shape[1]
        return self.gaps.std(axis=1, ddof=1) / np.sqrt(k) if k > 1 else np.zeros(self.gaps.shape[0])


def training_curve(model, schedule, N_values, seeds, ev: EvalSet, *, q: int = 256, ridge: float = 1e-4,
                   s: float | None = None, name: str | None = None) -> TrainingCurve:
    r"""Fit one readout per ``(N, seed)`` on samples whose levels are drawn from ``schedule``.

    Seed ``j`` fixes the random first layer and the training draws, so every schedule sees the same
    first layer and the same data points at a given seed (paired comparison).

    Parameters
    ----------
    model
        A Dirac mixture (``sample_x0``, ``dim``).
    schedule
        Any schedule with ``sample(n, rng=...)`` in :math:`\lambda` (e.g. :func:`training_schedule`).
    N_values : sequence of int
        Training-set sizes, >= 1 (the first ``N`` draws of one stream of ``max(N_values)``).
    seeds : sequence of int
        Seeds.
    ev : EvalSet
        The held-out set (the same for every schedule).
    q : int
        Random features.
    ridge : float
        Ridge :math:`\delta` of the readout.
    s : float, optional
        Preconditioning scale (default :func:`noisealloc.theory.schedules.data_scale.data_scale` of ``model``).
    name : str, optional
        Name recorded in the curve (default the schedule's).

    Returns
    -------
    TrainingCurve

    References
    ----------
    docs/THEORY.md §6.6 (i).
    """
    N_values = np.asarray(N_values, dtype=int)
    if N_values.ndim != 1 or N_values.size == 0 or np.any(N_values < 1):
        raise ValueError(f"N_values must be a non-empty list of positive integers; got {N_values.tolist()}")
    seeds = np.asarray(seeds, dtype=int)
    s = data_scale(model) if s is None else float(s)
    gaps = np.empty((N_values.size, seeds.size))
    n_max = int(N_values.max())
    for j, seed in enumerate(seeds):
        gen = np.random.default_rng([int(seed), 6])
        fmap = make_feature_map(model.dim, q, s, lam_range=(ev.lam[0], ev.lam[-1]), rng=gen)
        x0 = model.sample_x0(n_max, rng=gen)
        eps = gen.standard_normal(x0.shape)
        # The levels come from a separate stream so that schedules share (x0, eps) at each seed.
        lam = schedule.sample(n_max, rng=np.random.default_rng([int(seed), 7]))
        x = x0 + np.exp(-0.5 * lam)[:, None] * eps
        parts = _eval_parts(fmap, ev)
        psi = fmap.features(x, lam)
        for i, N in enumerate(N_values):
            theta = fit_readout(fmap, x0[:N], x[:N], lam[:N], ridge=ridge, psi=psi[:N])
            gaps[i, j] = elbo_gap(fmap, theta, ev, _parts=parts)
    return TrainingCurve(name or getattr(schedule, "name", "schedule"), N_values, seeds, gaps)


def samples_to_target(N_values, mean_gaps, target: float) -> float:
    """Smallest ``N`` at which the mean gap reaches ``target``: log-log interpolation between grid points.

    Parameters
    ----------
    N_values : (k,) array_like
        Increasing training-set sizes.
    mean_gaps : (k,) array_like
        Mean gap at each size, > 0.
    target : float
        The gap to reach, finite and > 0.

    Returns
    -------
    float
        The interpolated ``N``; ``inf`` when the curve never reaches the target inside the grid, and
        ``N_values[0]`` when it is already below the target at the first point.

    Examples
    --------
    >>> round(samples_to_target([100, 400], [1.0, 0.25], 0.5), 9)  # gap ~ 1/N: halving the gap doubles N
    200.0
    """
    N = np.asarray(N_values, float)
    g = np.asarray(mean_gaps, float)
    if not np.isfinite(target) or target <= 0:
        raise ValueError(f"target must be a finite positive gap; got {target!r}")
    below = np.flatnonzero(g <= target)
    if below.size == 0:
        return float("inf")
    i = int(below[0])
    if i == 0:
        return float(N[0])
    lx0, lx1 = np.log(N[i - 1]), np.log(N[i])
    ly0, ly1 = np.log(g[i - 1]), np.log(g[i])
    t = (np.log(target) - ly0) / (ly1 - ly0)
    return float(np.exp(lx0 + t * (lx1 - lx0)))


def training_schedule(model, name: str, lam_min: float, lam_max: float, *, h_levels: int = 65,
                      h_samples: int | None = None, rng=None):
    r"""One schedule of the training comparison (docs/THEORY.md §6.6) for ``model`` on ``[lam_min, lam_max]``.

    * ``"sqrt-entropic"`` / ``"entropic"``: :math:`p \propto \sqrt{h}` / :math:`p \propto h` in
      :math:`\lambda` from the model's own entropy rate on ``h_levels`` uniform levels
      (:func:`noisealloc.theory.schedules.entropic.schedule_from_model`; no data-scale choice);
    * any built-in heuristic (``"edm_lognormal"``, ``"cosine"``, ...): moved to the model's data scale
      :math:`s`, :math:`p(\lambda) = p_h(\lambda + 2\log(s/\sigma_{data}))`
      (:func:`noisealloc.theory.schedules.data_scale.shifted_heuristic`).

    Parameters
    ----------
    model
        A Dirac mixture (the training simulation needs its exact denoiser).
    name : str
        ``"sqrt-entropic"``, ``"entropic"`` or a built-in schedule name.
    lam_min, lam_max : float
        Training interval in log-SNR.
    h_levels : int
        Levels of the entropy-rate profile (entropic schedules only), >= 2.
    h_samples : int, optional
        Monte-Carlo samples per level where the model estimates ``h`` by Monte Carlo.
    rng : numpy.random.Generator, int or None
        Monte-Carlo randomness of ``h`` (keyword-only).

    Returns
    -------
    TabulatedSchedule
        In :math:`\lambda` on ``[lam_min, lam_max]``; the entropic ones are named ``name``.

    References
    ----------
    docs/THEORY.md §4 (b) (square-root law), §5 (schedules to compare, data scale), §6.6.
    """
    from noisealloc.theory.schedules.data_scale import shifted_heuristic
    from noisealloc.theory.schedules.entropic import schedule_from_model

    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
    if name in ENTROPIC_SCHEDULES:
        if isinstance(h_levels, bool) or not isinstance(h_levels, (int, np.integer)) or h_levels < 2:
            raise ValueError(f"h_levels must be an integer >= 2; got {h_levels!r}")
        lam = np.linspace(lo, hi, int(h_levels))
        return schedule_from_model(model, lam, rule=ENTROPIC_SCHEDULES[name], n_samples=h_samples, rng=rng,
                                   name=name).schedule
    return shifted_heuristic(name, data_scale(model), lo, hi)
