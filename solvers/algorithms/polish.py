r"""Projected Newton on the active support, with column generation over all candidates.

Given an allocation, keep a working set :math:`S` of candidates (the support plus
candidates whose gradient violates the equivalence theorem) and repeat:

1. **Newton on the face.** With :math:`g_S` and the Hessian
   :math:`H_{jk} = \partial^2\Phi/\partial p_j\partial p_k` on :math:`S`
   (see :func:`noisealloc.solvers.problem.hessian`), take
   :math:`d = -Z (Z^\top H Z)_+^{-1} Z^\top g_S` with :math:`Z` an orthonormal basis of
   :math:`\{d : \mathbf 1^\top d = 0\}` and :math:`(\cdot)_+` the eigenvalue-modified
   reduced Hessian (eigenvalues floored at a small positive fraction of the largest:
   a descent direction also for the non-convex sandwich and for dependent atoms).
   Coordinates at zero that the step would make negative are fixed (active set);
   the step is cut at the boundary (ratio test, which sets an atom to exactly zero) and
   backtracked (Armijo) when it does not decrease :math:`\Phi`.
2. **Column generation.** Compute the full gradient (one GEMV); if the certified gap
   :math:`\bar g - \min_i g_i` exceeds ``tol * scale``, add the most violating
   candidates to :math:`S` and repeat.

For large problems whose levels have low rank (``m >= 16``, every :math:`A_i`, :math:`G_i` of rank
at most ``m / 4``: figure 3's spline problems, rank <= 3 at m = 96) the face Hessian is formed from
the factors :math:`A_i = U_i U_i^\top` (:func:`sandwich_hessian_lowrank`, :func:`trace_hessian_lowrank`)
in :math:`O(m^2 s r + m s^2 r^2)` instead of :math:`O(s m^3 + s^2 m^2)`; the same analytic formulas.

Near the optimum the Newton steps converge quadratically, so the certified gap
reaches 1e-8 relative in a handful of full-gradient evaluations (Wu 1978's
quasi-Newton idea for design problems, here with an exact Hessian).  If five rounds
in a row do not reduce the gap, pairwise Frank-Wolfe steps are run once before
Newton resumes (a nearly singular face Hessian can leave a bad atom its mass).

References
----------
.. [1] C.-F. Wu, "Some iterative procedures for generating nonsingular optimal designs",
   Comm. Statist. A 7, 1978.
.. [2] D. P. Bertsekas, "Projected Newton methods for optimization problems with simple
   constraints", SIAM J. Control Optim. 20, 1982.
"""

from __future__ import annotations

import numpy as np

from noisealloc.solvers.algorithms.frank_wolfe import line_search, run as _frank_wolfe_run
from noisealloc.solvers.problem import (
    Problem,
    SingularMomentError,
    evaluate,
    gradient,
    hessian,
    new_counters,
    scale,
)

__all__ = ["run", "newton_on_support", "lowrank_factors", "sandwich_hessian_lowrank", "trace_hessian_lowrank"]

#: Pairwise Frank-Wolfe iterations run once when the Newton rounds stall (see :func:`run`).
_RESCUE_ITERS = 500

#: The sandwich Hessian goes through the low-rank factors (:func:`sandwich_hessian_lowrank`) when the
#: problem has at least this many parameters and every A_i, G_i has rank <= m / _LOWRANK_RATIO: figure 3's
#: spline problems (m = 3 J, rank <= 3) at m = 96 take ~50 ms per dense Hessian, most of a J = 32 solve.
_LOWRANK_MIN_M = 16
_LOWRANK_RATIO = 4
#: Eigenvalues of A_i, G_i at or below this fraction of the largest of the stack are dropped from the
#: factors: the Hessian only chooses the Newton direction (the certificate uses exact gradients), so a
#: relative perturbation of 1e-12 in it changes nothing that is checked.
_LOWRANK_RTOL = 1e-12
#: Negative eigenvalues down to this fraction of the largest are rounding and dropped too (figure 3's
#: [-8, 8] problem after the QR preconditioning: -1.9e-9, the dense G_i have the same noise); below it
#: the stack is not PSD and the dense Hessian is used.
_LOWRANK_NEG_RTOL = 1e-6
#: id(problem) -> (weak reference, factors or None): factored once per problem, not per Newton step.
_FACTORS: dict = {}


