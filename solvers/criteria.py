r"""Allocation problems on a candidate grid and their criteria.

A problem is a grid of ``n`` candidate noise levels with per-level matrices
``A[i]`` (shape ``(n, m, m)``), and for the sandwich also ``G[i]`` and
``A_eval``.  An allocation ``p`` (a probability vector on the grid) has moment
matrices

.. math::  M(p) = A_p = \sum_i p_i A_i + \delta I, \qquad G_p = \sum_i p_i G_i ,

with :math:`\delta = 0` unless the problem had to be regularised (recorded).
Criteria (THEORY.md section 4, regime (a)):

================  =============================================================  ==========
name              :math:`\Phi(p)`                                                convex
================  =============================================================  ==========
``'sandwich'``    :math:`V = \tfrac12 \operatorname{tr}(A_\omega A_p^{-1} G_p A_p^{-1})`    no
``'L'``           :math:`\operatorname{tr}(W M^{-1})`                            yes
``'A'``           :math:`\operatorname{tr}(M^{-1})` (``'L'`` with ``W = I``)     yes
``'D'``           :math:`-\log\det M`                                            yes
``'E'``           :math:`-\lambda_{\min}(M)` (non-smooth)                        yes
``'c'``           :math:`c^\top M^{-1} c`                                        yes
================  =============================================================  ==========

Every gradient :math:`g_i = \partial\Phi/\partial p_i` is an inner product with a
fixed matrix, :math:`g_i = \langle D_A, A_i\rangle + \langle D_G, G_i\rangle`, so the
hot loop over all ``n`` candidates is one matrix-vector product with the
flattened ``(n, m*m)`` stack (BLAS GEMV), after one Cholesky factorisation of
``M``; no per-candidate inverse is ever formed.

For 'E' the main algorithms minimise the smoothed criterion
:math:`\Phi_\mu(M) = \mu \log \sum_k e^{-\lambda_k(M)/\mu}`
(:math:`-\lambda_{\min} \le \Phi_\mu \le -\lambda_{\min} + \mu \log m`); the polish is
the semidefinite program :math:`\max t` s.t. :math:`M(p) \succeq tI` solved by a
primal-dual interior point with column generation
(:mod:`~noisealloc.solvers.e_optimal`), and the certificate is the non-smooth
weak-duality bound with the dual matrix of the equivalence theorem (see
:mod:`noisealloc.solvers.certificates`).

The entry point :func:`solve` lives here; the algorithms are in
:mod:`~noisealloc.solvers.frank_wolfe`, :mod:`~noisealloc.solvers.multiplicative`,
:mod:`~noisealloc.solvers.rex` and :mod:`~noisealloc.solvers.polish`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np
from scipy import linalg as sla

from noisealloc.theory.errors import (
    ConvergenceWarning,
    RegularizationWarning,
    as_float_array,
    as_generator,
    check_choice,
    check_finite,
)
from noisealloc.theory.tolerances import (
    EPS,
    FW_GAP_RTOL,
    KKT_RTOL,
    PSD_RTOL,
    REG_RCOND,
    SANDWICH_ROUNDING_RTOL,
    SINGULAR_RCOND,
    SYMMETRY_RTOL,
)

__all__ = ["CRITERIA", "METHODS", "Problem", "make_problem", "evaluate", "criterion_value", "solve"]

#: Criterion names accepted by :func:`solve` ('V' is an alias of 'sandwich').
CRITERIA = ("sandwich", "L", "A", "D", "E", "c")
_ALIASES = {"V": "sandwich"}
#: Methods accepted by :func:`solve`.
METHODS = ("auto", "frank-wolfe", "multiplicative", "rex")


class SingularMomentError(np.linalg.LinAlgError):
    """The moment matrix of an allocation is not positive definite (value +inf)."""


@dataclass(frozen=True)
class Problem:
    r"""A validated allocation problem on raw arrays (see :func:`make_problem`).

    Attributes
    ----------
    A : ndarray, shape (n, m, m)
        Symmetrised, PSD per-level matrices.
    G : ndarray, shape (n, m, m) or None
        Sandwich only (``None`` means ``G = A``).
    W : ndarray, shape (m, m)
        Weight of 'L'/'A'/'c' (``c c^T`` for 'c'); ``A_eval`` for the sandwich.
    c : ndarray, shape (m,) or None
    criterion : str
    grid : ndarray, shape (n,) or None
    regularization : float
        Ridge :math:`\delta` added to every :math:`M_p`.
    Aflat, Gflat : ndarray, shape (n, m*m)
        Row-major flattenings used by the gradient GEMV.
    value_scale : float
        Sandwich only: :math:`V` at the uniform allocation, the problem's own scale.  A
        sandwich value whose rounding-error bound exceeds ``SANDWICH_ROUNDING_RTOL``
        times this scale is treated as numerically singular (see :func:`evaluate_moments`).
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

    @property
    def n(self) -> int:
        return self.A.shape[0]

    @property
    def m(self) -> int:
        return self.A.shape[1]

    @property
    def convex(self) -> bool:
        return self.criterion != "sandwich"

    @property
    def atom_bound(self) -> int:
        """Theorem 1: ``m(m+1)/2 + 1`` (convex, or sandwich with G = A) else ``m(m+1) + 1``."""
        m = self.m
        if self.criterion == "sandwich" and self.G is not None:
            return m * (m + 1) + 1
        return m * (m + 1) // 2 + 1


