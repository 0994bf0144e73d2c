r"""Comparing noise schedules in neural training runs: paired t intervals, a judged window, late targets.

The comparison rules of docs/THEORY.md §6.6 (regime (iii)) as plain numpy/scipy functions of the
held-out loss curves.  For each schedule (a name) and each seed :math:`i = 0, \dots, S-1` there is a
held-out loss curve :math:`c_{s,i}(t_e)` (nats, :math:`> 0`) at checkpoints
:math:`0 = t_0 < t_1 < \dots < t_{E-1} = L`, :math:`L` the run length.  Seeds are *paired*: at one seed
every schedule starts from the same network and sees the same examples and noise, so the per-seed
differences (or ratios) between two schedules are the replicates, and the seed-to-seed variation
they share cancels.

Notes
-----
The rules, in the order they are applied.

**Judged window** (:func:`judged`).  Only checkpoints with :math:`t_e \ge \phi L` (``start_fraction``
:math:`\phi`, default 0.1) enter a judged number; the checkpoints before it (the optimiser's start-up
transient: Adam's first steps, learning-rate warm-up) are never read, except the step-0 loss
:math:`L_{0,i} = c_{s,i}(0)`, which fixes where the targets start.

**Smoothing** (:func:`smooth`).  Inside the window :math:`W`, a centred 3-point moving average over the
neighbours that lie in the window,

.. math:: \tilde c(t_e) = \frac{1}{|N_e|} \sum_{k \in N_e} c(t_k), \qquad
          N_e = \{e-1, e, e+1\} \cap W,

so the window's first and last checkpoints are 2-point averages and no value outside :math:`W`
influences :math:`\tilde c`.

**Steps to a target** (:func:`steps_to_target`).  The step from which :math:`\tilde c` stays at or
below a target :math:`y`: with :math:`j` the last window checkpoint where :math:`\tilde c(t_j) > y`,

.. math:: T = t_j + (t_{j+1} - t_j)\, \frac{\tilde c(t_j) - y}{\tilde c(t_j) - \tilde c(t_{j+1})}

(linear interpolation in steps; status ``"reached"``); :math:`T` = the window's first checkpoint when
no such :math:`j` exists (``"at window start"``: an upper bound, the crossing may lie before the
window); :math:`T = \infty` when :math:`j` is the last checkpoint (``"not reached"``).  Counting the
*last* crossing, not the first, keeps a noisy dip below the target from counting as reaching it.

**Late targets** (:func:`late_targets`).  The best schedule :math:`b` is the one whose seed-mean
smoothed curve has the lowest minimum over the window.  At seed :math:`i` and fraction :math:`f`,

.. math:: y_{i,f} = L_{0,i} - f\,(L_{0,i} - m_i) = (1-f)\,L_{0,i} + f\,m_i, \qquad
          m_i = \min_{e \in W} \tilde c_{b,i}(t_e),

:math:`L_{0,i}` the step-0 loss of seed :math:`i` (the mean over schedules, which share the initial
network).  The targets are per seed, so the ratio of two schedules' steps at one seed compares them on
the same target.  At :math:`f = 1` the target is the best schedule's own smoothed minimum: it reaches
it there on every seed where its smoothed curve does not rise above that minimum later in the window
(a curve still decreasing at the end); an upturn after the minimum leaves that seed "not reached".

**Paired t interval** (:func:`paired_interval`).  With :math:`d_i = a_i - b_i` (or
:math:`d_i = \log a_i - \log b_i`) over :math:`n` seeds,

.. math:: \bar d \pm t_{n-1,\,(1+\ell)/2}\; \frac{s_d}{\sqrt n}, \qquad
          s_d^2 = \frac{1}{n-1} \sum_i (d_i - \bar d)^2,

:math:`\ell` = ``level``; on the log scale the estimate and end points are reported as
:math:`e^{\bar d}` (the geometric mean over seeds of :math:`a_i / b_i`) and :math:`e^{\bar d \pm \dots}`.
The interval is exact when the :math:`d_i` are normal, so per-seed log step ratios that are
log-normal give it its nominal coverage at any :math:`n \ge 2`.  A percentile bootstrap over 3 seeds
cannot: its distribution has at most :math:`\binom{5}{3} = 10` distinct means, each extreme one of mass
:math:`1/27 > 2.5\,\%`, so its 95 % interval is at most :math:`[\min_i d_i, \max_i d_i]`, which covers the
centre of a symmetric law with probability :math:`1 - 2 \cdot 2^{-3} = 0.75`
(tests/verify/experiments/test_training_comparison.py measures both coverages).

**Sides** (:func:`interval_side`).  An interval is "above" (below) the null when its lower (upper)
end lies strictly above (below) it; an interval that contains or touches the null is
"inconclusive".  The null is 0 for a loss difference and 1 for a step ratio.

**The comparison** (:func:`compare_training`).  Per schedule against a reference: at equal compute,
the per-seed loss differences at the checkpoints nearest given fractions of the run; at the late
targets, the per-seed step ratios.  A step ratio is censored at a seed where either run does not reach
the target (its step count is only known to exceed :math:`L`); then no interval is computed, and the
side is "above" only when the schedule misses the target on every seed while the reference reaches
it on every seed ("below" in the mirror case), otherwise "inconclusive".  Quantities that cannot be
computed are ``None`` with a ``why`` string, never ``inf`` or ``NaN`` (the outputs are written as
JSON).

References
----------
.. [1] Student (W. S. Gosset), "The probable error of a mean", *Biometrika* 6(1), 1-25 (1908).
.. [2] B. Efron and R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall (1993),
   §13 (percentile intervals and their small-sample undercoverage).

Examples
--------
>>> steps = np.arange(0, 101, 10)                      # 11 checkpoints, every 10 % of the run
>>> tau = np.array([[0.25], [0.3], [0.2]])               # 3 seeds: time scales of the reference
>>> ref = 1 + 2 / (1 + steps / 100 / tau)
>>> slow = 1 + 2 / (1 + steps / 100 / (1.5 * tau * [[1.0], [1.1], [0.9]]))   # 1.5x slower on average
>>> out = compare_training(steps, {"ref": ref, "slow": slow}, reference="ref", fractions=(0.6, 1.0))
>>> out["best"], out["at"]                               # 25 % of the run: a tie, the earlier checkpoint
('ref', [20, 50, 100])
>>> row = out["rows"][1]
>>> [(e["step"], round(e["difference"]["estimate"], 3), e["side"]) for e in row["equal_compute"]]
[(20, 0.189, 'above'), (50, 0.188, 'above'), (100, 0.146, 'above')]
>>> late = row["late_targets"][0]                        # 60 % of the reference's improvement
>>> [round(late["ratio"][k], 3) for k in ("estimate", "lo", "hi")], late["side"]
([1.435, 1.124, 1.832], 'above')
>>> late = row["late_targets"][1]                        # the reference's own minimum
>>> late["ratio"], late["side"], late["censored"]
(None, 'above', {'slow': 3, 'ref': 0})
"""