def _stack_factors(X: np.ndarray, max_rank: int):
    """``U`` (n, m, r) with ``X_i = U_i U_i^T`` up to ``max(_LOWRANK_RTOL, _LOWRANK_NEG_RTOL)`` of the stack's
    largest eigenvalue, ``r`` the largest numerical rank; None when ``r > max_rank`` or some ``X_i`` has an
    eigenvalue below ``-_LOWRANK_NEG_RTOL`` times it (not PSD)."""
    w, V = np.linalg.eigh(0.5 * (X + np.swapaxes(X, 1, 2)))
    top = max(float(np.max(np.abs(w))), np.finfo(float).tiny)
    if np.min(w) < -_LOWRANK_NEG_RTOL * top:
        return None
    keep = w > _LOWRANK_RTOL * top
    r = int(keep.sum(axis=1).max())
    if r > max_rank:
        return None
    # eigh sorts ascending: the r largest are the last r columns; smaller ones are zeroed, not dropped,
    # so every level has the same r
    w, V = w[:, -r:], V[:, :, -r:]
    return V * np.sqrt(np.where(keep[:, -r:], w, 0.0))[:, None, :]


def lowrank_factors(prob: Problem):
    r"""Factors :math:`A_i = U_i U_i^\top` (and, for the sandwich, :math:`G_i = V_i V_i^\top`), or None.

    Computed once per problem (cached by identity) and returned only when ``m >= _LOWRANK_MIN_M`` and
    every rank is at most ``m / _LOWRANK_RATIO``, where :func:`sandwich_hessian_lowrank` is cheaper than
    the dense Hessian.

    Parameters
    ----------
    prob : Problem

    Returns
    -------
    (U, V) or None
        ``U``, ``V`` of shape (n, m, r); ``V is U`` when ``G`` is not given.
    """
    import weakref

    key = id(prob)
    hit = _FACTORS.get(key)
    if hit is not None and hit[0]() is prob:
        return hit[1]
    out = None
    if prob.criterion in _LOWRANK_CRITERIA and prob.m >= _LOWRANK_MIN_M:
        cap = prob.m // _LOWRANK_RATIO
        U = _stack_factors(prob.A, cap)
        if U is not None:
            V = U if prob.G is None or prob.criterion != "sandwich" else _stack_factors(prob.G, cap)
            out = None if V is None else (U, V)
    for k in [k for k, v in _FACTORS.items() if v[0]() is None]:
        del _FACTORS[k]
    try:
        _FACTORS[key] = (weakref.ref(prob), out)
    except TypeError:  # not weak-referenceable: no cache
        pass
    return out


