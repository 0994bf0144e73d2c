r"""Certificates of optimal (convex) or stationary (sandwich) allocations, recomputed from scratch.

For a convex criterion :math:`\Phi(M(p))` on a grid the gradient
:math:`g_i = \partial \Phi / \partial p_i` gives

.. math::  \mathrm{gap}(p) = \sum_i p_i g_i - \min_i g_i \;\ge\; \Phi(p) - \Phi^*

(convexity: :math:`\Phi(q) \ge \Phi(p) + g^\top (q - p) \ge \Phi(p) - \mathrm{gap}`),
and the Kiefer-Wolfowitz equivalence theorem: ``p`` is optimal iff
:math:`g_i \ge \bar g = \sum_j p_j g_j` for all ``i``, with equality on the support.
For the non-smooth E criterion any PSD, trace-one ``E`` gives the weak-duality bound
:math:`\max_q \lambda_{\min}(M_q) \le \max_i \langle E, A_i\rangle + \delta`, so

.. math::  -\lambda_{\min}(M_p) - \Phi^* \le \max_i \langle E, A_i\rangle + \delta - \lambda_{\min}(M_p),

which is certified with the best of a family of ``E`` built from ``(A, p)`` alone:
for a (near-)multiple :math:`\lambda_{\min}` the optimal dual matrix in its eigenspace,
found by a small spectraplex SDP (the equivalence theorem for E-optimality, Pukelsheim
2006, Theorem 7.21), plus soft-min eigenprojectors :math:`E_\mu \propto e^{-M_p/\mu}`
(see :func:`e_dual_bound`); the ``E`` used is returned.
For the sandwich (not convex) the same quantities certify first-order (KKT)
stationarity only, and the value at the convex surrogate's optimum is reported for
comparison.

Off the grid, the sensitivity :math:`d(\lambda) = -g(\lambda)` must satisfy
:math:`d(\lambda) \le -\bar g` on the whole interval; :func:`offgrid_check` maximises it
locally between grid nodes given a callable ``lam -> A(lam)``;
:func:`exact_sensitivity_check` proves it exactly (sympy, real-root isolation) when
``A`` is a rational function of :math:`\mathrm{snr} = e^\lambda`.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from noisealloc.solvers.criteria import Problem, evaluate, gradient, make_problem, moments, scale
from noisealloc.solvers.result import Certificate, ExactCertificate, OffGridCheck
from noisealloc.theory.errors import as_float_array, check_finite, check_interval
from noisealloc.theory.tolerances import E_CLUSTER_RTOL, FW_GAP_RTOL, KKT_RTOL

__all__ = ["certify", "certify_problem", "offgrid_check", "exact_sensitivity_check", "e_dual_bound"]


def _check_weights(weights, n: int) -> np.ndarray:
    p = as_float_array(weights, "weights")
    if p.shape != (n,):
        raise ValueError(f"weights must have shape ({n},) to match A; got {p.shape}")
    check_finite(p, "weights")
    if np.any(p < 0):
        raise ValueError(f"weights must be non-negative; min is {p.min()!r}")
    tot = p.sum()
    if not abs(tot - 1.0) <= 1e-9:
        raise ValueError(f"weights must sum to 1 (a probability vector); sum is {tot!r}")
    return p / tot


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
      :func:`noisealloc.solvers.e_optimal.column_generation`); at an optimal ``p`` the
      equivalence theorem (Pukelsheim 2006, ch. 7) says some such ``E`` makes the
      bound zero;
    * the eigenprojector of :math:`\lambda_{\min}` and soft-min projectors
      :math:`E_\mu \propto e^{-M_p/\mu}`, and averages over clusters of smallest eigenvalues.

    Returns ``(E, g, lam_min)`` with ``g_i = -<E, A_i>`` and ``lam_min`` of :math:`M_p`.
    """
    from noisealloc.solvers.e_optimal import column_generation

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
        from noisealloc.solvers.e_optimal import _peaks, column_generation

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