# ---------------------------------------------------------------------------- validation


def _check_sym_psd_stack(arr, name: str, *, check_psd: bool = True) -> np.ndarray:
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


def make_problem(A, criterion: str = "L", *, W=None, G=None, A_eval=None, c=None, grid=None) -> Problem:
    r"""Validate raw arrays into a :class:`Problem` (see :func:`solve` for the parameters).

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
        When the uniform information matrix is near-singular; a ridge is then added to
        every :math:`M_p` and recorded in ``Problem.regularization``.
    """
    if not isinstance(criterion, str):
        raise TypeError(f"criterion must be a string; got {type(criterion).__name__}")
    criterion = _ALIASES.get(criterion, criterion)
    check_choice(criterion, "criterion", CRITERIA + tuple(_ALIASES))
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
    # The uniform allocation has the largest range among all allocations.
    Mu = A.mean(axis=0)
    ev = np.linalg.eigvalsh(Mu)
    lmax = ev[-1]
    if lmax <= 0 or ev[0] <= SINGULAR_RCOND * lmax:
        raise ValueError(
            "the information matrix is singular for every allocation: the uniform allocation's "
            f"M has eigenvalues in [{ev[0]:.3g}, {lmax:.3g}] (reciprocal condition "
            f"{(ev[0] / lmax) if lmax > 0 else 0.0:.3g} <= SINGULAR_RCOND = {SINGULAR_RCOND:.3g}); "
            "some parameter direction is informed by no level"
        )
    reg = 0.0
    if ev[0] < REG_RCOND * lmax:
        reg = REG_RCOND * lmax
        warnings.warn(
            f"near-singular problem: uniform information matrix has reciprocal condition {ev[0] / lmax:.3g} "
            f"< REG_RCOND = {REG_RCOND:g}; adding the ridge {reg:.3g} * I to every M_p (recorded in the result)",
            RegularizationWarning,
            stacklevel=3,
        )
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
    )
    if criterion == "sandwich":
        # The uniform allocation is the most regular one (largest range): its V fixes the scale on
        # which near-singular values are judged.  Evaluated without the rounding guard (scale 0 = off).
        Mu_p, Gu_p = moments(prob, np.full(n, 1.0 / n))
        try:
            v_u = _sandwich_parts(prob, Mu_p, Gu_p)[0]
        except SingularMomentError:
            v_u = 0.0
        if not (np.isfinite(v_u) and v_u > 0.0):
            v_u = 0.0
        prob = replace(prob, value_scale=float(v_u))
    return prob


# ---------------------------------------------------------------------------- evaluation


@dataclass
class Eval:
    """Internal: value and gradient matrices of a criterion at one allocation."""

    value: float
    DA: np.ndarray
    DG: Optional[np.ndarray]
    M: np.ndarray
    K: Optional[np.ndarray]  # M^{-1}
    eig: Optional[tuple] = None  # 'E': (eigenvalues, eigenvectors, softmin weights)
    Gp: Optional[np.ndarray] = None


def moments(prob: Problem, p: np.ndarray):
    """``(M_p, G_p)`` from the support of ``p`` only (``G_p`` is None unless sandwich with G)."""
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


