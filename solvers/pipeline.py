r"""The optimize chain as one call: build -> solve -> reduce -> certify -> off-grid (-> exact).

:func:`optimize_allocation` is the one implementation of the fully coupled optimisation of
docs/THEORY.md section 4 (a) for a denoiser family: the command line (``noisealloc optimize``),
figure 2 and the coupling sweep of :mod:`noisealloc.verify.experiments.coupling` all call it.  The rules it
owns:

* the problem is built once from the family's matrices (criterion data: ``W = A_eval`` for 'L',
  ``G`` and ``A_eval`` for the sandwich) with the grid, and every stage runs on that
  :class:`~noisealloc.solvers.problem.Problem`;
* the solve; if it meets a numerically singular moment matrix with the polish, the main
  algorithm alone is tried (``polish_fallback``), and if that fails too the result has status 4
  (no allocation) instead of an exception;
* Carathéodory reduction (Theorem 1: never raises the value);
* the certificate of the final allocation, recomputed from it alone (the sandwich's surrogate
  value, a property of the problem, is taken from the solve);
* the off-grid sensitivity check where the family gives ``A(lam)`` at any level, and the exact
  sympy check where it gives :math:`A(\mathrm{snr})` exactly (the Gaussian ``linear`` family) for
  'L', 'A' and 'D';
* Theorem 1's atom bound from :attr:`~noisealloc.solvers.problem.Problem.atom_bound`.

References
----------
docs/THEORY.md section 4 (a): Theorem 1, certificates, criteria.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from noisealloc.theory._threads import single_blas_thread
from noisealloc.solvers.certificates import certify_problem, exact_check_problem, offgrid_check_problem
from noisealloc.solvers.criteria import SingularMomentError
from noisealloc.solvers.driver import solve
from noisealloc.solvers.problem import check_weights, make_problem
from noisealloc.solvers.result import STATUS_MESSAGES, AllocationResult
from noisealloc.solvers.algorithms.support import reduce_support
from noisealloc.theory.errors import ConvergenceWarning
from noisealloc.theory.information.matrices import FamilyMatrices, build_family_matrices, natural_family
from noisealloc.theory.tolerances import FW_GAP_RTOL, KKT_RTOL

__all__ = ["EXACT_CRITERIA", "optimize_allocation", "criterion_arrays"]

#: Criteria whose sensitivity the exact (sympy) check certifies for a family with ``A_sympy``.
EXACT_CRITERIA = ("L", "A", "D")


def criterion_arrays(matrices: FamilyMatrices, criterion: str, *, W=None, c=None, G=None) -> dict:
    """Keyword arrays of :func:`~noisealloc.solvers.make_problem` for a criterion on a family's matrices.

    Parameters
    ----------
    matrices : FamilyMatrices
    criterion : str
        ``'L'`` (weight ``A_eval`` unless ``W`` is given), ``'sandwich'``/``'V'`` (``G``, ``A_eval``),
        ``'c'`` (needs ``c``), ``'A'``, ``'D'``, ``'E'`` (nothing).
    W : array_like, shape (m, m), optional
        Weight of 'L' instead of ``A_eval``.
    c : array_like, shape (m,), optional
        The vector of 'c'.
    G : array_like, shape (n, m, m), optional
        Sandwich ``G`` instead of the family's (e.g. extended to more levels).

    Returns
    -------
    dict
        ``W``, ``G``/``A_eval`` or ``c`` as the criterion needs.
    """
    if criterion == "L":
        return {"W": matrices.A_eval if W is None else W}
    if criterion in ("sandwich", "V"):
        return {"G": matrices.G if G is None else G, "A_eval": matrices.A_eval}
    if criterion == "c":
        return {"c": c}
    return {}


def optimize_allocation(
    source,
    criterion: str = "L",
    *,
    family: str | None = None,
    lam=None,
    build_options: dict | None = None,
    data: str = "",
    W=None,
    c=None,
    method: str = "auto",
    polish: bool = True,
    tol: float | None = None,
    rtol: float | None = None,
    rng=None,
    reduce: bool = True,
    offgrid: bool = True,
    exact: bool | str = "auto",
) -> AllocationResult:
    r"""Certified optimal allocation of a denoiser family: build, solve, reduce, certify, check off the grid.

    Parameters
    ----------
    source : FamilyMatrices or data model
        The family's information matrices, or a data model of :mod:`noisealloc.theory` (then
        ``lam`` and optionally ``family`` build them with
        :func:`~noisealloc.theory.information.matrices.build_family_matrices`).
    criterion : {'L', 'A', 'D', 'E', 'c', 'sandwich', 'V'}
        Criterion (:mod:`~noisealloc.solvers.criteria`); 'L' uses ``W = A_eval`` unless ``W`` is given.
    family : str, optional
        Family of a data model (default :func:`~noisealloc.theory.information.matrices.natural_family`).
    lam : array_like, shape (n,), optional
        Candidate grid of a data model.
    build_options : dict, optional
        Options of the family's builder (e.g. ``{"q": 8, "n_mc": 4096}``).
    data : str
        Data SPEC recorded with the matrices.
    W : array_like, shape (m, m), optional
        Weight of 'L' instead of ``A_eval``.
    c : array_like, shape (m,), optional
        Vector of 'c'.
    method : {'auto', 'frank-wolfe', 'multiplicative', 'rex'}
        As in :func:`~noisealloc.solvers.solve`.
    polish : bool
        As in :func:`~noisealloc.solvers.solve`.
    tol : float, optional
        Target of the solve (default ``FW_GAP_RTOL`` convex, ``KKT_RTOL`` sandwich).
    rtol : float, optional
        Tolerance of the final certificate (same defaults).
    rng : numpy.random.Generator or int or None
        Randomness of the Monte-Carlo builders and of 'rex' (an integer seed is passed to both).
    reduce : bool
        Carathéodory reduction of the solver's allocation (default True).
    offgrid : bool
        Off-grid sensitivity check when the family gives ``A(lam)`` (default True).
    exact : bool or 'auto'
        Exact sympy check; ``'auto'``: when the family gives :math:`A(\mathrm{snr})` exactly
        (``A_sympy``) and the criterion is in :data:`EXACT_CRITERIA`.

    Returns
    -------
    AllocationResult
        Every stage's result, the final allocation and its certificate, ``status`` from
        ``STATUS_MESSAGES`` (4: singular, no allocation) and ``timings``.

    Raises
    ------
    ValueError
        Invalid input, or an information matrix singular for every allocation (not identifiable).

    Warns
    -----
    ConvergenceWarning
        From the solve, and when the result has status 4.

    References
    ----------
    docs/THEORY.md section 4 (a).

    Examples
    --------
    Gaussian manifold with two directions, linear shrinkage features, L-optimal (ELBO weight):

    >>> import numpy as np
    >>> from noisealloc.solvers import optimize_allocation
    >>> from noisealloc.theory.models.gaussian import GaussianManifold
    >>> model = GaussianManifold(np.zeros(3), np.eye(3)[:, :2], [1.0, 0.2])
    >>> res = optimize_allocation(model, "L", family="linear", lam=np.linspace(-4, 4, 33))
    >>> res.success, res.certificate.kind, res.certificate.n_atoms <= res.atom_bound
    (True, 'duality-gap', True)
    >>> bool(res.offgrid.rel_violation < 1e-6), res.exact.holds
    (True, True)
    """
    timings: dict = {}
    if isinstance(source, FamilyMatrices):
        if lam is not None or family is not None or build_options:
            raise ValueError("family, lam and build_options build matrices from a data model; "
                             "source is already a FamilyMatrices")
        matrices = source
    else:
        if lam is None:
            raise ValueError("lam (the candidate grid) is required when source is a data model")
        fam = natural_family(source) if family is None else family
        t0 = time.perf_counter()
        # one small GEMM per level (Monte-Carlo families): threaded BLAS only oversubscribes
        with single_blas_thread():
            matrices = build_family_matrices(source, fam, lam, data=data, rng=0 if rng is None else rng,
                                             **(build_options or {}))
        timings["build"] = time.perf_counter() - t0
    problem = make_problem(matrices.A, criterion, grid=matrices.lam, **criterion_arrays(matrices, criterion, W=W, c=c))
    return _chain(matrices, problem, method=method, polish=polish, tol=tol, rtol=rtol, rng=rng, reduce=reduce,
                  offgrid=offgrid, exact=exact, timings=timings)


def _chain(matrices, problem, *, method, polish, tol, rtol, rng, reduce, offgrid, exact, timings):
    crit = problem.criterion
    t0 = time.perf_counter()
    polish_fallback = False
    try:
        try:
            res = solve(problem, method=method, polish=polish, tol=tol, rng=rng)
        except SingularMomentError:
            if not polish:
                raise
            # The Newton polish can step onto a numerically singular moment matrix; the main
            # algorithm alone still returns a feasible allocation whose gap is reported as is.
            polish_fallback = True
            res = solve(problem, method=method, polish=False, tol=tol, rng=rng)
    except SingularMomentError as exc:
        timings["solve"] = time.perf_counter() - t0
        error = f"{type(exc).__name__}: {exc}"
        message = f"{STATUS_MESSAGES[4]} ({error})"
        warnings.warn(f"optimize_allocation: {message}", ConvergenceWarning, stacklevel=3)
        empty = np.zeros(0, dtype=int)
        return AllocationResult(
            weights=None, support=empty, lam=matrices.lam[empty], value=float("inf"), success=False, status=4,
            message=message, criterion=crit, matrices=matrices, problem=problem, solve_result=None, reduction=None,
            certificate=None, offgrid=None, exact=None, atom_bound=problem.atom_bound,
            polish_fallback=polish_fallback, error=error, timings=timings)
    timings["solve"] = time.perf_counter() - t0

    reduction = None
    weights = res.weights
    if reduce:
        t0 = time.perf_counter()
        try:
            reduction = reduce_support(problem, res.weights)
            weights = reduction.weights
        except SingularMomentError:
            reduction = None  # the rounding guard refused a value: keep the solver's allocation
        timings["reduce"] = time.perf_counter() - t0

    if rtol is None:
        rtol = FW_GAP_RTOL if problem.convex else KKT_RTOL
    t0 = time.perf_counter()
    p = check_weights(weights, problem.n)
    if reduction is None and float(rtol) == res.tol:
        cert = res.certificate  # the solver's allocation at the solver's tolerance: its certificate is this one
    else:
        # BLAS limited exactly where solve and certify limit it (the reduction's SVD and the checks
        # run unlimited, as they always have: OpenBLAS rounds differently per thread count).
        with single_blas_thread():
            cert = certify_problem(problem, p, rtol=rtol, surrogate_value=res.certificate.surrogate_value)
    timings["certify"] = time.perf_counter() - t0

    off = None
    if offgrid and matrices.A_of_lam is not None and (crit != "sandwich" or matrices.G_of_lam is not None):
        t0 = time.perf_counter()
        # on the allocation as reduced (p is it renormalised: the same to an ulp, and what the
        # certificates use; this check has always read the weights as they are)
        off = offgrid_check_problem(problem, weights, A_fn=matrices.A_of_lam,
                                    G_fn=matrices.G_of_lam if crit == "sandwich" else None)
        timings["offgrid"] = time.perf_counter() - t0
    ex = None
    want_exact = (matrices.A_sympy is not None and crit in EXACT_CRITERIA) if exact == "auto" else bool(exact)
    if want_exact:
        if matrices.A_sympy is None or crit not in EXACT_CRITERIA:
            raise ValueError(f"the exact check needs a family with A_sympy (the 'linear' family) and a criterion in "
                             f"{EXACT_CRITERIA}; got family {matrices.family!r}, criterion {crit!r}")
        t0 = time.perf_counter()
        A_sym, snr = matrices.A_sympy()
        ex = exact_check_problem(problem, p, A_sym=A_sym, snr=snr, slack=cert.gap + cert.rtol * cert.scale)
        timings["exact"] = time.perf_counter() - t0

    status = res.status
    if status == 0 and not cert.optimality_ok:
        status = 3
    message = res.message if status == res.status else (
        f"{STATUS_MESSAGES[3]} (final allocation: relative gap {cert.rel_gap:.3g}, "
        f"equivalence slack {cert.equivalence_slack:.3g}, rtol {cert.rtol:g})")
    support = np.flatnonzero(weights > 0)
    return AllocationResult(
        weights=weights, support=support, lam=matrices.lam[support], value=cert.value, success=status == 0,
        status=status, message=message, criterion=crit, matrices=matrices, problem=problem, solve_result=res,
        reduction=reduction, certificate=cert, offgrid=off, exact=ex, atom_bound=problem.atom_bound,
        polish_fallback=polish_fallback, error=None, timings=timings)
