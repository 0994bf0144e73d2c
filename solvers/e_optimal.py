r"""E-optimal allocations by a barrier interior-point method with column generation.

E-optimality maximises the smallest eigenvalue of the moment matrix,
:math:`\Phi(p) = -\lambda_{\min}(M(p))`, :math:`M(p) = \sum_i p_i A_i (+\delta I)`.  On a
working set :math:`S` of candidates this is the semidefinite program

.. math::  \max_{q \in \Delta_S,\ t} \; t \quad \text{s.t.} \quad X(q, t) = \sum_{i \in S} q_i B_i - t I \succeq 0,

solved by the primal log-barrier method (Boyd & Vandenberghe 2004, sec. 11.3): for
increasing :math:`\tau` minimise

.. math::  \varphi_\tau(q, t) = -\tau t - \log\det X(q, t) - \sum_i \log q_i
           \quad \text{s.t.}\ \mathbf 1^\top q = 1

by Newton's method (exact Hessian
:math:`\partial^2 \varphi / \partial q_i \partial q_j = \operatorname{tr}(Y B_i Y B_j) + \delta_{ij} q_i^{-2}`,
:math:`Y = X^{-1}`).  On the central path :math:`\operatorname{tr}(Y) = \tau`, so
:math:`E = Y / \tau` is PSD with unit trace and
:math:`\langle E, B_i\rangle = \nu/\tau - 1/(\tau q_i) \le \nu / \tau`: the dual
matrix of the equivalence theorem for E-optimality (Kiefer 1974; Pukelsheim 2006,
ch. 7), with duality gap :math:`(r + |S|)/\tau` on the working set
(:math:`r` the matrix size).

**Column generation** over all ``n`` candidates: the bound
:math:`\max_i \langle E, A_i\rangle - \lambda_{\min}(M(q))` is rigorous for every PSD,
trace-one ``E`` (weak duality) and costs one GEMV over the flattened stack; candidates
with :math:`\langle E, A_i\rangle` above the working-set optimum are added (one per
peak of the sensitivity in grid order) and the working set is re-solved, until the
bound is below the target.

The same routine, applied to the projected matrices :math:`Q^\top A_i Q` on the
eigenspace of :math:`\lambda_{\min}(M(p))`, gives the small spectraplex problem
:math:`\min_{Z \succeq 0, \operatorname{tr} Z = 1} \max_i \langle Z, Q^\top A_i Q\rangle`
whose solution is the certificate's dual matrix (see
:func:`noisealloc.solvers.certificates.e_dual_bound`).

References
----------
.. [1] S. Boyd, L. Vandenberghe, "Convex Optimization", Cambridge UP, 2004, ch. 11.
.. [2] F. Pukelsheim, "Optimal Design of Experiments", SIAM Classics, 2006, ch. 6-7.
.. [3] J. Kiefer, "General equivalence theory for optimum designs (approximate theory)",
   Ann. Statist. 2(5), 1974.
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass

import numpy as np
from scipy import linalg as sla

from noisealloc.solvers.problem import moments, new_counters
from noisealloc.theory.tolerances import E_CLUSTER_RTOL, FW_GAP_RTOL

__all__ = ["BarrierResult", "barrier_sdp", "column_generation", "e_dual_bound", "run"]


@dataclass(frozen=True)
class BarrierResult:
    r"""Result of :func:`barrier_sdp` on a working set.

    Attributes
    ----------
    q : ndarray, shape (s,)
        Weights (non-negative, sum one).
    t : float
        :math:`\lambda_{\min}` lower bound of the primal (``t`` of :math:`X = \sum_i q_i B_i - tI \succeq 0`).
    E : ndarray, shape (r, r)
        Dual matrix (PSD, unit trace).
    gap : float
        Final duality gap :math:`\nu - t`.
    nit : int
        Interior-point iterations.
    success : bool
        Gap and residuals met ``gap_atol``.
    """

    q: np.ndarray
    t: float
    E: np.ndarray
    gap: float
    nit: int
    success: bool


def _chol(X):
    try:
        L = np.linalg.cholesky(X)
    except np.linalg.LinAlgError:
        return None
    if not np.all(np.isfinite(L)) or not np.all(np.diag(L) > 0):
        return None
    return L


def _maxstep(Linv, D):
    """Largest alpha with L L^T + alpha D PSD (``Linv`` the inverse Cholesky factor); inf if none."""
    W = Linv @ D @ Linv.T
    lo = float(np.linalg.eigvalsh(0.5 * (W + W.T))[0])
    return np.inf if lo >= 0 else -1.0 / lo


def barrier_sdp(B: np.ndarray, q0=None, *, gap_atol: float, max_iter: int = 80) -> BarrierResult:
    r"""Solve :math:`\max_{q \in \Delta, t} t` s.t. :math:`X = \sum_i q_i B_i - t I \succeq 0` (primal-dual).

    Primal-dual interior-point method (HKM direction, Mehrotra predictor-corrector,
    infeasible start) on the pair

    .. math::  \max\ t \ \text{s.t.}\ \sum_i q_i B_i - tI = X \succeq 0,\ q \ge 0,\ 1^\top q = 1;
               \qquad \min\ \nu \ \text{s.t.}\ \langle E, B_i\rangle + z_i = \nu,\ z \ge 0,\ E \succeq 0,\ \operatorname{tr} E = 1,

    with central path :math:`XE = \mu I`, :math:`q_i z_i = \mu`.  The dual matrix ``E`` is
    iterated directly (not recovered from :math:`X^{-1}`), so it stays accurate when
    :math:`\lambda_{\min}` is repeated and ``X`` becomes singular.

    Parameters
    ----------
    B : ndarray, shape (s, r, r)
        Symmetric PSD candidate matrices of the working set.
    q0 : ndarray, shape (s,), optional
        Starting weights (mixed half-and-half with the uniform weights).
    gap_atol : float
        Stop when :math:`\nu - t` and the residuals are at most this.

    Returns
    -------
    BarrierResult
        ``q`` (s,) >= 0 summing to one, ``t``, ``E`` (r, r) PSD with unit trace,
        ``gap`` (the final :math:`\nu - t`), ``nit`` (iterations), ``success``.
    """
    s, r = B.shape[0], B.shape[1]
    ev0 = np.linalg.eigvalsh(B.mean(axis=0))
    sc = max(ev0[-1], np.finfo(float).tiny)
    Bs = B / sc  # O(1) eigenvalues: the stopping rule and the starting point are scale-free
    Bf = Bs.reshape(s, r * r)
    atol = gap_atol / sc
    I = np.eye(r)
    q = np.full(s, 1.0 / s)
    if q0 is not None:
        q0 = np.maximum(np.asarray(q0, float), 0.0)
        if q0.sum() > 0:
            q = 0.5 * q0 / q0.sum() + 0.5 * q
    Mq = (q @ Bf).reshape(r, r)
    t = float(np.linalg.eigvalsh(0.5 * (Mq + Mq.T))[0]) - 1.0
    X = 0.5 * (Mq + Mq.T) - t * I
    E = I / r
    v = Bf @ E.ravel()
    nu = float(v.max()) + 1.0
    z = nu - v
    theta = r + s
    it = 0
    converged = False
    best = None
    hist = []
    while it < max_iter:
        Rp = (q @ Bf).reshape(r, r) - t * I - X
        Rp = 0.5 * (Rp + Rp.T)
        v = Bf @ E.ravel()
        Rd = nu - v - z
        re = 1.0 - np.trace(E)
        mu = (float(np.sum(X * E)) + float(q @ z)) / theta
        gap = nu - t
        pres = float(np.max(np.abs(Rp)))
        dres = float(np.max(np.abs(Rd))) + abs(re)
        merit = max(gap, 0.0) + pres + dres
        if best is None or merit < best[0]:
            best = (merit, q.copy(), t, E.copy(), gap)
        if gap <= atol and pres <= atol and dres <= atol:
            converged = True
            break
        if it >= 5 and merit > 0.5 * hist[-5]:
            break  # stalled in rounding
        hist.append(merit)
        L = _chol(X)
        R = _chol(E)
        if L is None or R is None:
            break
        Linv = sla.solve_triangular(L, I, lower=True, check_finite=False)
        Rinv = sla.solve_triangular(R, I, lower=True, check_finite=False)
        Xi = Linv.T @ Linv
        G = np.matmul(np.matmul(Linv, Bs), R)  # L^-1 B_i R
        Gf = G.reshape(s, r * r)
        H = Gf @ Gf.T
        XiE = Xi @ E
        h = Bf @ (0.5 * (XiE + XiE.T)).ravel()
        cc = float(np.trace(XiE))
        XiRpE = Xi @ Rp @ E
        w = Bf @ (0.5 * (XiRpE + XiRpE.T)).ravel()
        K11 = H + np.diag(z / q)
        KKT = np.zeros((s + 2, s + 2))
        KKT[:s, :s] = K11
        KKT[:s, s] = KKT[s, :s] = -h
        KKT[s, s] = cc
        KKT[:s, s + 1] = KKT[s + 1, :s] = 1.0
        dsc = np.ones(s + 2)
        dsc[: s + 1] = 1.0 / np.sqrt(np.maximum(np.abs(np.diag(KKT)[: s + 1]), np.finfo(float).tiny))
        KKTs = KKT * dsc[:, None] * dsc[None, :]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sla.LinAlgWarning)
            try:
                lu = sla.lu_factor(KKTs, check_finite=False)
            except (ValueError, np.linalg.LinAlgError):
                break
        piv = np.abs(np.diag(lu[0]))
        if not np.all(np.isfinite(piv)) or piv.min() == 0.0:
            break  # the Newton system is singular to rounding: keep the best iterate

        def direction(Kmat, kq):
            rhs = np.empty(s + 2)
            rhs[:s] = -nu + Bf @ (0.5 * (Kmat + Kmat.T)).ravel() + kq - w
            rhs[s] = 1.0 - np.trace(Kmat) + np.trace(XiRpE)
            rhs[s + 1] = 1.0 - q.sum()
            sol = sla.lu_solve(lu, rhs * dsc, check_finite=False) * dsc
            # one step of iterative refinement: the KKT matrix is ill-conditioned near the end
            sol += sla.lu_solve(lu, (rhs - KKT @ sol) * dsc, check_finite=False) * dsc
            dq, dt, dnu = sol[:s], sol[s], sol[s + 1]
            dX = (dq @ Bf).reshape(r, r) - dt * I + Rp
            dX = 0.5 * (dX + dX.T)
            dE = Kmat - E - Xi @ dX @ E
            dE = 0.5 * (dE + dE.T)
            dz = kq - z - (z / q) * dq
            return dq, dt, dX, dE, dz, dnu

        def steps(dq, dX, dE, dz):
            ap = _maxstep(Linv, dX)
            ad = _maxstep(Rinv, dE)
            neg = dq < 0
            if neg.any():
                ap = min(ap, float(np.min(-q[neg] / dq[neg])))
            neg = dz < 0
            if neg.any():
                ad = min(ad, float(np.min(-z[neg] / dz[neg])))
            return min(1.0, ap), min(1.0, ad)

        # predictor (affine scaling)
        dq, dt, dX, dE, dz, dnu = direction(np.zeros((r, r)), np.zeros(s))
        ap, ad = steps(dq, dX, dE, dz)
        mu_aff = (float(np.sum((X + ap * dX) * (E + ad * dE))) + float((q + ap * dq) @ (z + ad * dz))) / theta
        sigma = min(1.0, max(0.0, (mu_aff / mu) ** 3)) if mu > 0 else 0.0
        # corrector: sigma mu centring plus Mehrotra's second-order term
        Kmat = Xi @ (sigma * mu * I - dX @ dE)
        kq = (sigma * mu - dq * dz) / q
        dq, dt, dX, dE, dz, dnu = direction(Kmat, kq)
        ap, ad = steps(dq, dX, dE, dz)
        ap, ad = 0.98 * ap, 0.98 * ad
        q = q + ap * dq
        t = t + ap * dt
        X = X + ap * dX
        E = E + ad * dE
        z = z + ad * dz
        nu = nu + ad * dnu
        # <E, B_i> + z_i = nu is homogeneous: rescaling restores tr E = 1 exactly
        # (rounding of the trace row of the Newton system would otherwise accumulate)
        tr = float(np.trace(E))
        E, z, nu = E / tr, z / tr, nu / tr
        it += 1
    _merit, q, t, E, gap = best
    E = 0.5 * (E + E.T)
    wE, VE = np.linalg.eigh(E)
    E = (VE * np.maximum(wE, 0.0)) @ VE.T
    E = E / np.trace(E)
    q = np.maximum(q, 0.0)
    q = q / q.sum()
    return BarrierResult(q, float(t) * sc, E, float(gap) * sc, it, converged)


def _peaks(v: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Members of ``idx`` that are local maxima of ``v`` in index (grid) order."""
    n = v.size
    left = np.where(idx > 0, v[np.maximum(idx - 1, 0)], -np.inf)
    right = np.where(idx < n - 1, v[np.minimum(idx + 1, n - 1)], -np.inf)
    return idx[(v[idx] >= left) & (v[idx] >= right)]


