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

Both checks, like :func:`noisealloc.solvers.certify`, take the same first arguments
``(problem, weights, criterion)``: a :class:`~noisealloc.solvers.problem.Problem`, or the raw
arrays with the criterion's keywords (:func:`~noisealloc.solvers.problem.as_problem`).  The
public :func:`noisealloc.solvers.certify` (in :mod:`~noisealloc.solvers.driver`) builds the
full :class:`~noisealloc.solvers.result.Certificate` with :func:`certify_problem`.

References
----------
docs/THEORY.md section 4 (a), "Certificates".
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from noisealloc.theory._threads import single_blas_thread
from noisealloc.solvers.algorithms.e_optimal import e_dual_bound
from noisealloc.solvers.problem import Problem, as_problem, check_weights, evaluate, gradient, scale
from noisealloc.solvers.result import Certificate, ExactCertificate, OffGridCheck
from noisealloc.theory.errors import check_interval
from noisealloc.theory.tolerances import FW_GAP_RTOL, KKT_RTOL

__all__ = [
    "certify_problem",
    "offgrid_check",
    "offgrid_check_problem",
    "exact_sensitivity_check",
    "exact_check_problem",
    "sensitivity_parts",
]


def certify_problem(prob: Problem, p: np.ndarray, *, rtol: float | None = None,
                    surrogate_value: float | None = None) -> Certificate:
    r"""The :class:`~noisealloc.solvers.result.Certificate` of an allocation of a validated problem.

    Parameters
    ----------
    prob : Problem
    p : ndarray, shape (n,)
        The allocation (a probability vector; not re-validated here).
    rtol : float, optional
        Tolerance of ``equivalence_ok`` and ``certified`` (default ``FW_GAP_RTOL`` for convex
        criteria, ``KKT_RTOL`` for the sandwich).
    surrogate_value : float, optional
        Sandwich only: V at the convex surrogate's optimum, stored as is (computed by the
        driver, which can solve the surrogate).

    Returns
    -------
    Certificate
        Gap, relative gap, equivalence slacks, support and atom bound, recomputed from
        ``(prob, p)`` alone.

    Raises
    ------
    SingularMomentError
        When the moment matrix of ``p`` is numerically singular.
    """
    if rtol is None:
        rtol = FW_GAP_RTOL if prob.convex else KKT_RTOL
    support = np.flatnonzero(p > 0)
    dual = None
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
    bound = prob.atom_bound
    gap_given = None
    if prob.convex and prob.criterion != "E" and prob.input_perturbation > 0:
        gap_given = gap_as_given(prob, p)
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
        surrogate_value=surrogate_value if prob.criterion == "sandwich" else None,
        input_perturbation=float(prob.input_perturbation),
        psd_projection=float(prob.psd_projection),
        gap_as_given=gap_given,
    )


def gap_as_given(prob: Problem, p: np.ndarray) -> float:
    r"""A bound on :math:`\Phi(p) - \Phi^*` of the input as given when the matrices solved differ from it.

    Every moment matrix of the input, in the problem's coordinates, satisfies
    :math:`\tilde M(q) - \eta I \preceq M(q) \preceq \tilde M(q) + \eta I` with
    :math:`\eta` = ``prob.input_perturbation``.  The convex criteria L, A, c and D are antitone in
    ``M``, so :math:`\Phi(p) \le \Phi_{-\eta}(p)` and
    :math:`\Phi^* \ge \Phi^*_{+\eta} \ge \Phi_{+\eta}(p) - \mathrm{gap}_{+\eta}(p)` (the Frank-Wolfe
    gap of the ridged problem), where :math:`\Phi_{\pm\eta}` is the criterion of :math:`\tilde M \pm \eta I`.

    Parameters
    ----------
    prob : Problem
        A convex problem other than 'E'.
    p : ndarray, shape (n,)

    Returns
    -------
    float
        :math:`\Phi_{-\eta}(p) - \Phi_{+\eta}(p) + \mathrm{gap}_{+\eta}(p)`; ``inf`` when
        :math:`\tilde M(p) - \eta I` is not positive definite.
    """
    from dataclasses import replace

    from noisealloc.solvers.criteria import SingularMomentError

    eta = prob.input_perturbation
    lo = replace(prob, regularization=prob.regularization - eta)
    hi = replace(prob, regularization=prob.regularization + eta)
    try:
        upper = evaluate(lo, p).value
    except SingularMomentError:
        return float("inf")
    ev = evaluate(hi, p)
    g = gradient(hi, ev)
    lower = ev.value - max(float(p @ g) - float(g.min()), 0.0)
    return float(max(upper - lower, 0.0))