def sandwich_hessian_lowrank(prob: Problem, idx, ev, factors) -> np.ndarray:
    r"""The sandwich Hessian on ``idx`` from low-rank factors :math:`A_j = U_j U_j^\top`, :math:`G_j = V_j V_j^\top`.

    The same five terms as :meth:`noisealloc.solvers.criteria.SandwichCriterion.hessian`
    (:math:`P = K A_\omega K`, :math:`Q = K G_p K`, :math:`R = Q A_\omega K`),

    .. math:: H_{jk} = \operatorname{tr}(P A_j Q A_k) + Z_{jk} + Z_{kj} - Y_{jk} - Y_{kj}, \qquad
       Z_{jk} = \operatorname{tr}(R A_k K A_j), \quad Y_{jk} = \operatorname{tr}(P A_k K G_j),

    each a block sum of an elementwise product: with the stacked factors
    :math:`U = [U_j]_{j \in S}` (:math:`m \times sr`),
    :math:`\operatorname{tr}(X U_j U_j^\top Y U_k U_k^\top) = \sum_{ab} (U_j^\top X^\top U_k)_{ab} (U_j^\top Y U_k)_{ab}`,
    so every term is :math:`\sum_{\text{block}\ (j,k)} (U^\top X^\top U) \circ (U^\top Y U)`.  Cost
    :math:`O(m^2 s r + m s^2 r^2)` against :math:`O(s m^3 + s^2 m^2)` dense.

    Parameters
    ----------
    prob : Problem
    idx : ndarray of int, shape (s,)
    ev : Evaluation
        At the current allocation (``ev.K``, ``ev.Gp``).
    factors : (U, V)
        From :func:`lowrank_factors`.

    Returns
    -------
    ndarray, shape (s, s)
    """
    U, V = factors
    idx = np.asarray(idx, dtype=int)
    s_, m, r = idx.size, prob.m, U.shape[2]
    K, W = ev.K, prob.W
    P = K @ W @ K
    Q = K @ ev.Gp @ K
    R = Q @ W @ K
    Us = np.swapaxes(U[idx], 0, 1).reshape(m, s_ * r)       # columns (j, a)
    Vs = Us if V is U else np.swapaxes(V[idx], 0, 1).reshape(m, s_ * V.shape[2])
    rv = r if V is U else V.shape[2]

    def bsum(X, Y, r1, r2):
        return np.einsum("jakb,jakb->jk", X.reshape(s_, r1, s_, r2), Y.reshape(s_, r1, s_, r2))

    UK = Us.T @ K
    T_PQ = bsum(Us.T @ P @ Us, Us.T @ Q @ Us, r, r)
    Z = bsum(Us.T @ R @ Us, UK @ Us, r, r)
    Y = bsum(Vs.T @ P @ Us, Vs.T @ K @ Us, rv, r)
    H = T_PQ + Z + Z.T - Y - Y.T
    return 0.5 * (H + H.T)


def trace_hessian_lowrank(prob: Problem, idx, ev, U) -> np.ndarray:
    r"""The Hessian of 'L', 'A', 'c' (:math:`2\operatorname{tr}(K W K A_j K A_k)`) or 'D'
    (:math:`\operatorname{tr}(K A_j K A_k)`) on ``idx`` from the factors :math:`A_j = U_j U_j^\top`.

    As in :func:`sandwich_hessian_lowrank`, :math:`\operatorname{tr}(X A_j Y A_k)` is the block sum of
    :math:`(U^\top X U) \circ (U^\top Y U)` for symmetric ``X``, ``Y``; the dense forms are those of
    :mod:`noisealloc.solvers.criteria`.

    Parameters
    ----------
    prob : Problem
    idx : ndarray of int, shape (s,)
    ev : Evaluation
    U : ndarray, shape (n, m, r)

    Returns
    -------
    ndarray, shape (s, s)
    """
    idx = np.asarray(idx, dtype=int)
    s_, m, r = idx.size, prob.m, U.shape[2]
    K = ev.K
    Us = np.swapaxes(U[idx], 0, 1).reshape(m, s_ * r)
    XK = (Us.T @ K @ Us).reshape(s_, r, s_, r)
    if prob.criterion == "D":
        H = np.einsum("jakb,jakb->jk", XK, XK)
    else:
        XP = (Us.T @ (K @ prob.W @ K) @ Us).reshape(s_, r, s_, r)
        H = 2.0 * np.einsum("jakb,jakb->jk", XP, XK)
    return 0.5 * (H + H.T)


#: Criteria whose face Hessian has a low-rank form here.
_LOWRANK_CRITERIA = ("sandwich", "L", "A", "c", "D")