def column_generation(Aflat: np.ndarray, S0, *, rtol: float, project=None, offset: float = 0.0,
                      max_rounds: int = 40, counters=None):
    r"""E-optimal weights over all candidates of ``Aflat`` (n, m*m) by column generation.

    ``project`` (m, r) restricts to :math:`Q^\top A_i Q` (the eigenspace problem of the
    certificate); ``None`` means the full problem (``r = m``).  ``offset`` is the ridge
    :math:`\delta` added to every moment matrix (it shifts every eigenvalue alike, so it
    only enters the scale).  Stops when the rigorous bound
    :math:`\max_i \langle E, A_i\rangle - \lambda_{\min}(\sum_i q_i A_i)` (in the
    projected space) is at most ``rtol * (lambda_min + offset)``.

    Parameters
    ----------
    Aflat : ndarray, shape (n, m*m)
        Flattened candidate matrices.
    S0 : array_like of int
        Starting working set.
    rtol : float
        Relative target of the bound.
    project : ndarray, shape (m, r), optional
        Orthonormal basis of the subspace (certificate's eigenspace problem).
    offset : float
        Ridge :math:`\delta`.
    max_rounds : int
        Column-generation rounds.
    counters : dict, optional
        ``nit``/``njev``/``nfev`` counters, updated in place.

    Returns
    -------
    q : ndarray, shape (n,)
        Weights (zero off the final working set).
    E : ndarray, shape (m, m)
        Dual matrix, PSD with unit trace (lifted by ``Q Z Q^T`` when projected).
    bound : float
        The rigorous bound of the best round.
    """
    n = Aflat.shape[0]
    m = int(round(np.sqrt(Aflat.shape[1])))
    S = np.unique(np.asarray(S0, dtype=int))
    best = None
    q_full = None
    for _round in range(max_rounds):
        # identical candidates (e.g. the two ends of a periodic grid) are one constraint
        # of the dual and make the Newton system exactly singular: keep the first
        _u, first = np.unique(Aflat[S], axis=0, return_index=True)
        S = S[np.sort(first)]
        As = Aflat[S].reshape(S.size, m, m)
        B = As if project is None else np.matmul(np.matmul(project.T, As), project)
        B = 0.5 * (B + np.swapaxes(B, 1, 2))
        q0 = None if q_full is None else q_full[S]
        # the working-set gap must be well below the target: the bound adds the rest
        if best is None:
            ev0 = np.linalg.eigvalsh(B.mean(axis=0))
            sc = max(ev0[0] + offset, 1e-3 * ev0[-1], np.finfo(float).tiny)
        else:
            sc = max(best[3] + offset, np.finfo(float).tiny)
        target = rtol * sc
        res = barrier_sdp(B, q0, gap_atol=0.5 * target)
        if counters is not None:
            counters["nit"] += res.nit
        E = res.E if project is None else project @ res.E @ project.T
        E = 0.5 * (E + E.T)
        v = Aflat @ E.ravel()
        if counters is not None:
            counters["njev"] += 1
        q_full = np.zeros(n)
        q_full[S] = res.q
        Mq = (res.q @ B.reshape(S.size, -1)).reshape(B.shape[1], B.shape[1])
        lmin = float(np.linalg.eigvalsh(0.5 * (Mq + Mq.T))[0])
        bound = float(v.max()) - lmin
        if best is None or bound < best[2]:
            best = (q_full.copy(), E, bound, lmin)
        if bound <= rtol * max(lmin + offset, np.finfo(float).tiny):
            break
        viol = np.flatnonzero(v > lmin + 0.25 * bound)
        viol = np.setdiff1d(viol, S)
        if viol.size == 0:
            break
        pk = _peaks(v, viol)
        if pk.size == 0:
            pk = viol
        k = max(4, m)
        add = pk[np.argsort(-v[pk])[:k]]
        # the sensitivity peak moves between rounds: take the grid neighbours along
        add = np.clip(np.concatenate([add + d for d in (-2, -1, 0, 1, 2)]), 0, n - 1)
        # drop candidates that neither the primal uses nor the dual needs (weight ~ 0 and
        # sensitivity clearly inactive): near-duplicate grid neighbours make the Newton
        # system singular to rounding; a needed constraint of a non-unique dual is kept,
        # else the rounds would cycle
        keep = S[(res.q >= 1e-9 * res.q.max()) | (v[S] >= lmin - bound)]
        S = np.union1d(keep, add)
    return best[0], best[1], best[2]


