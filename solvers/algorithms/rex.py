r"""Randomised exchange in the spirit of REX (Harman, Filová & Richtárik 2019).

Each iteration computes the full gradient once (one GEMV), forms the exchange set

.. math::  L = S \cup K_{\text{steep}} \cup K_{\text{rand}},

with :math:`S` the support, :math:`K_{\text{steep}}` the :math:`\gamma m` candidates with
the smallest :math:`g_i` and :math:`K_{\text{rand}}` :math:`\gamma m` candidates drawn
uniformly with ``rng``, and then visits :math:`L` in a random order; each visited
``l`` is exchanged with the current worst support point
:math:`j = \arg\max_{i \in S} g_i` along :math:`e_l - e_j` with the exact optimal step
(:func:`noisealloc.solvers.algorithms.frank_wolfe.line_search`; an exchange may move weight in
either direction, down to exact zeros).  Between exchanges only the gradients on
:math:`L` are refreshed (``|L| m^2`` work), so the cost per iteration is dominated by
one GEMV over all ``n`` candidates, as in REX.  Differences from the published
algorithm: the partner of each exchange is the worst support point rather than a
random pair, and the criterion-specific closed-form steps are replaced by the exact
one-dimensional line search (any criterion, any rank of ``A_i``).

References
----------
.. [1] R. Harman, L. Filová, P. Richtárik, "A randomized exchange algorithm for
   computing optimal approximate designs of experiments", J. Amer. Statist. Assoc.
   115(529), 2020 (arXiv 1801.05661, 2018).
"""

from __future__ import annotations

import numpy as np

from noisealloc.solvers.problem import Problem, evaluate, gradient, new_counters, scale
from noisealloc.solvers.algorithms.frank_wolfe import line_search
from noisealloc.theory.errors import as_generator

__all__ = ["run"]


def run(prob: Problem, p, *, tol: float, max_iter: int, rng=None, gamma: int = 4, counters=None):
    """REX-style randomised exchange iterations from ``p`` ('L', 'A', 'c', 'D').

    Parameters
    ----------
    prob : Problem
    p : array_like, shape (n,)
        Starting allocation.
    tol : float
        Stop when the gap is at most ``tol * scale``.
    max_iter : int
        Iteration limit.
    rng : numpy.random.Generator or int or None
        Randomness of the exchange sets and visiting order.
    gamma : int
        ``gamma * m`` steepest and ``gamma * m`` random candidates join the exchange set.
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
    if prob.criterion not in ("L", "A", "c", "D"):
        raise ValueError(f"rex supports criteria 'L', 'A', 'c', 'D'; got {prob.criterion!r}")
    rng = as_generator(rng)
    if counters is None:
        counters = new_counters()
    n, m = prob.n, prob.m
    p = np.array(p, dtype=float)
    k = min(n, gamma * m)
    for it in range(max_iter + 1):
        ev = evaluate(prob, p)
        g = gradient(prob, ev)
        counters["njev"] += 1
        gbar = float(p @ g)
        gap = gbar - float(g.min())
        if gap <= tol * scale(prob, ev):
            return p, 0
        if it == max_iter:
            return p, 1
        steep = np.argpartition(g, k - 1)[:k] if k < n else np.arange(n)
        rand = rng.choice(n, size=k, replace=False)
        L = np.union1d(np.union1d(np.flatnonzero(p > 0), steep), rand)
        L = rng.permutation(L)
        moved = False
        for l in L:
            gL = gradient(prob, ev, L)
            onS = p[L] > 0
            if not onS.any():
                break
            jj = np.flatnonzero(onS)[np.argmax(gL[onS])]
            j = int(L[jj])
            gl = float(gL[np.flatnonzero(L == l)[0]])
            if l == j or gl >= gL[jj]:
                continue
            DM = prob.A[l] - prob.A[j]
            t, v = line_search(prob, ev.M, None, DM, None, p[j], phi0=ev.value, counters=counters)
            if t <= 0:
                continue
            p[l] += t
            if t >= p[j]:
                p[j] = 0.0
            else:
                p[j] -= t
            ev = evaluate(prob, p)
            moved = True
        counters["nit"] += 1
        if not moved:
            return p, 2
    return p, 1
