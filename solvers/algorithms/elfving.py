r"""c-optimal allocations from Elfving's dual: a log-barrier method in the ``m`` parameters, then the support.

c-optimality minimises :math:`\Phi(p) = c^\top M(p)^{-1} c` with :math:`M(p) = \sum_i p_i B_i`,
:math:`B_i = A_i + \delta I` (the ridge :math:`\delta` of the problem, usually 0).  Its dual is a problem in
:math:`y \in \mathbb R^m` with one quadratic constraint per candidate (Elfving 1952; Pukelsheim 2006,
ch. 2.14, for matrices of any rank):

.. math::  \Phi^* = \min_{p \in \Delta} c^\top M(p)^{-1} c = \Big(\max_y\ c^\top y \ \ \text{s.t.}\ \
           y^\top B_i y \le 1 \ \forall i\Big)^2 .

Weak duality is Cauchy--Schwarz: for a feasible ``y`` and any ``p``,
:math:`(c^\top y)^2 \le (c^\top M^{-1} c)(y^\top M y) \le c^\top M^{-1} c`.  The log barrier

.. math::  f_\mu(y) = -c^\top y - \mu \sum_i \log s_i, \qquad s_i = 1 - y^\top B_i y,

is minimised by Newton's method (gradient :math:`-c + 2\mu \sum_i B_i y / s_i`, Hessian
:math:`2\mu \sum_i B_i / s_i + 4\mu \sum_i (B_i y)(B_i y)^\top / s_i^2`, both one pass over the stack) for
decreasing :math:`\mu`.  At the centre, :math:`c = M(w) y` with :math:`w_i = 2\mu / s_i`, so
:math:`p = w / \sum w` has :math:`c^\top M(p)^{-1} c = \sum_i w_i \, c^\top y` and
:math:`c^\top y = \sum_i w_i - 2 n \mu`: the relative gap of the pair is :math:`2 n \mu / c^\top y`.  Each
Newton step costs :math:`O(n m^2)` however near-tied the candidates are; the primal methods
(multiplicative, Newton on the face) instead move an optimal atom one sensitivity peak per round when
neighbouring candidates are nearly equal (the near-tied benchmark: 16 polish rounds), because the
c-criterion's face Hessian :math:`2 (B_j K c)^\top K (B_k K c)` has rank at most ``m``.

The barrier weights :math:`2\mu/s_i` are dense.  The support is read from the dual instead: the
candidates whose constraint is active to ``ELFVING_ACTIVE_RTOL`` (at most ``max(4 m, 32)``, the most
active), and the weights solve :math:`c = \sum_i w_i B_i y`, :math:`w \ge 0` (non-negative least squares,
``m`` equations), the optimality condition of the pair.  The result is a start for the Newton polish
(:mod:`~noisealloc.solvers.algorithms.polish`), which certifies it; it is None when the recovered weights
leave :math:`M(p)` singular or do not reproduce ``c``, and the driver then uses the multiplicative start.

References
----------
.. [1] G. Elfving, "Optimum allocation in linear regression theory", Ann. Math. Statist. 23(2), 1952.
.. [2] F. Pukelsheim, "Optimal Design of Experiments", SIAM Classics, 2006, sec. 2.14 (Elfving's theorem).
.. [3] G. Sagnol, "Computing optimal designs of multiresponse experiments reduces to second-order cone
   programming", J. Statist. Plann. Inference 141(5), 2011.
.. [4] S. Boyd, L. Vandenberghe, "Convex Optimization", Cambridge UP, 2004, sec. 11.3 (barrier method).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls

from noisealloc.solvers.problem import Problem, SingularMomentError, evaluate, new_counters
from noisealloc.theory.tolerances import ELFVING_ACTIVE_RTOL, ELFVING_RTOL

__all__ = ["dual_barrier", "run"]

#: mu shrinks by this factor per stage: each stage then needs a few Newton steps from the last centre.
_MU_FACTOR = 0.1
#: Centring per stage: Newton decrement of f_mu / mu.  Loose on the way, tight on the last stage, whose
#: centre gives the gap 2 n mu / c^T y.
_DEC_PATH, _DEC_FINAL = 1e-2, 1e-8
_MAX_NEWTON = 400


def _stack(prob: Problem) -> np.ndarray:
    r""":math:`B_i = A_i + \delta I` (``prob.A`` itself without a ridge)."""
    return prob.A + prob.regularization * np.eye(prob.m) if prob.regularization else prob.A


def dual_barrier(prob: Problem, *, rtol: float = ELFVING_RTOL, counters=None):
    r"""Follow the central path of :math:`\max c^\top y` s.t. :math:`y^\top B_i y \le 1` to relative gap ``rtol``.

    Parameters
    ----------
    prob : Problem
        A 'c' problem (``prob.c``, ``prob.A``, ``prob.regularization`` in the solver's coordinates).
    rtol : float
        Stop at the first centre with :math:`2 n \mu / c^\top y \le` ``rtol``.
    counters : dict, optional
        ``nit`` (Newton steps) and ``njev`` (passes over the stack), updated in place.

    Returns
    -------
    y : ndarray, shape (m,)
        Strictly feasible dual point.
    mu : float
        The last barrier parameter.
    gap : float
        :math:`2 n \mu / c^\top y` (relative gap of the central pair; exact only at the exact centre).
    converged : bool
        The gap met ``rtol`` within ``_MAX_NEWTON`` Newton steps.
    """
    if counters is None:
        counters = new_counters()
    n, m = prob.n, prob.m
    B = _stack(prob)
    Bf = B.reshape(n * m, m)
    Bw = B.reshape(n, m * m)
    c = np.asarray(prob.c, dtype=float)
    Mbar = B.mean(axis=0)
    u = np.linalg.solve(0.5 * (Mbar + Mbar.T), c)
    kappa = float(np.max(((Bf @ u).reshape(n, m)) @ u))
    # the first Newton step from y = 0 is M_bar^-1 c / (2 mu n): this mu puts it at s_i >= 3/4
    mu = max(np.sqrt(max(kappa, 0.0)) / n, np.finfo(float).tiny)
    y = np.zeros(m)
    steps, gap = 0, np.inf
    while steps < _MAX_NEWTON:
        final = False
        for _ in range(50):
            V = (Bf @ y).reshape(n, m)
            s = 1.0 - V @ y
            r = 1.0 / s
            g = -c + 2.0 * mu * (V.T @ r)
            H = 2.0 * mu * (r @ Bw).reshape(m, m) + 4.0 * mu * (V.T * (r * r)) @ V
            H = 0.5 * (H + H.T)
            try:
                d = -np.linalg.solve(H, g)
            except np.linalg.LinAlgError:
                return y, mu, gap, False
            dec = float(-g @ d)
            steps += 1
            counters["nit"] += 1
            counters["njev"] += 1
            cy = float(c @ y)
            gap = 2.0 * n * mu / cy if cy > 0 else np.inf
            final = gap <= rtol
            if not (dec >= 0) or dec <= (_DEC_FINAL if final else _DEC_PATH) * mu:
                break
            # largest step keeping every s_i > 0: s_i(t) = s_i - a_i t - b_i t^2, then backtracking (Armijo)
            Vd = (Bf @ d).reshape(n, m)
            a, b = 2.0 * (V @ d), Vd @ d
            f0 = -cy - mu * float(np.sum(np.log(s)))
            t = 1.0
            while t > 1e-14:
                st = s - t * (a + t * b)
                if np.all(st > 0):
                    if -(cy + t * float(c @ d)) - mu * float(np.sum(np.log(st))) <= f0 - 0.25 * t * dec:
                        break
                t *= 0.5
            if t <= 1e-14:
                break
            y = y + t * d
        if final:
            return y, mu, gap, True
        mu *= _MU_FACTOR
    return y, mu, gap, False


def run(prob: Problem, *, counters=None):
    r"""A start for the 'c' polish from Elfving's dual, or None (then the driver's multiplicative start is used).

    Parameters
    ----------
    prob : Problem
        A 'c' problem.
    counters : dict, optional
        ``nit``/``njev``/``nfev`` counters, updated in place.

    Returns
    -------
    p : ndarray, shape (n,) or None
        Weights on the active candidates of the dual (see the module docstring), with :math:`M(p)` positive
        definite; None when the path did not converge, the non-negative solve leaves a residual above
        ``ELFVING_ACTIVE_RTOL`` of :math:`\|c\|`, or :math:`M(p)` is singular.
    """
    if counters is None:
        counters = new_counters()
    if prob.criterion != "c" or prob.c is None:
        raise ValueError(f"the Elfving dual is for criterion 'c'; got {prob.criterion!r}")
    y, _mu, _gap, ok = dual_barrier(prob, counters=counters)
    if not ok:
        return None
    n, m = prob.n, prob.m
    V = (_stack(prob).reshape(n * m, m) @ y).reshape(n, m)
    act = V @ y  # y^T B_i y: 1 on the active constraints
    cand = np.flatnonzero(act >= 1.0 - ELFVING_ACTIVE_RTOL)
    cap = max(4 * m, 32)
    if cand.size > cap:
        cand = cand[np.argsort(-act[cand])[:cap]]
    if cand.size == 0:
        return None
    c = np.asarray(prob.c, dtype=float)
    w, res = nnls(V[cand].T, c)
    if not (np.isfinite(res) and res <= ELFVING_ACTIVE_RTOL * float(np.linalg.norm(c))) or not w.sum() > 0:
        return None
    p = np.zeros(n)
    p[cand] = w / w.sum()
    counters["nfev"] += 1
    try:
        evaluate(prob, p)
    except SingularMomentError:
        return None
    return p