def _e_clusters(ev: np.ndarray) -> list:
    """Sizes ``r >= 2`` of the clusters of smallest eigenvalues (spread within ``E_CLUSTER_RTOL``)."""
    m = ev.size
    tol = E_CLUSTER_RTOL * max(abs(ev[-1]), abs(ev[0]), np.finfo(float).tiny)
    sizes = []
    for r in range(2, m + 1):
        spread = ev[r - 1] - ev[0]
        if spread > tol:
            break
        # a cluster ends where the next eigenvalue is further away than the spread
        if r == m or ev[r] - ev[r - 1] > spread:
            sizes.append(r)
    return sizes


def e_dual_bound(prob: Problem, p: np.ndarray):
    r"""Best weak-duality certificate of E-optimality built from ``(A, p)`` alone.

    Every PSD, trace-one ``E`` gives :math:`\max_q \lambda_{\min}(M_q) \le \max_i \langle E, A_i\rangle + \delta`.
    Candidates tried (the one with the smallest bound is returned):

    * for every cluster of ``r >= 2`` smallest eigenvalues of :math:`M_p` with spread within
      ``E_CLUSTER_RTOL`` (relative to :math:`\lambda_{\max}`), and for ``r = m`` (the whole
      space; the eigenvector of a simple :math:`\lambda_{\min}` at a near-optimal ``p`` is only
      first-order accurate while the value is second-order), with orthonormal eigenvectors
      ``Q`` (m, r): :math:`E = Q Z Q^\top` with ``Z`` the solution of the spectraplex problem
      :math:`\min_{Z \succeq 0, \operatorname{tr} Z = 1} \max_i \langle Z, Q^\top A_i Q\rangle`
      (primal-dual interior point with column generation,
      :func:`column_generation`); at an optimal ``p`` the
      equivalence theorem (Pukelsheim 2006, ch. 7) says some such ``E`` makes the
      bound zero;
    * the eigenprojector of :math:`\lambda_{\min}` and soft-min projectors
      :math:`E_\mu \propto e^{-M_p/\mu}`, and averages over clusters of smallest eigenvalues.

    Parameters
    ----------
    prob : Problem
        An 'E' problem.
    p : ndarray, shape (n,)
        The allocation.

    Returns
    -------
    E : ndarray, shape (m, m)
        PSD dual matrix with unit trace.
    g : ndarray, shape (n,)
        :math:`g_i = -\langle E, A_i\rangle` (a subgradient of :math:`-\lambda_{\min}` up to the bound).
    lam_min : float
        :math:`\lambda_{\min}(M_p)`.

    References
    ----------
    F. Pukelsheim, "Optimal Design of Experiments", SIAM Classics, 2006, Theorem 7.21.
    """
    M, _ = moments(prob, p)
    ev, U = np.linalg.eigh(M)
    lmin = ev[0]
    spread = max(ev[-1] - ev[0], abs(ev[-1]), np.finfo(float).tiny)
    cands = []
    for k in range(1, 17):
        mu = spread * 10.0 ** (-k)
        z = np.exp(-(ev - lmin) / mu)
        cands.append((U * (z / z.sum())) @ U.T)
    for thr in 10.0 ** -np.arange(2, 15):
        cl = ev - lmin <= thr * spread
        cands.append((U * (cl / cl.sum())) @ U.T)
    m = prob.m
    tiny = np.finfo(float).tiny
    target = 0.1 * FW_GAP_RTOL * max(lmin, tiny)

    def score(E):
        E = 0.5 * (E + E.T)
        E = E / np.trace(E)
        g = -(prob.Aflat @ E.ravel())
        return -lmin + prob.regularization - g.min(), E, g

    best = min((score(E) for E in cands), key=lambda b: b[0])
    # The cluster sizes, and the whole space: the eigenvector of a simple lambda_min of a
    # near-optimal p is only first-order accurate (the value is second-order), so the
    # dual matrix is also re-optimised over all directions (r = m, the full dual problem
    # on the support of p plus the most sensitive candidates).  Tried in this order until
    # one meets a tenth of FW_GAP_RTOL (the rest could only tighten an already tight bound).
    sizes = sorted(set(_e_clusters(ev)) | ({m} if m > 1 else set()))
    if sizes and best[0] > target:
        support = np.flatnonzero(p > 0)
        cap = max(4 * m, 32)
        if support.size > cap:
            support = support[np.argsort(-p[support])[:cap]]
        v0 = -best[2]
        pk = _peaks(v0, np.arange(prob.n))
        top = pk[np.argsort(-v0[pk])[: max(2 * m, 8)]]
        S0 = np.union1d(support, top)
        for r in sizes:
            _q, E, _b = column_generation(prob.Aflat, S0, rtol=0.1 * FW_GAP_RTOL, project=U[:, :r])
            cand = score(E)
            if cand[0] < best[0]:
                best = cand
            if best[0] <= target:
                break
    return best[1], best[2], float(lmin)


