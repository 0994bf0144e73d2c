r"""The multiplicative algorithm for convex design criteria.

.. math::  p_i \leftarrow \frac{p_i\, (-g_i)^{\rho}}{\sum_j p_j (-g_j)^{\rho}},

with :math:`-g_i = \operatorname{tr}(M^{-1} W M^{-1} A_i)` for 'L'/'A'/'c' and
:math:`\operatorname{tr}(M^{-1} A_i)` for 'D'.  The exponent is :math:`\rho = 1` for
D-optimality (Titterington 1976; Silvey, Titterington & Torsney 1978) and
:math:`\rho = 1/2` for the linear criteria, for which Yu (2010) proves monotone
convergence.  A monotonicity safeguard halves :math:`\rho` whenever a step would
increase :math:`\Phi` (used for the smoothed E criterion, where no theorem applies).
Each iteration is one GEMV over all candidates.  Weights never become exactly zero,
so the method is used to locate the support quickly; the Newton polish finishes.

References
----------
.. [1] Y. Yu, "Monotonic convergence of a general algorithm for computing optimal
   designs", Ann. Statist. 38(3), 2010.
.. [2] S. D. Silvey, D. M. Titterington, B. Torsney, "An algorithm for optimal designs
   on a finite design space", Comm. Statist. A 7, 1978.
"""

from __future__ import annotations

import numpy as np

from noisealloc.solvers.problem import Problem, evaluate, gradient, new_counters, scale

__all__ = ["run"]


def run(prob: Problem, p, *, tol: float, max_iter: int, mu: float = 0.0, counters=None):
    """Multiplicative iterations from ``p`` (convex criteria).

    Parameters
    ----------
    prob : Problem
        A convex problem.
    p : array_like, shape (n,)
        Starting allocation.
    tol : float
        Stop when the gap is at most ``tol * scale``.
    max_iter : int
        Iteration limit.
    mu : float
        Smoothing of 'E'.
    counters : dict, optional
        ``nit``/``njev``/``nfev`` counters, updated in place.

    Returns
    -------
    p : ndarray, shape (n,)
        The final allocation.
    status : int
        Key of :data:`~noisealloc.solvers.result.STATUS_MESSAGES`: 0 gap met, 1 iteration
        limit, 2 stalled.
    """
    if not prob.convex:
        raise ValueError("the multiplicative algorithm needs a convex criterion")
    if counters is None:
        counters = new_counters()
    rho = 1.0 if prob.criterion == "D" else 0.5
    p = np.array(p, dtype=float)
    ev = evaluate(prob, p, mu=mu)
    for it in range(max_iter + 1):
        g = gradient(prob, ev)
        counters["njev"] += 1
        gbar = float(p @ g)
        gap = gbar - float(g.min())
        if gap <= tol * scale(prob, ev):
            return p, 0
        if it == max_iter:
            return p, 1
        # -g_i >= 0 up to rounding for every convex criterion here.
        s = np.maximum(-g, 0.0)
        r = rho
        while True:
            q = p * s**r
            q /= q.sum()
            ev_new = evaluate(prob, q, mu=mu)
            counters["nfev"] += 1
            if ev_new.value <= ev.value or r < 1e-3:
                break
            r *= 0.5
        counters["nit"] += 1
        if not ev_new.value < ev.value and np.array_equal(q, p):
            return p, 2
        p, ev = q, ev_new
    return p, 1