def certify_problem(prob: Problem, p: np.ndarray, *, rtol: float | None = None) -> Certificate:
    """:func:`certify` on a validated :class:`~noisealloc.solvers.criteria.Problem`."""
    if rtol is None:
        rtol = FW_GAP_RTOL if prob.convex else KKT_RTOL
    support = np.flatnonzero(p > 0)
    dual = None
    surrogate = None
    if prob.criterion == "E":
        E, g, lmin = e_dual_bound(prob, p)
        value = -lmin
        gbar = -(lmin - prob.regularization)
        sc = float(max(lmin, np.finfo(float).tiny))
        dual = E
    else:
        ev = evaluate(prob, p)
        g = gradient(prob, ev)
        value = ev.value
        gbar = float(p @ g)
        sc = scale(prob, ev)
    gap = float(max(gbar - g.min(), 0.0))
    eq_slack = float(g.min() - gbar)
    sup_slack = float(np.max(np.abs(g[support] - gbar))) if support.size else 0.0
    eq_ok = bool(eq_slack >= -rtol * sc and sup_slack <= rtol * sc)
    if prob.criterion == "sandwich":
        surrogate = _surrogate_value(prob)
    bound = prob.atom_bound
    return Certificate(
        criterion=prob.criterion,
        kind="duality-gap" if prob.convex else "kkt",
        value=float(value),
        g=g,
        g_bar=float(gbar),
        gap=gap,
        scale=float(sc),
        rel_gap=float(gap / sc),
        equivalence_slack=eq_slack,
        support_slack=sup_slack,
        equivalence_ok=eq_ok,
        rtol=float(rtol),
        support=support,
        n_atoms=int(support.size),
        atom_bound=int(bound),
        atoms_ok=bool(support.size <= bound),
        regularization=prob.regularization,
        dual_matrix=dual,
        surrogate_value=surrogate,
    )


def _surrogate_value(prob: Problem) -> float:
    """Sandwich V at the minimiser of the convex surrogate tr(A_omega A_p^-1)."""
    from noisealloc.solvers.criteria import solve, criterion_value

    if prob.G is None:
        return None
    res = solve(prob.A, "L", W=prob.W, tol=FW_GAP_RTOL)
    return float(criterion_value(prob, res.weights))


def certify(
    A,
    weights,
    criterion: str = "L",
    *,
    W=None,
    G=None,
    A_eval=None,
    c=None,
    grid=None,
    rtol: float | None = None,
    A_fn=None,
    G_fn=None,
    interval=None,
    A_sym=None,
    G_sym=None,
    snr=None,
    exact_slack: float | None = None,
) -> Certificate:
    r"""Recompute the certificate of an allocation from ``(A, weights)`` alone.

    Parameters
    ----------
    A, criterion, W, G, A_eval, c, grid
        As in :func:`noisealloc.solvers.solve`.
    weights : array_like, shape (n,)
        Probability vector on the grid.
    rtol : float, optional
        Tolerance of ``equivalence_ok`` and ``certified`` (default 1e-8 convex, 1e-6 sandwich).
    A_fn, G_fn : callable, optional
        ``lam -> A(lam)`` (and ``G(lam)``), shape (m, m): enables :func:`offgrid_check`
        (needs ``grid``); ``interval`` (default the grid's end points) is checked.
    A_sym, G_sym, snr : sympy objects, optional
        ``A`` (and ``G``) as sympy matrices rational in the symbol ``snr``: enables
        :func:`exact_sensitivity_check` on ``interval`` with slack ``exact_slack``
        (default: the certified gap plus ``rtol * scale``).

    Returns
    -------
    Certificate
    """
    prob = make_problem(A, criterion, W=W, G=G, A_eval=A_eval, c=c, grid=grid)
    p = _check_weights(weights, prob.n)
    from noisealloc.solvers.criteria import _blas_single_thread

    with _blas_single_thread():  # small factorisations: threads only oversubscribe (see solve)
        cert = certify_problem(prob, p, rtol=rtol)
    off = None
    exact = None
    if A_fn is not None:
        off = offgrid_check(prob, p, A_fn, G_fn=G_fn, interval=interval)
    if A_sym is not None:
        if interval is None:
            if prob.grid is None:
                raise ValueError("the exact check needs interval=(lam_lo, lam_hi) or a grid")
            interval = (prob.grid[0], prob.grid[-1])
        slack = exact_slack if exact_slack is not None else cert.gap + cert.rtol * cert.scale
        exact = exact_sensitivity_check(prob, p, A_sym, snr, interval, G_sym=G_sym, slack=slack)
    if off is None and exact is None:
        return cert
    from dataclasses import replace

    return replace(cert, offgrid=off, exact=exact)


