r"""Schedules of the masked process (docs/THEORY.md section 7.6): entropic ones from an :math:`h` profile, the
heuristics in common use, :math:`h` from measured losses, mask rates for training loops and JSON export.

Every schedule here is a :class:`~noisealloc.theory.schedules.base.Schedule` whose :math:`\lambda` is the
masked log-odds :math:`\log(\alpha/\varepsilon)` (:mod:`noisealloc.theory.masked.process`), in one of the
coordinates ``lambda``, ``eps``, ``t-masked``, ``t-masked-cosine`` or ``t-maskgit``.

=============================  ================================================================================
:func:`masked_schedule_from_rate`  :math:`p_u \propto (h\,|d\lambda/du|)^\gamma`, :math:`\gamma = \tfrac12` (square-root
                                   law of docs/THEORY.md §4 (b)) or 1 (:math:`p \propto h`), in a stated coordinate
:func:`masked_schedule_from_model` the same, with :math:`h` estimated from a masked model
:func:`masked_linear`              uniform :math:`t` with :math:`\alpha = 1 - t` (MDLM and MD4's default): in
                                   :math:`\lambda` the logistic density :math:`\alpha\varepsilon`
:func:`masked_cosine`              uniform :math:`t` with :math:`\alpha = \cos(\pi t/2)` (the form docs/THEORY.md §7.6
                                   specifies; MaskGIT's own rule differs, see its docstring)
:func:`maskgit_cosine`             MaskGIT's (and MD4's) cosine: :math:`\varepsilon = \sin(\pi t/2)`, :math:`t` uniform
:func:`masked_uniform_lambda`      uniform in :math:`\lambda`
=============================  ================================================================================

Default interval: :math:`\lambda \in [-12, 12]`, i.e. mask rates in :math:`[6.1\cdot10^{-6}, 1 - 6.1\cdot10^{-6}]`;
the heuristics are truncated to it and renormalised (their own :math:`t \in (0, 1)` reaches
:math:`\lambda = \pm\infty`).

Measured losses (the pilot and online routes of docs/THEORY.md section 5 carry over by section 7.3): a
model's held-out masked cross-entropy per level, summed over the masked tokens of a string, :math:`L(\lambda)`,
gives :math:`h = \alpha L` (:func:`masked_rate_from_losses`).  A training loop draws :math:`\lambda` from a
schedule (any sampler of :mod:`noisealloc.theory.schedules.samplers`, or :func:`sample_mask_rates`) and masks
each token with probability :math:`\varepsilon = \mathrm{sigmoid}(-\lambda)` (:func:`mask_rates`; in torch or
jax, ``sigmoid(-lam)``).  :func:`save_masked_json` writes the schema-v1 JSON of
:mod:`noisealloc.theory.schedules.io` in the ``lambda`` coordinate with ``meta["process"] = "masked"``, so
the existing loaders and samplers read it unchanged.
"""

from __future__ import annotations

import numpy as np

from noisealloc.theory.errors import as_float_array, as_float_scalar, check_finite, check_interval
from noisealloc.theory.masked.process import get_masked_coordinate, keep_probability, mask_rate

__all__ = [
    "DEFAULT_LAM_MIN",
    "DEFAULT_LAM_MAX",
    "masked_schedule_from_rate",
    "masked_schedule_from_model",
    "masked_rate_from_losses",
    "masked_schedule_from_losses",
    "masked_linear",
    "masked_cosine",
    "maskgit_cosine",
    "masked_uniform_lambda",
    "masked_heuristics",
    "mask_rates",
    "sample_mask_rates",
    "save_masked_json",
]

#: Default interval of the masked log-odds (mask rates 6.1e-6 .. 1 - 6.1e-6).
DEFAULT_LAM_MIN = -12.0
DEFAULT_LAM_MAX = 12.0