def _hessian(prob, p, S, ev, mu):
    """The face Hessian: low-rank for large problems with low-rank levels, else the criterion's own."""
    if prob.criterion in _LOWRANK_CRITERIA and prob.m >= _LOWRANK_MIN_M:
        f = lowrank_factors(prob)
        if f is not None:
            if prob.criterion == "sandwich":
                return sandwich_hessian_lowrank(prob, S, ev, f)
            return trace_hessian_lowrank(prob, S, ev, f[0])
    return hessian(prob, p, S, ev, mu=mu)


def _null_basis(s: int) -> np.ndarray:
    """Basis (s, s-1) of the hyperplane sum(d) = 0: d = (y, -sum(y)) (no factorisation needed)."""
    E = np.zeros((s, s - 1))
    E[: s - 1] = np.eye(s - 1)
    E[s - 1] = -1.0
    return E


def _value(prob, p, mu, counters):
    counters["nfev"] += 1
    try:
        return evaluate(prob, p, mu=mu)
    except SingularMomentError:
        return None


def _face_gap(p, S, gS):
    pos = p[S] > 0
    return float(gS[pos].max() - gS.min()) if pos.any() else 0.0


def newton_on_support(prob: Problem, p, S, *, target: float, mu: float = 0.0, max_steps: int = 100, counters=None):
    r"""Projected Newton restricted to the candidates ``S``.

    Stops when the KKT residual on the face, :math:`\max_{i \in S, p_i > 0} g_i - \min_{i \in S} g_i`,
    is at most ``target`` (a first-order measure: the Newton decrement, quadratic in the
    gradient, would stop far too early for a 1e-8 first-order certificate).

    Parameters
    ----------
    prob : Problem
    p : ndarray, shape (n,)
        Starting allocation (positive definite moment matrix).
    S : array_like of int
        Candidates of the face (the support plus candidates that may enter).
    target : float
        Absolute KKT residual on the face at which to stop.
    mu : float
        Smoothing of 'E'.
    max_steps : int
        Newton step limit.
    counters : dict, optional
        ``nit``/``njev``/``nfev`` counters, updated in place.

    Returns
    -------
    p : ndarray, shape (n,)
        The allocation after the Newton steps.
    S_kept : ndarray of int
        Candidates still on the face.
    n_steps : int
        Newton steps taken.
    """
    if counters is None:
        counters = new_counters()
    p = p.copy()
    S = np.array(sorted(set(int(i) for i in S)), dtype=int)
    ev = evaluate(prob, p, mu=mu)
    steps = 0
    tiny_dec = 1e3 * np.finfo(float).eps * max(abs(ev.value), 1.0)
    for _ in range(max_steps):
        if S.size <= 1:
            break
        gS = gradient(prob, ev, S)
        fg = _face_gap(p, S, gS)
        if fg <= target:
            break
        H = _hessian(prob, p, S, ev, mu)
        fixed = np.zeros(S.size, bool)
        while True:
            free = np.flatnonzero(~fixed)
            if free.size <= 1:
                d = np.zeros(S.size)
                break
            Z = _null_basis(free.size)
            Hr = Z.T @ H[np.ix_(free, free)] @ Z
            w, V = np.linalg.eigh(0.5 * (Hr + Hr.T))
            floor = max(abs(w).max(), np.finfo(float).tiny) * 1e-12
            w = np.maximum(w, floor)
            rhs = Z.T @ gS[free]
            d = np.zeros(S.size)
            d[free] = -Z @ (V @ ((V.T @ rhs) / w))
            newly = (~fixed) & (p[S] <= 0) & (d < 0)
            if not newly.any():
                break
            fixed |= newly
        dec = -float(gS @ d)
        if not dec > 0:
            break
        neg = d < 0
        ratio = np.full(S.size, np.inf)
        ratio[neg] = -p[S][neg] / d[neg]
        a_max = float(ratio.min())
        alpha = min(1.0, a_max)
        accepted = False
        for _k in range(60):
            q = p.copy()
            q[S] = p[S] + alpha * d
            if alpha == a_max:
                q[S[ratio <= a_max * (1 + 1e-12)]] = 0.0
            q[q < 0] = 0.0
            q /= q.sum()
            ev_new = _value(prob, q, mu, counters)
            if ev_new is None:
                # Numerically singular trial point (refused by the rounding guard).  Next to the singular
                # boundary nearly every trial is (figure 3's [-8, 8] sweep: 45 of 46 evaluations per
                # step, 60 halvings each): shrink by 8, and stop once the step could not change V by
                # more than its rounding.
                if alpha * dec < tiny_dec:
                    break
                alpha *= 0.125
                continue
            if ev_new.value <= ev.value - 1e-4 * alpha * dec:
                accepted = True
                break
            if alpha * dec < tiny_dec:
                # The decrease is below rounding of the value: judge the step by the
                # first-order residual instead.
                g_new = gradient(prob, ev_new, S)
                if _face_gap(q, S, g_new) < fg:
                    accepted = True
                break
            alpha *= 0.5
        steps += 1
        counters["nit"] += 1
        if not accepted:
            # Nearly dependent atoms (neighbouring grid points) make the reduced Hessian
            # ill-conditioned; fall back to an exact vertex-exchange step on the face.
            pos = np.flatnonzero(p[S] > 0)
            i = int(S[np.argmin(gS)])
            j = int(S[pos[np.argmax(gS[pos])]])
            if i == j:
                break
            DM = prob.A[i] - prob.A[j]
            DG = None if prob.G is None else prob.G[i] - prob.G[j]
            Gp = ev.Gp if prob.G is not None else None
            t, _v = line_search(prob, ev.M, Gp, DM, DG, p[j], mu=mu, phi0=ev.value, counters=counters)
            if not t > 0:
                break
            q = p.copy()
            q[i] += t
            q[j] = 0.0 if t >= p[j] else p[j] - t
            ev_new = evaluate_or_none(prob, q, mu)
            if ev_new is None:
                # The exact exchange lands on the numerically singular boundary, where the
                # value is rounding noise: no acceptable step on this face.
                break
        p, ev = q, ev_new
        keep = (p[S] > 0) | (gS < float(p[S] @ gS))
        if keep.sum() >= 1:
            S = S[keep]
    return p, S, steps