def _inv_pd(M: np.ndarray) -> np.ndarray:
    try:
        cf = sla.cho_factor(M, lower=True, check_finite=False)
    except np.linalg.LinAlgError as exc:
        raise SingularMomentError("moment matrix is not positive definite") from exc
    d = np.diag(cf[0])
    # Below SINGULAR_RCOND the inverse has no correct digit and values computed from it are
    # rounding noise (possibly of either sign).  (min d / max d)^2 is a cheap first test, but
    # the Cholesky diagonal can hide ill-conditioning (e.g. a Kronecker spline moment matrix
    # whose allocation sits on one level); LAPACK's dpocon estimate of the 1-norm reciprocal
    # condition number, O(m^2) given the factor, does not.  The threshold is the 2-norm one:
    # kappa_2 >= kappa_1 / m, and dpocon never underestimates rcond_1, so an estimate at or
    # below SINGULAR_RCOND / m proves rcond_2 <= SINGULAR_RCOND (make_problem's definition,
    # which a ridge-regularised problem is built to pass at the uniform allocation).
    if not np.all(d > 0) or d.min() ** 2 <= SINGULAR_RCOND * d.max() ** 2:
        raise SingularMomentError("moment matrix is singular in floating point")
    anorm = float(np.max(np.sum(np.abs(M), axis=0)))
    rcond, info = sla.lapack.dpocon(cf[0], anorm, uplo="L")
    if info != 0 or not rcond > SINGULAR_RCOND / M.shape[0]:
        raise SingularMomentError(f"moment matrix is singular in floating point (1-norm rcond estimate {rcond:.2e})")
    K = sla.cho_solve(cf, np.eye(M.shape[0]), check_finite=False)
    return 0.5 * (K + K.T), cf


def _softmin(ev: np.ndarray, mu: float):
    z = -(ev - ev[0]) / mu
    w = np.exp(z)
    s = w.sum()
    return w / s, np.log(s)


def evaluate_moments(prob: Problem, M: np.ndarray, Gp=None, *, mu: float = 0.0) -> Eval:
    """Value and gradient matrices at given moment matrices (raises SingularMomentError)."""
    crit = prob.criterion
    if crit == "E":
        ev, U = np.linalg.eigh(M)
        if mu > 0:
            s, lse = _softmin(ev, mu)
            value = -ev[0] + mu * lse
        else:
            s = np.zeros_like(ev)
            s[0] = 1.0
            value = -ev[0]
        DA = -(U * s) @ U.T
        return Eval(value=float(value), DA=DA, DG=None, M=M, K=None, eig=(ev, U, s))
    K, cf = _inv_pd(M)
    if crit in ("L", "A", "c"):
        KW = K @ prob.W
        B = KW @ K
        value = float(np.trace(KW))
        return Eval(value=value, DA=-0.5 * (B + B.T), DG=None, M=M, K=K)
    if crit == "D":
        value = float(-2.0 * np.sum(np.log(np.diag(cf[0]))))
        return Eval(value=value, DA=-K, DG=None, M=M, K=K)
    value, DA, DG, K, Gp = _sandwich_parts(prob, M, Gp, K=K)
    if prob.G is None:
        return Eval(value=value, DA=DA + DG, DG=None, M=M, K=K, Gp=Gp)
    return Eval(value=value, DA=DA, DG=DG, M=M, K=K, Gp=Gp)


