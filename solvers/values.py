r"""Criterion values of allocations as public functions, the sandwich :math:`V(p)` first.

:func:`sandwich_value` is the toolkit's one entry point for
:math:`V(p) = \tfrac12 \operatorname{tr}(A_\omega A_p^{-1} G_p A_p^{-1})` (docs/THEORY.md section 4);
it evaluates the same :class:`~noisealloc.solvers.criteria.SandwichCriterion` that every
solver minimises, rounding guard included.  Values are of the criterion as defined: no ridge
is added (the solvers' ridge for near-singular problems is a numerical device), and an
allocation whose moment matrix is numerically singular has the value ``+inf``.

References
----------
docs/THEORY.md section 4: well-specified asymptotics (the sandwich) and the criteria of regime (a).
"""

from __future__ import annotations

import numpy as np

from noisealloc.solvers.problem import (
    Problem,
    as_problem,
    check_weights,
    criterion_value,
    evaluate,
    gradient,
    make_problem,
)

__all__ = ["allocation_value", "sandwich_value", "sandwich_gradient"]


def allocation_value(problem, weights, criterion: str | None = None, *, W=None, G=None, A_eval=None,
                     c=None) -> float:
    r"""Criterion value :math:`\Phi(p)` of an allocation, ``+inf`` where its moment matrix is singular.

    Parameters
    ----------
    problem : Problem or array_like, shape (n, m, m)
        A :class:`~noisealloc.solvers.problem.Problem`, or the matrices ``A`` (then the criterion
        and its keywords; built without ridge).
    weights : array_like, shape (n,)
        Probability vector (non-negative, sums to one within 1e-9).
    criterion : str, optional
        As in :func:`noisealloc.solvers.solve` (default ``'L'`` for raw arrays).
    W, G, A_eval, c
        As in :func:`noisealloc.solvers.solve`.

    Returns
    -------
    float
        :math:`\Phi(p)` (with a Problem's ridge, if the Problem has one), or ``+inf``.

    Raises
    ------
    ValueError
        Invalid matrices or weights (negative, wrong shape, not summing to one).

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.solvers import allocation_value
    >>> x = np.linspace(-1, 1, 5); F = np.stack([np.ones(5), x, x**2], 1)
    >>> A = F[:, :, None] * F[:, None, :]
    >>> round(allocation_value(A, [0.25, 0, 0.5, 0, 0.25], "A"), 12)
    8.0
    >>> allocation_value(A, [0.5, 0, 0, 0, 0.5], "A")  # two points cannot fit a parabola
    inf
    """
    if isinstance(problem, Problem):
        prob = as_problem(problem, criterion, W=W, G=G, A_eval=A_eval, c=c)
    else:
        prob = make_problem(problem, "L" if criterion is None else criterion, W=W, G=G, A_eval=A_eval, c=c,
                            regularize=False)
    return float(criterion_value(prob, check_weights(weights, prob.n)))


def sandwich_value(A, G, A_eval, weights) -> float:
    r"""The sandwich :math:`V(p) = \tfrac12 \operatorname{tr}(A_\omega A_p^{-1} G_p A_p^{-1})`.

    Parameters
    ----------
    A : array_like, shape (n, m, m)
        Per-level Hessians :math:`A(\lambda_i)` (symmetric PSD).
    G : array_like, shape (n, m, m) or None
        Per-level gradient second moments :math:`G(\lambda_i)`; None means ``G = A``.
    A_eval : array_like, shape (m, m)
        :math:`A_\omega = \int \omega A\,d\lambda`.
    weights : array_like, shape (n,)
        The allocation: non-negative, summing to one within 1e-9.

    Returns
    -------
    float
        :math:`V(p) \ge 0`, or ``+inf`` where :math:`A_p` is singular in floating point (or where
        rounding of the inverse leaves V without a reliable digit on the problem's scale; see
        :class:`~noisealloc.solvers.criteria.SandwichCriterion`).

    Raises
    ------
    ValueError
        Invalid matrices, or weights that are negative, of the wrong shape or do not sum to one.

    References
    ----------
    docs/THEORY.md section 4: :math:`N(E R(\hat\theta_N) - R(\theta^*)) \to V(p)`.

    Examples
    --------
    One parameter, :math:`A_i = a_i`, :math:`G_i = g_i`: :math:`V = \tfrac12 A_\omega \sum p_i g_i / (\sum p_i a_i)^2`.

    >>> import numpy as np
    >>> from noisealloc.solvers import sandwich_value
    >>> A = np.array([1.0, 2.0])[:, None, None]; G = np.array([1.0, 4.0])[:, None, None]
    >>> round(sandwich_value(A, G, np.eye(1), [0.5, 0.5]), 12)  # 0.5 * 2.5 / 1.5**2
    0.555555555556
    >>> sandwich_value(A, G, np.eye(1), [0.5, 0.6])
    Traceback (most recent call last):
    ...
    ValueError: weights must sum to 1 (a probability vector, within WEIGHT_SUM_ATOL = 1e-09); sum is 1.1
    """
    prob = make_problem(A, "sandwich", G=G, A_eval=A_eval, regularize=False)
    return float(criterion_value(prob, check_weights(weights, prob.n)))


def sandwich_gradient(A, G, A_eval, weights) -> np.ndarray:
    r"""Gradient of the sandwich, :math:`\partial V / \partial p_i`.

    .. math:: \partial V / \partial p_i = \tfrac12\langle K A_\omega K, G_i\rangle
              - \langle \operatorname{sym}(K G_p K A_\omega K), A_i\rangle, \qquad K = A_p^{-1}.

    Parameters
    ----------
    A, G, A_eval, weights
        As in :func:`sandwich_value`.

    Returns
    -------
    ndarray, shape (n,)

    Raises
    ------
    ValueError
        Invalid matrices or weights.
    SingularMomentError
        Where :math:`A_p` is numerically singular (V is ``+inf`` there and has no gradient).
    """
    prob = make_problem(A, "sandwich", G=G, A_eval=A_eval, regularize=False)
    return gradient(prob, evaluate(prob, check_weights(weights, prob.n)))
