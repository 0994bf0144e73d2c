"""Frozen result objects of the allocation solvers (SciPy's vocabulary).

:class:`SolveResult` is what :func:`noisealloc.solvers.solve` returns;
:class:`Certificate` is what :func:`noisealloc.solvers.certify` recomputes from
``(A, weights)`` alone, so a third party can re-check a claimed optimum without
re-solving.  Status codes are listed once, in :data:`STATUS_MESSAGES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

__all__ = [
    "STATUS_MESSAGES",
    "Certificate",
    "OffGridCheck",
    "ExactCertificate",
    "SolveResult",
    "ReductionResult",
    "RefineResult",
    "Theorem1pResult",
]

#: One status table for every solver in this package.
STATUS_MESSAGES = {
    0: "converged: certified relative gap <= tol",
    1: "iteration limit reached before the certified gap met tol",
    2: "stalled: no further decrease is possible in floating point before tol was met",
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
    n_eval : int
        Number of evaluations of the matrix curve.
    lam_checked : ndarray
        Points where local maximisation was started (midpoints of bracketing intervals).
    """

    lam_max: float
    sensitivity_max: float
    bound: float
    violation: float
    rel_violation: float
    n_eval: int
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

    @property
    def certified(self) -> bool:
        """Relative gap within ``rtol``, equivalence check passed and atom count within the bound."""
        return bool(self.rel_gap <= self.rtol and self.equivalence_ok and self.atoms_ok)


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
    converged : bool
        ``status == 0`` (scipy's ``success``).
    status : int
        Key of :data:`STATUS_MESSAGES`.
    message : str
    n_iter : int
        Iterations of the main algorithm plus Newton steps of the polish.
    n_grad : int
        Full gradient evaluations (each one GEMV over all n candidates).
    n_value : int
        Criterion evaluations (line searches, backtracking).
    method : str
        E.g. ``'multiplicative+polish'``.
    criterion : str
    tol : float
    max_iter : int
    regularization : float
        Ridge :math:`\delta` added to :math:`M_p` (0 if none).
    seed_state : object
        ``rng.bit_generator.state`` at entry when randomness was used (REX), else None.
    certificate : Certificate
    """

    weights: np.ndarray
    support: np.ndarray
    lam: Optional[np.ndarray]
    value: float
    gap: float
    rel_gap: float
    converged: bool
    status: int
    message: str
    n_iter: int
    n_grad: int
    n_value: int
    method: str
    criterion: str
    tol: float
    max_iter: int
    regularization: float
    certificate: Certificate
    seed_state: object = None

    @property
    def success(self) -> bool:
        """Alias of ``converged`` (SciPy's name)."""
        return self.converged

    @property
    def x(self) -> np.ndarray:
        """Alias of ``weights`` (SciPy's name)."""
        return self.weights

    @property
    def fun(self) -> float:
        """Alias of ``value`` (SciPy's name)."""
        return self.value


@dataclass(frozen=True)
class ReductionResult:
    """Result of a support reduction or of a merge of close atoms.

    Attributes
    ----------
    weights : ndarray, shape (n,)
    support : ndarray of int
    value_before, value_after : float
    n_atoms_before, n_atoms_after : int
    moment_residual : float
        Max-norm of the change of the moment matrices (Caratheodory keeps them; 0 up to rounding).
    """

    weights: np.ndarray
    support: np.ndarray
    value_before: float
    value_after: float
    n_atoms_before: int
    n_atoms_after: int
    moment_residual: float


@dataclass(frozen=True)
class RefineResult:
    """Result of off-grid refinement.

    Attributes
    ----------
    lam : ndarray, shape (k,)
        Atom positions (continuous, inside the interval).
    weights : ndarray, shape (k,)
    value : float
    value_grid : float
        Value of the grid solution the refinement started from.
    n_sweeps : int
    n_eval : int
        Evaluations of the matrix curve.
    converged : bool
    message : str
    """

    lam: np.ndarray
    weights: np.ndarray
    value: float
    value_grid: float
    n_sweeps: int
    n_eval: int
    converged: bool
    message: str


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
    status : int
        0 success, 1 the LP failed and Caratheodory elimination was used.
    message : str
    """

    weights: np.ndarray
    support: np.ndarray
    residual: float
    n_atoms: int
    atom_bound: int
    status: int
    message: str