from __future__ import annotations

import numpy as np

from noisealloc.theory.errors import as_float_array

__all__ = [
    "STATUSES",
    "paired_interval",
    "interval_side",
    "judged",
    "smooth",
    "steps_to_target",
    "late_targets",
    "compare_training",
    "TARGET_MODES",
]

#: Outcomes of :func:`steps_to_target`; the first two count as reaching the target.
STATUSES = ("reached", "at window start", "not reached")
#: Relative slack of the window's start: a checkpoint at exactly ``start_fraction`` of the run stays
#: in the window although ``start_fraction * L`` may round a few ulps above it.
_WINDOW_SLACK = 1e-9


# ----------------------------------------------------------------------------- input checks


def _level(level) -> float:
    try:
        lv = float(level)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"level must be a number in (0, 1); got {level!r}") from exc
    if not 0.0 < lv < 1.0:  # also refuses NaN
        raise ValueError(f"level must lie in (0, 1) (e.g. 0.95); got {level!r}")
    return lv


def _start_fraction(start_fraction) -> float:
    try:
        sf = float(start_fraction)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"start_fraction must be a number in [0, 1); got {start_fraction!r}") from exc
    if not 0.0 <= sf < 1.0:
        raise ValueError(f"start_fraction must lie in [0, 1) (a fraction of the run); got {start_fraction!r}")
    return sf


def _fractions(values, name: str) -> list[float]:
    try:
        out = [float(v) for v in np.atleast_1d(np.asarray(values, dtype=object))]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numbers in (0, 1]; got {values!r}") from exc
    if not out:
        raise ValueError(f"{name} must hold at least one fraction in (0, 1]; got {values!r}")
    for v in out:
        if not 0.0 < v <= 1.0:
            raise ValueError(f"{name} must hold fractions in (0, 1] of the run; got {v!r} in {values!r}")
    return out


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask.ravel())[0])


def _check_steps(steps) -> np.ndarray:
    s = as_float_array(steps, "steps", ndim=1)
    if s.size < 2:
        raise ValueError(f"steps must hold at least 2 checkpoints (0 and the run length); got {s.tolist()!r}")
    if not np.all(np.isfinite(s)):
        k = _first_bad(~np.isfinite(s))
        raise ValueError(f"steps must be finite; steps[{k}] is {s[k]!r}")
    if s[0] != 0:
        raise ValueError(f"steps must start at 0 (the initial network's checkpoint); got steps[0] = {s[0]!r}")
    bad = np.diff(s) <= 0
    if np.any(bad):
        k = _first_bad(bad) + 1
        raise ValueError(f"steps must be strictly increasing; steps[{k}] = {s[k]!r} follows steps[{k - 1}] = "
                         f"{s[k - 1]!r}")
    return s


def _check_curve(curve, steps: np.ndarray, name: str = "curve") -> np.ndarray:
    c = as_float_array(curve, name, ndim=1)
    if c.shape != steps.shape:
        raise ValueError(f"{name} must have one value per checkpoint, shape {steps.shape}; got {c.shape}")
    if not np.all(np.isfinite(c)):
        k = _first_bad(~np.isfinite(c))
        raise ValueError(f"{name} must be finite; {name}[{k}] is {c[k]!r}")
    return c