def masked_schedule_from_rate(lam, h, *, h_stderr=0.0, rule: str = "sqrt-entropy", coordinate="lambda",
                              floor: float = 0.0, name: str | None = None, method: str = "given"):
    r"""Entropic schedule of the masked process from an :math:`h` profile, in a stated coordinate.

    .. math:: p_u(u_i) \propto \big(h(\lambda_i)\,|d\lambda/du|\big)^{\gamma}, \qquad
              \gamma = \tfrac12 \text{ (sqrt-entropy) or } 1 \text{ (entropy)}

    (:func:`noisealloc.theory.schedules.entropic.schedule_from_rate` with a masked coordinate).  For
    ``coordinate="eps"`` (or ``t-masked``), :math:`|d\lambda/d\varepsilon| = 1/(\alpha\varepsilon)`.

    Parameters
    ----------
    lam : (n,) array_like
        Strictly increasing log-odds grid, :math:`n \ge 2`, inside the coordinate's accurate range
        (:math:`\lambda \ge -15` for ``eps``).
    h : (n,) array_like
        :math:`h(\lambda)`, nats per unit log-odds.
    h_stderr : float or (n,) array_like
        Its standard error (recorded).
    rule : {"sqrt-entropy", "entropy"}
        Exponent 1/2 or 1.
    coordinate : str or Coordinate
        ``"lambda"``, ``"eps"``, ``"t-masked"`` or ``"t-masked-cosine"``.
    floor : float in [0, 1)
        Uniform mixture weight.
    name : str, optional
        Schedule name.
    method : str
        Recorded provenance of ``h``.

    Returns
    -------
    EntropicScheduleResult
        As :func:`~noisealloc.theory.schedules.entropic.schedule_from_rate`.

    Examples
    --------
    >>> import numpy as np
    >>> lam = np.linspace(-6.0, 6.0, 13)
    >>> res = masked_schedule_from_rate(lam, keep_probability(lam) * mask_rate(lam), coordinate="eps")
    >>> res.schedule.coordinate.name, round(float(res.pdf[6]), 4)   # h_eps = 1: uniform in eps
    ('eps', 1.005)
    """
    from noisealloc.theory.schedules.entropic import schedule_from_rate

    return schedule_from_rate(lam, h, h_stderr=h_stderr, rule=rule, coordinate=get_masked_coordinate(coordinate),
                              floor=floor, name=name, method=method)


def masked_schedule_from_model(model, lam, *, rule: str = "sqrt-entropy", coordinate="lambda", floor: float = 0.0,
                               n_samples: int | None = None, rng=None, name: str | None = None):
    r"""Entropic schedule of a masked model (finite, product, Markov or smoothed law): estimate :math:`h`, then build.

    Parameters
    ----------
    model : MaskedModel
        A law of :mod:`noisealloc.theory.masked`.
    lam : (n,) array_like
        Strictly increasing log-odds grid.
    rule : {"sqrt-entropy", "entropy"}
        Exponent 1/2 or 1.
    coordinate : str or Coordinate
        Coordinate of the learners and of the schedule.
    floor : float in [0, 1)
        Uniform mixture weight.
    n_samples : int, optional
        Monte-Carlo draws (the model's default when ``None``).
    rng : numpy.random.Generator, int or None
        Randomness (keyword-only).
    name : str, optional
        Schedule name.

    Returns
    -------
    EntropicScheduleResult
        With the model's :math:`h`, its standard error and method (``monte-carlo``).
    """
    as_float_scalar(floor, "floor")  # before the Monte-Carlo work (its range is checked with the schedule)
    opts = {} if n_samples is None else {"n_samples": n_samples}
    info = model.information(lam, rng=rng, **opts)
    est = info.entropy_rate
    return masked_schedule_from_rate(info.lam, est.value, h_stderr=est.stderr, rule=rule, coordinate=coordinate,
                                     floor=floor, name=name, method=est.method)


def masked_rate_from_losses(lam, loss, loss_stderr=None):
    r"""Entropy rate from measured masked cross-entropies per level: :math:`h = \alpha L` (docs/THEORY.md section 7.3).

    Parameters
    ----------
    lam : (n,) array_like
        Log-odds levels of the measurements.
    loss : (n,) array_like
        Held-out cross-entropy per string summed over the masked tokens, nats (divide bits by
        :math:`\log_2 e`); for a loss averaged over the masked tokens multiply by :math:`\varepsilon L` first.
    loss_stderr : (n,) array_like, optional
        Standard errors of ``loss``.

    Returns
    -------
    h : ndarray, shape (n,)
        :math:`\alpha(\lambda) L(\lambda)`, nats per unit log-odds.
    h_stderr : ndarray, shape (n,)
        :math:`\alpha \cdot` ``loss_stderr`` (zeros when not given).

    Examples
    --------
    >>> masked_rate_from_losses([0.0], [2.0])[0].tolist()
    [1.0]
    """
    lam = check_finite(as_float_array(lam, "lam", ndim=1), "lam")
    loss = check_finite(as_float_array(loss, "loss", shape=lam.shape), "loss")
    if np.any(loss < 0):
        raise ValueError(f"loss must be >= 0 (a cross-entropy); got {float(loss.min())!r}")
    se = np.zeros_like(loss) if loss_stderr is None else check_finite(
        as_float_array(loss_stderr, "loss_stderr", shape=lam.shape), "loss_stderr")
    a = keep_probability(lam)
    return a * loss, a * se