def _lmin(Aflat, w, m):
    idx = np.flatnonzero(w)
    M = (w[idx] @ Aflat[idx]).reshape(m, m)
    return float(np.linalg.eigvalsh(0.5 * (M + M.T))[0])


def _finalize(Aflat, q, E, m, *, rtol, offset, max_rounds: int = 4):
    r"""Re-solve on the active candidates only, so that the support is exact.

    The interior point leaves weights ~ mu / z_i on inactive candidates (sensitivity
    :math:`\langle E, A_i\rangle` below :math:`\lambda_{\min}`).  Zeroing them would cost up to
    that much of :math:`\lambda_{\min}`; instead the problem restricted to the candidates
    with non-negligible weight and active sensitivity is re-solved, and the result is
    accepted when its bound over all candidates still meets ``rtol``.
    Returns ``(q, E)``.
    """
    tiny = np.finfo(float).tiny
    T = np.flatnonzero(q >= 1e-9 * q.max())
    for k in range(max_rounds):
        lm = _lmin(Aflat, q, m) + offset
        if k == 0:
            T2 = T  # first drop the negligible weights only
        else:
            # then the candidates whose sensitivity under the re-solved dual is inactive
            v = Aflat[T] @ E.ravel() + offset
            keep = v >= lm - 0.25 * rtol * abs(lm)
            if keep.all() or not keep.any():
                break
            T2 = T[keep]
        B = Aflat[T2].reshape(T2.size, m, m)
        res = barrier_sdp(B, q[T2], gap_atol=0.5 * rtol * max(abs(lm), tiny))
        w = np.zeros_like(q)
        w[T2] = res.q
        w[w < 1e-14 * w.max()] = 0.0  # below rounding of M(p)
        w /= w.sum()
        lw = _lmin(Aflat, w, m) + offset
        bound = float((Aflat @ res.E.ravel()).max()) + offset - lw
        if not bound <= rtol * max(lw, tiny):  # the certified gap decides, not the value
            break
        q, E, T = w, res.E, np.flatnonzero(w)
    # Weights left at ~ mu / slack by the interior point: dropping them moves lambda_min
    # by about that much (up, to first order, for an inactive candidate); kept if the
    # certified bound with the current dual still holds.
    w = np.where(q >= 1e-8 * q.max(), q, 0.0)
    if np.count_nonzero(w) < np.count_nonzero(q):
        w /= w.sum()
        lw = _lmin(Aflat, w, m) + offset
        if float((Aflat @ E.ravel()).max()) + offset - lw <= rtol * max(lw, tiny):
            q = w
    return q, E