def _check_curves(steps: np.ndarray, curves, min_seeds: int) -> dict[str, np.ndarray]:
    if not isinstance(curves, dict) or not curves:
        raise ValueError(f"curves must be a non-empty dict name -> array (S, E); got {type(curves).__name__}")
    out = {}
    n_seeds = None
    for name, value in curves.items():
        arg = f"curves[{name!r}]"
        c = as_float_array(value, arg, ndim=2)
        if c.shape[1] != steps.size:
            raise ValueError(f"{arg} must have one column per checkpoint ({steps.size}); got shape {c.shape}")
        if n_seeds is None:
            n_seeds = c.shape[0]
        if c.shape[0] != n_seeds:
            first = next(iter(curves))
            raise ValueError(f"{arg} must have the same seeds (rows) as curves[{first!r}] ({n_seeds}); got "
                             f"shape {c.shape}")
        if not np.all(np.isfinite(c)):
            k = tuple(int(i) for i in np.unravel_index(_first_bad(~np.isfinite(c)), c.shape))
            raise ValueError(f"{arg} must be finite; entry {k} is {c[k]!r}")
        if np.any(c <= 0):
            k = tuple(int(i) for i in np.unravel_index(_first_bad(c <= 0), c.shape))
            raise ValueError(f"{arg} must be > 0 (held-out losses in nats); entry {k} is {c[k]!r}")
        out[name] = c
    if n_seeds < min_seeds:
        raise ValueError(f"curves must hold >= {min_seeds} seeds (rows) per schedule; got {n_seeds}")
    return out


def _number(x: float):
    """A JSON-friendly step: int when integral (checkpoints are step counts), else float."""
    x = float(x)
    return int(x) if x.is_integer() else x


# ----------------------------------------------------------------------------- intervals


def paired_interval(a, b, *, level: float = 0.95, log: bool = False) -> dict:
    r"""Student-t interval of the mean paired difference (or ratio) over seeds.

    .. math:: \bar d \pm t_{n-1,\,(1+\ell)/2}\, \frac{s_d}{\sqrt n}, \qquad d_i = a_i - b_i
              \ \text{or}\ d_i = \log a_i - \log b_i,

    :math:`s_d` the sample standard deviation (``ddof=1``) and :math:`t_{\nu,q}` the :math:`q`
    quantile of Student's t with :math:`\nu` degrees of freedom (``scipy.stats.t.ppf``).  With
    ``log=True`` the estimate and end points are :math:`e^{\bar d}` (the geometric mean of
    :math:`a_i/b_i`) and :math:`e^{\bar d \mp t s_d/\sqrt n}`.  Exact coverage when the :math:`d_i` are
    independent normal draws [1]_.

    Parameters
    ----------
    a, b : array_like, shape (n,)
        Per-seed values, paired (entry :math:`i` of both from seed :math:`i`), :math:`n \ge 2`, finite;
        :math:`> 0` when ``log``.
    level : float in (0, 1), default 0.95
        Coverage of the interval.
    log : bool, default False
        Compare ``a / b`` on the log scale (a ratio) instead of ``a - b``.

    Returns
    -------
    dict
        ``estimate`` (:math:`\bar d`, or :math:`e^{\bar d}`), ``lo``, ``hi`` (end points on the same
        scale), ``se`` (:math:`s_d/\sqrt n`, of the mean log ratio when ``log``), ``n``, ``df``
        (:math:`n - 1`), ``level``, ``scale`` (``"difference"`` or ``"ratio"``).  All :math:`d_i` equal
        gives ``lo == hi == estimate``.

    Raises
    ------
    ValueError
        One line naming the argument and value: :math:`n < 2`, ``a`` and ``b`` of different shapes,
        non-finite values, values :math:`\le 0` with ``log``, ``level`` outside (0, 1).

    References
    ----------
    .. [1] Student, "The probable error of a mean", *Biometrika* 6(1), 1-25 (1908).

    Examples
    --------
    >>> r = paired_interval([2.0, 4.0, 3.0], [1.0, 2.0, 2.0])   # d = 1, 2, 1: mean 4/3, sd 1/sqrt(3)
    >>> round(r["estimate"], 4), round(r["se"], 4), r["df"]
    (1.3333, 0.3333, 2)
    >>> round(r["lo"], 4), round(r["hi"], 4)   # 4/3 -+ 4.302653 / 3
    (-0.1009, 2.7676)
    >>> r = paired_interval([2.0, 8.0], [1.0, 4.0], log=True)   # the same ratio at both seeds
    >>> round(r["estimate"], 12), round(r["hi"] - r["lo"], 12), r["scale"]   # (up to the rounding of log)
    (2.0, 0.0, 'ratio')
    """
    from scipy import stats

    lv = _level(level)
    x = as_float_array(a, "a", ndim=1)
    y = as_float_array(b, "b", ndim=1)
    if x.shape != y.shape:
        raise ValueError(f"b must be paired with a (one value per seed, shape {x.shape}); got shape {y.shape}")
    if x.size < 2:
        raise ValueError(f"a and b must hold n >= 2 paired values (seeds) for an interval; got n = {x.size}")
    for arr, arg in ((x, "a"), (y, "b")):
        if not np.all(np.isfinite(arr)):
            k = _first_bad(~np.isfinite(arr))
            raise ValueError(f"{arg} must be finite; {arg}[{k}] is {arr[k]!r}")
        if log and np.any(arr <= 0):
            k = _first_bad(arr <= 0)
            raise ValueError(f"{arg} must be > 0 with log=True (a ratio of positive values); {arg}[{k}] is {arr[k]!r}")
    d = np.log(x) - np.log(y) if log else x - y
    n = d.size
    mean = float(np.mean(d))
    # Equal differences must give a zero-width interval, which the rounding of a computed sd would not.
    se = 0.0 if np.all(d == d[0]) else float(np.std(d, ddof=1) / np.sqrt(n))
    half = float(stats.t.ppf((1.0 + lv) / 2.0, n - 1)) * se
    lo, hi = (mean - half, mean + half) if se > 0 else (mean, mean)
    if log:
        est = float(np.exp(mean))
        lo, hi = (float(np.exp(lo)), float(np.exp(hi))) if se > 0 else (est, est)
    else:
        est = mean
    return {"estimate": est, "lo": float(lo), "hi": float(hi), "se": se, "n": int(n), "df": int(n - 1),
            "level": lv, "scale": "ratio" if log else "difference"}


