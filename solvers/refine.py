r"""Off-grid refinement: move atoms continuously and re-optimise their weights.

Starting from a grid solution (atoms :math:`\lambda_j` with weights :math:`w_j`), each
sweep

1. moves every atom in turn to the minimiser of :math:`\Phi` over its position in the
   interval between its neighbouring grid nodes (bounded Brent, weights fixed), using
   the callable ``A_fn(lam)`` (and ``G_fn`` for the sandwich);
2. re-optimises the weights on the moved atoms by projected Newton
   (:func:`noisealloc.solvers.algorithms.polish.newton_on_support`) on the small problem whose
   candidates are the atoms themselves.

Sweeps stop when the value decreases by less than ``rtol * |value|``.  The value never
increases (each move and the weight update are accepted only if they do not).  The
result is certified off the grid with :func:`noisealloc.solvers.certificates.offgrid_check`
by the caller if wanted (the refined atoms are not on the original grid).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import optimize

from noisealloc.solvers.algorithms.polish import newton_on_support
from noisealloc.solvers.problem import criterion_value, make_problem
from noisealloc.solvers.result import STATUS_MESSAGES, RefineResult
from noisealloc.theory.errors import ConvergenceWarning, as_float_array, check_finite

__all__ = ["refine"]


def refine(
    A_fn,
    lam,
    weights,
    criterion: str = "L",
    *,
    interval,
    G_fn=None,
    W=None,
    A_eval=None,
    c=None,
    max_sweeps: int = 50,
    rtol: float = 1e-12,
    window: float | None = None,
) -> RefineResult:
    r"""Refine atom positions off the grid.

    Parameters
    ----------
    A_fn : callable
        ``lam -> A(lam)``, shape (m, m).
    lam, weights : array_like, shape (k,)
        Starting atoms (e.g. ``res.lam`` and ``res.weights[res.support]``).
    criterion, W, A_eval, c
        As in :func:`noisealloc.solvers.solve`.
    interval : tuple of float
        ``(lam_lo, lam_hi)``: atoms stay inside.
    G_fn : callable, optional
        ``lam -> G(lam)`` (sandwich).
    max_sweeps : int
        Sweep limit (at least 1).
    rtol : float
        Stop when a sweep lowers the value by at most ``rtol * |value|``.
    window : float, optional
        Half-width of each atom's search interval (default: half the smallest distance
        between starting atoms, at least 1e-3 of the interval).

    Returns
    -------
    RefineResult
        ``status`` 0 when the value change per sweep fell below ``rtol``, 1 at the sweep limit.

    Warns
    -----
    ConvergenceWarning
        At the sweep limit (``status`` 1).
    """
    if not (isinstance(max_sweeps, (int, np.integer)) and max_sweeps >= 1):
        raise ValueError(f"max_sweeps must be an integer >= 1; got {max_sweeps!r}")
    lam = np.array(as_float_array(lam, "lam"), dtype=float).ravel()
    w = np.array(as_float_array(weights, "weights"), dtype=float).ravel()
    if lam.size == 0 or lam.shape != w.shape:
        raise ValueError(f"lam and weights must be non-empty with equal shapes; got {lam.shape} and {w.shape}")
    check_finite(lam, "lam")
    check_finite(w, "weights")
    if np.any(w < 0) or not w.sum() > 0:
        raise ValueError("weights must be non-negative with a positive sum")
    w = w / w.sum()
    try:
        lo, hi = (float(v) for v in interval)
    except (TypeError, ValueError):
        raise ValueError(f"interval must be a pair (lo, hi) of finite numbers; got {interval!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"interval must be a pair (lo, hi) of finite numbers; got {interval!r}")
    if not lo < hi or np.any(lam < lo) or np.any(lam > hi):
        raise ValueError(f"interval must contain every atom; got ({lo}, {hi}) and atoms in [{lam.min()}, {lam.max()}]")
    n_eval = [0]
    ref = W if W is not None else A_eval
    m_expected = None if ref is None else np.shape(ref)[0] if np.ndim(ref) == 2 else None
    if m_expected is None and c is not None:
        m_expected = np.size(c)

    def call(fn, name, t):
        out = np.asarray(fn(t))
        shape_ok = out.ndim == 2 and out.shape[0] == out.shape[1] and out.shape[0] > 0
        if not shape_ok or (m_expected is not None and out.shape[0] != m_expected):
            want = "(m, m)" if m_expected is None else f"({m_expected}, {m_expected})"
            raise ValueError(f"{name}({t!r}) must return a square matrix of shape {want}; got shape {out.shape}")
        if np.iscomplexobj(out):
            raise ValueError(f"{name}({t!r}) must return a real matrix; got a complex one")
        return out.astype(float)

    first = call(A_fn, "A_fn", float(lam[0]))
    if m_expected is None:
        m_expected = first.shape[0]

    def mats(x):
        n_eval[0] += x.size
        A = np.stack([call(A_fn, "A_fn", float(t)) for t in x])
        G = None if G_fn is None else np.stack([call(G_fn, "G_fn", float(t)) for t in x])
        return A, G

    def value(x, wts):
        A, G = mats(x)
        prob = make_problem(A, criterion, W=W, A_eval=A_eval, c=c, G=G)
        return criterion_value(prob, wts), prob

    if window is None:
        gaps = np.diff(np.sort(lam))
        window = max(0.5 * gaps.min() if gaps.size else (hi - lo), 1e-3 * (hi - lo))
    v0, _ = value(lam, w)
    v = v0
    converged = False
    sweeps = 0
    for sweeps in range(1, max_sweeps + 1):
        v_start = v
        for j in range(lam.size):
            a, b = max(lo, lam[j] - window), min(hi, lam[j] + window)

            def f(t, j=j):
                x = lam.copy()
                x[j] = t
                return value(x, w)[0]

            r = optimize.minimize_scalar(f, bounds=(a, b), method="bounded", options={"xatol": 1e-10 * (hi - lo)})
            if r.fun < v:
                lam[j], v = r.x, r.fun
        _, prob = value(lam, w)
        w_new, _, _ = newton_on_support(prob, w, np.arange(lam.size), target=0.0, max_steps=30)
        v_new = criterion_value(prob, w_new)
        if v_new <= v:
            w, v = w_new, v_new
        if v_start - v <= rtol * abs(v):
            converged = True
            break
    order = np.argsort(lam)
    keep = w[order] > 0
    status = 0 if converged else 1
    if converged:
        message = f"converged: value change per sweep below rtol = {rtol:g} after {sweeps} sweeps"
    else:
        message = (f"{STATUS_MESSAGES[1]}: sweep limit max_sweeps = {max_sweeps} reached with the value still "
                   f"changing by more than rtol = {rtol:g} per sweep")
        warnings.warn(f"refine: {message}", ConvergenceWarning, stacklevel=2)
    return RefineResult(
        lam=lam[order][keep],
        weights=w[order][keep],
        value=float(v),
        value_grid=float(v0),
        success=converged,
        status=status,
        message=message,
        nit=sweeps,
        nfev=n_eval[0],
    )
