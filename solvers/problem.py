r"""Allocation problems on a candidate grid: validation, moment matrices and criterion evaluation.

A :class:`Problem` holds validated float64 arrays: a grid of ``n`` candidate noise levels
with per-level matrices ``A[i]`` (shape ``(n, m, m)``), and for the sandwich also ``G[i]`` and
``A_eval`` (docs/THEORY.md section 4).  :func:`make_problem` builds one from raw arrays (the one
place where inputs are checked); every public solver function accepts either a
:class:`Problem` or the raw arrays (:func:`as_problem`).  An allocation ``p`` has the moment
matrices (:func:`moments`)

.. math::  M(p) = A_p = \sum_i p_i A_i + \delta I, \qquad G_p = \sum_i p_i G_i ,

and its criterion value and gradient come from the problem's criterion object
(:mod:`~noisealloc.solvers.criteria`) through :func:`evaluate`.

**Preconditioning.**  Every criterion but E is invariant under a congruence
:math:`A_i \mapsto T^{-\top} A_i T^{-1}` of all per-level matrices when the criterion's own data
move with it (:math:`W, A_\omega \mapsto T^{-\top} W T^{-1}`, :math:`c \mapsto T^{-\top} c`; for D the
value shifts by the constant :math:`-2\log|\det T|`).  :func:`make_problem` therefore stores the
problem in coordinates where the uniform allocation's moment matrix :math:`M_u = \bar A` is close
to the identity, :math:`M_u = T^\top \tilde M_u T`: an exact power-of-two Jacobi scaling when that
leaves :math:`\tilde M_u` well conditioned, else the Householder QR of the stacked factors
:math:`C_i` of :math:`A_i = C_i^\top C_i` (``Problem.precond_kind``).  Solutions, values (D with its
offset included) and certificates are those of the problem as given (on the QR path the algorithms
run on a PSD projection of the input, and the certificate, and a final polish, on the input as given
in the same coordinates, ``Problem.A_given``); they do not depend on a
positive rescaling of ``A`` or on the basis of the parameters (monomial or Chebyshev), and
singularity is decided on the preconditioned problem.  ``Problem.A`` holds the preconditioned
matrices; :meth:`Problem.transform` maps further matrices (off-grid levels) into them.

References
----------
docs/THEORY.md section 4, regime (a).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from noisealloc.solvers.criteria import (
    CRITERIA,
    CRITERION_ALIASES,
    Criterion,
    Evaluation,
    SingularMomentError,
    criterion_object,
    gradient,
    inv_pd,
)
from noisealloc.theory.errors import RegularizationWarning, as_float_array, check_choice, check_finite
from noisealloc.theory.tolerances import EPS, PRECOND_QR_RCOND, PSD_RTOL, REG_RCOND, SINGULAR_RCOND, SYMMETRY_RTOL

__all__ = [
    "CRITERIA",
    "SingularMomentError",
    "Problem",
    "make_problem",
    "as_problem",
    "check_weights",
    "moments",
    "evaluate",
    "evaluate_moments",
    "criterion_value",
    "gradient",
    "scale",
    "hessian",
    "new_counters",
    "unit_scaled",
    "given_problem",
]

#: Weights given as a probability vector must sum to one within this (absolute): a vector
#: assembled in float64 sums to 1 within n ulps; anything further off is not a probability vector.
WEIGHT_SUM_ATOL = 1e-9


@dataclass(frozen=True)
class Problem:
    r"""A validated allocation problem on raw arrays (see :func:`make_problem`).

    Attributes
    ----------
    A : ndarray, shape (n, m, m)
        Symmetrised, PSD per-level matrices, preconditioned: :math:`T^{-\top} A_i T^{-1}`.
    G : ndarray, shape (n, m, m) or None
        Sandwich only (``None`` means ``G = A``); preconditioned like ``A``.
    W : ndarray, shape (m, m)
        Weight of 'L'/'A'/'c' (``c c^T`` for 'c'); ``A_eval`` for the sandwich; preconditioned,
        :math:`T^{-\top} W T^{-1}`.
    c : ndarray, shape (m,) or None
        Preconditioned, :math:`T^{-\top} c`.
    criterion : str
        Canonical criterion name (a key of ``CRITERIA``).
    grid : ndarray, shape (n,) or None
        Strictly increasing candidate levels.
    regularization : float
        Ridge :math:`\delta` added to every :math:`M_p`.
    Aflat, Gflat : ndarray, shape (n, m*m)
        Row-major flattenings used by the gradient GEMV.
    value_scale : float
        Sandwich only: :math:`V` at the uniform allocation, the problem's own scale.  A
        sandwich value whose rounding-error bound exceeds ``SANDWICH_ROUNDING_RTOL`` times
        the larger of V and this scale is treated as numerically singular (see
        :class:`~noisealloc.solvers.criteria.SandwichCriterion`).
    precond : ndarray, shape (m, m) or None
        The factor :math:`T` of the preconditioning (upper triangular or diagonal; None: none, E).
    precond_kind : {'none', 'jacobi', 'qr'}
        How ``T`` was found (see the module docstring).
    value_offset : float
        Added to the criterion value of the preconditioned matrices to give the value of the
        problem as given: :math:`-2\log|\det T|` for D, 0 otherwise.
    input_perturbation : float
        QR preconditioning of a convex criterion only (0 otherwise): a bound :math:`\eta` on
        :math:`\max_i \|A^{\mathrm{given}}_i - S^\top A_i S\|_2`, the rounding of ``A_given``
        (:func:`_congruence_dd`, of order :math:`m\varepsilon`); the certificate's ``gap_as_given`` covers it.
    psd_projection : float
        The largest :math:`\sum |w_k|` over the negative eigenvalues :math:`w_k` of a
        Jacobi-scaled input matrix that the QR preconditioning projected away, relative to that
        matrix's largest eigenvalue (0: no input matrix was indefinite in floating point).
    A_given : ndarray, shape (n, m, m) or None
        QR preconditioning of a convex criterion only: the input as given in the problem's coordinates,
        :math:`S^\top A_i S` with the float matrix :math:`S = T^{-1}` (``_triangular_inverse(precond)``),
        computed in double-double.  ``A`` holds the factored (PSD-projected) matrices the algorithms
        run on; certificates are computed on ``A_given`` (:func:`given_problem`).  None also when
        ``make_problem(..., psd_projected=True)`` asked for the projection itself.
    projection_distance : float
        :math:`\max_i \|A_i - A^{\mathrm{given}}_i\|_2` (plus ``input_perturbation``): how far the
        matrices solved are from the input as given, in the problem's coordinates.
    """

    A: np.ndarray
    G: Optional[np.ndarray]
    W: np.ndarray
    c: Optional[np.ndarray]
    criterion: str
    grid: Optional[np.ndarray]
    regularization: float
    Aflat: np.ndarray
    Gflat: Optional[np.ndarray]
    value_scale: float = 1.0
    precond: Optional[np.ndarray] = None
    precond_kind: str = "none"
    value_offset: float = 0.0
    input_perturbation: float = 0.0
    psd_projection: float = 0.0
    A_given: Optional[np.ndarray] = None
    projection_distance: float = 0.0

    def transform(self, X) -> np.ndarray:
        r"""A matrix of the problem as given (an ``A`` or ``G`` at another level) in the problem's coordinates.

        Parameters
        ----------
        X : array_like, shape (m, m) or (k, m, m)

        Returns
        -------
        ndarray
            :math:`T^{-\top} X T^{-1}` (``X`` itself without preconditioning).
        """
        X = np.asarray(X, dtype=float)
        if self.precond is None:
            return X
        Tinv = _triangular_inverse(self.precond)
        return np.swapaxes(Tinv, -1, -2) @ X @ Tinv

    def dual_to_original(self, D) -> np.ndarray:
        r"""A gradient matrix :math:`\partial\Phi/\partial M` of the problem's coordinates in those given.

        :math:`\langle D, T^{-\top} X T^{-1}\rangle = \langle T^{-1} D T^{-\top}, X\rangle`, so a
        sensitivity against an original matrix ``X`` is ``<dual_to_original(D), X>``.

        Parameters
        ----------
        D : ndarray, shape (m, m) or None

        Returns
        -------
        ndarray or None
        """
        if D is None or self.precond is None:
            return D
        Tinv = _triangular_inverse(self.precond)
        return Tinv @ D @ Tinv.T

    @property
    def n(self) -> int:
        """Number of candidate levels."""
        return self.A.shape[0]

    @property
    def m(self) -> int:
        """Number of parameters (size of each matrix)."""
        return self.A.shape[1]

    @property
    def convex(self) -> bool:
        """Whether the criterion is convex (every criterion but the sandwich)."""
        return self.criterion != "sandwich"

    @property
    def criterion_object(self) -> Criterion:
        """The :class:`~noisealloc.solvers.criteria.Criterion` that evaluates this problem."""
        return criterion_object(self.criterion)

    @property
    def atom_bound(self) -> int:
        """Theorem 1: ``m(m+1)/2 + 1`` (convex, or sandwich with G = A) else ``m(m+1) + 1``."""
        m = self.m
        if self.criterion == "sandwich" and self.G is not None:
            return m * (m + 1) + 1
        return m * (m + 1) // 2 + 1


# ---------------------------------------------------------------------------- validation


def _check_sym_psd_stack(arr, name: str, *, check_psd: bool = True) -> np.ndarray:
    if np.iscomplexobj(arr):
        # numpy would drop the imaginary part with only a ComplexWarning
        raise ValueError(f"{name} must be real (symmetric PSD matrices); got a complex array")
    arr = as_float_array(arr, name)
    if arr.ndim != 3 or arr.shape[1] != arr.shape[2]:
        raise ValueError(f"{name} must have shape (n, m, m) (a stack of square matrices); got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty (n = 0 candidate levels): the grid must hold at least one level")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} must have m >= 1 parameters; got shape {arr.shape}")
    check_finite(arr, name)
    size = np.max(np.abs(arr), axis=(1, 2))
    asym = np.max(np.abs(arr - np.swapaxes(arr, 1, 2)), axis=(1, 2))
    bad = np.flatnonzero(asym > SYMMETRY_RTOL * np.maximum(size, np.finfo(float).tiny))
    if bad.size:
        i = bad[0]
        raise ValueError(
            f"{name} must hold symmetric matrices; {name}[{i}] has max |X - X^T| = {asym[i]:.3g} "
            f"(relative {asym[i] / max(size[i], 1e-300):.3g} > SYMMETRY_RTOL = {SYMMETRY_RTOL:g})"
        )
    arr = 0.5 * (arr + np.swapaxes(arr, 1, 2))
    if check_psd:
        ev = np.linalg.eigvalsh(arr)
        lo, hi = ev[:, 0], np.maximum(ev[:, -1], 0.0)
        bad = np.flatnonzero(lo < -PSD_RTOL * np.maximum(hi, np.finfo(float).tiny))
        if bad.size:
            i = bad[0]
            raise ValueError(
                f"{name} must hold positive semidefinite matrices; {name}[{i}] has eigenvalue {lo[i]:.6g} "
                f"(largest {hi[i]:.6g}; allowed relative negativity PSD_RTOL = {PSD_RTOL:g})"
            )
    return np.ascontiguousarray(arr)


def _check_sym_psd_matrix(mat, name: str, m: int) -> np.ndarray:
    mat = as_float_array(mat, name)
    if mat.shape != (m, m):
        raise ValueError(f"{name} must have shape ({m}, {m}) to match A of shape (n, {m}, {m}); got {mat.shape}")
    return _check_sym_psd_stack(mat[None], name)[0]


def check_weights(weights, n: int, *, name: str = "weights", exact_sum: bool = True) -> np.ndarray:
    r"""Validate an allocation on ``n`` candidates and return it normalised, ``p / sum(p)``.

    Parameters
    ----------
    weights : array_like, shape (n,)
        Non-negative weights.
    n : int
        Number of candidates.
    name : str
        Argument name used in error messages.
    exact_sum : bool
        True: the weights must sum to one within ``WEIGHT_SUM_ATOL`` (a probability vector);
        False: any positive sum is accepted (then they are rescaled).

    Returns
    -------
    ndarray, shape (n,)
        ``p / p.sum()``.

    Raises
    ------
    ValueError
        Wrong shape, non-finite or negative entries, or a sum that is not one (``exact_sum``) or
        not positive.

    Examples
    --------
    >>> from noisealloc.solvers.problem import check_weights
    >>> check_weights([0.25, 0.75], 2).tolist()
    [0.25, 0.75]
    >>> check_weights([0.5, 0.6], 2)
    Traceback (most recent call last):
    ...
    ValueError: weights must sum to 1 (a probability vector, within WEIGHT_SUM_ATOL = 1e-09); sum is 1.1
    """
    p = as_float_array(weights, name)
    if p.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) to match A; got {p.shape}")
    check_finite(p, name)
    if np.any(p < 0):
        raise ValueError(f"{name} must be non-negative; min is {p.min()!r}")
    tot = p.sum()
    if exact_sum:
        if not abs(tot - 1.0) <= WEIGHT_SUM_ATOL:
            raise ValueError(f"{name} must sum to 1 (a probability vector, within WEIGHT_SUM_ATOL = "
                             f"{WEIGHT_SUM_ATOL:g}); sum is {tot!r}")
    elif not tot > 0:
        raise ValueError(f"{name} must be non-negative with a positive sum; sum is {tot!r}")
    return p / tot


def _triangular_inverse(T: np.ndarray) -> np.ndarray:
    from noisealloc.solvers._linalg import triangular_inverse

    return triangular_inverse(T, lower=False)


def _singular_error(what: str) -> ValueError:
    return ValueError("the information matrix is singular for every allocation: " + what +
                      "; some parameter direction is informed by no level")


def _precondition(A: np.ndarray):
    r"""The congruence that makes the uniform moment matrix well conditioned (module docstring).

    Returns ``(A_tilde, T, kind, psd_projection)`` (the last: ``Problem.psd_projection``) with :math:`A_i = T^\top \tilde A_i T` and
    :math:`\tilde M_u = \operatorname{mean}_i \tilde A_i` close to the identity.

    Raises ValueError when the uniform allocation (the largest range) is singular in floating point:
    a parameter no level informs, or stacked factors of reciprocal condition at most SINGULAR_RCOND
    after column scaling.
    """
    n, m = A.shape[0], A.shape[1]
    diag = np.einsum("ijj->j", A) / n
    if not np.all(diag > 0):
        k = int(np.flatnonzero(~(diag > 0))[0])
        raise _singular_error(f"parameter {k} has zero uniform information (M_u[{k}, {k}] = 0)")
    # Powers of two: the scaling is exact, so a positive rescaling of A by 2^k gives the same bits.
    d = np.exp2(np.round(0.5 * np.log2(diag)))
    As = A / np.outer(d, d)
    ev = np.linalg.eigvalsh(As.mean(axis=0))
    if ev[0] >= PRECOND_QR_RCOND * ev[-1]:
        return As, np.diag(d), "jacobi", 0.0
    # Factors of the Jacobi-scaled matrices (columns of unit size, so each factor's normwise error is
    # columnwise too); eigenvalues below the eigensolver's resolution are rounding and are dropped.
    w0, U = np.linalg.eigh(As)
    w = np.where(w0 > 4.0 * m * EPS * np.maximum(w0[:, -1:], 0.0), w0, 0.0)
    C = (U * np.sqrt(w)[:, None, :]).transpose(0, 2, 1).reshape(n * m, m)  # rows: sqrt(w_k) u_k^T
    Q, R = np.linalg.qr(C)
    R = R / np.sqrt(n)
    cols = np.linalg.norm(R, axis=0)
    if not np.all(cols > 0):
        raise _singular_error("the stacked factors of the uniform allocation have a zero column")
    sv = np.linalg.svd(R / cols, compute_uv=False)
    rc = sv[-1] / sv[0]
    if not rc > SINGULAR_RCOND:
        raise _singular_error(
            f"the column-scaled factor of the uniform allocation's M has reciprocal condition {rc:.3g} "
            f"<= SINGULAR_RCOND = {SINGULAR_RCOND:.3g} (M itself: {rc * rc:.3g})")
    Qb = Q.reshape(n, m, m)
    At = n * (np.swapaxes(Qb, 1, 2) @ Qb)
    At = 0.5 * (At + np.swapaxes(At, 1, 2))
    wmax = np.maximum(w0[:, -1], 0.0)
    neg = np.sum(np.where(w0 < 0, -w0, 0.0), axis=1) / np.maximum(wmax, np.finfo(float).tiny)
    return At, R * d[None, :], "qr", float(np.max(neg))


def _dot2_congruence(S: np.ndarray, X: np.ndarray):
    r""":math:`S^\top X_i S` for an upper triangular float ``S`` as a double-double pair, by Ogita, Rump and
    Oishi's Dot2 (SIAM J. Sci. Comput. 26, 2005, Alg. 4.5): error-free products (Dekker's split) and sums
    (Knuth's two-sum) in float64, the zeros of ``S`` skipped.  Before its final rounding the result is
    within :math:`(2\gamma_m^2 + m\varepsilon^2)\,|S|^\top |X_i| |S|` entrywise."""
    from noisealloc.solvers import _double_double as ddm

    b, m = X.shape[0], X.shape[1]
    tri = not np.any(np.tril(S, -1))  # dtrtri of the upper triangular factor: exact zeros below
    St = np.ascontiguousarray(S.T)  # lower triangular
    s1, s2 = ddm._split(St)
    x1, x2 = ddm._split(X)
    hi, lo = np.zeros((b, m, m)), np.zeros((b, m, m))
    for j in range(m):  # P = S^T X: row r gets S^T[r, j] X[j, :] for r >= j
        r = j if tri else 0
        a, a1, a2 = St[r:, j:j + 1], s1[r:, j:j + 1], s2[r:, j:j + 1]
        c, c1, c2 = X[:, j:j + 1, :], x1[:, j:j + 1, :], x2[:, j:j + 1, :]
        prod = a * c
        err = ((a1 * c1 - prod) + a1 * c2 + a2 * c1) + a2 * c2
        h, t = ddm._two_sum(hi[:, r:, :], prod)
        hi[:, r:, :] = h
        lo[:, r:, :] += t + err
    ph, pl = hi, lo
    p1, p2 = ddm._split(ph)
    u1, u2 = ddm._split(S)
    hi, lo = np.zeros((b, m, m)), np.zeros((b, m, m))
    for j in range(m):  # Z = P S: column k gets P[:, j] S[j, k] for k >= j
        k = j if tri else 0
        a, a1, a2, al = ph[:, :, j:j + 1], p1[:, :, j:j + 1], p2[:, :, j:j + 1], pl[:, :, j:j + 1]
        c, c1, c2 = S[j:j + 1, k:], u1[j:j + 1, k:], u2[j:j + 1, k:]
        prod = a * c
        err = ((a1 * c1 - prod) + a1 * c2 + a2 * c1) + a2 * c2 + al * c
        h, t = ddm._two_sum(hi[:, :, k:], prod)
        hi[:, :, k:] = h
        lo[:, :, k:] += t + err
    return hi, lo


def _congruence_dd(S: np.ndarray, X: np.ndarray, *, chunk: int = 2048):
    r"""``fl(S^T X_i S)`` computed in twice the working precision, and a bound on its distance to the exact congruence.

    Both products by Dot2 (:func:`_dot2_congruence`, ``S`` upper triangular): their error before the final rounding is below
    :math:`(2\gamma_m^2 + m\varepsilon^2)(|S|^\top |X_i| |S|)` entrywise; the result is then rounded to
    float64 (its low part is the rounding).  So the rounded matrices are the input as given, in the
    coordinates of the float matrix ``S``, to a relative :math:`\varepsilon` of their own entries however
    ill-conditioned ``S`` is (a float64 product loses :math:`\varepsilon \kappa(S)^2`).

    Parameters
    ----------
    S : ndarray, shape (m, m)
    X : ndarray, shape (n, m, m)
    chunk : int
        Matrices per block (bounds the memory).

    Returns
    -------
    B : ndarray, shape (n, m, m)
        Symmetric float64 :math:`S^\top X_i S`.
    err : ndarray, shape (n,)
        Upper bounds on :math:`\|B_i - S^\top X_i S\|_2` (Frobenius norms of the low parts plus the
        products' error, and the symmetrisation).
    """
    n, m = X.shape[0], X.shape[1]
    B = np.empty_like(X)
    err = np.empty(n)
    absS = np.abs(S)
    gam = m * EPS / (1.0 - m * EPS)
    c = 2.0 * gam * gam + (m + 2) * EPS * EPS
    for s0 in range(0, n, chunk):
        x = X[s0:s0 + chunk]
        Zh, Zl = _dot2_congruence(S, x)
        hi = Zh + Zl
        lo = Zl - (hi - Zh)  # what rounding to float64 left out
        sym = 0.5 * (hi + np.swapaxes(hi, 1, 2))
        mag = absS.T @ np.abs(x) @ absS
        B[s0:s0 + chunk] = sym
        err[s0:s0 + chunk] = (np.linalg.norm(lo, axis=(1, 2)) + np.linalg.norm(hi - sym, axis=(1, 2))
                              + c * np.linalg.norm(mag, axis=(1, 2))) * (1.0 + 4 * EPS)
    return B, err


def _e_unresolvable_message(Mt: np.ndarray, T: np.ndarray, lmin_float: float, lmax: float, m: int) -> str:
    r"""Why criterion 'E' refuses a nonsingular problem whose :math:`\lambda_{\min}` float64 cannot resolve.

    :math:`M_u = T^\top \tilde M_u T` with :math:`\tilde M_u` well conditioned, so
    :math:`\lambda_{\min}(M_u) = \sigma_{\min}(L^\top T)^2` (:math:`\tilde M_u = L L^\top`) to a relative
    :math:`\kappa(L^\top T)\,\varepsilon`, while the float64 eigenvalues of :math:`M(p)` (and the sums
    forming it) carry an absolute error of order :math:`m \varepsilon \lambda_{\max}`: E's relative
    gap, measured on the scale :math:`\lambda_{\min}`, has no correct digit.
    """
    try:
        F = np.linalg.cholesky(0.5 * (Mt + Mt.T)).T @ T
        sv = np.linalg.svd(F, compute_uv=False)
        est = f"{sv[-1] ** 2:.3g}"
    except np.linalg.LinAlgError:
        est = "positive"
    noise = m * EPS * lmax
    return (f"A: criterion 'E' cannot be certified in float64 for this problem: the information matrix is "
            f"nonsingular (its column-scaled factors are well conditioned; lambda_min of "
            f"the uniform allocation's M is {est} from that factor, lambda_max {lmax:.3g}), but float64 rounding "
            f"of M(p) and of its eigenvalues is of order m eps lambda_max = {noise:.3g} (eigvalsh gives lambda_min "
            f"= {lmin_float:.3g}): lambda_min / lambda_max is at or below SINGULAR_RCOND = {SINGULAR_RCOND:.3g}, "
            f"so E's gap relative to lambda_min has no correct digit (E is not invariant under a change of "
            f"parameter basis: rescale or reparametrise the parameters so that lambda_min is resolvable)")


def make_problem(A, criterion: str = "L", *, W=None, G=None, A_eval=None, c=None, grid=None,
                 regularize: bool = True, psd_projected: bool = False) -> Problem:
    r"""Validate raw arrays into a :class:`Problem`.

    Parameters
    ----------
    A : array_like, shape (n, m, m)
        Per-level symmetric PSD matrices :math:`A(\lambda_i)`.
    criterion : {'sandwich', 'V', 'L', 'A', 'D', 'E', 'c'}
        Criterion (table in :mod:`~noisealloc.solvers.criteria`).
    W : array_like, shape (m, m), optional
        Weight of 'L' (default identity).
    G : array_like, shape (n, m, m), optional
        Sandwich only: :math:`G(\lambda_i)` (default ``A``, i.e. ``G = A``, convex case).
    A_eval : array_like, shape (m, m)
        Sandwich only: :math:`A_\omega = \int \omega A`.
    c : array_like, shape (m,)
        'c' only.
    grid : array_like, shape (n,), optional
        Strictly increasing candidate levels :math:`\lambda_i`.
    regularize : bool
        E only (the other criteria are preconditioned, see the module docstring): add a ridge when
        the uniform information matrix is near-singular (default True; the solvers need it).  False
        evaluates the criterion exactly as defined, so a near-singular allocation shows up as
        singular instead of being hidden by the ridge.
    psd_projected : bool
        False (default): certificates are of the input as given, also when the QR preconditioning
        factors a PSD projection of it (``Problem.A_given``).  True: the problem solved and certified
        is that projection (for rank-one inputs :math:`\mathrm{fl}(f f^\top)`, the rank-one problem
        :math:`f f^\top` to rounding in ``f``), and the certificate says so with the projection's size.
        Jacobi-scaled problems are solved as given either way.

    Returns
    -------
    Problem

    Raises
    ------
    ValueError
        Non-symmetric, indefinite or non-finite matrices, disagreeing shapes, an empty
        grid, an unknown criterion, missing data, or an information matrix that is
        singular for every allocation (the uniform allocation has the largest range, so
        its singularity means all are singular).

    Warns
    -----
    RegularizationWarning
        E only: when the uniform information matrix is near-singular (reciprocal condition below
        ``REG_RCOND``) and ``regularize``: a ridge is then added to every :math:`M_p` and
        recorded in ``Problem.regularization``.

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.solvers import make_problem
    >>> x = np.linspace(-1, 1, 5); F = np.stack([np.ones(5), x], 1)
    >>> prob = make_problem(F[:, :, None] * F[:, None, :], "D", grid=x)
    >>> prob.n, prob.m, prob.atom_bound
    (5, 2, 4)
    """
    if not isinstance(criterion, str):
        raise TypeError(f"criterion must be a string; got {type(criterion).__name__}")
    criterion = CRITERION_ALIASES.get(criterion, criterion)
    check_choice(criterion, "criterion", CRITERIA + tuple(CRITERION_ALIASES))
    A = _check_sym_psd_stack(A, "A")
    n, m = A.shape[0], A.shape[1]
    if grid is not None:
        grid = as_float_array(grid, "grid")
        if grid.ndim != 1:
            raise ValueError(f"grid must be one-dimensional; got shape {grid.shape}")
        if grid.size == 0:
            raise ValueError("grid is empty: give at least one candidate noise level")
        check_finite(grid, "grid")
        if grid.size != n:
            raise ValueError(f"grid has {grid.size} levels but A has {n} matrices (shapes must agree)")
        if n > 1 and not np.all(np.diff(grid) > 0):
            raise ValueError("grid must be strictly increasing (adjacent grid atoms are merged by position)")
    Gs = None
    cvec = None
    if criterion == "sandwich":
        if A_eval is None:
            raise ValueError("criterion 'sandwich' needs A_eval (the evaluation matrix A_omega, shape (m, m))")
        Wm = _check_sym_psd_matrix(A_eval, "A_eval", m)
        if G is not None:
            Gs = _check_sym_psd_stack(G, "G")
            if Gs.shape != A.shape:
                raise ValueError(f"G must have the shape of A {A.shape}; got {Gs.shape}")
        if W is not None or c is not None:
            raise ValueError("W and c are not used by the sandwich criterion (pass A_eval and G)")
    else:
        if G is not None or A_eval is not None:
            raise ValueError(f"G and A_eval belong to the sandwich criterion; criterion is {criterion!r}")
        if criterion == "L":
            Wm = np.eye(m) if W is None else _check_sym_psd_matrix(W, "W", m)
            if not np.any(Wm):
                raise ValueError("W must not be the zero matrix")
        elif criterion == "c":
            if c is None:
                raise ValueError("criterion 'c' needs the vector c (shape (m,))")
            cvec = as_float_array(c, "c")
            if cvec.shape != (m,):
                raise ValueError(f"c must have shape ({m},) to match A; got {cvec.shape}")
            check_finite(cvec, "c")
            if not np.any(cvec):
                raise ValueError("c must not be the zero vector")
            Wm = np.outer(cvec, cvec)
        else:
            if W is not None or c is not None:
                raise ValueError(f"W and c are not used by criterion {criterion!r}")
            Wm = np.eye(m)
    # The uniform allocation has the largest range among all allocations: it decides singularity,
    # and (every criterion but E, which is not invariant under a change of basis) its factor is the
    # preconditioner.
    T, kind, offset, proj = None, "none", 0.0, 0.0
    A_given, eta, dist = None, 0.0, 0.0
    if criterion != "E":
        A_in = A
        At, T, kind, proj = _precondition(A)
        A = np.ascontiguousarray(At)
        Tinv = _triangular_inverse(T)
        if Gs is not None:
            Gs = np.ascontiguousarray(Tinv.T @ Gs @ Tinv)
            Gs = 0.5 * (Gs + np.swapaxes(Gs, 1, 2))
        if kind == "qr" and criterion != "sandwich":
            # The QR factors solve a PSD projection of the input, which on near-singular inputs (rank-one
            # f f^T rounded to indefinite) differs from it far above rounding in these coordinates; the
            # input as given, congruent by the float matrix Tinv, is kept beside them for the certificate
            # (docs/THEORY.md section 4 (a), "what is certified").  W and c move in double-double too: a
            # float64 product would lose eps * kappa(T)^2.
            A_given, errs = _congruence_dd(Tinv, A_in)
            eta = float(np.max(errs))
            diff = A - A_given
            dist = float(np.max(np.linalg.norm(diff, axis=(1, 2)))) * (1.0 + 4 * EPS) + eta  # Frobenius >= 2-norm
            if cvec is not None:
                from noisealloc.solvers import _double_double as ddm

                cd = ddm.matmul(ddm.dd(Tinv.T), ddm.dd(cvec[:, None]))
                cvec = (cd[0] + cd[1])[:, 0]
                Wm = np.outer(cvec, cvec)
            else:
                Wm = _congruence_dd(Tinv, Wm[None])[0][0]
            if criterion == "D":
                offset = float(2.0 * np.sum(np.log(np.abs(np.diag(Tinv)))))  # exact congruence by Tinv
        else:
            Wm = Tinv.T @ Wm @ Tinv
            Wm = 0.5 * (Wm + Wm.T)
            if cvec is not None:
                cvec = Tinv.T @ cvec
                Wm = np.outer(cvec, cvec)
            if criterion == "D":
                offset = float(-2.0 * np.sum(np.log(np.abs(np.diag(T)))))
    Mu = A.mean(axis=0)
    ev = np.linalg.eigvalsh(Mu)
    lmax = ev[-1]
    if criterion == "E" and lmax > 0 and ev[0] <= SINGULAR_RCOND * lmax:
        # float64 eigenvalues cannot tell a tiny lambda_min from zero; the stacked factors (the
        # preconditioner of the basis-invariant criteria) can.  Raises the singular error if singular.
        At_u, T_u = _precondition(A)[:2]
        raise ValueError(_e_unresolvable_message(At_u.mean(axis=0), T_u, ev[0], lmax, m))
    if lmax <= 0 or ev[0] <= SINGULAR_RCOND * lmax:
        raise _singular_error(
            f"the uniform allocation's M has eigenvalues in [{ev[0]:.3g}, {lmax:.3g}] (reciprocal condition "
            f"{(ev[0] / lmax) if lmax > 0 else 0.0:.3g} <= SINGULAR_RCOND = {SINGULAR_RCOND:.3g})")
    reg = 0.0
    if regularize and ev[0] < REG_RCOND * lmax:
        reg = REG_RCOND * lmax
        warnings.warn(
            f"near-singular problem: uniform information matrix has reciprocal condition {ev[0] / lmax:.3g} "
            f"< REG_RCOND = {REG_RCOND:g}; adding the ridge {reg:.3g} * I to every M_p (recorded in the result)",
            RegularizationWarning,
            stacklevel=3,
        )
    if psd_projected:
        A_given, eta = None, 0.0  # the projection is the problem (projection_distance still says how far)
    prob = Problem(
        A=A,
        G=Gs,
        W=Wm,
        c=cvec,
        criterion=criterion,
        grid=grid,
        regularization=reg,
        Aflat=A.reshape(n, m * m),
        Gflat=None if Gs is None else Gs.reshape(n, m * m),
        value_scale=0.0,
        precond=T,
        precond_kind=kind,
        value_offset=offset,
        input_perturbation=eta,
        psd_projection=proj,
        A_given=A_given,
        projection_distance=dist,
    )
    if criterion == "sandwich":
        # The uniform allocation is the most regular one (largest range): its V fixes the scale on
        # which near-singular values are judged.  Evaluated without the rounding guard (scale 0 = off).
        Mu_p, Gu_p = moments(prob, np.full(n, 1.0 / n))
        try:
            v_u = prob.criterion_object.parts(prob, Mu_p, Gu_p)[0]
        except SingularMomentError:
            v_u = 0.0
        if not (np.isfinite(v_u) and v_u > 0.0):
            v_u = 0.0
        prob = replace(prob, value_scale=float(v_u))
    return prob


def as_problem(problem, criterion: str | None = None, *, W=None, G=None, A_eval=None, c=None, grid=None) -> Problem:
    r"""A :class:`Problem` from either a :class:`Problem` or the raw arrays of :func:`make_problem`.

    The public solver functions (``solve``, ``certify``, ``offgrid_check``, ``reduce_support``,
    ...) share this first argument, so each takes the same kind of input.

    Parameters
    ----------
    problem : Problem or array_like, shape (n, m, m)
        A validated problem, or the per-level matrices ``A``.
    criterion : str, optional
        Criterion of raw arrays (default ``'L'``); with a :class:`Problem` it may only repeat the
        problem's own criterion.
    W, G, A_eval, c, grid
        As in :func:`make_problem` (raw arrays only: a :class:`Problem` already holds them).

    Returns
    -------
    Problem

    Raises
    ------
    ValueError
        A :class:`Problem` together with array keywords, or with a different criterion.
    """
    if isinstance(problem, Problem):
        given = [k for k, v in (("W", W), ("G", G), ("A_eval", A_eval), ("c", c), ("grid", grid)) if v is not None]
        if given:
            raise ValueError(f"{', '.join(given)} must not be given with a Problem (it already holds its arrays); "
                             "pass either a Problem or the raw arrays")
        if criterion is not None and CRITERION_ALIASES.get(criterion, criterion) != problem.criterion:
            raise ValueError(f"criterion {criterion!r} disagrees with the Problem's criterion {problem.criterion!r}")
        return problem
    return make_problem(problem, "L" if criterion is None else criterion, W=W, G=G, A_eval=A_eval, c=c, grid=grid)


def given_problem(prob: Problem) -> Problem:
    """The problem on the input as given (``A_given``) when the matrices solved differ from it, else ``prob``.

    Parameters
    ----------
    prob : Problem

    Returns
    -------
    Problem
        With ``A = A_given`` (and ``A_given = None``); ``input_perturbation`` still bounds its rounding.
    """
    if prob.A_given is None:
        return prob
    B = prob.A_given
    return replace(prob, A=B, Aflat=B.reshape(prob.n, prob.m * prob.m), A_given=None, projection_distance=0.0)


def unit_scaled(prob: Problem):
    r"""An 'E' problem rescaled exactly by a power of two so that its largest diagonal entry is about 1.

    :math:`\lambda_{\min}(fM) = f\lambda_{\min}(M)`, so E's weights and relative gap do not change,
    while sums of data scaled by 1e-300 no longer fall into subnormals (where they lose relative
    accuracy).  Scaling up is exact; scaling down loses only entries below :math:`2^{-1022}` of the
    largest, far under the resolution ``SINGULAR_RCOND`` of :math:`\lambda_{\min}`.

    Parameters
    ----------
    prob : Problem

    Returns
    -------
    scaled : Problem
        ``prob`` itself unless it is an 'E' problem whose entries are not already of unit size.
    factor : float
        The power of two :math:`f` (``scaled.A = f * prob.A``, ridge likewise).
    """
    if prob.criterion != "E":
        return prob, 1.0
    top = float(np.max(np.einsum("ijj->ij", prob.A)))
    if not (np.isfinite(top) and top > 0):
        return prob, 1.0
    f = float(np.exp2(-np.round(np.log2(top))))
    if f == 1.0:
        return prob, 1.0
    A = prob.A * f
    return replace(prob, A=A, Aflat=A.reshape(prob.n, prob.m * prob.m),
                   regularization=prob.regularization * f), f


# ---------------------------------------------------------------------------- evaluation


def moments(prob: Problem, p: np.ndarray):
    r"""Moment matrices :math:`(A_p + \delta I, G_p)` of an allocation, from its support only.

    Parameters
    ----------
    prob : Problem
    p : ndarray, shape (n,)
        The allocation.

    Returns
    -------
    M : ndarray, shape (m, m)
        :math:`\sum_i p_i A_i + \delta I` (symmetrised).
    Gp : ndarray, shape (m, m) or None
        :math:`\sum_i p_i G_i` for the sandwich (:math:`A_p` without ridge when ``G = A``);
        None for the other criteria.
    """
    idx = np.flatnonzero(p)
    m = prob.m
    if 4 * idx.size > p.size:  # dense: a fancy-indexed copy would cost more than the zeros
        idx = slice(None)
    pw = p[idx]
    M = (pw @ prob.Aflat[idx]).reshape(m, m)
    M = 0.5 * (M + M.T)
    if prob.regularization:
        M = M + prob.regularization * np.eye(m)
    Gp = None
    if prob.criterion == "sandwich":
        if prob.G is None:
            Gp = M - prob.regularization * np.eye(m) if prob.regularization else M
        else:
            Gp = (pw @ prob.Gflat[idx]).reshape(m, m)
            Gp = 0.5 * (Gp + Gp.T)
    return M, Gp


def evaluate_moments(prob: Problem, M: np.ndarray, Gp=None, *, mu: float = 0.0) -> Evaluation:
    """Value and gradient matrices at given moment matrices.

    Parameters
    ----------
    prob : Problem
    M : ndarray, shape (m, m)
        :math:`A_p` (ridge included).
    Gp : ndarray, shape (m, m), optional
        :math:`G_p` (sandwich).
    mu : float
        Smoothing of 'E'.

    Returns
    -------
    Evaluation

    Raises
    ------
    SingularMomentError
        Where the moment matrix is numerically singular.
    """
    return prob.criterion_object.evaluate(prob, M, Gp, mu=mu)


def evaluate(prob: Problem, p: np.ndarray, *, mu: float = 0.0) -> Evaluation:
    """Value and gradient matrices at an allocation.

    Parameters
    ----------
    prob : Problem
    p : ndarray, shape (n,)
        The allocation.
    mu : float
        Smoothing of 'E'.

    Returns
    -------
    Evaluation

    Raises
    ------
    SingularMomentError
        Where the moment matrix is numerically singular.
    """
    M, Gp = moments(prob, p)
    return evaluate_moments(prob, M, Gp, mu=mu)


def criterion_value(prob: Problem, p: np.ndarray, *, mu: float = 0.0) -> float:
    r""":math:`\Phi(p)`, ``+inf`` when the moment matrix is numerically singular.

    Parameters
    ----------
    prob : Problem
    p : ndarray, shape (n,)
        The allocation (not validated: see :func:`check_weights`).
    mu : float
        Smoothing of 'E'.

    Returns
    -------
    float
    """
    try:
        return evaluate(prob, p, mu=mu).value
    except SingularMomentError:
        return np.inf


def scale(prob: Problem, ev: Evaluation) -> float:
    """Normaliser of the relative gap (see :class:`~noisealloc.solvers.result.Certificate`).

    Parameters
    ----------
    prob : Problem
    ev : Evaluation

    Returns
    -------
    float
        :math:`|\\Phi|` for 'L', 'A', 'c', 'sandwich'; ``m`` for 'D'; :math:`\\lambda_{\\min}(M_p)` for 'E'.
    """
    return prob.criterion_object.scale(prob, ev)


def hessian(prob: Problem, p: np.ndarray, idx: np.ndarray, ev: Evaluation, *, mu: float = 0.0) -> np.ndarray:
    r"""Hessian :math:`\partial^2\Phi / \partial p_j \partial p_k` for ``j, k`` in ``idx``.

    Analytic for 'L', 'A', 'c' (:math:`2\operatorname{tr}(K W K A_j K A_k)`), 'D'
    (:math:`\operatorname{tr}(K A_j K A_k)`) and smoothed 'E' (Lewis' formula for spectral
    functions) and the sandwich (second derivatives of :math:`V` in closed form,
    :meth:`noisealloc.solvers.criteria.SandwichCriterion.hessian`; the Newton polish builds it from
    low-rank factors of the levels where that is cheaper).

    Parameters
    ----------
    prob : Problem
    p : ndarray, shape (n,)
    idx : ndarray of int, shape (s,)
    ev : Evaluation
        Evaluation at ``p``.
    mu : float
        Smoothing of 'E' (must be positive for 'E').

    Returns
    -------
    ndarray, shape (s, s)
    """
    return prob.criterion_object.hessian(prob, p, idx, ev, mu=mu, evaluate=lambda q: evaluate(prob, q))


def new_counters() -> dict:
    """Fresh work counters shared by the algorithms of one solve (SciPy's names).

    Returns
    -------
    dict
        ``{'nit': 0, 'njev': 0, 'nfev': 0}``: iterations (main algorithm plus Newton steps),
        full gradient evaluations (one GEMV over all candidates each) and criterion evaluations
        (line searches, backtracking).
    """
    return {"nit": 0, "njev": 0, "nfev": 0}
