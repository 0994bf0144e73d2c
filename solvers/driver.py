r"""The driver: :func:`solve` (optimal allocation with a certificate) and :func:`certify`.

:func:`solve` validates the problem once (:func:`~noisealloc.solvers.problem.as_problem`),
runs a main algorithm (:mod:`~noisealloc.solvers.algorithms.multiplicative`,
:mod:`~noisealloc.solvers.algorithms.frank_wolfe` or :mod:`~noisealloc.solvers.algorithms.rex`) to find the
support, then the polish (:mod:`~noisealloc.solvers.algorithms.polish`, or
:mod:`~noisealloc.solvers.algorithms.e_optimal` for 'E'), and lets the certificate
(:mod:`~noisealloc.solvers.certificates`), not the algorithms' own bookkeeping, decide the
status.  :func:`certify` recomputes that certificate for any allocation.  Both run with BLAS
limited to one thread, scoped to the call (:func:`~noisealloc.solvers.single_blas_thread`).

References
----------
docs/THEORY.md section 4, regime (a): criteria and certificates.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from math import comb

import numpy as np

from noisealloc.solvers.algorithms import e_optimal, elfving, frank_wolfe, multiplicative, rex
from noisealloc.solvers.algorithms import polish as polish_mod
from noisealloc.solvers._linalg import psd_part
from noisealloc.theory._threads import single_blas_thread
from noisealloc.solvers.certificates import certify_problem, exact_check_problem, offgrid_check_problem
from noisealloc.solvers.criteria import SingularMomentError
from noisealloc.solvers.problem import (
    Problem,
    as_problem,
    check_weights,
    criterion_value,
    evaluate,
    moments,
    given_problem,
    new_counters,
    unit_scaled,
)
from noisealloc.solvers.result import STATUS_MESSAGES, Certificate, SolveResult
from noisealloc.theory.errors import ConvergenceWarning, as_generator, check_choice
from noisealloc.solvers.sandwich_global import (
    bernstein_proof,
    branch_and_bound,
    dirichlet_starts,
    exhaustive_one_parameter,
    proportional_factor,
    support_starts,
)
from noisealloc.theory.tolerances import (
    FW_GAP_RTOL,
    KKT_RTOL,
    SANDWICH_BNB_MAX_BOXES,
    SANDWICH_BERNSTEIN_MAX_LEVELS,
    SANDWICH_BERNSTEIN_MAX_LEVELS_PYTHON,
    SANDWICH_GLOBAL_RTOL,
    SANDWICH_RANDOM_STARTS,
    SANDWICH_REFINE_RTOL,
    SANDWICH_SUPPORT_STARTS,
    SANDWICH_SAME_VALUE_RTOL,
    SINGULAR_RCOND,
)

__all__ = ["METHODS", "solve", "certify"]

#: Methods accepted by :func:`solve`.
METHODS = ("auto", "frank-wolfe", "multiplicative", "rex")


#: Extra runs of the main algorithm alone (each to a tenth of the previous gap) when its gap met
#: tol but the equivalence check did not yet (support atoms not at equal gradient).
_EQUALITY_ROUNDS = 3


def _default_max_iter(method: str) -> int:
    return {"frank-wolfe": 20000, "multiplicative": 20000, "rex": 2000}.get(method, 20000)


def solve(
    problem,
    criterion: str | None = None,
    *,
    W=None,
    G=None,
    A_eval=None,
    c=None,
    grid=None,
    method: str = "auto",
    polish: bool = True,
    tol: float | None = None,
    max_iter: int | None = None,
    p0=None,
    rng=None,
    starts=None,
    n_random_starts: int | None = None,
    global_search: bool | None = None,
) -> SolveResult:
    r"""Optimal allocation on a candidate grid, with a certificate.

    Minimises :math:`\Phi(M(p))` over probability vectors ``p`` on the grid (criteria in
    :mod:`~noisealloc.solvers.criteria`).  The main algorithm reduces the certified gap quickly
    and identifies the support; ``polish=True`` then runs projected Newton on the active
    support with column generation over all candidates (quadratic convergence), until
    the certified relative gap is at most ``tol``.

    Parameters
    ----------
    problem : Problem or array_like, shape (n, m, m)
        A validated :class:`~noisealloc.solvers.problem.Problem`, or the per-level symmetric PSD
        matrices :math:`A(\lambda_i)` (then the criterion and its keywords below build it).
    criterion : {'sandwich', 'V', 'L', 'A', 'D', 'E', 'c'}, optional
        Default ``'L'`` for raw arrays; with a Problem only its own criterion.
    W : array_like, shape (m, m), optional
        Weight of 'L' (default identity).
    G : array_like, shape (n, m, m), optional
        Sandwich only: :math:`G(\lambda_i)` (default ``A``, i.e. ``G = A``, convex case).
    A_eval : array_like, shape (m, m)
        Sandwich only: :math:`A_\omega = \int \omega A`.
    c : array_like, shape (m,)
        'c' only.
    grid : array_like, shape (n,), optional
        Strictly increasing candidate levels :math:`\lambda_i` (used for ``lam`` and merging).
    method : {'auto', 'frank-wolfe', 'multiplicative', 'rex'}
        ``'auto'``: multiplicative for convex criteria, Frank-Wolfe (pairwise) for the sandwich; for 'c' with
        the polish and no ``p0``, the start is Elfving's dual barrier
        (:mod:`~noisealloc.solvers.algorithms.elfving`, ``method`` of the result ``'elfving+polish'``), the
        multiplicative one only when the dual's support leaves :math:`M(p)` singular.
    polish : bool
        Finish with projected Newton on the active support (default True); for 'E' the
        finish is the primal-dual interior point of :mod:`~noisealloc.solvers.algorithms.e_optimal`, repeated in
        double-double arithmetic when float64 stalls above ``E_POLISH_RTOL`` (degenerate problems).
    tol : float, optional
        Target certified relative gap (default ``FW_GAP_RTOL`` = 1e-8 for convex criteria,
        ``KKT_RTOL`` = 1e-6 for the sandwich).
    max_iter : int, optional
        Iteration limit of the main algorithm.
    p0 : array_like, shape (n,), optional
        Starting allocation (default uniform).
    rng : numpy.random.Generator or int or None
        Randomness of 'rex' and of the sandwich multi-start's Dirichlet starts (for the
        multi-start ``None`` means seed 0, so a result is reproducible by default).
    starts : sequence of array_like, shape (n,), optional
        Sandwich only: extra starting allocations of the multi-start (e.g. the square-root
        entropic density on the grid).
    n_random_starts : int, optional
        Sandwich only: random Dirichlet starts of the multi-start (default
        ``SANDWICH_RANDOM_STARTS`` = 4, and 0 where the default two-parameter proof runs: it proves the
        best start or finds a lower point itself; 0 keeps the uniform (or ``p0``) start, the surrogate's
        optimum, the best small supports and ``starts``).  Not used where ``G = sA`` or ``m = 1``.
    global_search : bool, optional
        Sandwich only: after the multi-start, try to prove the best KKT point global, to relative
        accuracy ``SANDWICH_GLOBAL_RTOL``: for ``m = 2`` by
        :func:`~noisealloc.solvers.sandwich_global.bernstein_proof` (Bernstein subdivision over every set
        of four levels, Theorem 1's bound; a lower point it finds is polished and the proof repeated);
        for larger ``m`` by :func:`~noisealloc.solvers.sandwich_global.branch_and_bound` (perspective
        relaxation over :math:`A_p^{-1}`, ``SANDWICH_BNB_MAX_BOXES`` boxes).  Default (None): when ``m = 2``
        and ``n <= SANDWICH_BERNSTEIN_MAX_LEVELS`` (``SANDWICH_BERNSTEIN_MAX_LEVELS_PYTHON`` when numba is
        missing or disabled: the proof's kernels then run as plain Python); True: for any ``m``; False: never.

    Returns
    -------
    SolveResult
        ``status`` is a key of ``STATUS_MESSAGES``; ``success`` (``status == 0``) only when the
        certificate's gap and equivalence check hold at ``tol`` (its atom count may exceed
        Theorem 1's bound at tied optima: :func:`~noisealloc.solvers.reduce_support`).
        ``optimality`` is ``'global'`` for convex criteria and for sandwiches with a global proof
        (``G = sA``, where V is convex; one parameter, where single levels and pairs are searched
        exhaustively in closed form; a branch and bound that closed, see ``global_search``), else ``'local (KKT)'`` after a multi-start from the uniform
        (or ``p0``) allocation, the convex surrogate's optimum, ``starts``, ``n_random_starts``
        Dirichlet draws and the ``SANDWICH_SUPPORT_STARTS`` best supports of ``m`` levels
        (:func:`~noisealloc.solvers.sandwich_global.support_starts`), the lowest value kept (at equal
        values a certified run; when ``tol`` is below ``KKT_RTOL`` the extra starts run to ``KKT_RTOL``
        and only those within ``SANDWICH_REFINE_RTOL`` of the best value continue to ``tol``, so the
        others' ``start_values`` are their values at ``KKT_RTOL``); ``'none'`` when the certificate does not hold (``status != 0``) (``n_starts`` and ``start_values`` report the
        starts and the spread of their values); the message says which.

    Raises
    ------
    ValueError
        Invalid input (see :func:`~noisealloc.solvers.problem.make_problem`).
    SingularMomentError
        When the starting allocation's moment matrix is numerically singular and the
        algorithms cannot leave it (a :class:`numpy.linalg.LinAlgError`;
        :func:`~noisealloc.solvers.optimize_allocation` turns it into a status).

    Warns
    -----
    ConvergenceWarning
        If the certificate does not hold at ``tol``.
    RegularizationWarning
        If a ridge had to be added (near-singular problem).

    References
    ----------
    docs/THEORY.md section 4 (a): criteria to support, certificates (global versus local sandwich optima).

    Examples
    --------
    Quadratic regression on five points of [-1, 1], A-optimal:

    >>> import numpy as np
    >>> from noisealloc.solvers import solve
    >>> x = np.linspace(-1, 1, 5); F = np.stack([np.ones(5), x, x**2], 1)
    >>> res = solve(F[:, :, None] * F[:, None, :], "A")
    >>> np.round(res.weights, 6).tolist()
    [0.25, 0.0, 0.5, 0.0, 0.25]
    """
    prob = as_problem(problem, criterion, W=W, G=G, A_eval=A_eval, c=c, grid=grid)
    with single_blas_thread():
        return _solve(prob, method=method, polish=polish, tol=tol, max_iter=max_iter, p0=p0, rng=rng,
                      starts=starts, n_random_starts=n_random_starts, global_search=global_search)


def _solve(prob: Problem, *, method, polish, tol, max_iter, p0, rng, starts=None, n_random_starts=None,
           global_search=None) -> SolveResult:
    check_choice(method, "method", METHODS)
    if global_search is not None and not isinstance(global_search, (bool, np.bool_)):
        raise ValueError(f"global_search must be True, False or None; got {global_search!r}")
    elfving_start = method == "auto" and prob.criterion == "c" and polish and p0 is None
    if method == "auto":
        method = "multiplicative" if prob.convex else "frank-wolfe"
    if method == "multiplicative" and not prob.convex:
        raise ValueError("method 'multiplicative' needs a convex criterion; the sandwich is not convex (use 'frank-wolfe')")
    if method == "rex" and prob.criterion not in ("L", "A", "c", "D"):
        raise ValueError(f"method 'rex' supports criteria 'L', 'A', 'c', 'D'; got {prob.criterion!r}")
    if tol is None:
        tol = FW_GAP_RTOL if prob.convex else KKT_RTOL
    tol = float(tol)
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive finite number; got {tol!r}")
    if max_iter is None:
        max_iter = _default_max_iter(method)
    if not isinstance(max_iter, (int, np.integer)) or max_iter < 0:
        raise ValueError(f"max_iter must be a non-negative integer; got {max_iter!r}")
    n = prob.n
    if p0 is None:
        p = np.full(n, 1.0 / n)
    else:
        p = check_weights(p0, n, name="p0", exact_sum=False)
        if not np.isfinite(criterion_value(prob, p)):
            raise ValueError("p0 has a singular information matrix; start from an allocation with M(p0) positive definite")
    gen = None
    seed_state = None
    if method == "rex":
        gen = as_generator(rng)
        seed_state = gen.bit_generator.state

    counters = new_counters()
    # V at the convex surrogate's optimum is a property of the problem: one L solve, not one per start
    surrogate = surrogate_value(prob)
    # E is solved on an exact power-of-two rescaling with entries of unit size (data scaled by 1e-300
    # summed into subnormals); the weights do not change, the certificate is scaled back at the end.
    given, (prob, factor) = prob, unit_scaled(prob)
    if elfving_start:
        # c: Elfving's dual finds the optimal atoms in O(n m^2) per Newton step; the multiplicative start
        # left the polish sliding atoms one sensitivity peak per round on near-tied levels (16 rounds)
        pe = elfving.run(prob, counters=counters)
        if pe is not None:
            p, method = pe, "elfving"

    def run_from(p, run_tol=tol):
        return _run_from(prob, p, method=method, polish=polish, tol=run_tol, max_iter=max_iter, gen=gen,
                         counters=counters, surrogate=surrogate)

    p, status, cert = run_from(p)
    if method == "elfving" and status != 0:
        # The dual's start was not certified (seen at the float64 rounding floor of ill-conditioned c problems,
        # gap 4e-8 where the multiplicative start's polish ended at 9e-9): the former start is tried too and
        # the better certificate kept, so the new start never loses what the old one found.
        method = "multiplicative"
        q, st_q, cert_q = run_from(np.full(prob.n, 1.0 / prob.n))
        if st_q == 0 or cert_q.rel_gap < cert.rel_gap:
            p, status, cert = q, st_q, cert_q
        else:
            method = "elfving"
    optimality, proof = "global", "convex criterion"
    n_starts, start_values, ms_state = 1, None, None
    if prob.criterion == "sandwich":
        p, status, cert, optimality, proof, n_starts, start_values, ms_state = _sandwich_global(
            prob, p, status, cert, run_from=run_from, starts=starts, n_random_starts=n_random_starts, rng=rng,
            global_search=global_search)
    elif starts is not None or n_random_starts is not None or global_search is not None:
        raise ValueError(f"starts, n_random_starts and global_search are for the non-convex sandwich only; criterion "
                         f"{prob.criterion!r} is convex (one start finds the global optimum)")
    if status != 0 and not (prob.criterion == "sandwich" and prob.m == 1 and optimality == "global"):
        # Neither global nor a KKT point unless the certificate holds (for m = 1 the value itself is
        # compared with the exact global minimum).
        optimality = "none"
    if factor != 1.0:
        cert = _rescaled_certificate(cert, 1.0 / factor, given)
        prob = given
    support = np.flatnonzero(p > 0)
    label = method + ("+polish" if polish else "")
    message = STATUS_MESSAGES[status] + f" (certified relative gap {cert.rel_gap:.3g}, tol {tol:g})"
    if cert.rel_gap_as_given is not None:
        message += (f"; for {cert.certified_problem}, the relative gap is bounded by "
                    f"{cert.rel_gap_as_given:.3g}")
        if prob.criterion == "E" and status == 6:
            message += (" (float64 rounding of lambda_min(M(p)), of order m eps lambda_max, is too "
                        f"large relative to lambda_min = {-cert.value:.3g})")
    if prob.criterion == "sandwich":
        message += f"; optimality: {optimality} ({proof})"
    if status != 0:
        warnings.warn(f"{label}: {message}", ConvergenceWarning, stacklevel=3)
    return SolveResult(
        weights=p,
        support=support,
        lam=None if prob.grid is None else prob.grid[support],
        value=cert.value,
        gap=cert.gap,
        rel_gap=cert.rel_gap,
        success=status == 0,
        status=status,
        message=message,
        nit=counters["nit"],
        njev=counters["njev"],
        nfev=counters["nfev"],
        method=label,
        criterion=prob.criterion,
        tol=tol,
        max_iter=int(max_iter),
        regularization=prob.regularization,
        certificate=cert,
        seed_state=seed_state if ms_state is None else ms_state,
        optimality=optimality,
        n_starts=n_starts,
        start_values=start_values,
    )


def _run_from(prob: Problem, p: np.ndarray, *, method, polish, tol, max_iter, gen, counters, surrogate=None):
    """Main algorithm, polish and certificate from one start; the status the certificate decides."""
    mus = [0.0]
    if prob.criterion == "E":
        ev0 = evaluate(prob, p)
        lam_scale = abs(ev0.eig[0][-1])
        # With polish the smoothed main run only finds a warm start for the interior
        # point; alone it follows the smoothing to mu -> 0 (it cannot reach 1e-8).
        mus = [lam_scale * 1e-2] if polish else [lam_scale * 10.0 ** (-k) for k in (2, 4, 6, 8, 10, 12)]
    # The main algorithm is run to a loose gap when polishing follows (it only has to
    # find the support); alone it must reach tol.
    main_tol = max(tol, 1e-3) if polish else tol
    main_iter = min(max_iter, 40) if polish else max_iter
    status = 1
    dual_hint = None  # E's double-double dual matrix, rescored by the certificate instead of re-solved

    def main(p, main_tol, mu):
        if method == "elfving":
            return p, 1  # the start is the dual's support (_solve); the polish certifies
        if method == "multiplicative":
            return multiplicative.run(prob, p, tol=main_tol, max_iter=main_iter, mu=mu, counters=counters)
        if method == "frank-wolfe":
            return frank_wolfe.run(prob, p, tol=main_tol, max_iter=main_iter, mu=mu, counters=counters)
        return rex.run(prob, p, tol=main_tol, max_iter=main_iter, rng=gen, counters=counters)

    for mu in mus:
        p, status = main(p, main_tol, mu)
        if polish and prob.criterion == "E":
            # non-smooth: primal-dual interior point with column generation
            p, status, dual_hint = e_optimal.run(prob, p, tol=tol, counters=counters)
        elif polish:
            p, status = polish_mod.run(prob, p, tol=tol, mu=mu, counters=counters)
    cert = _certify(prob, p, rtol=tol, surrogate=surrogate, dual_hint=dual_hint)
    # The gap met tol but the gradient is not yet equal on the support: the main algorithm alone
    # stops on the gap, so it continues to a tenth of the gap, up to _EQUALITY_ROUNDS times.
    rounds = 0
    while (not polish and status == 0 and rounds < _EQUALITY_ROUNDS and cert.rel_gap <= tol
           and not cert.equivalence_ok):
        rounds += 1
        p, status = main(p, tol * 0.1**rounds, mus[-1])
        status = 0 if status == 2 else status  # stalled below tol: the certificate decides
        cert = _certify(prob, p, rtol=tol, surrogate=cert.surrogate_value)
    if cert.rel_gap <= tol and not cert.equivalence_ok:
        p, cert = _restore_equality(prob, p, cert, tol, counters)
    if polish and prob.A_given is not None and not cert.optimality_ok:
        p, cert = _polish_as_given(prob, p, cert, tol, counters)
    # The certificate, not the solver's own bookkeeping, decides convergence: the gap and the
    # equivalence check (equality of the gradient on the support) must both hold.
    if cert.optimality_ok:
        status = 0
    elif cert.rel_gap <= tol and cert.equivalence_ok:
        status = 6  # the problem solved is certified, the input as given is not (Certificate.gap_as_given)
    elif cert.rel_gap <= tol:
        status = 3
    elif status == 0:
        status = 2
    return p, status, cert


def _better(a, b, value_scale: float) -> bool:
    """Run ``a = (p, status, cert)`` beats ``b``: a lower value by more than ``SANDWICH_SAME_VALUE_RTOL``
    of ``max(V_b, V(uniform))``; at equal values (within that), a certified run beats one that is not.

    The value decides first: a certified KKT point far above a point that stalled near the singular
    boundary (where the infimum sits) is not the better answer, and the status of the returned run
    says that it stalled.  Ties keep the earlier start: values that differ by rounding (e.g.
    V ~ 1e-317 of a problem whose V vanishes) are the same optimum.
    """
    if not np.isfinite(b[2].value):
        # a singular b (V = inf) makes the margin inf - inf = nan: any finite value is lower
        return bool(np.isfinite(a[2].value)) or (a[1] == 0 and b[1] != 0)
    margin = SANDWICH_SAME_VALUE_RTOL * max(abs(b[2].value), value_scale)
    if a[2].value < b[2].value - margin:
        return True
    return a[2].value <= b[2].value + margin and a[1] == 0 and b[1] != 0


def _sandwich_global(prob: Problem, p, status, cert, *, run_from, starts, n_random_starts, rng, global_search=None):
    r"""Global proof where one is affordable, else a multi-start keeping the best KKT point.

    Returns ``(p, status, cert, optimality, proof, n_starts, start_values, seed_state)``
    (see :func:`solve`, Returns).
    """
    s = proportional_factor(prob)
    if s is not None:
        return p, status, cert, "global", f"G = sA with s = {s:.6g}: V is convex", 1, None, None
    if prob.m == 1:
        v_glob, w_glob = exhaustive_one_parameter(prob)
        if not cert.value <= v_glob * (1.0 + SANDWICH_SAME_VALUE_RTOL):
            # The exact minimiser is itself the answer; the local run only stopped elsewhere.
            c_glob = _certify(prob, w_glob, rtol=cert.rtol, surrogate=cert.surrogate_value)
            p, cert = w_glob, c_glob
            status = 0 if c_glob.optimality_ok else 3 if c_glob.rel_gap <= c_glob.rtol else 2
        ok = cert.value <= v_glob * (1.0 + SANDWICH_SAME_VALUE_RTOL)
        return (p, status, cert, "global" if ok else "local (KKT)",
                f"m = 1: exhaustive search over single levels and pairs, global minimum {v_glob:.8g}",
                1, None, None)
    from noisealloc.theory import _numba

    # the default two-parameter proof and its level cap (without numba its kernels run as plain Python,
    # ~500x slower: a smaller cap)
    cap_name, cap = (("SANDWICH_BERNSTEIN_MAX_LEVELS", SANDWICH_BERNSTEIN_MAX_LEVELS) if _numba.HAVE_NUMBA else
                     ("SANDWICH_BERNSTEIN_MAX_LEVELS_PYTHON (numba is missing or disabled)",
                      SANDWICH_BERNSTEIN_MAX_LEVELS_PYTHON))
    proof_by_default = prob.m == 2 and prob.n <= cap
    if n_random_starts is None:
        # Where the proof runs, random starts add nothing it needs: it either proves the best start's value
        # or returns a lower allocation, which is polished and proved in turn (_bernstein_proof).
        n_random_starts = 0 if (global_search is None and proof_by_default) else SANDWICH_RANDOM_STARTS
    if not isinstance(n_random_starts, (int, np.integer)) or n_random_starts < 0:
        raise ValueError(f"n_random_starts must be a non-negative integer; got {n_random_starts!r}")
    gen = as_generator(0 if rng is None else rng)
    seed_state = gen.bit_generator.state
    begin = []
    if starts is not None:
        for k, q in enumerate(starts):
            q = check_weights(q, prob.n, name=f"starts[{k}]", exact_sum=False)
            if not np.isfinite(criterion_value(prob, q)):
                raise ValueError(f"starts[{k}] has a singular information matrix; give allocations with M(p) "
                                 "positive definite")
            begin.append(q)
    n_given = len(begin)
    # The convex surrogate tr(A_w A_p^-1)'s optimum: exact where G = sA, a start near it otherwise.
    surrogate = _surrogate_solve(prob)
    begin.append(surrogate.weights)
    begin.extend(dirichlet_starts(prob.n, int(n_random_starts), gen))
    # Dense starts funnel into one basin: also start on the best small supports.
    n_support = len(begin)
    begin.extend(support_starts(prob, SANDWICH_SUPPORT_STARTS))
    n_support = len(begin) - n_support
    best = (p, status, cert)
    # Each start first runs to KKT_RTOL only (when tol is tighter): most starts end in a worse basin,
    # and their tight polish is most of the cost.  A start whose value there is within
    # SANDWICH_REFINE_RTOL of the best is then continued from that point to tol (the continuation
    # changes V by far less than that margin, so no contender is lost); the others keep the value
    # they reached, certified at KKT_RTOL.
    loose_tol = max(cert.rtol, KKT_RTOL)
    runs = []
    for q in begin:
        try:
            runs.append(run_from(q, loose_tol))
        except SingularMomentError:  # a start whose descent ends on the singular boundary
            runs.append(None)
    v_lo = min([cert.value] + [r[2].value for r in runs if r is not None])
    values = [cert.value]
    for run in runs:
        if run is None:
            values.append(np.nan)
            continue
        if run[2].rtol > cert.rtol and run[2].value <= v_lo + SANDWICH_REFINE_RTOL * max(abs(v_lo), prob.value_scale):
            try:
                run = run_from(run[0])
            except SingularMomentError:
                # the continuation stepped onto the singular boundary: the loose point stands, with its
                # status judged at tol (a KKT_RTOL certificate must not pass for one at tol)
                c_t = _certify(prob, run[0], rtol=cert.rtol, surrogate=run[2].surrogate_value)
                run = (run[0], 0 if c_t.optimality_ok else 3 if c_t.rel_gap <= c_t.rtol else 2, c_t)
        values.append(run[2].value)
        if _better(run, best, prob.value_scale):
            best = run
    values = np.asarray(values)
    v_best = best[2].value
    n_best = int(np.sum(np.abs(values - v_best) <= SANDWICH_SAME_VALUE_RTOL * max(abs(v_best), prob.value_scale)))
    proof = (f"best of {values.size} starts (uniform or p0, surrogate optimum, {n_given} given, "
             f"{int(n_random_starts)} Dirichlet, {n_support} on the best m-level supports): values {np.nanmin(values):.8g} .. {np.nanmax(values):.8g}, "
             f"{n_best} at the best")
    if global_search is None:
        global_search = proof_by_default
        if prob.m == 2 and not global_search:
            proof += f"; no global proof (n = {prob.n} levels > {cap_name} = {cap})"
    optimality = "local (KKT)"
    if global_search and best[1] == 0:
        if prob.m == 2:
            best, optimality, note = _bernstein_proof(prob, best, run_from)
        else:
            best, optimality, note = _branch_and_bound_proof(prob, best, run_from)
        proof = (note if optimality == "global" else proof + "; " + note)
    return best[0], best[1], best[2], optimality, proof, int(values.size), values, seed_state


#: Rounds of the two-parameter proof: each round that finds an allocation below the incumbent polishes
#: from it and tries again.
_PROOF_ROUNDS = 4


def _bernstein_proof(prob: Problem, best, run_from):
    """Two-parameter global proof (:func:`~noisealloc.solvers.sandwich_global.bernstein_proof`) of the
    multi-start's best certified KKT point ``best = (p, status, cert)``.

    A point the proof finds below the incumbent is polished and replaces ``best`` when certified and
    lower, and the proof is repeated (at most ``_PROOF_ROUNDS`` rounds); the label is ``'global'`` when a
    round closes, i.e. :math:`V(p) \\ge (1 - \\text{SANDWICH\\_GLOBAL\\_RTOL})\\, V(p_{\\text{returned}})` for every
    allocation.
    """
    pieces, seconds = 0, 0.0
    for _round in range(_PROOF_ROUNDS):
        bb = bernstein_proof(prob, best[2].value, rtol=SANDWICH_GLOBAL_RTOL)
        pieces += bb.boxes
        seconds += bb.seconds
        what = (f"Bernstein proof over all {comb(max(prob.n, 4), 4)} sets of four levels (Theorem 1's bound), "
                f"{pieces} simplices, {seconds:.2f} s")
        if bb.closed:
            return best, "global", what + (f": proved lower bound {bb.lower:.10g}, so no allocation is below "
                                           f"V (1 - {SANDWICH_GLOBAL_RTOL:g})")
        if bb.weights is None:
            return best, "local (KKT)", what + f" (open: {bb.note})"
        try:
            run = run_from(bb.weights)
        except SingularMomentError:
            run = None
        if run is None or run[1] != 0 or not run[2].value < best[2].value:
            return best, "local (KKT)", what + (f": found an allocation with V = {bb.upper:.10g}, below the returned "
                                                "point; the certified polish from there failed")
        best = run
    return best, "local (KKT)", what + f" (open: {_PROOF_ROUNDS} rounds each found a lower point)"


def _branch_and_bound_proof(prob: Problem, best, run_from):
    """Branch and bound from the multi-start's best certified KKT point ``best = (p, status, cert)``.

    A point the search finds lower is polished and replaces ``best`` when certified; the label is
    ``'global'`` when the proved lower bound is within ``SANDWICH_GLOBAL_RTOL`` of the returned value.
    """
    bb = branch_and_bound(prob, best[2].value, rtol=SANDWICH_GLOBAL_RTOL)
    if bb.weights is not None and bb.upper < best[2].value * (1.0 - SANDWICH_SAME_VALUE_RTOL):
        try:
            run = run_from(bb.weights)
        except SingularMomentError:
            run = None
        if run is not None and run[1] == 0 and run[2].value < best[2].value:
            best = run
    v = best[2].value
    if bb.note:
        return best, "local (KKT)", f"no branch and bound: {bb.note}"
    closed = v - bb.lower <= SANDWICH_GLOBAL_RTOL * v
    what = (f"branch and bound over A_p^-1 (perspective relaxation), {bb.boxes} boxes, {bb.seconds:.1f} s: "
            f"proved lower bound {bb.lower:.10g}")
    if closed:
        return best, "global", what + f", so no allocation is below V (1 - {SANDWICH_GLOBAL_RTOL:g})"
    if bb.closed:  # closed around a lower point that the polish could not certify
        return best, "local (KKT)", what + (f" around V = {bb.upper:.10g}, below the returned point; the "
                                            "certified polish from there failed")
    return best, "local (KKT)", what + f" (open: budget of {SANDWICH_BNB_MAX_BOXES} boxes spent)"


def _polish_as_given(prob: Problem, p: np.ndarray, cert: Certificate, tol: float, counters: dict):
    r"""Polish on the input as given (``Problem.A_given``) what the algorithms found on its PSD projection.

    On a near-singular input (rank-one :math:`f f^\top` rounded to indefinite matrices) the projection
    differs from the input far above rounding in the solved coordinates (monomials of degree 10 on
    [0, 1]: 1e-2), and so do the optima: the certificate, which is of the input as given, then fails at
    the projection's optimum.  Newton with column generation on the input as given starts there; the
    result is kept when it certifies or lowers the relative gap.
    """
    pg = given_problem(prob)
    try:
        q, _ = polish_mod.run(pg, p, tol=tol, mu=0.0, counters=counters)
        cq = _certify(prob, q, rtol=tol, surrogate=cert.surrogate_value)
        if cq.rel_gap <= tol and not cq.equivalence_ok:
            q, _ = _restore_equality(pg, q, cq, tol, counters)
            cq = _certify(prob, q, rtol=tol, surrogate=cert.surrogate_value)
    except (ValueError, SingularMomentError):
        return p, cert
    if cq.optimality_ok or (not cert.optimality_ok and cq.rel_gap < cert.rel_gap):
        return q, cq
    return p, cert


def _restore_equality(prob: Problem, p: np.ndarray, cert: Certificate, tol: float, counters: dict):
    r"""Close the equivalence check when the gap already met ``tol`` (two attempts, kept only if certified).

    The algorithms stop on the gap :math:`\bar g - \min_i g_i`, in which an atom enters with its
    weight; the equivalence check asks equal gradients on the whole support, also at atoms of tiny
    weight (and for E the interior point's duality gap is second order in the error of the
    weights where :math:`\lambda_{\min}` is simple, the equality first order).

    1. Newton on the support (projected, exact Hessian; for E that of a simple
       :math:`\lambda_{\min}`) to a tenth of ``tol``;
    2. if that does not certify, the atoms whose gradient is clearly above the equality level
       (``g_i - g_bar > tol * scale``: left by the main algorithm) are dropped, then Newton again.

    An optimum on the singular boundary (atoms of ~0 weight that keep M invertible) cannot be
    certified this way: the input is returned and the status says so.
    """
    for attempt in (0, 1):
        S, q = cert.support, p
        if attempt == 1:
            dust = S[cert.g[S] - cert.g_bar > tol * cert.scale]
            if dust.size == 0 or dust.size == S.size:
                break
            q = p.copy()
            q[dust] = 0.0
            q /= q.sum()
            S = np.setdiff1d(S, dust)
            if not np.isfinite(criterion_value(prob, q)):
                break
        try:
            q, _, _ = polish_mod.newton_on_support(prob, q, S, target=0.1 * tol * cert.scale, mu=0.0,
                                                   counters=counters)
        except (ValueError, SingularMomentError):  # E with a repeated lambda_min: no smooth Newton step
            continue
        cq = _certify(prob, q, rtol=tol, surrogate=cert.surrogate_value)
        if cq.optimality_ok:
            return q, cq
    return p, cert


def surrogate_value(prob: Problem) -> float | None:
    r"""Sandwich :math:`V` at the minimiser of its convex surrogate :math:`\operatorname{tr}(A_\omega A_p^{-1})`.

    Parameters
    ----------
    prob : Problem
        A sandwich problem.

    Returns
    -------
    float or None
        :math:`V(p_L)` with :math:`p_L` the L-optimal allocation for ``W = A_eval`` (``+inf``
        if singular there); None unless the problem is a sandwich with a separate ``G`` (with
        ``G = A`` the surrogate is the criterion itself).
    """
    if prob.criterion != "sandwich" or prob.G is None:
        return None
    return float(criterion_value(prob, _surrogate_solve(prob).weights))


def _surrogate_solve(prob: Problem):
    """The L-optimal allocation for ``W = A_eval``: the convex surrogate of a sandwich problem.

    ``prob.W`` is ``A_eval`` in the preconditioner's coordinates, where a direction of the input's
    rounding-level negativity (allowed, ``PSD_RTOL``) can be stretched far above ``PSD_RTOL`` of the
    transformed matrix's largest eigenvalue (eigenvalue -13.6 against 15710: a 5-atom Dirac mixture on
    [-8, 8] with J = 16 splines, a cell of ``figures/sweeps/coupling_dirac.toml``), and L's input check
    would refuse it.  The surrogate only supplies a start and a reference value, so its weight is the
    nearest PSD matrix (negative eigenvalues set to 0).
    """
    W = psd_part(prob.W)
    return solve(prob.A, "L", W=0.5 * (W + W.T), tol=FW_GAP_RTOL)


def _rescaled_certificate(cert: Certificate, inv: float, prob: Problem) -> Certificate:
    """An E certificate of the unit-scaled problem (:func:`~noisealloc.solvers.problem.unit_scaled`) in the
    units of the problem as given: absolute fields times ``inv`` (a power of two), relative ones unchanged."""
    from noisealloc.solvers.certificates import _certified_problem

    return replace(cert, value=cert.value * inv, g=cert.g * inv, g_bar=cert.g_bar * inv, gap=cert.gap * inv,
                   scale=cert.scale * inv, equivalence_slack=cert.equivalence_slack * inv,
                   support_slack=cert.support_slack * inv, regularization=prob.regularization,
                   gap_as_given=None if cert.gap_as_given is None else cert.gap_as_given * inv,
                   certified_problem=_certified_problem(prob))


def _certify(prob: Problem, p: np.ndarray, *, rtol=None, surrogate=None, dual_hint=None) -> Certificate:
    if surrogate is None:
        surrogate = surrogate_value(prob)
    return certify_problem(prob, p, rtol=rtol, surrogate_value=surrogate, dual_hint=dual_hint)


def certify(
    problem,
    weights,
    criterion: str | None = None,
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
    r"""Recompute the certificate of an allocation from ``(problem, weights)`` alone.

    Parameters
    ----------
    problem : Problem or array_like, shape (n, m, m)
        As in :func:`solve` (a Problem, or ``A`` with the criterion and its keywords).
    weights : array_like, shape (n,)
        Probability vector on the grid (non-negative, sums to one within 1e-9).
    criterion, W, G, A_eval, c, grid
        As in :func:`solve`.
    rtol : float, optional
        Tolerance of ``equivalence_ok`` and ``certified`` (default 1e-8 convex, 1e-6 sandwich).
    A_fn, G_fn : callable, optional
        ``lam -> A(lam)`` (and ``G(lam)``), shape (m, m): adds
        :func:`~noisealloc.solvers.certificates.offgrid_check` (needs a grid) on ``interval``
        (default the grid's end points).
    A_sym, G_sym, snr : sympy objects, optional
        ``A`` (and ``G``) as sympy matrices rational in the symbol ``snr``: adds
        :func:`~noisealloc.solvers.certificates.exact_sensitivity_check` on ``interval`` with
        slack ``exact_slack`` (default: the certified gap plus ``rtol * scale``).

    Returns
    -------
    Certificate
        With ``offgrid`` and ``exact`` filled when requested.

    References
    ----------
    docs/THEORY.md section 4 (a), "Certificates" (Kiefer-Wolfowitz equivalence, sensitivity function).

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.solvers import certify
    >>> x = np.linspace(-1, 1, 5); F = np.stack([np.ones(5), x, x**2], 1)
    >>> A = F[:, :, None] * F[:, None, :]
    >>> cert = certify(A, [0.25, 0, 0.5, 0, 0.25], "A")
    >>> cert.kind, cert.certified, round(cert.value, 12)
    ('duality-gap', True, 8.0)
    >>> certify(A, np.full(5, 0.2), "A").certified  # uniform is not A-optimal
    False
    """
    prob = as_problem(problem, criterion, W=W, G=G, A_eval=A_eval, c=c, grid=grid)
    p = check_weights(weights, prob.n)
    if prob.criterion == "E":
        # E is finite (0) on a singular M(p), but its gap is relative to lambda_min(M(p)): undefined there.
        ev = np.linalg.eigvalsh(moments(prob, p)[0])
        if not ev[0] > SINGULAR_RCOND * max(ev[-1], 0.0):
            raise SingularMomentError(
                f"weights: the moment matrix M(p) of this allocation is numerically singular (lambda_min = "
                f"{ev[0]:.3g}, lambda_max = {ev[-1]:.3g}); its E value is 0 and a relative gap on the scale "
                "lambda_min is undefined (any nonsingular allocation is better)")
    with single_blas_thread():  # small factorisations: threads only oversubscribe (see solve)
        try:
            cert = _certify(prob, p, rtol=rtol)
        except SingularMomentError as exc:
            raise SingularMomentError(
                f"weights: the moment matrix M(p) of this allocation is numerically singular ({exc}); a singular "
                "allocation has no certificate (its criterion value is +inf: allocation_value)") from exc
    off = None
    exact = None
    if A_fn is not None:
        off = offgrid_check_problem(prob, p, A_fn=A_fn, G_fn=G_fn, interval=interval)
    if A_sym is not None:
        slack = exact_slack if exact_slack is not None else cert.gap + cert.rtol * cert.scale
        exact = exact_check_problem(prob, p, A_sym=A_sym, snr=snr, interval=interval, G_sym=G_sym, slack=slack)
    if off is None and exact is None:
        return cert
    return replace(cert, offgrid=off, exact=exact)
