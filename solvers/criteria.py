r"""Design criteria of an allocation, one small object per criterion (docs/THEORY.md section 4, regime (a)).

A problem is a grid of ``n`` candidate noise levels with per-level matrices
``A[i]`` (shape ``(n, m, m)``), and for the sandwich also ``G[i]`` and
``A_eval`` (see :mod:`~noisealloc.solvers.problem`).  An allocation ``p`` (a
probability vector on the grid) has moment matrices

.. math::  M(p) = A_p = \sum_i p_i A_i + \delta I, \qquad G_p = \sum_i p_i G_i ,

with :math:`\delta = 0` unless the problem had to be regularised (recorded).

================  =============================================================  ==========  ===============================
name              :math:`\Phi(p)`                                                convex      object
================  =============================================================  ==========  ===============================
``'sandwich'``    :math:`V = \tfrac12 \operatorname{tr}(A_\omega A_p^{-1} G_p A_p^{-1})`    no          :class:`SandwichCriterion`
``'L'``           :math:`\operatorname{tr}(W M^{-1})`                            yes         :class:`TraceCriterion`
``'A'``           :math:`\operatorname{tr}(M^{-1})` (``'L'`` with ``W = I``)     yes         :class:`TraceCriterion`
``'D'``           :math:`-\log\det M`                                            yes         :class:`LogDetCriterion`
``'E'``           :math:`-\lambda_{\min}(M)` (non-smooth)                        yes         :class:`MinEigenvalueCriterion`
``'c'``           :math:`c^\top M^{-1} c`                                        yes         :class:`TraceCriterion` (``W = c c^T``)
================  =============================================================  ==========  ===============================

Each object computes, from the moment matrices, the value, the gradient matrices
:math:`D_A = \partial\Phi/\partial A_p` and :math:`D_G = \partial\Phi/\partial G_p` (so that
:math:`g_i = \partial\Phi/\partial p_i = \langle D_A, A_i\rangle + \langle D_G, G_i\rangle`, see
:func:`gradient`), the Hessian on a set of candidates and the scale of the relative gap.
The hot loop over all ``n`` candidates is one matrix-vector product with the flattened
``(n, m*m)`` stack (BLAS GEMV), after one Cholesky factorisation of ``M``; no
per-candidate inverse is ever formed.

For 'E' the main algorithms minimise the smoothed criterion
:math:`\Phi_\mu(M) = \mu \log \sum_k e^{-\lambda_k(M)/\mu}`
(:math:`-\lambda_{\min} \le \Phi_\mu \le -\lambda_{\min} + \mu \log m`); the polish is
the semidefinite program :math:`\max t` s.t. :math:`M(p) \succeq tI`
(:mod:`~noisealloc.solvers.algorithms.e_optimal`).

This module sits at the bottom of :mod:`noisealloc.solvers`: it imports nothing from the
package.  The objects read a problem's arrays (``A``, ``Aflat``, ``G``, ``Gflat``, ``W``,
``regularization``, ``value_scale``) by attribute, so any
:class:`~noisealloc.solvers.problem.Problem` works.

References
----------
docs/THEORY.md section 4, regime (a) (criteria to support; certificates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
from scipy import linalg as sla

from noisealloc.theory.tolerances import (
    E_CLUSTER_RTOL,
    EPS,
    FD_REL_STEP,
    SANDWICH_ROUNDING_RTOL,
    SANDWICH_ROUNDING_ULPS,
    SINGULAR_RCOND,
)

__all__ = [
    "CRITERIA",
    "CRITERION_ALIASES",
    "SingularMomentError",
    "Evaluation",
    "Criterion",
    "TraceCriterion",
    "LogDetCriterion",
    "MinEigenvalueCriterion",
    "SandwichCriterion",
    "criterion_object",
    "gradient",
    "inv_pd",
]

#: Criterion names accepted by :func:`noisealloc.solvers.solve` ('V' is an alias of 'sandwich').
CRITERIA = ("sandwich", "L", "A", "D", "E", "c")
#: Other spellings of a criterion name.
CRITERION_ALIASES = {"V": "sandwich"}


class SingularMomentError(np.linalg.LinAlgError):
    """The moment matrix of an allocation is not positive definite (value +inf)."""


@dataclass
class Evaluation:
    r"""Value and gradient matrices of a criterion at one allocation.

    Attributes
    ----------
    value : float
        :math:`\Phi(p)`.
    DA : ndarray, shape (m, m)
        :math:`\partial\Phi/\partial A_p` (for the sandwich with ``G = A`` this already
        includes the ``G_p`` part).
    DG : ndarray, shape (m, m) or None
        :math:`\partial\Phi/\partial G_p` (sandwich with a separate ``G`` only).
    M : ndarray, shape (m, m)
        The moment matrix :math:`A_p` (ridge included).
    K : ndarray, shape (m, m) or None
        :math:`M^{-1}` (None for 'E').
    eig : tuple or None
        'E' only: ``(eigenvalues, eigenvectors, softmin weights)`` of ``M``.
    Gp : ndarray, shape (m, m) or None
        Sandwich only: :math:`G_p`.
    """

    value: float
    DA: np.ndarray
    DG: Optional[np.ndarray]
    M: np.ndarray
    K: Optional[np.ndarray]
    eig: Optional[tuple] = None
    Gp: Optional[np.ndarray] = None


def inv_pd(M: np.ndarray):
    r"""Inverse of a symmetric positive definite moment matrix, refusing numerically singular ones.

    Parameters
    ----------
    M : ndarray, shape (m, m)
        Symmetric moment matrix :math:`A_p`.

    Returns
    -------
    K : ndarray, shape (m, m)
        :math:`M^{-1}`, symmetrised.
    cf : tuple
        The Cholesky factor ``(L, lower)`` of :func:`scipy.linalg.cho_factor`.

    Raises
    ------
    SingularMomentError
        When ``M`` is not positive definite, or its reciprocal condition number is at or
        below ``SINGULAR_RCOND`` (then the inverse has no correct digit).
    """
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


def gradient(prob, ev: Evaluation, idx=None) -> np.ndarray:
    r"""Gradient :math:`g_i = \langle D_A, A_i\rangle + \langle D_G, G_i\rangle` over the candidates.

    Parameters
    ----------
    prob : Problem
        The problem (its flattened stacks ``Aflat`` and ``Gflat`` are used).
    ev : Evaluation
        Gradient matrices at the allocation.
    idx : array_like of int, optional
        Candidates to evaluate (default all).

    Returns
    -------
    ndarray, shape (n,) or (len(idx),)
        :math:`g_i = \partial\Phi/\partial p_i`.
    """
    Af = prob.Aflat if idx is None else prob.Aflat[idx]
    g = Af @ ev.DA.ravel()
    if ev.DG is not None:
        Gf = prob.Gflat if idx is None else prob.Gflat[idx]
        g = g + Gf @ ev.DG.ravel()
    return g


class Criterion:
    r"""A design criterion :math:`\Phi(M(p))`: value, gradient matrices, Hessian and scale.

    Subclasses implement :meth:`evaluate`; :meth:`scale` and :meth:`hessian` have
    defaults documented there.

    Attributes
    ----------
    name : str
        Criterion name (a key of :data:`CRITERIA`).
    convex : bool
        Whether :math:`\Phi` is convex in ``p`` (then the certificate is a duality gap).
    """

    name = ""
    convex = True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def evaluate(self, prob, M: np.ndarray, Gp=None, *, mu: float = 0.0) -> Evaluation:
        """Value and gradient matrices at given moment matrices.

        Parameters
        ----------
        prob : Problem
            The problem (criterion data ``W``, ``G``, ``regularization``, ``value_scale``).
        M : ndarray, shape (m, m)
            Moment matrix :math:`A_p` (ridge included).
        Gp : ndarray, shape (m, m), optional
            :math:`G_p` (sandwich only).
        mu : float
            Smoothing of 'E' (0: the exact, non-smooth criterion).

        Returns
        -------
        Evaluation

        Raises
        ------
        SingularMomentError
            When the moment matrix is numerically singular.
        """
        raise NotImplementedError

    def scale(self, prob, ev: Evaluation) -> float:
        r"""Normaliser of the relative gap: :math:`|\Phi(p)|` (see :class:`~noisealloc.solvers.result.Certificate`).

        Parameters
        ----------
        prob : Problem
        ev : Evaluation

        Returns
        -------
        float
        """
        return float(max(abs(ev.value), np.finfo(float).tiny))

    def hessian(self, prob, p: np.ndarray, idx: np.ndarray, ev: Evaluation, *, mu: float = 0.0,
                evaluate: Callable | None = None) -> np.ndarray:
        r"""Hessian :math:`\partial^2\Phi / \partial p_j \partial p_k` for ``j, k`` in ``idx``.

        Parameters
        ----------
        prob : Problem
        p : ndarray, shape (n,)
            The allocation.
        idx : ndarray of int, shape (s,)
            Candidates of the face.
        ev : Evaluation
            Evaluation at ``p``.
        mu : float
            Smoothing of 'E'.
        evaluate : callable, optional
            ``p -> Evaluation`` (needed by the finite-difference Hessian of the sandwich).

        Returns
        -------
        ndarray, shape (s, s)
            Symmetric Hessian.
        """
        raise NotImplementedError


class TraceCriterion(Criterion):
    r"""'L', 'A' and 'c': :math:`\Phi = \operatorname{tr}(W M^{-1})` (``W = I`` for 'A', ``W = c c^\top`` for 'c').

    Gradient matrix :math:`D_A = -M^{-1} W M^{-1}` (symmetrised); Hessian
    :math:`2\operatorname{tr}(K W K A_j K A_k)` with :math:`K = M^{-1}`.

    Parameters
    ----------
    name : {'L', 'A', 'c'}

    References
    ----------
    docs/THEORY.md section 4 (a): L/A-optimality :math:`g_i = -\operatorname{tr}(M^{-1} W M^{-1} M_i)`.
    """

    def __init__(self, name: str):
        self.name = name

    def evaluate(self, prob, M, Gp=None, *, mu: float = 0.0) -> Evaluation:
        """See :meth:`Criterion.evaluate`.

        Parameters
        ----------
        prob, M, Gp, mu
            As in :meth:`Criterion.evaluate`.

        Returns
        -------
        Evaluation
        """
        K, _cf = inv_pd(M)
        KW = K @ prob.W
        B = KW @ K
        value = float(np.trace(KW))
        return Evaluation(value=value, DA=-0.5 * (B + B.T), DG=None, M=M, K=K)

    def hessian(self, prob, p, idx, ev, *, mu: float = 0.0, evaluate=None) -> np.ndarray:
        """Analytic Hessian (see the class docstring).

        Parameters
        ----------
        prob, p, idx, ev, mu, evaluate
            As in :meth:`Criterion.hessian`.

        Returns
        -------
        ndarray, shape (len(idx), len(idx))
        """
        As = prob.A[idx]
        K = ev.K
        s_, m = As.shape[0], prob.m
        X = np.matmul(K, As)  # K A_j
        XT = np.swapaxes(X, 1, 2).reshape(s_, m * m)
        P = np.matmul(-ev.DA, As)  # K W K A_j
        H = 2.0 * (P.reshape(s_, m * m) @ XT.T)
        return 0.5 * (H + H.T)


class LogDetCriterion(Criterion):
    r"""'D': :math:`\Phi = -\log\det M`.

    Gradient matrix :math:`D_A = -M^{-1}`; Hessian :math:`\operatorname{tr}(K A_j K A_k)`; the
    relative gap is scaled by ``m`` (the gap of D is a log-efficiency).

    Attributes
    ----------
    name : str
        ``'D'``.

    References
    ----------
    docs/THEORY.md section 4 (a): D-optimal :math:`-\log\det M`.
    """

    name = "D"

    def evaluate(self, prob, M, Gp=None, *, mu: float = 0.0) -> Evaluation:
        """See :meth:`Criterion.evaluate`.

        Parameters
        ----------
        prob, M, Gp, mu
            As in :meth:`Criterion.evaluate`.

        Returns
        -------
        Evaluation
        """
        K, cf = inv_pd(M)
        # value_offset: -2 log|det T| of the preconditioning, so that the value is that of the problem
        # as given (criteria read problems by attribute; a bare one has no offset).
        value = float(-2.0 * np.sum(np.log(np.diag(cf[0])))) + float(getattr(prob, "value_offset", 0.0))
        return Evaluation(value=value, DA=-K, DG=None, M=M, K=K)

    def scale(self, prob, ev) -> float:
        """``m``: the D gap is a log-efficiency.

        Parameters
        ----------
        prob, ev
            As in :meth:`Criterion.scale`.

        Returns
        -------
        float
        """
        return float(prob.m)

    def hessian(self, prob, p, idx, ev, *, mu: float = 0.0, evaluate=None) -> np.ndarray:
        """Analytic Hessian :math:`\\operatorname{tr}(K A_j K A_k)`.

        Parameters
        ----------
        prob, p, idx, ev, mu, evaluate
            As in :meth:`Criterion.hessian`.

        Returns
        -------
        ndarray, shape (len(idx), len(idx))
        """
        As = prob.A[idx]
        K = ev.K
        s_, m = As.shape[0], prob.m
        X = np.matmul(K, As)  # K A_j
        XT = np.swapaxes(X, 1, 2).reshape(s_, m * m)
        H = X.reshape(s_, m * m) @ XT.T  # tr(K A_j K A_k)
        return 0.5 * (H + H.T)


class MinEigenvalueCriterion(Criterion):
    r"""'E': :math:`\Phi = -\lambda_{\min}(M)`, smoothed by :math:`\mu \log\sum_k e^{-\lambda_k/\mu}` when ``mu > 0``.

    Gradient matrix :math:`D_A = -U \operatorname{diag}(s) U^\top` with the soft-min weights
    ``s`` (a one-hot vector when ``mu = 0``: a subgradient); Hessian by Lewis' formula for
    spectral functions (``mu > 0``), or by second-order perturbation theory of a simple
    :math:`\lambda_{\min}` (``mu = 0``); the relative gap is scaled by :math:`\lambda_{\min}(M)`.

    Attributes
    ----------
    name : str
        ``'E'``.

    References
    ----------
    docs/THEORY.md section 4 (a): E-optimal :math:`-\lambda_{\min}(M)` (the rate criterion).
    """

    name = "E"

    def evaluate(self, prob, M, Gp=None, *, mu: float = 0.0) -> Evaluation:
        """See :meth:`Criterion.evaluate`.

        Parameters
        ----------
        prob, M, Gp, mu
            As in :meth:`Criterion.evaluate`.

        Returns
        -------
        Evaluation
        """
        ev, U = np.linalg.eigh(M)
        if mu > 0:
            s, lse = _softmin(ev, mu)
            value = -ev[0] + mu * lse
        else:
            s = np.zeros_like(ev)
            s[0] = 1.0
            value = -ev[0]
        DA = -(U * s) @ U.T
        return Evaluation(value=float(value), DA=DA, DG=None, M=M, K=None, eig=(ev, U, s))

    def scale(self, prob, ev) -> float:
        """:math:`\\lambda_{\\min}(M_p)` (floored at the smallest positive float).

        Parameters
        ----------
        prob, ev
            As in :meth:`Criterion.scale`.

        Returns
        -------
        float
        """
        return float(max(ev.eig[0][0], np.finfo(float).tiny))

    def hessian(self, prob, p, idx, ev, *, mu: float = 0.0, evaluate=None) -> np.ndarray:
        """Hessian of the smoothed criterion (Lewis' formula); needs ``mu > 0``.

        Parameters
        ----------
        prob, p, idx, ev, mu, evaluate
            As in :meth:`Criterion.hessian`.

        Returns
        -------
        ndarray, shape (len(idx), len(idx))
        """
        As = prob.A[idx]
        ev_, U, s = ev.eig
        At = np.matmul(np.matmul(U.T, As), U)  # U^T A_j U
        if mu <= 0:
            # The exact criterion is smooth where lambda_min is simple: second-order perturbation
            # theory, d^2(-lambda_0) = 2 sum_{l>0} (u_0^T A_j u_l)(u_0^T A_k u_l) / (lambda_l - lambda_0).
            if ev_.size > 1 and not ev_[1] - ev_[0] > E_CLUSTER_RTOL * max(abs(ev_[-1]), 1e-300):
                raise ValueError("the Hessian of the exact 'E' criterion needs a simple smallest eigenvalue "
                                 f"(lambda_1 - lambda_0 = {ev_[1] - ev_[0]:.3g}); use a smoothing mu > 0")
            c = At[:, 0, 1:] / np.sqrt(ev_[1:] - ev_[0])
            H = 2.0 * (c @ c.T)
            return 0.5 * (H + H.T)
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


class SandwichCriterion(Criterion):
    r"""The sandwich :math:`V(p) = \tfrac12 \operatorname{tr}(A_\omega A_p^{-1} G_p A_p^{-1})` (not convex).

    The one implementation of :math:`V` in the toolkit (:func:`noisealloc.solvers.sandwich_value`
    and every solver call it).  With :math:`K = A_p^{-1}`:
    :math:`D_A = -\operatorname{sym}(K G_p K A_\omega K)`, :math:`D_G = \tfrac12 K A_\omega K`.
    The Hessian is analytic (:meth:`hessian`).

    **Rounding guard.**  :math:`M_p` and :math:`G_p` are known to about an ulp of their norms and
    the inverse is backward stable, so to first order the computed value is off by at most
    :math:`u\,(\|M_p\|\,\|D_A\|_* + \|G_p\|\,\|D_G\|_*)` (``u = SANDWICH_ROUNDING_ULPS`` eps).
    Near the singular boundary this bound, not the condition number alone, says whether V has any
    correct digit: a minimiser is drawn to points where rounding (of :math:`G_p` along directions
    where :math:`K` is huge) makes V small.  Such points are refused (:class:`SingularMomentError`)
    when the bound exceeds ``SANDWICH_ROUNDING_RTOL`` times :math:`\max(V, V_{\rm uniform})`
    (``value_scale``, V at the uniform allocation; 0 switches the guard off).

    Attributes
    ----------
    name : str
        ``'sandwich'``.
    convex : bool
        False: the certificate is first-order (KKT) stationarity.

    References
    ----------
    docs/THEORY.md section 4: well-specified asymptotics, the sandwich :math:`V(p)`.
    """

    name = "sandwich"
    convex = False

    def parts(self, prob, M: np.ndarray, Gp, K=None):
        """Value, gradient matrices, inverse and :math:`G_p` (raises where V is rounding noise).

        Parameters
        ----------
        prob : Problem
        M : ndarray, shape (m, m)
            :math:`A_p` (ridge included).
        Gp : ndarray, shape (m, m) or None
            :math:`G_p`; None means ``G = A`` (then :math:`G_p = A_p` without the ridge).
        K : ndarray, shape (m, m), optional
            :math:`M^{-1}` when already known.

        Returns
        -------
        value : float
        DA, DG : ndarray, shape (m, m)
        K : ndarray, shape (m, m)
        Gp : ndarray, shape (m, m)

        Raises
        ------
        SingularMomentError
            Singular ``M``, a negative computed value, or a rounding-error bound above
            ``SANDWICH_ROUNDING_RTOL * max(V, prob.value_scale)``.
        """
        if K is None:
            K, _cf = inv_pd(M)
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
            # M_p and G_p are known only to their rounding: assembly of a sum of PSD matrices and the
            # backward error of the Cholesky solve both perturb entry (j, k) by about an ulp of
            # sqrt(M_jj M_kk) (|A_i,jk| <= sqrt(A_i,jj A_i,kk) and Cauchy-Schwarz over the sum), so to
            # first order V is uncertain by u * sum_jk (|D_A|_jk d_j d_k + |D_G|_jk g_j g_k), with
            # d = sqrt(diag M_p), g = sqrt(diag G_p).  The G term matters at the singular boundary:
            # there K is huge along directions in which G_p is pure rounding noise, and V computed
            # from that noise can have any value.  Unlike a normwise bound, this one does not charge a
            # graded matrix (levels of very different weight, e.g. B-spline blocks under sqrt(h))
            # the rounding of its largest entries in its smallest ones.
            unit = SANDWICH_ROUNDING_ULPS * EPS
            # Judged on the larger of V and the problem's scale: a large V (a poor allocation) needs
            # digits relative to itself only; a small one, where a minimiser is drawn to rounding
            # noise, on the problem's scale.
            limit = SANDWICH_ROUNDING_RTOL * max(value, prob.value_scale)
            d = np.sqrt(np.maximum(np.diag(M), 0.0))
            if prob.G is None:
                err = unit * float(d @ np.abs(DA + DG) @ d)
            else:
                g = np.sqrt(np.maximum(np.diag(Gp), 0.0))
                err = unit * float(d @ np.abs(DA) @ d + g @ np.abs(DG) @ g)
            if not err <= limit:
                raise SingularMomentError(
                    f"sandwich value {value:.3e} carries a rounding-error bound {err:.2e} > SANDWICH_ROUNDING_RTOL * "
                    f"max(V, V(uniform)) = {limit:.2e}: the moment matrix is numerically singular"
                )
        return value, DA, DG, K, Gp

    def evaluate(self, prob, M, Gp=None, *, mu: float = 0.0) -> Evaluation:
        """See :meth:`Criterion.evaluate`.

        Parameters
        ----------
        prob, M, Gp, mu
            As in :meth:`Criterion.evaluate`.

        Returns
        -------
        Evaluation
        """
        K, _cf = inv_pd(M)
        value, DA, DG, K, Gp = self.parts(prob, M, Gp, K=K)
        if prob.G is None:
            return Evaluation(value=value, DA=DA + DG, DG=None, M=M, K=K, Gp=Gp)
        return Evaluation(value=value, DA=DA, DG=DG, M=M, K=K, Gp=Gp)

    def hessian(self, prob, p, idx, ev, *, mu: float = 0.0, evaluate=None) -> np.ndarray:
        r"""Analytic Hessian on ``idx``.

        With :math:`K = (A_p + \delta I)^{-1}`, :math:`\partial K/\partial p_j = -K A_j K`,
        :math:`P = K A_\omega K`, :math:`Q = K G_p K`, :math:`R = Q A_\omega K`:

        .. math:: \frac{\partial^2 V}{\partial p_j \partial p_k} =
           \operatorname{tr}(P A_j Q A_k) + \operatorname{tr}(R A_k K A_j) + \operatorname{tr}(R A_j K A_k)
           - \operatorname{tr}(P A_k K G_j) - \operatorname{tr}(P A_j K G_k),

        (differentiate :math:`\partial_j V = \tfrac12\operatorname{tr}(A_\omega K G_j K)
        - \tfrac12\operatorname{tr}(A_\omega K A_j K G_p K) - \tfrac12\operatorname{tr}(A_\omega K G_p K A_j K)`
        once more), :math:`G_j = A_j` when ``G`` is not given.  Cost :math:`O(s m^3 + s^2 m^2)` (batched
        products and one GEMM per term), against :math:`2s` full evaluations for finite differences.

        Parameters
        ----------
        prob, p, idx, ev, mu
            As in :meth:`Criterion.hessian` (``ev.K`` and ``ev.Gp`` are used).
        evaluate : callable, optional
            Unused (kept for the common signature).

        Returns
        -------
        ndarray, shape (len(idx), len(idx))
        """
        idx = np.asarray(idx, dtype=int)
        K = ev.K
        Gp = ev.Gp
        AS = prob.A[idx]
        GS = AS if prob.G is None else prob.G[idx]
        W = prob.W
        P = K @ W @ K
        Q = K @ Gp @ K
        R = Q @ W @ K
        KA = K @ AS                    # (s, m, m): K A_j
        PA = P @ AS                    # P A_j
        QA = Q @ AS                    # Q A_j
        RA = R @ AS                    # R A_j
        KG = K @ GS                    # K G_j
        s_ = idx.size
        KAt = KA.transpose(0, 2, 1).reshape(s_, -1)
        T_PQ = PA.reshape(s_, -1) @ QA.transpose(0, 2, 1).reshape(s_, -1).T   # tr(P A_j Q A_k)
        T_R = RA.reshape(s_, -1) @ KAt.T                                     # [k, j] = tr(R A_k K A_j)
        T_G = PA.reshape(s_, -1) @ KG.transpose(0, 2, 1).reshape(s_, -1).T   # [k, j] = tr(P A_k K G_j)
        H = T_PQ + T_R + T_R.T - T_G - T_G.T
        return 0.5 * (H + H.T)


_OBJECTS = {
    "sandwich": SandwichCriterion(),
    "L": TraceCriterion("L"),
    "A": TraceCriterion("A"),
    "c": TraceCriterion("c"),
    "D": LogDetCriterion(),
    "E": MinEigenvalueCriterion(),
}


def criterion_object(name: str) -> Criterion:
    """The criterion object of a name (aliases such as ``'V'`` accepted).

    Parameters
    ----------
    name : str
        One of :data:`CRITERIA` or :data:`CRITERION_ALIASES`.

    Returns
    -------
    Criterion

    Examples
    --------
    >>> from noisealloc.solvers.criteria import criterion_object
    >>> criterion_object("V"), criterion_object("D").convex
    (SandwichCriterion('sandwich'), True)
    """
    key = CRITERION_ALIASES.get(name, name)
    if key not in _OBJECTS:
        raise ValueError(f"criterion must be one of {CRITERIA + tuple(CRITERION_ALIASES)}; got {name!r}")
    return _OBJECTS[key]
