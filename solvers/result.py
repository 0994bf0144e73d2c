"""Frozen result objects of the allocation solvers (SciPy's vocabulary).

:class:`SolveResult` is what :func:`noisealloc.solvers.solve` returns;
:class:`Certificate` is what :func:`noisealloc.solvers.certify` recomputes from
``(problem, weights)`` alone, so a third party can re-check a claimed optimum without
re-solving; :class:`AllocationResult` is the whole optimize chain
(:func:`noisealloc.solvers.optimize_allocation`).

Every solver result speaks SciPy's vocabulary: ``x`` (the weights), ``fun`` (the value, where
there is one), ``success``, ``status``, ``message``, ``nit`` (iterations), ``nfev``
(criterion or curve evaluations) and, for the allocation solver, ``njev`` (full gradient
evaluations).  Status codes are listed once, in :data:`STATUS_MESSAGES`, and every result uses
that table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

__all__ = [
    "STATUS_MESSAGES",
    "AllocationResult",
    "Certificate",
    "OffGridCheck",
    "ExactCertificate",
    "SolveResult",
    "ReductionResult",
    "RefineResult",
    "Theorem1pResult",
]

#: One status table for every solver in this package (``success`` is ``status == 0``).
STATUS_MESSAGES = {
    0: "converged: certified relative gap <= tol",
    1: "iteration limit reached before the certified gap met tol",
    2: "stalled: no further decrease is possible in floating point before tol was met",
    3: "certificate failed: the gap met tol but the equivalence check did not (the gradient is not equal on the "
       "support; typically atoms of ~0 weight that keep the moment matrix invertible at an optimum on the "
       "singular boundary)",
    4: "numerically singular: the moment matrix is singular in floating point at the allocation",
    5: "fallback: the primary method failed; the result comes from the fallback method and was re-checked",
    6: "not certified for the input as given: the gap of the problem solved met tol, but its bound for the input as "
       "given (the matrices solved differ from it, or float64 rounding is too large relative to the scale) did not",
}


@dataclass(frozen=True)
class OffGridCheck:
    r"""Off-grid check of the sensitivity function :math:`d(\lambda) = -g(\lambda)`.

    Attributes
    ----------
    lam_max : float
        Where the largest sensitivity was found (local maximisation between grid nodes).
    sensitivity_max : float
        :math:`\max_\lambda d(\lambda)` found.
    bound : float
        :math:`-\sum_j p_j g_j` (the value the sensitivity must not exceed).
    violation : float
        ``sensitivity_max - bound``; for a convex criterion an upper bound on
        :math:`\Phi(p) - \Phi^*` over all allocations on the interval, if the
        maximisation found the global maximum.
    rel_violation : float
        ``violation / scale``.
    nfev : int
        Number of evaluations of the matrix curve.
    lam_checked : ndarray
        Points where local maximisation was started (midpoints of bracketing intervals).
    """

    lam_max: float
    sensitivity_max: float
    bound: float
    violation: float
    rel_violation: float
    nfev: int
    lam_checked: np.ndarray


@dataclass(frozen=True)
class ExactCertificate:
    r"""Exact (sympy) check that :math:`d(\lambda) \le \text{bound} + \text{slack}` on the whole interval.

    The numeric weights enter as exact binary rationals, so the statement is
    exact for the allocation stored in floating point.

    Attributes
    ----------
    holds : bool
        Whether the polynomial inequality holds on ``[snr_lo, snr_hi]``.
    slack : float
        The additive slack allowed above the bound (a rational rounding of it is used).
    snr_interval : tuple of float
        ``(exp(lam_lo), exp(lam_hi))``.
    degree : int
        Degree of the polynomial in ``snr`` whose sign was certified.
    n_roots : int
        Real roots of the polynomial inside the interval.
    min_margin : float
        Smallest value of ``bound + slack - d`` at the roots and end points (float).
    """

    holds: bool
    slack: float
    snr_interval: tuple
    degree: int
    n_roots: int
    min_margin: float


@dataclass(frozen=True)
class Certificate:
    r"""Optimality (convex criteria) or stationarity (sandwich) certificate.

    Everything here is recomputed by :func:`noisealloc.solvers.certify` from
    ``(A, weights)`` and the criterion's data.

    Attributes
    ----------
    criterion : str
    kind : {'duality-gap', 'kkt'}
        ``'duality-gap'``: for a convex criterion ``gap`` is a rigorous upper bound on
        :math:`\Phi(p) - \Phi^*` over the grid.  ``'kkt'``: the sandwich is not convex and
        ``gap`` measures first-order (KKT) stationarity on the simplex only.
    value : float
        :math:`\Phi(p)`.
    g : ndarray, shape (n,)
        :math:`g_i = \partial\Phi/\partial p_i` (for 'E' a subgradient, see ``dual_matrix``).
    g_bar : float
        :math:`\sum_j p_j g_j`.
    gap : float
        :math:`\bar g - \min_i g_i \ge 0` (for 'E': :math:`\max_i \langle E, A_i\rangle - \lambda_{\min}(M_p)`).
    scale : float
        Normaliser of ``rel_gap``: :math:`|\Phi|` for 'L', 'A', 'c', 'sandwich'; ``m`` for 'D'
        (the gap of D is a log-efficiency); :math:`\lambda_{\min}(M_p)` for 'E'.
    rel_gap : float
    equivalence_slack : float
        :math:`\min_i (g_i - \bar g)`, >= ``-gap`` (Kiefer-Wolfowitz: optimal iff >= 0).
    support_slack : float
        :math:`\max_{i \in S} |g_i - \bar g|` (equality on the support).
    equivalence_ok : bool
        ``rel`` versions of both slacks within ``rtol``.
    rtol : float
        Tolerance used for ``equivalence_ok``.
    support : ndarray of int
    n_atoms : int
    atom_bound : int
        Theorem 1: ``m(m+1)/2 + 1`` for convex criteria (and the sandwich with G = sA),
        ``m(m+1) + 1`` for the general sandwich.
    atoms_ok : bool
    regularization : float
        Ridge :math:`\delta` in :math:`M_p + \delta I` (0 if none).
    dual_matrix : ndarray or None
        'E' only: the PSD, trace-one matrix E of the weak-duality bound
        :math:`\max_q \lambda_{\min}(M_q) \le \max_i \langle E, A_i \rangle + \delta`; at an
        optimum it lives on the eigenspace of :math:`\lambda_{\min}(M_p)` (equivalence theorem
        for E-optimality), see :func:`noisealloc.solvers.certificates.e_dual_bound`.
    surrogate_value : float or None
        Sandwich only: :math:`V` at the L-optimal allocation with :math:`W = A_\omega`
        (the convex surrogate, exact when :math:`G = sA`).
    offgrid : OffGridCheck or None
    exact : ExactCertificate or None
    input_perturbation : float
        ``Problem.input_perturbation``: the rounding of the input as given in the solved coordinates
        (QR preconditioning of a convex criterion; 0 otherwise), covered by ``gap_as_given``.
    psd_projection : float
        ``Problem.psd_projection``: relative size of the input's negative eigenvalues projected away by
        the QR preconditioning (0: none).  The algorithms ran on that projection; the certificate
        (``gap``, ``g``, ...) is computed on the input as given, except for the sandwich
        (``certified_problem`` says which).
    projection_distance : float
        ``Problem.projection_distance``: how far the projected matrices the algorithms ran on are
        from the input as given, in the solved coordinates.
    gap_as_given : float or None
        A bound on :math:`\Phi(p) - \Phi^*` of the exact input as given, where ``gap`` alone is not
        one.  QR-preconditioned convex criteria (``gap`` is that of the rounded congruence ``A_given``,
        :math:`\eta` = ``input_perturbation``):
        :math:`\Phi_{-\eta}(p) - (\Phi_{+\eta}(p) - \mathrm{gap}_{+\eta}(p))` with
        :math:`\Phi_{\pm\eta}` the criterion of :math:`\tilde M(q) \pm \eta I` (every :math:`M(q)` of the
        input lies between them, and the criteria are antitone in M); ``inf`` when
        :math:`\tilde M(p) - \eta I` is not positive definite.  'E': ``gap`` plus a bound on its float64
        rounding (:func:`~noisealloc.solvers.certificates.e_rounding_bound`), so that it bounds the
        exact gap of the input as given with ``dual_matrix`` made exactly PSD.  None otherwise
        (the input was solved as given, in exactly rescaled coordinates).
    rel_gap_as_given : float or None
        ``gap_as_given / scale`` (computed before any rescaling back to the input's units, so it does
        not underflow).  ``optimality_ok`` requires it within ``rtol`` when it is set.
    certified_problem : str
        Which problem the certificate is for, in words: the input as given, and how (solved as
        given; through matrices that differ by ``input_perturbation``, with the size of the PSD
        projection; with a recorded ridge).
    """

    criterion: str
    kind: str
    value: float
    g: np.ndarray
    g_bar: float
    gap: float
    scale: float
    rel_gap: float
    equivalence_slack: float
    support_slack: float
    equivalence_ok: bool
    rtol: float
    support: np.ndarray
    n_atoms: int
    atom_bound: int
    atoms_ok: bool
    regularization: float = 0.0
    dual_matrix: Optional[np.ndarray] = None
    surrogate_value: Optional[float] = None
    offgrid: Optional[OffGridCheck] = None
    exact: Optional[ExactCertificate] = None
    input_perturbation: float = 0.0
    psd_projection: float = 0.0
    projection_distance: float = 0.0
    gap_as_given: Optional[float] = None
    rel_gap_as_given: Optional[float] = None
    certified_problem: str = "the input as given"

    @property
    def optimality_ok(self) -> bool:
        """The optimality (convex) or KKT (sandwich) certificate holds: relative gap within ``rtol``
        and the equivalence check passed, for the input as given (``rel_gap_as_given`` within
        ``rtol`` when it is set).  What a solver's ``success`` requires."""
        given_ok = self.rel_gap_as_given is None or self.rel_gap_as_given <= self.rtol
        return bool(self.rel_gap <= self.rtol and self.equivalence_ok and given_ok)

    @property
    def certified(self) -> bool:
        """:attr:`optimality_ok` and the atom count within Theorem 1's bound.

        A solver's optimum may carry more atoms than the bound (tied levels); it is still
        optimal, and :func:`~noisealloc.solvers.reduce_support` brings it within the bound.
        """
        return bool(self.optimality_ok and self.atoms_ok)


