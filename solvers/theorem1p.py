r"""Theorem 1' (population form): at most m + 1 atoms reach the same population optimum.

For a (possibly misspecified) class with convex or PL per-level losses, the
population optimum :math:`\theta^*(p)` of an allocation ``p`` is characterised by
:math:`\sum_i p_i \nabla_\theta \mathbb E\,\ell(\theta^*(p); \lambda_i) = 0`.  Given the
per-level gradient vectors :math:`\nabla_i = \nabla_\theta \mathbb E\,\ell(\theta^*(p); \lambda_i)`
(shape ``(n, m)``), any ``q`` in the polytope

.. math::  \{ q \ge 0 : \mathbf 1^\top q = 1,\; \textstyle\sum_i q_i \nabla_i = \sum_i p_i \nabla_i \}

has the same first-order condition at :math:`\theta^*(p)`; a basic feasible solution
(a vertex) has at most ``m + 1`` non-zeros (Carathéodory).  The vertex is found by
the dual simplex method of HiGHS (``scipy.optimize.linprog(method="highs-ds")``) on
the support of ``p``; the right-hand side is :math:`\sum_i p_i \nabla_i` as computed (not
exactly zero in floating point), so ``p`` itself is feasible.  If the LP solution has
more than ``m + 1`` atoms (degenerate ties), Carathéodory elimination finishes.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import linprog

from noisealloc.solvers.result import STATUS_MESSAGES, Theorem1pResult
from noisealloc.solvers.algorithms.support import caratheodory
from noisealloc.theory.errors import ConvergenceWarning, as_float_array, check_finite

__all__ = ["reduce_population"]

#: A reduction succeeds when its residual is at most this times the largest |gradient entry|:
#: the final weights solve the equality system on the support by least squares, accurate to a
#: few hundred ulps of its entries (1e-10 leaves a wide margin while catching a wrong vertex).
RESIDUAL_RTOL = 1e-10


def reduce_population(grads, p) -> Theorem1pResult:
    r"""Allocation with at most ``m + 1`` atoms and the same :math:`\sum_i q_i \nabla_i` as ``p``.

    Parameters
    ----------
    grads : array_like, shape (n, m)
        :math:`\nabla_\theta \mathbb E\,\ell(\theta^*(p); \lambda_i)` for each candidate level.
    p : array_like, shape (n,)
        The allocation (non-negative, sums to one).

    Returns
    -------
    Theorem1pResult
        ``weights`` ``q`` (support inside that of ``p``), ``residual``
        :math:`\|\sum q_i \nabla_i - \sum p_i \nabla_i\|_\infty`; ``status`` 0 (LP vertex) or
        5 (the LP failed, Caratheodory elimination used); ``success`` when the result checks.

    References
    ----------
    docs/THEORY.md section 4 (a), Theorem 1' (population form).

    Warns
    -----
    ConvergenceWarning
        When the result fails its check (``success`` False).

    Examples
    --------
    >>> import numpy as np
    >>> grads = np.array([[1.0], [-1.0], [2.0], [-2.0]])
    >>> res = reduce_population(grads, np.full(4, 0.25))
    >>> res.n_atoms <= 2, abs(res.weights @ grads[:, 0]) < 1e-15
    (True, True)
    """
    grads = as_float_array(grads, "grads")
    if grads.ndim != 2 or grads.shape[0] == 0:
        raise ValueError(f"grads must have shape (n, m) with n >= 1; got {grads.shape}")
    check_finite(grads, "grads")
    n, m = grads.shape
    p = as_float_array(p, "p")
    if p.shape != (n,):
        raise ValueError(f"p must have shape ({n},) to match grads; got {p.shape}")
    check_finite(p, "p")
    if np.any(p < 0) or not abs(p.sum() - 1.0) <= 1e-9:
        raise ValueError(f"p must be a probability vector (non-negative, sum 1); sum is {p.sum()!r}")
    S = np.flatnonzero(p > 0)
    target = p[S] @ grads[S]
    A_eq = np.vstack([grads[S].T, np.ones((1, S.size))])
    b_eq = np.concatenate([target, [1.0]])
    status, message = 0, "HiGHS dual simplex returned a basic solution"
    q = np.zeros(n)
    res = linprog(np.zeros(S.size), A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs-ds")
    if res.status == 0:
        q[S] = np.maximum(res.x, 0.0)
        q /= q.sum()
    else:
        status, message = 5, f"{STATUS_MESSAGES[5]} (HiGHS failed: {res.message}; Caratheodory elimination used)"
        q = p.copy()
    V = np.concatenate([grads, np.ones((n, 1))], axis=1)
    if np.count_nonzero(q) > m + 1:
        q = caratheodory(V, q)
        q /= q.sum()
        message += "; Caratheodory elimination removed degenerate atoms"
    # the LP solution is feasible only to HiGHS's tolerance: re-solve the equality system
    # exactly on the final support (a square or overdetermined consistent system)
    Sq = np.flatnonzero(q > 0)
    sol, *_ = np.linalg.lstsq(V[Sq].T, np.concatenate([target, [1.0]]), rcond=None)
    if np.all(sol > 0):
        q = np.zeros(n)
        q[Sq] = sol
    resid = float(np.max(np.abs(q @ grads - target)))
    n_atoms = int(np.count_nonzero(q))
    success = bool(n_atoms <= m + 1 and resid <= RESIDUAL_RTOL * max(float(np.max(np.abs(grads))), np.finfo(float).tiny))
    if not success:
        message += f"; check failed: {n_atoms} atoms (bound {m + 1}), residual {resid:.2e}"
        warnings.warn(f"reduce_population: {message}", ConvergenceWarning, stacklevel=2)
    return Theorem1pResult(
        weights=q,
        support=np.flatnonzero(q > 0),
        residual=resid,
        n_atoms=n_atoms,
        atom_bound=m + 1,
        success=success,
        status=status,
        message=message,
        nit=int(getattr(res, "nit", 0) or 0),
    )