def masked_schedule_from_losses(lam, loss, *, loss_stderr=None, rule: str = "sqrt-entropy", coordinate="lambda",
                                floor: float = 0.0, name: str | None = None):
    r"""Entropic schedule from measured per-level masked losses (:func:`masked_rate_from_losses`, then the rule).

    Parameters
    ----------
    lam, loss : (n,) array_like
        Levels (strictly increasing) and losses summed over the masked tokens (nats).
    loss_stderr : (n,) array_like, optional
        Standard errors of ``loss``.
    rule : {"sqrt-entropy", "entropy"}
        Exponent 1/2 or 1.
    coordinate : str or Coordinate
        Coordinate of the schedule.
    floor : float in [0, 1)
        Uniform mixture weight.
    name : str, optional
        Schedule name.

    Returns
    -------
    EntropicScheduleResult
    """
    h, se = masked_rate_from_losses(lam, loss, loss_stderr)
    return masked_schedule_from_rate(lam, h, h_stderr=se, rule=rule, coordinate=coordinate, floor=floor, name=name,
                                     method="losses")


def _uniform_in(coord_name: str, lam_min, lam_max, coordinate, name):
    from noisealloc.theory.schedules.base import TransportedSchedule, TruncatedSchedule
    from noisealloc.theory.schedules.laws import Uniform

    lo_l, hi_l = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
    c = get_masked_coordinate(coord_name)
    ends = np.sort(c.from_lam(np.array([lo_l, hi_l])))
    lo, hi = float(ends[0]), float(ends[1])
    sched = TruncatedSchedule(Uniform(lo, hi), lo, hi, coordinate=c, name=name)
    target = get_masked_coordinate(coordinate)
    if target.name == c.name:
        return sched
    return TransportedSchedule(sched, target, lam_interval=(lo_l, hi_l))


def masked_linear(*, lam_min: float = DEFAULT_LAM_MIN, lam_max: float = DEFAULT_LAM_MAX, coordinate="lambda"):
    r"""Linear schedule: :math:`t` uniform with :math:`\alpha = 1 - t` (MDLM, MD4), truncated to the interval.

    In :math:`\lambda` its density is :math:`\alpha\varepsilon` (logistic), renormalised on the interval.

    Parameters
    ----------
    lam_min, lam_max : float
        Log-odds interval.
    coordinate : str or Coordinate
        Coordinate of the returned schedule.

    Returns
    -------
    Schedule

    Examples
    --------
    >>> s = masked_linear()
    >>> round(float(s.pdf(0.0)), 6)    # 1/4 over a mass of 1 - 2 sigmoid(-12)
    0.250003
    """
    return _uniform_in("t-masked", lam_min, lam_max, coordinate, "masked_linear")


def masked_cosine(*, lam_min: float = DEFAULT_LAM_MIN, lam_max: float = DEFAULT_LAM_MAX, coordinate="lambda"):
    r"""Cosine schedule as docs/THEORY.md section 7.6 specifies: :math:`t` uniform with :math:`\alpha = \cos(\pi t/2)`.

    This is *not* MaskGIT's own rule: MaskGIT (and MD4's cosine schedule) masks a fraction
    :math:`\cos(\pi r/2)` of the tokens with :math:`r` uniform, i.e. :math:`\alpha = 1 - \sin(\pi t/2)` with
    :math:`t = 1 - r`, a different law of :math:`\lambda`.  The form provided here is the specified one.

    Parameters
    ----------
    lam_min, lam_max : float
        Log-odds interval.
    coordinate : str or Coordinate
        Coordinate of the returned schedule.

    Returns
    -------
    Schedule
    """
    return _uniform_in("t-masked-cosine", lam_min, lam_max, coordinate, "masked_cosine")