@dataclass(frozen=True)
class SolveResult:
    r"""Result of :func:`noisealloc.solvers.solve`.

    Attributes
    ----------
    weights : ndarray, shape (n,)
        The allocation :math:`p` on the grid (non-negative, sums to one).
    support : ndarray of int
        Indices with positive weight.
    lam : ndarray or None
        ``grid[support]`` when a grid was given.
    value : float
        :math:`\Phi(p)` (the criterion value, regularisation included).
    gap, rel_gap : float
        Certified gap (see :class:`Certificate`) and ``gap / scale``.
    success : bool
        ``status == 0``: the certificate's :attr:`Certificate.optimality_ok` holds at ``tol``.
    status : int
        Key of :data:`STATUS_MESSAGES`: 0 converged, 1 iteration limit, 2 stalled, 3 the gap met
        ``tol`` but the equivalence check failed, 6 the gap met ``tol`` but not its bound for the
        input as given (``Certificate.gap_as_given``).
    message : str
    nit : int
        Iterations of the main algorithm plus Newton steps of the polish.
    njev : int
        Full gradient evaluations (each one GEMV over all n candidates).
    nfev : int
        Criterion evaluations (line searches, backtracking).
    method : str
        E.g. ``'multiplicative+polish'``.
    criterion : str
    tol : float
    max_iter : int
    regularization : float
        Ridge :math:`\delta` added to :math:`M_p` (0 if none).
    seed_state : object
        ``rng.bit_generator.state`` at entry when randomness was used (REX, the sandwich
        multi-start), else None.
    certificate : Certificate
    optimality : {'global', 'local (KKT)', 'none'}
        ``'global'`` for convex criteria and for sandwiches with a global proof (docs/THEORY.md section 4
        (a)); ``'local (KKT)'`` for a sandwich KKT point after a multi-start; ``'none'`` when the
        certificate does not hold (``status != 0``).
    n_starts : int
        Starts of the sandwich multi-start (1 otherwise).
    start_values : ndarray or None
        Value reached from each start (NaN where a start ended at a singular allocation); None
        without a multi-start.
    """

    weights: np.ndarray
    support: np.ndarray
    lam: Optional[np.ndarray]
    value: float
    gap: float
    rel_gap: float
    success: bool
    status: int
    message: str
    nit: int
    njev: int
    nfev: int
    method: str
    criterion: str
    tol: float
    max_iter: int
    regularization: float
    certificate: Certificate
    seed_state: object = None
    optimality: str = "global"
    n_starts: int = 1
    start_values: Optional[np.ndarray] = None

    x = property(lambda self: self.weights, doc="Alias of ``weights`` (SciPy's name).")
    fun = property(lambda self: self.value, doc="Alias of ``value`` (SciPy's name).")