def sensitivity_parts(prob: Problem, p: np.ndarray):
    r"""Gradient matrices and bound of the sensitivity :math:`d(\lambda) = -(\langle D_A, A(\lambda)\rangle + \langle D_G, G(\lambda)\rangle)`.

    Parameters
    ----------
    prob : Problem
    p : ndarray, shape (n,)
        The allocation.

    Returns
    -------
    DA : ndarray, shape (m, m)
    DG : ndarray, shape (m, m) or None
    bound : float
        :math:`-\sum_j p_j g_j`: the value :math:`d` must not exceed anywhere.
    scale : float
        Normaliser of the relative violation.
    """
    if prob.criterion == "E":
        E, g, lmin = e_dual_bound(prob, p)
        return -E, None, lmin - prob.regularization, max(lmin, np.finfo(float).tiny)
    ev = evaluate(prob, p)
    g = gradient(prob, ev)
    return ev.DA, ev.DG, -float(p @ g), scale(prob, ev)


def offgrid_check(problem, weights, criterion: str | None = None, *, A_fn, G_fn=None, interval=None,
                  n_top: int = 64, W=None, G=None, A_eval=None, c=None, grid=None) -> OffGridCheck:
    r"""Local maximisation of the sensitivity :math:`d(\lambda)` between grid nodes.

    Starts at every local maximum of :math:`d` sampled on the grid (plus the ``n_top``
    largest values and the interval ends) and maximises on the two adjacent grid
    intervals with bounded Brent.  A maximum hidden strictly inside an interval whose
    end points are not near a sampled local maximum is not searched: the exact check
    (:func:`exact_sensitivity_check`) has no such gap.

    Parameters
    ----------
    problem : Problem or array_like, shape (n, m, m)
        The problem, or its matrices ``A`` (then ``criterion`` and its keywords, and ``grid``).
    weights : array_like, shape (n,)
        Probability vector on the grid.
    criterion : str, optional
        As in :func:`noisealloc.solvers.solve` (raw arrays only; default ``'L'``).
    A_fn : callable
        ``lam -> A(lam)``, shape (m, m).
    G_fn : callable, optional
        ``lam -> G(lam)`` (required for the sandwich with a separate ``G``).
    interval : tuple of float, optional
        ``(lam_lo, lam_hi)`` to check (default the grid's end points).
    n_top : int
        Largest grid values of :math:`d` used as extra starts.
    W, G, A_eval, c, grid
        Raw-array keywords of :func:`~noisealloc.solvers.problem.make_problem`; the problem needs a grid.

    Returns
    -------
    OffGridCheck

    Examples
    --------
    A-optimal design for a line on [-1, 1] puts half the mass on each end; the sensitivity
    :math:`\operatorname{tr}(M^{-2} f f^\top)` peaks there:

    >>> import numpy as np
    >>> from noisealloc.solvers import offgrid_check
    >>> x = np.linspace(-1, 1, 5); F = np.stack([np.ones(5), x], 1)
    >>> fn = lambda t: np.outer([1.0, t], [1.0, t])
    >>> chk = offgrid_check(F[:, :, None] * F[:, None, :], [0.5, 0, 0, 0, 0.5], "A", A_fn=fn, grid=x)
    >>> abs(chk.violation) < 1e-12
    True
    """
    prob = as_problem(problem, criterion, W=W, G=G, A_eval=A_eval, c=c, grid=grid)
    return offgrid_check_problem(prob, check_weights(weights, prob.n), A_fn=A_fn, G_fn=G_fn, interval=interval,
                                 n_top=n_top)