def _drop_inactive(prob, q, tol, rounds: int = 2):
    r"""Zero the atoms that the certificate's dual matrix shows inactive.

    With ``E`` from :func:`noisealloc.solvers.certificates.e_dual_bound` (what
    :func:`~noisealloc.solvers.certify` will use), an atom with
    :math:`\langle E, A_i\rangle < \lambda_{\min}` violates equality on the support; removing
    it raises :math:`\lambda_{\min}` to first order.  Kept when the bound
    :math:`\max_i \langle E, A_i\rangle - \lambda_{\min}` with the same ``E`` still meets the target.
    """
    m, tiny = prob.m, np.finfo(float).tiny
    off = prob.regularization
    dual = e_dual_bound(prob, q)
    for _ in range(rounds):
        E, g, lmin = dual
        v = -g + off
        S = np.flatnonzero(q)
        # only the interior point's leftovers (weights ~ mu / slack, far below the atoms'):
        # an atom whose slack is at the level of the bound's accuracy may be active
        low = S[(v[S] < lmin - 0.25 * tol * max(lmin, tiny)) & (q[S] < 1e-4 * q.max())]
        if low.size == 0 or low.size == S.size:
            break
        w = q.copy()
        w[low] = 0.0
        w /= w.sum()
        lw = _lmin(prob.Aflat, w, m) + off
        if float(v.max()) - lw <= 0.5 * tol * max(lw, tiny):
            dual = e_dual_bound(prob, w)
        else:
            # a multiple lambda_min can drop under the removal: re-solve on the rest
            T = np.flatnonzero(w)
            res = barrier_sdp(prob.A[T], w[T], gap_atol=0.25 * tol * max(lmin, tiny))
            w = np.zeros_like(q)
            w[T] = res.q
            # the restricted problem's dual need not be valid off T (a multiple lambda_min
            # has many duals): judge w by the certificate recomputed from w itself
            dual = e_dual_bound(prob, w)
            if not float(-dual[1].min()) + off - dual[2] <= 0.5 * tol * max(dual[2], tiny):
                break
        q = w
    return q