def interval_side(lo, hi, null) -> str:
    """Where an interval lies relative to the null value: ``"above"``, ``"below"`` or ``"inconclusive"``.

    Parameters
    ----------
    lo, hi : float
        End points, ``lo <= hi``, not NaN.
    null : float
        The value of no effect (0 for a difference, 1 for a ratio).

    Returns
    -------
    str
        ``"above"`` if ``lo > null``, ``"below"`` if ``hi < null``, else ``"inconclusive"`` (the
        interval contains or touches the null).

    Raises
    ------
    ValueError
        NaN or ``lo > hi``.

    Examples
    --------
    >>> interval_side(0.1, 0.5, 0.0), interval_side(-0.5, -0.1, 0.0), interval_side(0.0, 0.5, 0.0)
    ('above', 'below', 'inconclusive')
    """
    try:
        lo_f, hi_f, null_f = float(lo), float(hi), float(null)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"lo, hi and null must be numbers; got ({lo!r}, {hi!r}, {null!r})") from exc
    if np.isnan(lo_f) or np.isnan(hi_f) or np.isnan(null_f):
        raise ValueError(f"lo, hi and null must not be NaN; got ({lo_f!r}, {hi_f!r}, {null_f!r})")
    if lo_f > hi_f:
        raise ValueError(f"lo must be <= hi (an interval); got lo = {lo_f!r} > hi = {hi_f!r}")
    if lo_f > null_f:
        return "above"
    if hi_f < null_f:
        return "below"
    return "inconclusive"


# ----------------------------------------------------------------------------- window, smoothing, crossing


def judged(steps, *, start_fraction: float = 0.1) -> np.ndarray:
    r"""The judged window: checkpoints at or after ``start_fraction`` of the run.

    .. math:: W = \{e : t_e \ge \phi\, t_{E-1}\}

    (up to a relative slack of 1e-9 of the run, so that a checkpoint at exactly :math:`\phi L` is in
    :math:`W` whatever the rounding of :math:`\phi L`).  Nothing before the window enters a judged
    number: it is the optimiser's start-up transient.

    Parameters
    ----------
    steps : array_like, shape (E,)
        Checkpoints: strictly increasing, ``steps[0] == 0``, ``steps[-1]`` the run length.
    start_fraction : float in [0, 1), default 0.1
        :math:`\phi`.

    Returns
    -------
    ndarray of bool, shape (E,)
        ``True`` on the judged checkpoints (a final segment of the checkpoints, never empty).

    Examples
    --------
    >>> judged([0, 5, 10, 50, 100]).tolist()
    [False, False, True, True, True]
    """
    s = _check_steps(steps)
    sf = _start_fraction(start_fraction)
    return s >= (sf - _WINDOW_SLACK) * s[-1]