def _local_minima(g: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Members of ``idx`` that are local minima of ``g`` in index (grid) order."""
    n = g.size
    left = np.where(idx > 0, g[np.maximum(idx - 1, 0)], np.inf)
    right = np.where(idx < n - 1, g[np.minimum(idx + 1, n - 1)], np.inf)
    return idx[(g[idx] <= left) & (g[idx] <= right)]


def _aggregate(p: np.ndarray, S: np.ndarray) -> np.ndarray:
    """Move every weight outside ``S`` to the nearest member of ``S`` in index order."""
    S = np.sort(S)
    pos = np.searchsorted(S, np.arange(p.size))
    lo = S[np.clip(pos - 1, 0, S.size - 1)]
    hi = S[np.clip(pos, 0, S.size - 1)]
    near = np.where(np.abs(np.arange(p.size) - lo) <= np.abs(hi - np.arange(p.size)), lo, hi)
    q = np.bincount(near, weights=p, minlength=p.size)
    return q / q.sum()


def run(prob: Problem, p, *, tol: float, mu: float = 0.0, max_rounds: int = 100, counters=None):
    """Polish ``p`` by projected Newton with column generation until the certified relative gap is <= ``tol``.

    Parameters
    ----------
    prob : Problem
    p : array_like, shape (n,)
        Starting allocation (e.g. from the main algorithm).
    tol : float
        Target relative gap.
    mu : float
        Smoothing of 'E'.
    max_rounds : int
        Column-generation rounds.
    counters : dict, optional
        ``nit``/``njev``/``nfev`` counters, updated in place.

    Returns
    -------
    p : ndarray, shape (n,)
        The polished allocation.
    status : int
        Key of :data:`~noisealloc.solvers.result.STATUS_MESSAGES`: 0 gap met, 1 round limit,
        2 stalled (five rounds without progress, also after one pairwise Frank-Wolfe rescue).

    Raises
    ------
    SingularMomentError
        When the moment matrix of ``p`` is numerically singular.
    """
    if counters is None:
        counters = new_counters()
    p = np.array(p, dtype=float)
    n = prob.n
    ev = evaluate(prob, p, mu=mu)
    g = gradient(prob, ev)
    counters["njev"] += 1
    cap = max(4 * prob.m, 32)
    if np.count_nonzero(p) > cap:
        # A multiplicative run leaves every weight positive: keep the heavy atoms and the
        # local minima of g (sensitivity peaks), and move the rest of the mass to the
        # nearest kept candidate so that M(p) barely changes.  The heavy atoms are the local
        # maxima of p in grid order (one per cluster): on near-tied levels the largest weights
        # all sit in one cluster of neighbours, and keeping only those (model-like, c, n = 1001)
        # left a singular aggregate, so the Newton polish ran on all n candidates (65 s, not 0.2 s).
        order = np.argsort(-p)
        heavy = _local_minima(-p, np.arange(n))
        heavy = heavy[np.argsort(-p[heavy])][: cap // 2]
        heavy = heavy[p[heavy] >= 1e-3 * p[order[0]]]
        gbar = float(p @ g)
        peaks = _local_minima(g, np.flatnonzero(g <= gbar))
        peaks = peaks[np.argsort(g[peaks])][: cap // 2]
        S = np.union1d(heavy, peaks)
        q = _aggregate(p, S)
        if evaluate_or_none(prob, q, mu) is not None:
            p = q
    best_gap = np.inf
    stale = 0
    rescued = False
    for _round in range(max_rounds):
        ev = evaluate(prob, p, mu=mu)
        g = gradient(prob, ev)
        counters["njev"] += 1
        gbar = float(p @ g)
        gap = gbar - float(g.min())
        sc = scale(prob, ev)
        if gap <= tol * sc:
            return p, 0
        if gap < best_gap * 0.999:
            best_gap, stale = gap, 0
        else:
            stale += 1
            if stale >= 5:
                if rescued:
                    return p, 2
                # Newton on the face makes no progress.  Seen when many identical atoms (levels
                # where the model is exact, G = 0) leave its reduced Hessian nearly singular: the
                # floored step shuffles weight among them while a clearly bad atom keeps its mass.
                # Pairwise Frank-Wolfe steps move mass from the worst support atom to the best
                # candidate, whatever the curvature; then Newton resumes.
                p, _st = _frank_wolfe_run(prob, p, tol=tol, max_iter=_RESCUE_ITERS, mu=mu, counters=counters)
                rescued, stale, best_gap = True, 0, np.inf
                continue
        # add the most violating candidates, one per sensitivity peak
        viol = np.flatnonzero(g < gbar - 0.25 * gap)
        peaks = _local_minima(g, viol) if viol.size else np.array([int(np.argmin(g))])
        if peaks.size == 0:
            peaks = np.array([int(np.argmin(g))])
        k = min(peaks.size, max(4, prob.m))
        add = peaks[np.argsort(g[peaks])[:k]]
        S = np.union1d(np.flatnonzero(p > 0), add)
        p, S, _ = newton_on_support(prob, p, S, target=0.1 * tol * sc, mu=mu, counters=counters)
    ev = evaluate(prob, p, mu=mu)
    g = gradient(prob, ev)
    counters["njev"] += 1
    return p, (0 if float(p @ g) - g.min() <= tol * scale(prob, ev) else 1)


def evaluate_or_none(prob, p, mu):
    try:
        return evaluate(prob, p, mu=mu)
    except SingularMomentError:
        return None