@dataclass(frozen=True)
class ReductionResult:
    """Result of a support reduction or of a merge of close atoms.

    Attributes
    ----------
    weights : ndarray, shape (n,)
        The reduced allocation (``x``).
    support : ndarray of int
    value_before, value_after : float
        Criterion values before and after (``fun`` is ``value_after``).
    n_atoms_before, n_atoms_after : int
    moment_residual : float
        Max-norm of the change of the moment matrices (Caratheodory keeps them; 0 up to rounding).
    success : bool
        ``status == 0`` (a reduction never fails: when rounding would raise the value the input
        is returned, and ``message`` says so).
    status : int
        Key of :data:`STATUS_MESSAGES` (always 0).
    message : str
    nit : int
        Atoms removed (one per elimination or merge step).
    nfev : int
        Criterion evaluations.
    """

    weights: np.ndarray
    support: np.ndarray
    value_before: float
    value_after: float
    n_atoms_before: int
    n_atoms_after: int
    moment_residual: float
    success: bool = True
    status: int = 0
    message: str = ""
    nit: int = 0
    nfev: int = 0

    x = property(lambda self: self.weights, doc="Alias of ``weights`` (SciPy's name).")
    fun = property(lambda self: self.value_after, doc="Alias of ``value_after`` (SciPy's name).")