def _smooth_rows(c: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """3-point window-restricted moving average along the last axis (checked inputs)."""
    w = mask.astype(np.float64)
    # Outside values are replaced, not multiplied by 0, so that not even their bits reach a sum.
    v = np.where(mask, c, 0.0)
    num = v.copy()
    den = np.broadcast_to(w, v.shape).copy()
    num[..., 1:] += v[..., :-1]
    den[..., 1:] += w[:-1]
    num[..., :-1] += v[..., 1:]
    den[..., :-1] += w[1:]
    out = np.full(v.shape, np.nan)
    np.divide(num, den, out=out, where=np.broadcast_to(mask, v.shape))
    return out


def smooth(curve, mask) -> np.ndarray:
    r"""Centred 3-point moving average of a curve, restricted to a window.

    .. math:: \tilde c_e = \frac{1}{|N_e|} \sum_{k \in N_e} c_k, \qquad N_e = \{e-1, e, e+1\} \cap W
              \quad (e \in W),

    :math:`W` the checkpoints where ``mask`` is true; :math:`\tilde c_e` is NaN outside :math:`W`.  At
    the window's two ends the average is over the 2 points available inside it.  Entries of ``curve``
    outside the window are never read (they may even be NaN).

    Parameters
    ----------
    curve : array_like, shape (E,)
        Values at the checkpoints; finite inside the window.
    mask : array_like of bool, shape (E,)
        The window (:func:`judged`), at least one ``True``.

    Returns
    -------
    ndarray, shape (E,)
        :math:`\tilde c`, NaN outside the window.

    Examples
    --------
    >>> smooth([9.0, 5.0, 3.0, 2.0, 4.0], [False, True, True, True, True]).tolist()
    [nan, 4.0, 3.3333333333333335, 3.0, 3.0]
    """
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise ValueError(f"mask must be an array of bool (e.g. from judged); got dtype {m.dtype}")
    if m.ndim != 1 or not m.any():
        raise ValueError(f"mask must be 1-D with at least one True (the window); got {m.tolist()!r}")
    c = as_float_array(curve, "curve", ndim=1)
    if c.shape != m.shape:
        raise ValueError(f"curve must have the shape of mask {m.shape}; got {c.shape}")
    inside = np.isfinite(c) | ~m
    if not np.all(inside):
        k = _first_bad(~inside)
        raise ValueError(f"curve must be finite inside the window; curve[{k}] is {c[k]!r}")
    return _smooth_rows(c, m)


def _crossing(s_w: np.ndarray, c_w: np.ndarray, target: float) -> tuple[float, str]:
    """Last crossing from above of ``target`` by the window's smoothed values (checked inputs)."""
    above = np.flatnonzero(c_w > target)
    if above.size == 0:
        return float(s_w[0]), "at window start"
    j = int(above[-1])
    if j == c_w.size - 1:
        return float("inf"), "not reached"
    frac = (c_w[j] - target) / (c_w[j] - c_w[j + 1])
    return float(s_w[j] + (s_w[j + 1] - s_w[j]) * frac), "reached"


def steps_to_target(steps, curve, target: float, *, start_fraction: float = 0.1) -> tuple[float, str]:
    r"""Step from which the smoothed curve stays at or below ``target`` inside the judged window.

    On :math:`\tilde c` (:func:`smooth` on :func:`judged`), with :math:`j` the last window checkpoint
    where :math:`\tilde c(t_j) > y`:

    .. math:: T = t_j + (t_{j+1} - t_j)\,\frac{\tilde c(t_j) - y}{\tilde c(t_j) - \tilde c(t_{j+1})}.

    The *last* crossing from above counts, so a dip below the target followed by a rise above it is
    not reaching it.

    Parameters
    ----------
    steps : array_like, shape (E,)
        Checkpoints: strictly increasing, ``steps[0] == 0``.
    curve : array_like, shape (E,)
        Held-out loss at those checkpoints, finite.
    target : float
        The loss :math:`y` to reach, finite.
    start_fraction : float in [0, 1), default 0.1
        Start of the judged window as a fraction of the run.

    Returns
    -------
    step : float
        :math:`T` (``"reached"``: strictly inside the window); the window's first checkpoint
        (``"at window start"``: already at or below the target there, so :math:`T` is an upper bound);
        ``inf`` (``"not reached"``: the smoothed curve ends above the target).
    status : str
        One of :data:`STATUSES`.

    Examples
    --------
    >>> steps = [0, 10, 20, 30, 40]
    >>> steps_to_target(steps, [5.0, 4.0, 3.0, 2.0, 1.0], 2.5)   # smoothed 3.5, 3, 2, 1.5 on 10..40
    (25.0, 'reached')
    >>> steps_to_target(steps, [5.0, 4.0, 3.0, 2.0, 1.0], 3.6)
    (10.0, 'at window start')
    >>> steps_to_target(steps, [5.0, 4.0, 3.0, 2.0, 1.0], 1.0)
    (inf, 'not reached')
    """
    s = _check_steps(steps)
    c = _check_curve(curve, s)
    try:
        y = float(target)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"target must be a finite loss; got {target!r}") from exc
    if not np.isfinite(y):
        raise ValueError(f"target must be a finite loss; got {target!r}")
    mask = judged(s, start_fraction=start_fraction)
    return _crossing(s[mask], _smooth_rows(c, mask)[mask], y)


# ----------------------------------------------------------------------------- late targets, comparison


def _late_targets(s: np.ndarray, curves: dict[str, np.ndarray], fracs: list[float], sf: float) -> dict:
    mask = judged(s, start_fraction=sf)
    s_w = s[mask]
    smoothed = {name: _smooth_rows(c, mask)[:, mask] for name, c in curves.items()}
    names = list(curves)
    # The seed-mean of the smoothed curves equals the smoothed seed mean (the average is linear).
    minima = [float(np.min(np.mean(smoothed[name], axis=0))) for name in names]
    best = names[int(np.argmin(minima))]  # argmin: ties go to the first in dict order
    l0 = np.mean([c[:, 0] for c in curves.values()], axis=0)
    m = np.min(smoothed[best], axis=1)
    # (1-f) L0 + f m rather than L0 - f (L0 - m): exact at f = 1, so the best schedule's minimum is
    # its own target bit for bit (L0 - (L0 - m) can round below m and miss it).
    targets = np.array([(1.0 - f) * l0 + f * m for f in fracs])
    out_steps, out_status = {}, {}
    for name in names:
        t = np.empty(targets.shape)
        st: list[list[str]] = []
        for k in range(len(fracs)):
            row = []
            for i in range(targets.shape[1]):
                t[k, i], status = _crossing(s_w, smoothed[name][i], float(targets[k, i]))
                row.append(status)
            st.append(row)
        out_steps[name], out_status[name] = t, st
    return {"best": best, "fractions": list(fracs), "targets": targets, "steps": out_steps, "status": out_status}