def _sensitivity_parts(prob: Problem, p: np.ndarray):
    """(DA, DG, bound, scale): d(lam) = -(<DA, A(lam)> + <DG, G(lam)>) must stay <= bound."""
    if prob.criterion == "E":
        E, g, lmin = e_dual_bound(prob, p)
        return -E, None, lmin - prob.regularization, max(lmin, np.finfo(float).tiny)
    ev = evaluate(prob, p)
    g = gradient(prob, ev)
    return ev.DA, ev.DG, -float(p @ g), scale(prob, ev)


def offgrid_check(prob: Problem, p, A_fn, *, G_fn=None, interval=None, n_top: int = 64) -> OffGridCheck:
    r"""Local maximisation of the sensitivity :math:`d(\lambda)` between grid nodes.

    Starts at every local maximum of :math:`d` sampled on the grid (plus the ``n_top``
    largest values and the interval ends) and maximises on the two adjacent grid
    intervals with bounded Brent.  A maximum hidden strictly inside an interval whose
    end points are not near a sampled local maximum is not searched: the exact check
    (:func:`exact_sensitivity_check`) has no such gap.
    """
    if prob.grid is None:
        raise ValueError("the off-grid check needs the grid of candidate levels")
    grid = prob.grid
    lo, hi = (grid[0], grid[-1]) if interval is None else check_interval(*interval, name="interval")
    DA, DG, bound, sc = _sensitivity_parts(prob, p)
    if prob.criterion == "sandwich" and prob.G is not None and G_fn is None:
        raise ValueError("the sandwich off-grid check needs G_fn (lam -> G(lam))")
    n_eval = [0]

    def d(lam):
        n_eval[0] += 1
        Al = np.asarray(A_fn(float(lam)), dtype=float)
        val = -float(np.sum(DA * Al))
        if DG is not None:
            val -= float(np.sum(DG * np.asarray(G_fn(float(lam)), dtype=float)))
        return val

    dg = -(prob.Aflat @ DA.ravel())
    if DG is not None:
        dg -= prob.Gflat @ DG.ravel()
    n = grid.size
    idx = set()
    for i in range(n):
        left = dg[i - 1] if i > 0 else -np.inf
        right = dg[i + 1] if i < n - 1 else -np.inf
        if dg[i] >= left and dg[i] >= right:
            idx.add(i)
    idx.update(np.argsort(-dg)[: min(n_top, n)].tolist())
    brackets = []
    for i in sorted(idx):
        a = grid[i - 1] if i > 0 else min(lo, grid[0])
        b = grid[i + 1] if i < n - 1 else max(hi, grid[-1])
        brackets.append((max(a, lo), min(b, hi)))
    if lo < grid[0]:
        brackets.append((lo, grid[0]))
    if hi > grid[-1]:
        brackets.append((grid[-1], hi))
    best_lam, best = float(grid[int(np.argmax(dg))]), float(dg.max())
    starts = []
    for a, b in brackets:
        if not b > a:
            continue
        starts.append(0.5 * (a + b))
        r = optimize.minimize_scalar(lambda x: -d(x), bounds=(a, b), method="bounded", options={"xatol": 1e-10 * max(1.0, abs(b - a))})
        for x in (r.x, a, b):
            v = d(x)
            if v > best:
                best, best_lam = v, float(x)
    viol = best - bound
    return OffGridCheck(
        lam_max=best_lam,
        sensitivity_max=float(best),
        bound=float(bound),
        violation=float(viol),
        rel_violation=float(viol / sc),
        n_eval=n_eval[0],
        lam_checked=np.asarray(starts),
    )


