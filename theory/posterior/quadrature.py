r"""Vectorised adaptive Gauss--Kronrod quadrature with boundary-graded meshes.

The posterior quantities of Dirac mixtures at high SNR are integrals whose mass
sits in layers of width :math:`\delta = \sigma^2 / d` around the decision
boundaries between atoms (docs/THEORY.md section 3.1): fixed Gauss--Hermite nodes
never see them.  This module provides the two tools the models build on:

* :func:`graded_breakpoints`: for many independent problems at once, a mesh that
  is cut at given points (atoms, boundary crossings) and graded geometrically
  away from each cut, starting at a problem-specific feature scale, so that no
  feature of width ``scale`` at a cut can fall between nodes;
* :func:`adaptive_gauss_kronrod`: global adaptive Gauss--Kronrod (G10/K21, the
  QUADPACK ``qk21`` pair) over a batch of problems, each a union of intervals,
  with several integrands sharing the nodes; the error of each interval is the
  conservative :math:`|K_{21} - G_{10}|` and an interval is split until the
  summed error of its problem is below ``rtol * |value|`` (or ``atol``).

Everything is vectorised over problems, so nested (iterated) integrals in two
dimensions cost numpy passes, not Python loops.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.errors import ConvergenceWarning, as_float_array, as_float_scalar, check_finite

__all__ = [
    "GK21_NODES",
    "GK21_WEIGHTS",
    "G10_WEIGHTS",
    "QuadratureResult",
    "adaptive_gauss_kronrod",
    "graded_breakpoints",
]

# QUADPACK qk21: Kronrod nodes (positive half, descending; odd indices 1,3,..,9
# are the 10-point Gauss-Legendre nodes), Kronrod weights and Gauss weights.
_XGK = np.array([
    0.995657163025808080735527280689003, 0.973906528517171720077964012084452,
    0.930157491355708226001207180059508, 0.865063366688984510732096688423493,
    0.780817726586416897063717578345042, 0.679409568299024406234327365114874,
    0.562757134668604683339000099272694, 0.433395394129247190799265943165784,
    0.294392862701460198131126603103866, 0.148874338981631210884826001129720,
    0.0,
])
_WGK = np.array([
    0.011694638867371874278064396062192, 0.032558162307964727478818972459390,
    0.054755896574351996031381300244580, 0.075039674810919952767043140916190,
    0.093125454583697605535065465083366, 0.109387158802297641899210590325805,
    0.123491976262065851077482424932700, 0.134709217311473325928054001771707,
    0.142775938577060080797094273138717, 0.147739104901338491374841515972068,
    0.149445554002916905664936468389821,
])
_WG = np.array([
    0.066671344308688137593568809893332, 0.149451349150580593145776339657697,
    0.219086362515982043995534934228163, 0.269266719309996355091226921569469,
    0.295524224714752870173892994651338,
])
#: The 21 Kronrod nodes on [-1, 1] (ascending).
GK21_NODES = np.concatenate([-_XGK[:-1], _XGK[::-1]])
#: The Kronrod weights matching :data:`GK21_NODES`.
GK21_WEIGHTS = np.concatenate([_WGK[:-1], _WGK[::-1]])
#: The 10-point Gauss weights on the 21 nodes (0 on the Kronrod-only nodes).
G10_WEIGHTS = np.zeros(21)
_gauss_pos = np.array([1, 3, 5, 7, 9])
G10_WEIGHTS[_gauss_pos] = _WG
G10_WEIGHTS[20 - _gauss_pos] = _WG


@dataclass(frozen=True)
class QuadratureResult:
    """Result of :func:`adaptive_gauss_kronrod`.

    Attributes
    ----------
    value : ndarray, shape (n_out, n_problems)
        Kronrod estimates.
    abs_error : ndarray, shape (n_out, n_problems)
        Summed :math:`|K_{21} - G_{10}|` over the final intervals: a
        conservative error estimate of ``value`` (the Kronrod rule is far more
        accurate than the Gauss rule it is compared with).
    success : bool
        Whether every problem met its tolerance.
    nit : int
        Refinement rounds.
    n_intervals : int
        Final number of intervals over all problems.
    nfev : int
        Integrand evaluations (points).
    info : dict
        Free-form diagnostics (empty as returned by :func:`adaptive_gauss_kronrod`;
        not part of equality).
    """

    value: np.ndarray
    abs_error: np.ndarray
    success: bool
    nit: int
    n_intervals: int
    nfev: int
    info: dict = field(default_factory=dict, compare=False)


def graded_breakpoints(cuts, lo, hi, scale, *, first=8.0, ratio=16.0, max_terms=None):
    r"""Per-problem sorted breakpoints cut at ``cuts`` and graded away from them.

    For each problem ``p`` the breakpoints are ``lo[p]``, ``hi[p]``, every finite
    cut inside ``[lo, hi]`` and the points ``cut +- scale * first * ratio**m``
    (clipped to ``[lo, hi]``), :math:`m = 0, 1, \dots` until the offset exceeds
    ``hi - lo``.  A feature of width ``scale`` at a cut is therefore always
    inside an interval of length at most ``first * scale`` from the cut, where
    the Gauss--Kronrod nodes resolve it; beyond that the integrand is smooth on
    the interval's own scale.

    Parameters
    ----------
    cuts : array_like, shape (n_problems, n_cuts)
        Cut points (NaN or infinite entries are ignored); a single row is
        broadcast to every problem.
    lo, hi : array_like, shape (n_problems,)
        Integration range of each problem, ``lo < hi``.
    scale : array_like, shape (n_problems,)
        Smallest feature width, > 0.
    first : float, default 8.0
        First offset from a cut, in units of ``scale``.
    ratio : float, default 16.0
        Geometric growth of the offsets, > 1.
    max_terms : int, optional
        Cap on the number of offsets per side of a cut (default: as many as
        needed to cover ``hi - lo``).

    Returns
    -------
    a, b : ndarray, shape (n_intervals,)
        Interval ends (zero-length intervals removed).
    pid : ndarray of int, shape (n_intervals,)
        Problem index of each interval.

    References
    ----------
    docs/THEORY.md section 3.1 (boundary layers of Dirac mixtures at high SNR).

    Examples
    --------
    One problem on :math:`[-1, 1]` with a feature of width 0.01 at 0:

    >>> a, b, pid = graded_breakpoints([[0.0]], [-1.0], [1.0], [0.01])
    >>> a.round(4).tolist(), b.round(4).tolist(), pid.tolist()
    ([-1.0, -0.08, 0.0, 0.08], [-0.08, 0.0, 0.08, 1.0], [0, 0, 0, 0])
    """
    cuts = np.atleast_2d(as_float_array(cuts, "cuts"))
    lo = as_float_array(lo, "lo").reshape(-1)
    hi = as_float_array(hi, "hi").reshape(-1)
    scale = as_float_array(scale, "scale").reshape(-1)
    first, ratio = as_float_scalar(first, "first"), as_float_scalar(ratio, "ratio")
    n_prob = lo.shape[0]
    if cuts.shape[0] != n_prob:
        cuts = np.broadcast_to(cuts, (n_prob, cuts.shape[1]))
    span = hi - lo
    with np.errstate(divide="ignore", invalid="ignore"):
        n_terms = np.ceil(np.log(np.maximum(span / (first * scale), 1.0)) / np.log(ratio)).astype(int) + 1
    m_max = int(n_terms.max()) if n_prob else 1
    if max_terms is not None:
        m_max = min(m_max, int(max_terms))
    offsets = scale[:, None] * first * ratio ** np.arange(m_max)[None, :]  # (P, M)
    good = np.isfinite(cuts)
    c = np.where(good, cuts, lo[:, None])
    pts = np.concatenate(
        [
            lo[:, None],
            hi[:, None],
            c,
            (c[:, :, None] - offsets[:, None, :]).reshape(n_prob, -1),
            (c[:, :, None] + offsets[:, None, :]).reshape(n_prob, -1),
        ],
        axis=1,
    )
    pts = np.clip(pts, lo[:, None], hi[:, None])
    pts.sort(axis=1)
    a = pts[:, :-1]
    b = pts[:, 1:]
    keep = b > a
    pid = np.broadcast_to(np.arange(n_prob)[:, None], a.shape)
    return a[keep], b[keep], pid[keep]


#: Nodes per call of the integrand: the integrands hold several arrays of (nodes x atoms) or
#: (outputs x nodes) at once, so a batch of every level's intervals (2e5 intervals x 21 nodes for a
#: 16-atom mixture on a figure's grid) peaked at 5.5 GB; blocks of 2^17 nodes keep it to ~100s of MB.
_EVAL_BLOCK_POINTS = 1 << 17


def _eval(f, a, b, pid):
    """Kronrod and Gauss estimates on intervals [a, b] (vectorised, in blocks of intervals)."""
    per = max(1, _EVAL_BLOCK_POINTS // 21)
    if a.shape[0] > per:
        parts = [_eval(f, a[i:i + per], b[i:i + per], pid[i:i + per]) for i in range(0, a.shape[0], per)]
        return np.concatenate([p[0] for p in parts], axis=1), np.concatenate([p[1] for p in parts], axis=1)
    half = 0.5 * (b - a)
    mid = 0.5 * (b + a)
    x = mid[:, None] + half[:, None] * GK21_NODES[None, :]
    vals = as_float_array(f(x.ravel(), np.repeat(pid, 21)), "the values of f")  # complex refused, not cut
    vals = vals.reshape(vals.shape[0], a.shape[0], 21)
    k = half * (vals @ GK21_WEIGHTS)
    g = half * (vals @ G10_WEIGHTS)
    return k, np.abs(k - g)


def adaptive_gauss_kronrod(f, a, b, pid, n_problems, *, n_out=1, rtol=1e-11, atol=0.0,
                           max_rounds=60, max_intervals=4_000_000, warn=True, active=None):
    r"""Global adaptive G10/K21 quadrature of a batch of problems.

    Problem ``p`` is :math:`\int f(x, p)\,dx` over the union of the intervals
    ``[a[i], b[i]]`` with ``pid[i] == p``.  ``f(x, pid)`` takes flat arrays of
    points and their problem indices and returns ``(n_out, n_points)`` values
    (all integrands share the nodes); ``active`` (bool, ``(n_out, n_problems)``)
    restricts the tolerance test to the outputs that matter for each problem.  Each round evaluates only new intervals
    and, for every problem whose summed error exceeds
    :math:`\max(\mathrm{rtol}\,|I_p|, \mathrm{atol})` in some output, bisects its
    intervals whose error exceeds that tolerance divided by the problem's
    interval count (this always splits at least the worst one).

    .. math:: I_p = \sum_{i:\,\mathrm{pid}_i = p} \frac{b_i - a_i}{2}
              \sum_{j=1}^{21} w^{K}_j\, f\Big(\frac{a_i + b_i}{2} + \frac{b_i - a_i}{2} x_j,\ p\Big),
              \qquad \mathrm{err}_p = \sum_i \big|K_{21}(i) - G_{10}(i)\big| .

    Parameters
    ----------
    f : callable
        ``f(x, pid) -> array of shape (n_out, len(x))``: integrands at flat points ``x``
        of the problems ``pid`` (float64 and intp arrays of equal length).  It must
        return a 2-D array even when ``n_out == 1``.
    a, b : array_like, shape (n_intervals,)
        Initial interval ends, ``a < b`` (e.g. from :func:`graded_breakpoints`).
    pid : array_like of int, shape (n_intervals,)
        Problem index of each interval, in ``range(n_problems)``.
    n_problems : int
        Number of problems.
    n_out : int, default 1
        Number of integrands sharing the nodes.
    rtol, atol : float, default 1e-11, 0.0
        Per-problem, per-output tolerance :math:`\max(\mathrm{rtol}\,|I_p|, \mathrm{atol})`
        on the summed error estimate.
    max_rounds : int, default 60
        Refinement rounds before giving up.
    max_intervals : int, default 4_000_000
        Interval budget over all problems before giving up.
    warn : bool, default True
        Emit a ``ConvergenceWarning`` when a problem misses its tolerance.
    active : array_like of bool, shape (n_out, n_problems), optional
        Outputs whose tolerance counts for each problem (default: all).

    Returns
    -------
    QuadratureResult
        ``value`` and ``abs_error`` of shape ``(n_out, n_problems)``, ``success``,
        the counters ``nit`` (rounds), ``nfev`` (points) and ``n_intervals``.
        Unconverged problems (round or interval budget exhausted, or intervals
        that can no longer be halved in float64) set ``success=False`` and emit a
        :class:`~noisealloc.theory.errors.ConvergenceWarning` when ``warn``.

    References
    ----------
    Piessens et al. (1983), QUADPACK (the ``qk21`` rule); docs/THEORY.md section 3.1.

    Examples
    --------
    Two problems in one call, :math:`\int_0^1 e^x dx = e - 1` and :math:`\int_0^\pi \sin x\, dx = 2`:

    >>> f = lambda x, p: np.where(p == 0, np.exp(x), np.sin(x))[None, :]
    >>> res = adaptive_gauss_kronrod(f, [0.0, 0.0], [1.0, np.pi], [0, 1], 2)
    >>> res.value.round(12).tolist(), res.success
    ([[1.718281828459, 2.0]], True)

    A layer of width 1e-4 at 0 (mass 1): the graded mesh resolves it in fewer points
    than bisection from the plain interval would need.

    >>> d = 1e-4
    >>> g = lambda x, p: (np.exp(-np.abs(x) / d) / (2 * d))[None, :]
    >>> a, b, pid = graded_breakpoints([[0.0]], [-1.0], [1.0], [d])
    >>> res = adaptive_gauss_kronrod(g, a, b, pid, 1)
    >>> round(float(res.value[0, 0]), 10), res.nfev < adaptive_gauss_kronrod(g, [-1.0], [1.0], [0], 1).nfev
    (1.0, True)
    """
    # checked at the boundary (issue 28): a=[] raised an IndexError, complex ends were cut to their real part
    a = check_finite(as_float_array(a, "a", ndim=1), "a")
    b = check_finite(as_float_array(b, "b", ndim=1), "b")
    pid_arr = np.asarray(pid)
    if a.size == 0 or b.shape != a.shape or pid_arr.shape != a.shape:
        raise ValueError(f"a, b and pid must be 1-d of equal length >= 1 (one entry per interval); got shapes "
                         f"{a.shape}, {b.shape}, {pid_arr.shape}")
    if pid_arr.dtype.kind not in "iu":
        raise ValueError(f"pid must hold integers; got dtype {pid_arr.dtype}")
    if isinstance(n_problems, bool) or not isinstance(n_problems, (int, np.integer)) or n_problems < 1:
        raise ValueError(f"n_problems must be an integer >= 1; got {n_problems!r}")
    rtol, atol = as_float_scalar(rtol, "rtol"), as_float_scalar(atol, "atol")
    if pid_arr.min() < 0 or pid_arr.max() >= n_problems:
        raise ValueError(f"pid must lie in [0, n_problems - 1] = [0, {n_problems - 1}]; got [{pid_arr.min()}, "
                         f"{pid_arr.max()}]")
    pid = pid_arr.astype(np.intp)
    k, e = _eval(f, a, b, pid)
    nfev = a.size * 21
    nit = 0
    success = True
    while True:
        tot = np.zeros((n_out, n_problems))
        err = np.zeros((n_out, n_problems))
        for o in range(n_out):
            tot[o] = np.bincount(pid, weights=k[o], minlength=n_problems)
            err[o] = np.bincount(pid, weights=e[o], minlength=n_problems)
        tol = np.maximum(rtol * np.abs(tot), atol)
        if active is not None:
            tol = np.where(active, tol, np.inf)
        bad = np.any(err > tol, axis=0)
        if not np.any(bad):
            break
        if nit >= max_rounds or a.size > max_intervals:
            success = False
            break
        count = np.bincount(pid, minlength=n_problems)
        share = tol / np.maximum(count, 1)[None, :]
        split = bad[pid] & np.any(e > share[:, pid], axis=0)
        # Intervals too short to halve in float64 cannot be refined further.
        mid = 0.5 * (a + b)
        splittable = (mid > a) & (mid < b)
        if not np.any(split & splittable):
            success = False
            break
        split &= splittable
        nit += 1
        sa, sb, sp = a[split], b[split], pid[split]
        sm = 0.5 * (sa + sb)
        na = np.concatenate([sa, sm])
        nb = np.concatenate([sm, sb])
        npid = np.concatenate([sp, sp])
        nk, ne = _eval(f, na, nb, npid)
        nfev += na.size * 21
        keep = ~split
        a = np.concatenate([a[keep], na])
        b = np.concatenate([b[keep], nb])
        pid = np.concatenate([pid[keep], npid])
        k = np.concatenate([k[:, keep], nk], axis=1)
        e = np.concatenate([e[:, keep], ne], axis=1)
    if not success and warn:
        warnings.warn(
            f"adaptive Gauss-Kronrod stopped after {nit} rounds with {a.size} intervals before meeting "
            f"rtol={rtol:g}, atol={atol:g} in {int(np.sum(bad))} of {n_problems} problems",
            ConvergenceWarning,
            stacklevel=2,
        )
    return QuadratureResult(value=tot, abs_error=err, success=bool(success), nit=nit,
                            n_intervals=int(a.size), nfev=int(nfev))