def late_targets(steps, curves: dict, *, fractions=(0.9, 1.0), start_fraction: float = 0.1) -> dict:
    r"""Per-seed late targets (shares of the best schedule's improvement) and every schedule's steps to them.

    The best schedule :math:`b` has the lowest minimum over the judged window of its seed-mean smoothed
    curve (ties: the first in dict order).  At seed :math:`i` and fraction :math:`f`:

    .. math:: y_{i,f} = L_{0,i} - f\,(L_{0,i} - m_i), \qquad m_i = \min_{e \in W} \tilde c_{b,i}(t_e),

    computed as :math:`(1-f) L_{0,i} + f m_i` so that :math:`y_{i,1} = m_i` exactly;
    :math:`L_{0,i}` is the step-0 loss of seed :math:`i`, the mean over schedules of
    ``curves[name][i, 0]`` (they share the initial network).  Each schedule's steps to
    :math:`y_{i,f}` come from :func:`steps_to_target` on its seed-:math:`i` curve.  At :math:`f = 1`
    the best schedule reaches its target (at its minimum) on every seed where its smoothed curve does
    not rise above that minimum later in the window.

    Parameters
    ----------
    steps : array_like, shape (E,)
        Checkpoints: strictly increasing, ``steps[0] == 0``.
    curves : dict
        ``name -> array (S, E)`` of held-out losses (finite, :math:`> 0`), the same seeds in the same
        row order for every schedule.
    fractions : sequence of float in (0, 1], default (0.9, 1.0)
        The shares :math:`f` of the improvement.
    start_fraction : float in [0, 1), default 0.1
        Start of the judged window.

    Returns
    -------
    dict
        ``best`` (name), ``fractions`` (list), ``targets`` (array ``(F, S)``), ``steps``
        (``name -> array (F, S)``, ``inf`` where not reached), ``status`` (``name -> list of F lists of
        S`` statuses from :data:`STATUSES`).

    Examples
    --------
    >>> c = {"a": [[3.0, 2.0, 1.5, 1.2, 1.0]], "b": [[3.0, 2.5, 2.0, 1.5, 1.2]]}
    >>> out = late_targets([0, 25, 50, 75, 100], c, fractions=(0.5, 1.0))
    >>> out["best"], out["targets"].tolist()   # m = (1.2 + 1.0)/2 = 1.1 (smoothed end of "a")
    ('a', [[2.05], [1.1]])
    >>> out["status"]["a"], out["status"]["b"]
    ([['at window start'], ['reached']], [['reached'], ['not reached']])
    """
    s = _check_steps(steps)
    sf = _start_fraction(start_fraction)
    fracs = _fractions(fractions, "fractions")
    return _late_targets(s, _check_curves(s, curves, 1), fracs, sf)


def _seed_stats(x: np.ndarray) -> tuple[float, float]:
    return float(np.mean(x)), float(np.std(x, ddof=1) / np.sqrt(x.size))


def _late_row(name: str, reference: str, lt: dict, k: int, lv: float) -> dict:
    n = lt["targets"].shape[1]
    t_name, t_ref = lt["steps"][name][k], lt["steps"][reference][k]
    st_name, st_ref = lt["status"][name][k], lt["status"][reference][k]
    miss_name = sum(s == "not reached" for s in st_name)
    miss_ref = sum(s == "not reached" for s in st_ref)
    start_name = sum(s == "at window start" for s in st_name)
    start_ref = sum(s == "at window start" for s in st_ref)
    row = {
        "fraction": lt["fractions"][k],
        "targets": [float(y) for y in lt["targets"][k]],
        "steps": [None if s == "not reached" else _number(t) for t, s in zip(t_name, st_name)],
        "status": list(st_name),
        "reference_steps": [None if s == "not reached" else _number(t) for t, s in zip(t_ref, st_ref)],
        "reference_status": list(st_ref),
        "censored": {name: miss_name, reference: miss_ref},
        "at_window_start": {name: start_name, reference: start_ref},
    }
    if start_name == n and start_ref == n and name != reference:
        # Both already at or below the target at the window's first checkpoint on every seed: each step
        # count is that checkpoint (an upper bound), so their ratio is 1 by construction, not a measurement.
        row.update(ratio=None, side="inconclusive",
                   why=f"interval not computed: {name!r} and {reference!r} both reach the target before the judged "
                       f"window on every seed (at its first checkpoint), so the step ratio is not measured")
    elif miss_name == 0 and miss_ref == 0:
        ratio = paired_interval(t_name, t_ref, level=lv, log=True)
        row.update(ratio=ratio, side=interval_side(ratio["lo"], ratio["hi"], 1.0), why=None)
    else:
        if miss_name == n and miss_ref == 0:
            side = "above"
        elif miss_ref == n and miss_name == 0:
            side = "below"
        else:
            side = "inconclusive"
        why = (f"interval not computed: the target is not reached on {miss_name} of {n} seeds by {name!r} and "
               f"on {miss_ref} of {n} by {reference!r}; a run that never reaches it is only known to need more "
               f"steps than the run, so its per-seed ratio is censored")
        if side == "above":
            why += f"; {name!r} misses it on every seed while {reference!r} reaches it on every seed"
        elif side == "below":
            why += f"; {reference!r} misses it on every seed while {name!r} reaches it on every seed"
        row.update(ratio=None, side=side, why=why)
    starts = start_name + start_ref
    row["note"] = (None if starts == 0 else
                   f"{starts} step count(s) are the window's first checkpoint (the target was already met "
                   f"there), an upper bound: the ratio involving them is not exact")
    return row