def offgrid_check_problem(prob: Problem, p: np.ndarray, *, A_fn, G_fn=None, interval=None,
                          n_top: int = 64) -> OffGridCheck:
    """:func:`offgrid_check` on a validated problem and allocation (no re-validation).

    Parameters
    ----------
    prob : Problem
    p : ndarray, shape (n,)
        Probability vector (already validated).
    A_fn, G_fn, interval, n_top
        As in :func:`offgrid_check`.

    Returns
    -------
    OffGridCheck
    """
    # A_fn / G_fn are typically small Monte-Carlo GEMMs (4096 x 32) called ~1000 times by the
    # bracketed searches: threaded BLAS on a shared machine made each call ~20x slower.
    with single_blas_thread():
        return _offgrid_check(prob, p, A_fn=A_fn, G_fn=G_fn, interval=interval, n_top=n_top)


def _offgrid_check(prob: Problem, p: np.ndarray, *, A_fn, G_fn, interval, n_top) -> OffGridCheck:
    if prob.grid is None:
        raise ValueError("the off-grid check needs the grid of candidate levels")
    grid = prob.grid
    lo, hi = (grid[0], grid[-1]) if interval is None else check_interval(*interval, name="interval")
    DA, DG, bound, sc = sensitivity_parts(prob, p)
    if prob.criterion == "sandwich" and prob.G is not None and G_fn is None:
        raise ValueError("the sandwich off-grid check needs G_fn (lam -> G(lam))")
    n_eval = [0]
    # A_fn and G_fn give matrices of the problem as given; the gradient matrices are in the
    # problem's (preconditioned) coordinates: <D, T^-T X T^-1> = <T^-1 D T^-T, X>.
    DA_in, DG_in = prob.dual_to_original(DA), prob.dual_to_original(DG)

    def d(lam):
        n_eval[0] += 1
        Al = np.asarray(A_fn(float(lam)), dtype=float)
        val = -float(np.sum(DA_in * Al))
        if DG is not None:
            val -= float(np.sum(DG_in * np.asarray(G_fn(float(lam)), dtype=float)))
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
        nfev=n_eval[0],
        lam_checked=np.asarray(starts),
    )


def exact_sensitivity_check(problem, weights, criterion: str | None = None, *, A_sym, snr=None, interval=None,
                            G_sym=None, slack: float = 0.0, W=None, G=None, A_eval=None, c=None,
                            grid=None) -> ExactCertificate:
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

    Parameters
    ----------
    problem : Problem or array_like, shape (n, m, m)
        The problem, or its matrices ``A`` (then ``criterion`` and its keywords).
    weights : array_like, shape (n,)
        Probability vector on the grid.
    criterion : str, optional
        As in :func:`noisealloc.solvers.solve` (raw arrays only; default ``'L'``).
    A_sym : sympy.Matrix, shape (m, m)
        :math:`A` as rational functions of ``snr``.
    snr : sympy.Symbol, optional
        The variable (default: the one free symbol of ``A_sym``).
    interval : tuple of float, optional
        ``(lam_lo, lam_hi)`` (default the grid's end points).
    G_sym : sympy.Matrix, optional
        :math:`G` likewise (sandwich with a separate ``G``).
    slack : float
        Additive slack allowed above the bound.
    W, G, A_eval, c, grid
        Raw-array keywords of :func:`~noisealloc.solvers.problem.make_problem`.

    Returns
    -------
    ExactCertificate
    """
    prob = as_problem(problem, criterion, W=W, G=G, A_eval=A_eval, c=c, grid=grid)
    return exact_check_problem(prob, check_weights(weights, prob.n), A_sym=A_sym, snr=snr, interval=interval,
                               G_sym=G_sym, slack=slack)


def exact_check_problem(prob: Problem, p: np.ndarray, *, A_sym, snr=None, interval=None, G_sym=None,
                        slack: float = 0.0) -> ExactCertificate:
    """:func:`exact_sensitivity_check` on a validated problem and allocation (no re-validation).

    Parameters
    ----------
    prob : Problem
    p : ndarray, shape (n,)
        Probability vector (already validated).
    A_sym, snr, interval, G_sym, slack
        As in :func:`exact_sensitivity_check`.

    Returns
    -------
    ExactCertificate
    """
    import sympy as sp

    if interval is None:
        if prob.grid is None:
            raise ValueError("the exact check needs interval=(lam_lo, lam_hi) or a grid")
        interval = (prob.grid[0], prob.grid[-1])
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
    DA, DG, bound, sc = sensitivity_parts(prob, p)
    DA, DG = prob.dual_to_original(DA), prob.dual_to_original(DG)  # A_sym is the problem as given
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