@dataclass(frozen=True)
class RefineResult:
    """Result of off-grid refinement.

    Attributes
    ----------
    lam : ndarray, shape (k,)
        Atom positions (continuous, inside the interval).
    weights : ndarray, shape (k,)
        Their weights (``x``).
    value : float
        Criterion value at the refined atoms (``fun``).
    value_grid : float
        Value of the grid solution the refinement started from.
    success : bool
        ``status == 0``.
    status : int
        Key of :data:`STATUS_MESSAGES`: 0 the value change per sweep fell below ``rtol``, 1 sweep limit.
    message : str
    nit : int
        Sweeps.
    nfev : int
        Evaluations of the matrix curve.
    """

    lam: np.ndarray
    weights: np.ndarray
    value: float
    value_grid: float
    success: bool
    status: int
    message: str
    nit: int
    nfev: int

    x = property(lambda self: self.weights, doc="Alias of ``weights`` (SciPy's name).")
    fun = property(lambda self: self.value, doc="Alias of ``value`` (SciPy's name).")


@dataclass(frozen=True)
class Theorem1pResult:
    r"""Result of :func:`noisealloc.solvers.reduce_population` (Theorem 1').

    Attributes
    ----------
    weights : ndarray, shape (n,)
        ``q`` with at most ``m + 1`` atoms.
    support : ndarray of int
    residual : float
        :math:`\|\sum_i q_i \nabla_i - \sum_i p_i \nabla_i\|_\infty`.
    n_atoms : int
    atom_bound : int
        ``m + 1``.
    success : bool
        The reduction checks: at most ``m + 1`` atoms and ``residual`` within
        ``RESIDUAL_RTOL`` (:mod:`~noisealloc.solvers.theorem1p`) of the largest gradient entry.
    status : int
        Key of :data:`STATUS_MESSAGES`: 0 the LP (HiGHS dual simplex) gave the vertex, 5 the LP
        failed and Caratheodory elimination (the fallback) was used.
    message : str
    nit : int
        Simplex iterations of the LP.
    """

    weights: np.ndarray
    support: np.ndarray
    residual: float
    n_atoms: int
    atom_bound: int
    success: bool
    status: int
    message: str
    nit: int = 0

    x = property(lambda self: self.weights, doc="Alias of ``weights`` (SciPy's name).")