def _rule(sf: float, s_end: float, s0: float, at_steps: list, fracs: list, lv: float, n: int,
          targets: str = "best") -> str:
    whose = ("of the two schedules compared, the one whose seed-mean smoothed curve has the lower minimum (so "
             "the better of the pair reaches the target and the other is measured against it)" if targets == "pair"
             else "the schedule whose seed-mean smoothed curve has the lowest minimum of all")
    return (
        f"Judged window: only checkpoints at or after {sf:g} of the run (step {_number(s0)} of "
        f"{_number(s_end)}) enter a judged number; earlier checkpoints, the optimiser's start-up transient, are "
        f"never read, except the step-0 loss, where the targets start. Equal compute: at steps {at_steps}, the "
        f"held-out loss of the schedule minus the reference's at each of the {n} seeds (paired: one seed gives "
        f"every schedule the same initial network, examples and noise); negative means the schedule is better. "
        f"Late targets: each seed's curve is smoothed inside the window by a centred 3-point moving average "
        f"(2 points at the window's ends, no point outside the window); the target's schedule is {whose}; at "
        f"seed i and fraction f in {fracs} the target is L0_i - f (L0_i - m_i), L0_i the step-0 loss and m_i "
        f"the target's schedule's smoothed minimum at that seed; "
        f"a schedule's steps to it are where its smoothed curve crosses the target from above for the last time "
        f"(it stays at or below from there on), interpolated linearly in steps between the two checkpoints "
        f"around the crossing; a curve already at or below the target at the window's first checkpoint is "
        f"given that checkpoint (an upper bound), one that ends above it has not reached it. Intervals: "
        f"Student-t intervals at level {lv:g} over the {n} paired seeds, mean +- t(df = {n - 1}) sd / sqrt({n}), "
        f"of the per-seed loss differences and of the per-seed log step ratios (reported as the geometric-mean "
        f"ratio, schedule over reference). An interval decides only when it excludes the null (0 for a "
        f"difference, 1 for a ratio): 'above' or 'below'; one that contains or touches it is inconclusive. If "
        f"either run misses the target on some seed, no ratio interval is computed; the side is then 'above' "
        f"only if the schedule misses it on every seed while the reference reaches it on every seed ('below' in "
        f"the mirror case), otherwise inconclusive."
    )


#: How compare_training sets the late targets: per compared pair, or from the best schedule of all.
TARGET_MODES = ("pair", "best")


