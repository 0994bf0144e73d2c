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
from noisealloc.solvers.problem import (
    Problem,
    as_problem,
    check_weights,
    evaluate,
    gradient,
    moments,
    scale,
    given_problem,
    unit_scaled,
)
from noisealloc.solvers.result import Certificate, ExactCertificate, OffGridCheck
from noisealloc.theory.errors import check_interval
from noisealloc.theory.tolerances import E_ROUNDING_ULPS, EPS, FW_GAP_RTOL, KKT_RTOL

__all__ = [
    "certify_problem",
    "offgrid_check",
    "offgrid_check_problem",
    "exact_sensitivity_check",
    "exact_check_problem",
    "sensitivity_parts",
]


def certify_problem(prob: Problem, p: np.ndarray, *, rtol: float | None = None,
                    surrogate_value: float | None = None, dual_hint: np.ndarray | None = None) -> Certificate:
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
    dual_hint : ndarray, shape (m, m), optional
        E only: a candidate dual matrix (the solver's double-double one), rescored from ``(A, p)``
        like every other candidate of :func:`~noisealloc.solvers.algorithms.e_optimal.e_dual_bound`;
        it spares that function its own double-double solve when its bound is already small.

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
        # Solved and certified on an exact power-of-two rescaling with entries of unit size: on data
        # scaled by 1e-300 the sums of the bound fell into subnormals and lost their relative accuracy.
        sp, f = unit_scaled(prob)
        E, g, lmin = e_dual_bound(sp, p, hint=dual_hint)
        rounding = e_rounding_bound(sp, p, E, g)
        reg = sp.regularization
        gbar = -(lmin - reg)
        # The scale is lambda_min of the input as given (without a ridge); the ridge cancels in the gap.
        sc = float(max(lmin - reg, np.finfo(float).tiny))
        gap = float(max(gbar - g.min(), 0.0))
        eq_slack = float(g.min() - gbar)
        sup_slack = float(np.max(np.abs(g[support] - gbar))) if support.size else 0.0
        eq_ok = bool(eq_slack >= -rtol * sc and sup_slack <= rtol * sc)
        rel_gap = gap / sc
        given_rel = (gap + rounding) / sc
        # back to the units of the problem as given (exact: a power of two, unless the result underflows)
        inv = 1.0 / f
        value, g, gbar, gap, sc = -lmin * inv, g * inv, gbar * inv, gap * inv, sc * inv
        eq_slack, sup_slack = eq_slack * inv, sup_slack * inv
        dual = E
        gap_given = gap + rounding * inv
    else:
        # The input as given, when the matrices solved are a PSD projection of it (QR preconditioning)
        solved, prob = prob, given_problem(prob)
        ev = evaluate(prob, p)
        g = gradient(prob, ev)
        value = ev.value
        gbar = float(p @ g)
        sc = scale(prob, ev)
        gap = float(max(gbar - g.min(), 0.0))
        eq_slack = float(g.min() - gbar)
        sup_slack = float(np.max(np.abs(g[support] - gbar))) if support.size else 0.0
        eq_ok = bool(eq_slack >= -rtol * sc and sup_slack <= rtol * sc)
        rel_gap = gap / sc
        gap_given = None
        given_rel = None
        if prob.convex and solved.A_given is not None:
            gap_given = gap_as_given(prob, p)
            given_rel = gap_given / sc
        prob = solved
    bound = prob.atom_bound
    return Certificate(
        criterion=prob.criterion,
        kind="duality-gap" if prob.convex else "kkt",
        value=float(value),
        g=g,
        g_bar=float(gbar),
        gap=gap,
        scale=float(sc),
        rel_gap=float(rel_gap),
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
        projection_distance=float(prob.projection_distance),
        gap_as_given=gap_given,
        rel_gap_as_given=None if given_rel is None else float(given_rel),
        certified_problem=_certified_problem(prob),
    )


def _certified_problem(prob: Problem) -> str:
    """One line naming the problem a certificate is for (``Certificate.certified_problem``)."""
    if prob.criterion == "E":
        what = "the input as given (E: gap_as_given adds a bound on the float64 rounding of the gap)"
    elif prob.A_given is not None:
        what = (f"the input as given (its float matrices congruent to the solved coordinates in double-double, "
                f"rounding {prob.input_perturbation:.3g} covered by gap_as_given; the algorithms ran on its PSD "
                f"projection, {prob.projection_distance:.3g} away in those coordinates, negative eigenvalues "
                f"{prob.psd_projection:.3g} relative)")
    elif prob.precond_kind == "qr":
        dist = (f", {prob.projection_distance:.3g} away from the input as given in the solved coordinates"
                if prob.projection_distance else "")
        what = (f"the PSD-projected input, not the input as given (the QR preconditioning factored it: negative "
                f"eigenvalues {prob.psd_projection:.3g} relative to the largest, and those below rounding, "
                f"projected away{dist}; the matrices solved are certified)")
    elif prob.precond_kind == "jacobi":
        what = "the input as given (solved in exactly rescaled coordinates)"
    else:
        what = "the input as given"
    if prob.regularization:
        what += f", with the ridge {prob.regularization:.3g} * I recorded in regularization"
    return what


def e_rounding_bound(prob: Problem, p: np.ndarray, E: np.ndarray, g: np.ndarray) -> float:
    r"""A bound on the float64 rounding of E's weak-duality gap, so that gap plus it bounds the exact gap.

    The exact gap of the input as given with the returned dual matrix is
    :math:`\max_i \langle E', A_i\rangle + \delta - \lambda_{\min}(M(p))`, with
    :math:`E' = (E + sI) / \operatorname{tr}(E + sI)` exactly PSD and of unit trace,
    :math:`s = \max(0, -\lambda_{\min}(E))` plus its eigenvalue error.  First-order rounding-error
    bounds (Higham 2002, ch. 3; :math:`\gamma_k \approx k\varepsilon`), each by a factor
    ``E_ROUNDING_ULPS``:

    * :math:`\langle E, A_i\rangle` by one GEMV of length :math:`m^2` and the trace normalisation:
      :math:`(m^2 + m + 2)\,\varepsilon \langle |E|, |A_i|\rangle`; the shift adds
      :math:`s \operatorname{tr}(A_i)^+`;
    * :math:`\lambda_{\min}(M(p))`: :math:`M(p)` summed over the ``k`` atoms,
      :math:`(k + 2)\varepsilon \|\sum_i p_i |A_i|\|_F`, and eigvalsh's backward error
      :math:`m \varepsilon \|M(p)\|_2`.

    These are of order :math:`m^2 \varepsilon \lambda_{\max}`: relative to :math:`\lambda_{\min}`
    they exceed the tolerance when :math:`\lambda_{\min} / \lambda_{\max}` is below about
    :math:`m^2 \varepsilon / \mathrm{tol}`, where float64 cannot certify E.

    Parameters
    ----------
    prob : Problem
        An 'E' problem (entries of unit size: :func:`~noisealloc.solvers.problem.unit_scaled`).
    p : ndarray, shape (n,)
    E : ndarray, shape (m, m)
        The dual matrix (trace one, PSD up to rounding).
    g : ndarray, shape (n,)
        :math:`-\langle E, A_i\rangle` as computed.

    Returns
    -------
    float
        The bound, absolute, in the units of ``prob``.
    """
    from noisealloc.solvers import _double_double as ddm

    m = prob.m
    k = E_ROUNDING_ULPS * EPS
    Es = 0.5 * (E + E.T)
    ev_E = np.linalg.eigvalsh(Es)
    shift = max(0.0, -float(ev_E[0])) + k * m * float(np.max(np.abs(ev_E)))
    tr = np.maximum(np.einsum("ijj->i", prob.A), 0.0)
    # <E, A_i> in double-double (exact products, sums to eps^2): a float64 GEMV's bound
    # m^2 eps <|E|, |A_i|> alone exceeded the tolerance on well-posed problems (m = 9, lambda_min 1e-5).
    hi, lo = ddm._two_prod(prob.Aflat, Es.ravel()[None, :])
    acc = (hi[:, 0], lo[:, 0])
    for j in range(1, hi.shape[1]):
        acc = ddm.add(acc, (hi[:, j], lo[:, j]))
    ub = acc[0] + acc[1]
    absdot = np.abs(prob.Aflat) @ np.abs(Es).ravel()
    # trace normalisation of E (relative (m + 2) eps), the dd sums and the final rounding of each
    ub_err = k * (m + 2) * np.abs(ub) + k * EPS * m * m * absdot + shift * tr
    up = float(np.max(ub + ub_err) - np.max(-g))
    idx = np.flatnonzero(p)
    Mabs = (p[idx] @ np.abs(prob.Aflat[idx])).reshape(m, m)
    M, _ = moments(prob, p)
    lo_err = k * (idx.size + 2) * float(np.linalg.norm(Mabs)) + k * m * float(np.linalg.norm(M, 2))
    return float(up + lo_err)


def gap_as_given(prob: Problem, p: np.ndarray) -> float:
    r"""A bound on :math:`\Phi(p) - \Phi^*` of the exact input as given from its rounded congruence ``prob.A``.

    Every moment matrix of the exact input, in the problem's coordinates, satisfies
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
        :math:`\Phi_{-\eta}(p) - \Phi_{+\eta}(p) + \mathrm{gap}_{+\eta}(p)` plus the float64 rounding of
        the gap (:func:`_fw_rounding_bound`); ``inf`` when
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
    return float(max(upper - lower, 0.0)) + _fw_rounding_bound(hi, p, ev, g)


def _fw_rounding_bound(prob: Problem, p: np.ndarray, ev, g: np.ndarray) -> float:
    r"""First-order bound on the float64 rounding of a Frank-Wolfe gap :math:`\sum_i p_i g_i - \min_i g_i`.

    :math:`g_i = \langle D, A_i\rangle` by a GEMV of length :math:`m^2` (:math:`m^2\varepsilon\langle |D|, |A_i|\rangle`),
    :math:`\bar g` summed over the ``s`` atoms (:math:`(s + 2)\varepsilon \sum_i p_i |g_i|`), and ``D`` itself,
    computed through :math:`M(p)^{-1}` to a relative :math:`m \kappa(M(p))\varepsilon`; each times
    ``E_ROUNDING_ULPS``.  Without it the bound missed the exact gap by 1e-5 of itself on a near-collinear
    D problem (gap 1.2e-10, gradients of size 2).
    """
    m, k = prob.m, E_ROUNDING_ULPS * EPS
    absD = np.abs(ev.DA).ravel()
    if ev.DG is not None:
        absD = absD + np.abs(ev.DG).ravel()
    idx = np.flatnonzero(p)
    gemv = float(np.max(np.abs(prob.Aflat) @ absD))
    evm = np.linalg.eigvalsh(ev.M)
    kappa = float(evm[-1] / evm[0]) if evm[0] > 0 else float("inf")
    return float(k * ((m * m + 2) * gemv + (idx.size + 2) * float(p[idx] @ np.abs(g[idx]))
                      + 2 * m * kappa * float(np.max(np.abs(g)))))


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
        sp, f = unit_scaled(prob)  # see certify_problem
        E, g, lmin = e_dual_bound(sp, p)
        return -E, None, (lmin - sp.regularization) / f, max(lmin - sp.regularization, np.finfo(float).tiny) / f
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