def _sandwich_parts(prob: Problem, M: np.ndarray, Gp, K=None):
    r"""Sandwich value and gradient matrices; raises SingularMomentError where V is rounding noise.

    The inverse is backward stable: the computed ``K`` is :math:`(M + E)^{-1}` with
    :math:`\|E\|_2 \lesssim (m+1)\,\epsilon\,\|M\|_2`, so to first order the computed value is off by
    :math:`|\langle \partial V/\partial M, E\rangle| \le \|D\|_* \|E\|_2`, with
    :math:`D = -\tfrac12 (K G K A_\omega K + K A_\omega K G K)` (``DA`` below).  Near the singular
    boundary this bound, not the condition number alone, says whether V has any correct digit: a
    minimiser is drawn to points where rounding makes V small.  Such points are refused when the bound
    exceeds ``SANDWICH_ROUNDING_RTOL`` times the problem's scale (V at the uniform allocation).
    """
    if K is None:
        K, _cf = _inv_pd(M)
    if Gp is None:
        Gp = M - prob.regularization * np.eye(M.shape[0]) if prob.regularization else M
    KAK = K @ prob.W @ K
    KGK = K @ Gp @ K
    value = float(0.5 * np.sum(prob.W * KGK))
    if value < 0.0:
        # V = tr(A_w K G K)/2 >= 0 exactly (K G K is PSD); a negative value is rounding noise of
        # an inverse with no correct digit, and a minimiser is drawn to exactly such points.
        raise SingularMomentError(f"sandwich value {value:.3e} < 0: the moment matrix is numerically singular")
    Q = KGK @ prob.W @ K
    DA = -0.5 * (Q + Q.T)
    DG = 0.5 * (KAK + KAK.T) * 0.5
    if prob.value_scale > 0.0:
        m = M.shape[0]
        # M_p and G_p are known only to their assembly rounding, ~(m+1) eps of their norm (and the
        # inverse is backward stable to the same order), so to first order V is uncertain by
        # <dV/dM, dM> + <dV/dG, dG>.  ||X||_* <= sqrt(m) ||X||_F bounds each pairing cheaply.  The G
        # term matters at the singular boundary: there K is huge along directions in which G_p is
        # pure rounding noise, and V computed from that noise can have any value.
        if prob.G is None:
            pair = np.linalg.norm(M) * np.linalg.norm(DA + DG)
        else:
            pair = np.linalg.norm(M) * np.linalg.norm(DA) + np.linalg.norm(Gp) * np.linalg.norm(DG)
        err = (m + 1) * EPS * np.sqrt(m) * pair
        if not err <= SANDWICH_ROUNDING_RTOL * prob.value_scale:
            raise SingularMomentError(
                f"sandwich value {value:.3e} carries a rounding-error bound {err:.2e} > SANDWICH_ROUNDING_RTOL * "
                f"V(uniform) = {SANDWICH_ROUNDING_RTOL * prob.value_scale:.2e}: the moment matrix is numerically singular"
            )
    return value, DA, DG, K, Gp


def evaluate(prob: Problem, p: np.ndarray, *, mu: float = 0.0) -> Eval:
    """Value and gradient matrices at allocation ``p`` (raises SingularMomentError)."""
    M, Gp = moments(prob, p)
    return evaluate_moments(prob, M, Gp, mu=mu)


def criterion_value(prob: Problem, p: np.ndarray, *, mu: float = 0.0) -> float:
    """:math:`\\Phi(p)`, ``+inf`` when the moment matrix is singular."""
    try:
        return evaluate(prob, p, mu=mu).value
    except SingularMomentError:
        return np.inf


def gradient(prob: Problem, ev: Eval, idx=None) -> np.ndarray:
    """:math:`g_i = \\langle D_A, A_i\\rangle + \\langle D_G, G_i\\rangle` for all (or the listed) candidates."""
    Af = prob.Aflat if idx is None else prob.Aflat[idx]
    g = Af @ ev.DA.ravel()
    if ev.DG is not None:
        Gf = prob.Gflat if idx is None else prob.Gflat[idx]
        g = g + Gf @ ev.DG.ravel()
    return g


def scale(prob: Problem, ev: Eval) -> float:
    """Normaliser of the relative gap (see :class:`~noisealloc.solvers.result.Certificate`)."""
    if prob.criterion == "D":
        return float(prob.m)
    if prob.criterion == "E":
        return float(max(ev.eig[0][0], np.finfo(float).tiny))
    return float(max(abs(ev.value), np.finfo(float).tiny))