def compare_training(steps, curves: dict, *, reference: str, fractions=(0.9, 1.0), at=(0.25, 0.5, 1.0),
                     level: float = 0.95, start_fraction: float = 0.1, targets: str = "pair") -> dict:
    r"""Compare every schedule with ``reference`` at equal compute and at late targets, with paired t intervals.

    **Equal compute.**  For each fraction :math:`a` in ``at``, the checkpoint :math:`k` nearest to
    :math:`a L` (ties: the earlier; it must lie in the judged window): :func:`paired_interval` of
    :math:`c_{s,i}(t_k) - c_{\mathrm{ref},i}(t_k)` over seeds (nats; negative: the schedule is better),
    its side against 0, and each schedule's mean and standard error over seeds.

    **Late targets.**  For each :math:`f` in ``fractions``, the steps :math:`T_{s,i}` to the per-seed
    targets of :func:`late_targets`, computed for the pair (schedule, reference) alone when ``targets``
    is ``"pair"`` (the default: the target is a share of the better of the two's improvement, so that the
    better one reaches it and the comparison can decide whenever the other misses it on every seed), or
    over all schedules when it is ``"best"`` (a share of the best schedule's improvement; two schedules
    far from the best then both miss it and their comparison is inconclusive).  When every seed of both runs reaches the target (status
    ``"reached"`` or ``"at window start"``, but not both at window start on every seed, which makes
    the ratio 1 by construction: then it is ``None`` with a ``why``), :func:`paired_interval` of :math:`T_{s,i}` and
    :math:`T_{\mathrm{ref},i}` with ``log=True`` (geometric-mean ratio) and its side against 1
    (``"above"``: the schedule needs more steps).  Otherwise the ratio is censored: ``ratio`` is
    ``None``, ``censored`` counts the seeds that miss the target per run, ``why`` says why, and the
    side is ``"above"`` when the schedule misses on every seed while the reference reaches on every
    seed, ``"below"`` in the mirror case, else ``"inconclusive"``.

    Parameters
    ----------
    steps : array_like, shape (E,)
        Checkpoints: strictly increasing, ``steps[0] == 0``, ``steps[-1]`` the run length :math:`L`.
    curves : dict
        ``name -> array (S, E)`` of held-out losses (finite, :math:`> 0`), :math:`S \ge 2` seeds in the
        same row order for every schedule.
    reference : str
        The schedule every other one is compared with (a key of ``curves``).
    fractions : sequence of float in (0, 1], default (0.9, 1.0)
        Late targets as shares of the best schedule's improvement.
    at : sequence of float in (0, 1], default (0.25, 0.5, 1.0)
        Equal-compute checkpoints as fractions of the run.
    level : float in (0, 1), default 0.95
        Coverage of every interval.
    start_fraction : float in [0, 1), default 0.1
        Start of the judged window.
    targets : {"pair", "best"}
        Whose improvement the late targets are shares of (above).

    Returns
    -------
    dict
        ``reference``, ``level``, ``start_fraction``, ``targets`` (the mode), ``n_seeds``, ``fractions``, ``at`` (the checkpoint
        steps used), ``best`` (of :func:`late_targets`), ``rule`` (the rules in words), ``rows``: one
        dict per schedule in ``curves`` order (the reference's row included, with differences exactly 0)
        with ``schedule``, ``equal_compute`` (per ``at``: ``fraction``, ``step``, ``mean``, ``se``,
        ``reference_mean``, ``reference_se``, ``difference`` (a :func:`paired_interval` dict), ``side``)
        and ``late_targets`` (per fraction: ``fraction``, ``targets``, ``steps``, ``status``,
        ``reference_steps``, ``reference_status`` (per seed; a step is ``None`` where not reached),
        ``censored``, ``at_window_start`` (counts per run), ``ratio`` (a :func:`paired_interval` dict or
        ``None``), ``side``, ``why`` (``None`` when the ratio is computed), ``note`` (``None`` unless some
        step is an upper bound)).  No ``inf`` or ``NaN`` anywhere.

    Raises
    ------
    ValueError
        Bad ``steps``, ``curves`` of different shapes, fewer than 2 seeds, ``E != len(steps)``,
        non-finite or non-positive losses, ``reference`` not in ``curves``, an ``at`` checkpoint before
        the judged window, ``fractions``/``at`` outside (0, 1], ``level`` outside (0, 1).

    Examples
    --------
    >>> steps = np.arange(0, 101, 10)
    >>> base = np.array([3.0, 2.0, 1.6, 1.4, 1.3, 1.2, 1.15, 1.1, 1.08, 1.06, 1.05])
    >>> ref = np.array([base, base + 0.01, base - 0.01])
    >>> out = compare_training(steps, {"ref": ref, "worse": ref + 0.1}, reference="ref", fractions=(0.5,))
    >>> e = out["rows"][1]["equal_compute"][0]
    >>> e["step"], round(e["difference"]["estimate"], 6), e["side"]
    (20, 0.1, 'above')
    """
    s = _check_steps(steps)
    sf = _start_fraction(start_fraction)
    lv = _level(level)
    fracs = _fractions(fractions, "fractions")
    ats = _fractions(at, "at")
    if targets not in TARGET_MODES:
        raise ValueError(f"targets must be one of {', '.join(TARGET_MODES)}; got {targets!r}")
    c = _check_curves(s, curves, 2)
    if reference not in c:
        raise ValueError(f"reference must be one of the schedules {list(c)!r}; got {reference!r}")
    mask = judged(s, start_fraction=sf)
    idx = []
    for a in ats:
        k = int(np.argmin(np.abs(s - a * s[-1])))
        if not mask[k]:
            raise ValueError(f"at = {a!r} selects checkpoint step {_number(s[k])}, before the judged window "
                             f"(steps >= {sf:g} of the run, from step {_number(s[mask][0])}); choose a later fraction")
        idx.append(k)
    lt = _late_targets(s, c, fracs, sf)
    n = next(iter(c.values())).shape[0]
    rows = []
    for name, cn in c.items():
        cr = c[reference]
        equal = []
        for a, k in zip(ats, idx):
            diff = paired_interval(cn[:, k], cr[:, k], level=lv)
            mean, se = _seed_stats(cn[:, k])
            ref_mean, ref_se = _seed_stats(cr[:, k])
            equal.append({"fraction": a, "step": _number(s[k]), "mean": mean, "se": se, "reference_mean": ref_mean,
                          "reference_se": ref_se, "difference": diff,
                          "side": interval_side(diff["lo"], diff["hi"], 0.0)})
        lt_s = lt if targets == "best" or name == reference else _late_targets(
            s, {name: cn, reference: c[reference]}, fracs, sf)
        late = [{**_late_row(name, reference, lt_s, k, lv), "targets_from": lt_s["best"]} for k in range(len(fracs))]
        rows.append({"schedule": name, "equal_compute": equal, "late_targets": late})
    at_steps = [_number(s[k]) for k in idx]
    return {
        "reference": reference,
        "level": lv,
        "start_fraction": sf,
        "targets": targets,
        "n_seeds": int(n),
        "fractions": fracs,
        "at": at_steps,
        "best": lt["best"],
        "rule": _rule(sf, s[-1], s[mask][0], at_steps, fracs, lv, n, targets),
        "rows": rows,
    }