@dataclass(frozen=True)
class AllocationResult:
    r"""Result of the optimize chain :func:`noisealloc.solvers.optimize_allocation`.

    build -> solve -> reduce (Carathéodory) -> certify the reduced allocation -> off-grid check
    (-> exact sympy check); every stage's own result is kept.

    Attributes
    ----------
    weights : ndarray, shape (n,) or None
        The final allocation on the grid (reduced when ``reduce``; ``x``); None when the solve
        failed (``status`` 4).
    support : ndarray of int
        Indices with positive weight.
    lam : ndarray
        The atoms, ``grid[support]``.
    value : float
        :math:`\Phi` of the final allocation (``fun``; ``inf`` when singular).
    success : bool
        ``status == 0``: the solve converged and the final allocation's certificate holds
        (:attr:`Certificate.optimality_ok`).
    status : int
        Key of :data:`STATUS_MESSAGES`: the solve's status, 3 when the re-certified final
        allocation fails the equivalence check, 4 when the moment matrix is numerically singular
        wherever the solver could start (no allocation).
    message : str
    criterion : str
    matrices : FamilyMatrices
        The information matrices the problem was built from (:mod:`noisealloc.theory.information.matrices`).
    problem : Problem or None
        The validated problem (with the grid).
    solve_result : SolveResult or None
        The solver's result (its own certificate is of the unreduced allocation).
    reduction : ReductionResult or None
        The Carathéodory reduction (None when not asked, or when it met a singular matrix).
    certificate : Certificate or None
        Certificate of the final allocation, recomputed from it alone.
    offgrid : OffGridCheck or None
    exact : ExactCertificate or None
    atom_bound : int
        Theorem 1's bound of the problem (:attr:`Problem.atom_bound`).
    polish_fallback : bool
        The Newton polish met a singular moment matrix and the main algorithm's allocation was
        used instead.
    error : str or None
        ``"<ExceptionType>: <message>"`` of the failure behind status 4.
    timings : dict
        Seconds per stage (``build``, ``solve``, ``reduce``, ``certify``, ``offgrid``, ``exact``).
    """

    weights: Optional[np.ndarray]
    support: np.ndarray
    lam: np.ndarray
    value: float
    success: bool
    status: int
    message: str
    criterion: str
    matrices: object
    problem: object
    solve_result: Optional[SolveResult]
    reduction: Optional[ReductionResult]
    certificate: Optional[Certificate]
    offgrid: Optional[OffGridCheck]
    exact: Optional[ExactCertificate]
    atom_bound: int
    polish_fallback: bool = False
    error: Optional[str] = None
    timings: dict = field(default_factory=dict)

    x = property(lambda self: self.weights, doc="Alias of ``weights`` (SciPy's name).")
    fun = property(lambda self: self.value, doc="Alias of ``value`` (SciPy's name).")

    @property
    def nit(self) -> int:
        """Iterations of the solve (0 if it failed)."""
        return 0 if self.solve_result is None else self.solve_result.nit

    @property
    def nfev(self) -> int:
        """Criterion evaluations of the solve (0 if it failed)."""
        return 0 if self.solve_result is None else self.solve_result.nfev

    @property
    def njev(self) -> int:
        """Full gradient evaluations of the solve (0 if it failed)."""
        return 0 if self.solve_result is None else self.solve_result.njev