def hessian(prob: Problem, p: np.ndarray, idx: np.ndarray, ev: Eval, *, mu: float = 0.0) -> np.ndarray:
    r"""Hessian :math:`\partial^2\Phi / \partial p_j \partial p_k` for ``j, k`` in ``idx``.

    Analytic for 'L', 'A', 'c' (:math:`2\operatorname{tr}(K W K A_j K A_k)`), 'D'
    (:math:`\operatorname{tr}(K A_j K A_k)`) and smoothed 'E' (Lewis' formula for spectral
    functions); centred finite differences of the analytic gradient for the sandwich.
    """
    crit = prob.criterion
    As = prob.A[idx]
    if crit in ("L", "A", "c", "D"):
        K = ev.K
        s_, m = As.shape[0], prob.m
        X = np.matmul(K, As)  # K A_j
        XT = np.swapaxes(X, 1, 2).reshape(s_, m * m)
        if crit == "D":
            H = X.reshape(s_, m * m) @ XT.T  # tr(K A_j K A_k)
        else:
            P = np.matmul(-ev.DA, As)  # K W K A_j
            H = 2.0 * (P.reshape(s_, m * m) @ XT.T)
        return 0.5 * (H + H.T)
    if crit == "E":
        ev_, U, s = ev.eig
        if mu <= 0:
            raise ValueError("the Hessian of 'E' needs a smoothing mu > 0")
        At = np.matmul(np.matmul(U.T, As), U)  # U^T A_j U
        d = np.einsum("jkk->jk", At)
        F2 = (np.diag(s) - np.outer(s, s)) / mu
        H = d @ F2 @ d.T
        dl = ev_[:, None] - ev_[None, :]
        num = -s[:, None] + s[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            Gam = np.where(np.abs(dl) > 1e-9 * max(abs(ev_[-1]), 1e-300), num / dl, 0.0)
        close = np.abs(dl) <= 1e-9 * max(abs(ev_[-1]), 1e-300)
        Gam = np.where(close, (s[:, None] + s[None, :]) / (2 * mu), Gam)
        np.fill_diagonal(Gam, 0.0)
        H = H + np.einsum("jab,ab,kab->jk", At, Gam, At)
        return 0.5 * (H + H.T)
    # sandwich: finite differences of the analytic gradient restricted to idx
    from noisealloc.theory.tolerances import FD_REL_STEP

    s_ = len(idx)
    H = np.empty((s_, s_))
    for a, j in enumerate(idx):
        h = FD_REL_STEP * max(p[j], 1.0 / max(s_, 1))
        pp = p.copy()
        pp[j] += h
        pm = p.copy()
        pm[j] = p[j] - h
        g0 = None
        try:
            gp = gradient(prob, evaluate(prob, pp), idx)
        except SingularMomentError:
            gp = None
        try:
            gm = gradient(prob, evaluate(prob, pm), idx)
        except SingularMomentError:
            gm = None
        if gp is not None and gm is not None:
            H[:, a] = (gp - gm) / (2 * h)
        elif gp is not None or gm is not None:
            g0 = gradient(prob, ev, idx)
            H[:, a] = (gp - g0) / h if gp is not None else (g0 - gm) / h
        else:
            # M(p) is singular to rounding: no curvature information in this column; the
            # eigenvalue floor of the Newton step then makes it a gradient step.
            H[:, a] = 0.0
    return 0.5 * (H + H.T)


# ---------------------------------------------------------------------------- solve


def _default_max_iter(method: str) -> int:
    return {"frank-wolfe": 20000, "multiplicative": 20000, "rex": 2000}.get(method, 20000)


def solve(
    A,
    criterion: str = "L",
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
):
    r"""Optimal allocation on a candidate grid, with a certificate.

    Minimises :math:`\Phi(M(p))` over probability vectors ``p`` on the grid (criteria in
    the module docstring).  The main algorithm reduces the certified gap quickly and
    identifies the support; ``polish=True`` then runs projected Newton on the active
    support with column generation over all candidates (quadratic convergence), until
    the certified relative gap is at most ``tol``.

    Parameters
    ----------
    A : array_like, shape (n, m, m)
        Per-level symmetric PSD matrices :math:`A(\lambda_i)`.
    criterion : {'sandwich', 'V', 'L', 'A', 'D', 'E', 'c'}
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
        ``'auto'``: multiplicative for convex criteria, Frank-Wolfe (pairwise) for the sandwich.
    polish : bool
        Finish with projected Newton on the active support (default True); for 'E' the
        finish is the primal-dual interior point of :mod:`~noisealloc.solvers.e_optimal`.
    tol : float, optional
        Target certified relative gap (default ``FW_GAP_RTOL`` = 1e-8 for convex criteria,
        ``KKT_RTOL`` = 1e-6 for the sandwich).
    max_iter : int, optional
        Iteration limit of the main algorithm.
    p0 : array_like, shape (n,), optional
        Starting allocation (default uniform).
    rng : numpy.random.Generator or int or None
        Randomness of 'rex' only.

    Returns
    -------
    SolveResult
        ``status`` 0 converged, 1 iteration limit, 2 stalled (see ``STATUS_MESSAGES``).

    Warns
    -----
    ConvergenceWarning
        If the certified gap did not reach ``tol``.
    RegularizationWarning
        If a ridge had to be added (near-singular problem).

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
    with _blas_single_thread():
        return _solve(A, criterion, W=W, G=G, A_eval=A_eval, c=c, grid=grid, method=method, polish=polish,
                      tol=tol, max_iter=max_iter, p0=p0, rng=rng)


def _blas_single_thread():
    """Limit BLAS to one thread: the solver's GEMVs and m x m factorisations are too small
    for threading to pay, and on a shared machine oversubscription slows them ~10x."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings threadpoolctl
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _solve(A, criterion, *, W, G, A_eval, c, grid, method, polish, tol, max_iter, p0, rng):
    from noisealloc.solvers import certificates, e_optimal, frank_wolfe, multiplicative, rex
    from noisealloc.solvers import polish as polish_mod
    from noisealloc.solvers.result import STATUS_MESSAGES, SolveResult

    prob = make_problem(A, criterion, W=W, G=G, A_eval=A_eval, c=c, grid=grid)
    check_choice(method, "method", METHODS)
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
        p = as_float_array(p0, "p0")
        if p.shape != (n,):
            raise ValueError(f"p0 must have shape ({n},); got {p.shape}")
        check_finite(p, "p0")
        if np.any(p < 0) or not p.sum() > 0:
            raise ValueError("p0 must be non-negative with a positive sum")
        p = p / p.sum()
        if not np.isfinite(criterion_value(prob, p)):
            raise ValueError("p0 has a singular information matrix; start from an allocation with M(p0) positive definite")
    gen = None
    seed_state = None
    if method == "rex":
        gen = as_generator(rng)
        seed_state = gen.bit_generator.state

    counters = {"n_iter": 0, "n_grad": 0, "n_value": 0}
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
    for mu in mus:
        if method == "multiplicative":
            p, st = multiplicative.run(prob, p, tol=main_tol, max_iter=main_iter, mu=mu, counters=counters)
        elif method == "frank-wolfe":
            p, st = frank_wolfe.run(prob, p, tol=main_tol, max_iter=main_iter, mu=mu, counters=counters)
        else:
            p, st = rex.run(prob, p, tol=main_tol, max_iter=main_iter, rng=gen, counters=counters)
        status = st
        if polish and prob.criterion == "E":
            # non-smooth: primal-dual interior point with column generation
            p, status = e_optimal.run(prob, p, tol=tol, counters=counters)
        elif polish:
            p, status = polish_mod.run(prob, p, tol=tol, mu=mu, counters=counters)
    cert = certificates.certify_problem(prob, p, rtol=tol)
    # The certificate, not the solver's own bookkeeping, decides convergence.
    if cert.rel_gap <= tol:
        status = 0
    elif status == 0:
        status = 2
    support = np.flatnonzero(p > 0)
    label = method + ("+polish" if polish else "")
    message = STATUS_MESSAGES[status] + f" (certified relative gap {cert.rel_gap:.3g}, tol {tol:g})"
    if status != 0:
        warnings.warn(f"{label}: {message}", ConvergenceWarning, stacklevel=3)
    return SolveResult(
        weights=p,
        support=support,
        lam=None if prob.grid is None else prob.grid[support],
        value=cert.value,
        gap=cert.gap,
        rel_gap=cert.rel_gap,
        converged=status == 0,
        status=status,
        message=message,
        n_iter=counters["n_iter"],
        n_grad=counters["n_grad"],
        n_value=counters["n_value"],
        method=label,
        criterion=prob.criterion,
        tol=tol,
        max_iter=int(max_iter),
        regularization=prob.regularization,
        certificate=cert,
        seed_state=seed_state,
    )


def sandwich_value(A, G, A_eval, weights) -> float:
    r"""The sandwich :math:`V(p) = \tfrac12 \operatorname{tr}(A_\omega A_p^{-1} G_p A_p^{-1})`.

    Parameters
    ----------
    A, G : array_like, shape (n, m, m)
    A_eval : array_like, shape (m, m)
    weights : array_like, shape (n,)
    """
    prob = make_problem(A, "sandwich", G=G, A_eval=A_eval)
    p = as_float_array(weights, "weights", shape=(prob.n,))
    check_finite(p, "weights")
    return evaluate(prob, p).value


def sandwich_gradient(A, G, A_eval, weights) -> np.ndarray:
    r""":math:`\partial V / \partial p_i = \tfrac12\langle K A_\omega K, G_i\rangle - \langle \operatorname{sym}(K G_p K A_\omega K), A_i\rangle`, :math:`K = A_p^{-1}`; shape (n,)."""
    prob = make_problem(A, "sandwich", G=G, A_eval=A_eval)
    p = as_float_array(weights, "weights", shape=(prob.n,))
    check_finite(p, "weights")
    return gradient(prob, evaluate(prob, p))