def run(prob, p, *, tol: float, counters=None):
    r"""E-optimal weights from the starting allocation ``p`` (the polish of 'E').

    The working set starts as the heaviest atoms of ``p`` and the peaks of the
    sensitivity :math:`\langle E_0, A_i\rangle` with :math:`E_0` the projector on the
    eigenvectors of the smallest eigenvalues of :math:`M(p)`.

    Parameters
    ----------
    prob : Problem
        An 'E' problem.
    p : array_like, shape (n,)
        Starting allocation.
    tol : float
        Target relative gap.
    counters : dict, optional
        ``nit``/``njev``/``nfev`` counters, updated in place.

    Returns
    -------
    p : ndarray, shape (n,)
        The allocation.
    status : int
        0 (bound met) or 2 (stalled), keys of :data:`~noisealloc.solvers.result.STATUS_MESSAGES`.
    """
    if counters is None:
        counters = new_counters()
    m, n = prob.m, prob.n
    Aflat = prob.Aflat
    p = np.asarray(p, float)
    M = (p @ Aflat).reshape(m, m)
    ev, U = np.linalg.eigh(0.5 * (M + M.T))
    k = min(m, 3)
    E0 = U[:, :k] @ U[:, :k].T / k
    v = Aflat @ E0.ravel()
    counters["njev"] += 1
    cap = max(2 * m, 16)
    heavy = np.argsort(-p)[:cap]
    heavy = heavy[p[heavy] >= 1e-4 * p.max()]
    pk = _peaks(v, np.arange(n))
    pk = pk[np.argsort(-v[pk])[:cap]]
    S0 = np.union1d(heavy, pk)
    q, E, bound = column_generation(Aflat, S0, rtol=0.1 * tol, offset=prob.regularization, counters=counters)
    q, E = _finalize(Aflat, q, E, m, rtol=0.5 * tol, offset=prob.regularization)
    if np.count_nonzero(q) > prob.atom_bound:
        # a non-unique optimum (the interior point returns its analytic centre):
        # Caratheodory keeps M(q), hence lambda_min and the bound, and drops atoms
        from noisealloc.solvers.support import caratheodory, moment_vectors

        idx = np.flatnonzero(q)
        w = np.zeros_like(q)
        w[idx] = caratheodory(moment_vectors(prob.A[idx]), q[idx])
        w /= w.sum()
        if _lmin(Aflat, w, m) >= _lmin(Aflat, q, m) * (1.0 - 1e-3 * tol):
            q = w
    q = _drop_inactive(prob, q, tol)
    lm = float(np.linalg.eigvalsh(((q @ Aflat).reshape(m, m) + prob.regularization * np.eye(m)))[0])
    return q, (0 if bound <= tol * max(lm, np.finfo(float).tiny) else 2)