def exact_sensitivity_check(prob: Problem, p, A_sym, snr, interval, *, G_sym=None, slack: float = 0.0) -> ExactCertificate:
    r"""Exact proof that :math:`d(\lambda) \le \text{bound} + \text{slack}` for all :math:`\lambda` in ``interval``.

    ``A_sym`` (and ``G_sym``) are sympy matrices whose entries are rational functions of
    the symbol ``snr`` (:math:`= e^\lambda`).  The float gradient matrices and the bound
    are converted to exact rationals (their binary values), the inequality is written as
    :math:`P(\mathrm{snr}) / Q(\mathrm{snr}) \ge 0`, and its sign on
    :math:`[e^{\lambda_{lo}}, e^{\lambda_{hi}}]` is decided by real-root isolation
    (``sympy.Poly.intervals``): ``Q`` must have no root in the interval and ``P Q`` must be
    non-negative at both ends and at the end points of every isolating interval of the
    roots of ``P`` (between consecutive roots the sign is constant, and an odd-order
    root would show a sign change between its isolating end points).
    """
    import sympy as sp

    lo, hi = check_interval(*interval, name="interval")
    if snr is None:
        free = set()
        for e in A_sym:
            free |= sp.sympify(e).free_symbols
        if len(free) != 1:
            raise ValueError(f"A_sym must depend on exactly one symbol (snr) when snr is not given; found {free}")
        snr = free.pop()
    m = prob.m
    if tuple(A_sym.shape) != (m, m):
        raise ValueError(f"A_sym must have shape ({m}, {m}); got {A_sym.shape}")
    DA, DG, bound, sc = _sensitivity_parts(prob, p)
    R = sp.Rational
    d = 0
    for a in range(m):
        for b in range(m):
            if DA[a, b] != 0:
                d -= R(float(DA[a, b])) * A_sym[a, b]
            if DG is not None and DG[a, b] != 0:
                d -= R(float(DG[a, b])) * G_sym[a, b]
    expr = sp.together(R(float(bound)) + R(float(slack)) - d)
    num, den = sp.fraction(expr)
    P = sp.Poly(sp.expand(num), snr)
    Q = sp.Poly(sp.expand(den), snr)
    s_lo = R(float(np.exp(lo)))
    s_hi = R(float(np.exp(hi)))
    # exp(lo), exp(hi) in float are within an ulp of the true ends; the rational
    # interval [s_lo, s_hi] is the one certified (stated in the result).
    holds = True
    if Q.degree() > 0 and Q.intervals(inf=s_lo, sup=s_hi):
        holds = False  # a pole inside the interval
    pts = {s_lo, s_hi}
    roots = P.intervals(inf=s_lo, sup=s_hi) if P.degree() > 0 else []
    for (a, b), _mult in roots:
        pts.add(max(min(a, s_hi), s_lo))
        pts.add(max(min(b, s_hi), s_lo))
    margins = []
    for x in sorted(pts):
        val = P.eval(x) * Q.eval(x)
        margins.append(float(P.eval(x) / Q.eval(x)) if Q.eval(x) != 0 else float("-inf"))
        if val < 0:
            holds = False
    if P.is_zero:
        margins = [0.0]
    return ExactCertificate(
        holds=bool(holds),
        slack=float(slack),
        snr_interval=(float(s_lo), float(s_hi)),
        degree=int(P.degree()) if not P.is_zero else 0,
        n_roots=len(roots),
        min_margin=float(min(margins)),
    )
