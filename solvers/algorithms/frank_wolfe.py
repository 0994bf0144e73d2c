r"""Frank-Wolfe with away and pairwise (vertex-exchange) steps on the probability simplex.

At allocation ``p`` with gradient :math:`g = \nabla\Phi(p)` (one GEMV over all
candidates), the toward vertex is :math:`s = \arg\min_i g_i` and the away vertex
:math:`a = \arg\max_{i \in S} g_i` on the support :math:`S`.

* pairwise step (vertex exchange, Böhning 1986; Lacoste-Julien & Jaggi 2015):
  :math:`p \leftarrow p + t (e_s - e_a)`, :math:`t \in [0, p_a]`;
* away-step Frank-Wolfe (Guélat & Marcotte 1986; Wolfe 1970): the better of the FW
  direction :math:`e_s - p` (:math:`t \in [0, 1]`) and the away direction
  :math:`p - e_a` (:math:`t \in [0, p_a / (1 - p_a)]`).

The step length is exact: the directional derivative
:math:`\varphi'(t) = \langle \nabla_M\Phi(M + tD), D\rangle` is bracketed on the
feasible interval and its root found by Brent's method (``scipy.optimize.brentq``);
the step is accepted only if it decreases :math:`\Phi` (safeguard for the
non-convex sandwich).  Moves only touch the moment matrices (``m x m``), so a line
search costs ``O(m^3)`` per evaluation, independent of ``n``.

The duality gap :math:`\bar g - \min_i g_i` (:math:`\bar g = \sum_j p_j g_j`) bounds
:math:`\Phi(p) - \Phi^*` for convex criteria and is the stopping rule.

References
----------
.. [1] S. Lacoste-Julien, M. Jaggi, "On the global linear convergence of Frank-Wolfe
   optimization variants", NeurIPS 2015.
.. [2] D. Böhning, "A vertex-exchange-method in D-optimal design theory", Metrika 33, 1986.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from noisealloc.solvers.problem import (
    Problem,
    SingularMomentError,
    evaluate,
    evaluate_moments,
    gradient,
    new_counters,
    scale,
)

__all__ = ["run", "line_search"]

VARIANTS = ("pairwise", "away")


def line_search(prob: Problem, M, Gp, DM, DG, t_max: float, *, mu: float = 0.0, phi0: float, counters=None):
    r"""Exact step :math:`t^* = \arg\min_{t \in [0, t_{\max}]} \Phi(M + t D_M, G_p + t D_G)`.

    The root of the directional derivative is bracketed on ``[0, t_max]`` and found by Brent's
    method; where the moment matrix becomes singular before ``t_max`` the interval is first cut
    by bisection.  A step is accepted only if it decreases :math:`\Phi` (halved up to 40 times
    otherwise: a safeguard for the non-convex sandwich).

    Parameters
    ----------
    prob : Problem
    M : ndarray, shape (m, m)
        Moment matrix at the current allocation.
    Gp : ndarray, shape (m, m) or None
        :math:`G_p` (sandwich with a separate ``G``), else None.
    DM, DG : ndarray, shape (m, m)
        Change of :math:`A_p` (and :math:`G_p`) per unit step.
    t_max : float
        Largest feasible step.
    mu : float
        Smoothing of 'E'.
    phi0 : float
        Value at ``t = 0``.
    counters : dict, optional
        ``nit``/``njev``/``nfev`` counters, updated in place (``nfev`` per evaluation).

    Returns
    -------
    t : float
        The step (0 when no decrease was found).
    value : float
        :math:`\Phi` after the step (``phi0`` when ``t = 0``).
    """

    def phi_and_slope(t):
        if counters is not None:
            counters["nfev"] += 1
        Gt = None if Gp is None else Gp + t * DG
        ev = evaluate_moments(prob, M + t * DM, Gt, mu=mu)
        slope = float(np.sum(ev.DA * DM))
        if ev.DG is not None:
            slope += float(np.sum(ev.DG * DG))
        return ev.value, slope

    try:
        v_hi, s_hi = phi_and_slope(t_max)
    except SingularMomentError:
        v_hi, s_hi = np.inf, np.inf
    if s_hi <= 0 and v_hi <= phi0:
        return t_max, v_hi

    def slope(t):
        try:
            return phi_and_slope(t)[1]
        except SingularMomentError:
            return np.inf

    if np.isfinite(s_hi):
        try:
            t = optimize.brentq(slope, 0.0, t_max, xtol=1e-15 * max(t_max, 1e-300), rtol=4 * np.finfo(float).eps, maxiter=200)
        except ValueError:
            t = 0.5 * t_max
    else:
        # The moment matrix becomes singular before t_max: bisect on a finite sub-interval.
        lo, hi = 0.0, t_max
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if np.isfinite(slope(mid)):
                lo = mid
            else:
                hi = mid
        try:
            t = optimize.brentq(slope, 0.0, lo, xtol=1e-15 * max(lo, 1e-300), maxiter=200) if slope(lo) > 0 else lo
        except ValueError:
            t = 0.5 * lo
    try:
        v = phi_and_slope(t)[0]
    except SingularMomentError:
        v = np.inf
    # Safeguard (non-convex sandwich): halve until the value decreases.
    k = 0
    while not v < phi0 and k < 40:
        t *= 0.5
        try:
            v = phi_and_slope(t)[0]
        except SingularMomentError:
            v = np.inf
        k += 1
    if not v < phi0:
        return 0.0, phi0
    return t, v


def run(prob: Problem, p, *, tol: float, max_iter: int, mu: float = 0.0, variant: str = "pairwise", counters=None):
    r"""Frank-Wolfe iterations (pairwise or away steps) from ``p``.

    Parameters
    ----------
    prob : Problem
    p : array_like, shape (n,)
        Starting allocation (positive definite moment matrix).
    tol : float
        Stop when the gap :math:`\bar g - \min_i g_i` is at most ``tol * scale``.
    max_iter : int
        Iteration limit.
    mu : float
        Smoothing of 'E'.
    variant : {'pairwise', 'away'}
    counters : dict, optional
        ``nit``/``njev``/``nfev`` counters, updated in place.

    Returns
    -------
    p : ndarray, shape (n,)
        The final allocation.
    status : int
        Key of :data:`~noisealloc.solvers.result.STATUS_MESSAGES`: 0 gap met, 1 iteration
        limit, 2 stalled (no decreasing step, or a step made the moment matrix singular).
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}; got {variant!r}")
    if counters is None:
        counters = new_counters()
    p = np.array(p, dtype=float)
    p_prev = p
    for it in range(max_iter + 1):
        try:
            ev = evaluate(prob, p, mu=mu)
        except SingularMomentError:
            # a drop step made M(p) singular in rounding: keep the last regular iterate
            return p_prev, 2
        p_prev = p.copy()
        g = gradient(prob, ev)
        counters["njev"] += 1
        gbar = float(p @ g)
        s = int(np.argmin(g))
        gap = gbar - g[s]
        if gap <= tol * scale(prob, ev):
            return p, 0
        if it == max_iter:
            return p, 1
        S = np.flatnonzero(p > 0)
        a = int(S[np.argmax(g[S])])
        Gp = ev.Gp if prob.G is not None else None
        direction = np.zeros_like(p)
        drop_a = False
        if variant == "pairwise":
            direction[s] += 1.0
            direction[a] -= 1.0
            t_max = p[a]
            drop_a = a != s
        elif gbar - g[s] >= g[a] - gbar:  # FW direction e_s - p
            direction -= p
            direction[s] += 1.0
            t_max = 1.0
        else:  # away direction p - e_a
            direction += p
            direction[a] -= 1.0
            t_max = p[a] / (1.0 - p[a]) if p[a] < 1.0 else 1e6
            drop_a = True
        idx = np.flatnonzero(direction)
        DM = (direction[idx] @ prob.Aflat[idx]).reshape(prob.m, prob.m)
        DG = None if Gp is None else (direction[idx] @ prob.Gflat[idx]).reshape(prob.m, prob.m)
        DM = 0.5 * (DM + DM.T)
        M, _G = ev.M, ev.Gp
        t, _v = line_search(prob, M, Gp, DM, DG, t_max, mu=mu, phi0=ev.value, counters=counters)
        counters["nit"] += 1
        if t == 0.0:
            return p, 2
        p = p + t * direction
        if t == t_max and drop_a:
            p[a] = 0.0  # exact drop step
        p[p < 0] = 0.0
        p /= p.sum()
    return p, 1