def maskgit_cosine(*, lam_min: float = DEFAULT_LAM_MIN, lam_max: float = DEFAULT_LAM_MAX, coordinate="lambda"):
    r"""MaskGIT's cosine rule (also MD4's cosine schedule): a fraction :math:`\cos(\pi r/2)` of the tokens masked, :math:`r` uniform.

    With :math:`t = 1 - r`: :math:`\varepsilon = \sin(\pi t/2)`, :math:`t` uniform (coordinate ``t-maskgit``).
    Not the same law as :func:`masked_cosine` (:math:`\alpha = \cos(\pi t/2)`, the form docs/THEORY.md
    section 7.6 specifies); both are provided so that a comparison can say which one it ran.

    Parameters
    ----------
    lam_min, lam_max : float
        Log-odds interval.
    coordinate : str or Coordinate
        Coordinate of the returned schedule.

    Returns
    -------
    Schedule
    """
    return _uniform_in("t-maskgit", lam_min, lam_max, coordinate, "maskgit_cosine")


def masked_uniform_lambda(*, lam_min: float = DEFAULT_LAM_MIN, lam_max: float = DEFAULT_LAM_MAX,
                          coordinate="lambda"):
    r"""Uniform density in the log-odds on :math:`[\lambda_{min}, \lambda_{max}]`.

    Parameters
    ----------
    lam_min, lam_max : float
        Log-odds interval.
    coordinate : str or Coordinate
        Coordinate of the returned schedule.

    Returns
    -------
    Schedule
    """
    return _uniform_in("lambda", lam_min, lam_max, coordinate, "masked_uniform_lambda")


def masked_heuristics(*, lam_min: float = DEFAULT_LAM_MIN, lam_max: float = DEFAULT_LAM_MAX,
                      coordinate="lambda") -> dict:
    """The heuristic schedules of docs/THEORY.md section 7.6 by name (linear, both cosines, uniform in lambda).

    Parameters
    ----------
    lam_min, lam_max : float
        Log-odds interval.
    coordinate : str or Coordinate
        Coordinate of the schedules.

    Returns
    -------
    dict of str to Schedule
    """
    kw = dict(lam_min=lam_min, lam_max=lam_max, coordinate=coordinate)
    return {"masked_linear": masked_linear(**kw), "masked_cosine": masked_cosine(**kw),
            "maskgit_cosine": maskgit_cosine(**kw), "masked_uniform_lambda": masked_uniform_lambda(**kw)}


def mask_rates(lam) -> np.ndarray:
    r"""Mask rates of log-odds draws, :math:`\varepsilon = \mathrm{sigmoid}(-\lambda)` (what a training loop applies).

    Parameters
    ----------
    lam : array_like
        Draws of :math:`\lambda` (numpy, or anything ``numpy.asarray`` converts).

    Returns
    -------
    ndarray of float64
        :math:`\varepsilon \in [0, 1]`.
    """
    return mask_rate(as_float_array(lam, "lam"))


def sample_mask_rates(schedule, n: int, *, rng=None) -> np.ndarray:
    r"""Draw ``n`` levels from a masked schedule (any coordinate) and return their mask rates.

    Parameters
    ----------
    schedule : Schedule
        A schedule of the masked process.
    n : int
        Number of draws.
    rng : numpy.random.Generator, int or None
        Randomness (keyword-only).

    Returns
    -------
    ndarray, shape (n,)
        :math:`\varepsilon(\lambda_i)` of the draws.
    """
    u = schedule.sample(n, rng=rng)
    return mask_rate(schedule.coordinate.to_lam(u))


def save_masked_json(schedule, path, *, n: int = 513, meta: dict | None = None):
    r"""Write a masked schedule as schema-v1 JSON in the ``lambda`` coordinate with ``meta["process"] = "masked"``.

    The masked coordinates are not in the Gaussian registry, so the file is always written in
    :math:`\lambda` (exact transport, then tabulation); the coordinate it was built in is kept as
    ``meta["built_in_coordinate"]``.  Read it back with
    :func:`noisealloc.theory.schedules.io.load_json` or any sampler of
    :mod:`noisealloc.theory.schedules.samplers`.

    Parameters
    ----------
    schedule : Schedule
        A masked schedule.
    path : str or path-like
        Destination file.
    n : int
        Knots of the tabulation.
    meta : dict, optional
        Extra provenance (JSON-serialisable).

    Returns
    -------
    pathlib.Path
    """
    from noisealloc.theory.schedules.io import save_json

    meta = dict(meta or {})
    meta["process"] = "masked"
    meta.setdefault("built_in_coordinate", schedule.coordinate.name)
    meta.setdefault("lam", "masked log-odds log(alpha/eps); mask rate eps = sigmoid(-lam)")
    lam_sched = schedule.to(get_masked_coordinate("lambda"))
    return save_json(lam_sched.tabulate(n) if lam_sched is not schedule else schedule, path, n=n, meta=meta)
