r"""Global or local: what a sandwich optimum can say about itself (THEORY.md section 4 (a)).

The sandwich :math:`V(p) = \tfrac12 \operatorname{tr}(A_\omega A_p^{-1} G_p A_p^{-1})` is not convex, so a
KKT point may be a local minimum.  This module holds the two global proofs the driver uses and the
starts of its multi-start:

* :func:`proportional_factor` -- where :math:`G = sA` (:math:`s \ge 0` constant),
  :math:`V = \tfrac s2 \operatorname{tr}(A_\omega A_p^{-1})` is convex and a KKT point is global;
* :func:`exhaustive_one_parameter` -- for :math:`m = 1`, :math:`V = \tfrac12 a_\omega g_p / a_p^2`
  and, by Theorem 1's bound :math:`m(m+1)/2 + 1 = 2` (for fixed :math:`a_p` the value is linear in
  :math:`p`, a linear programme with two equality constraints), a global minimiser lies on at most
  two levels; on a pair the stationary point of :math:`g(t)/a(t)^2` is unique and in closed form, so
  the minimum over all singles and pairs is the exact global minimum on the grid;
* :func:`dirichlet_starts` -- random starting allocations from a seeded generator.

For :math:`m \ge 2` no proof is attempted: an exhaustive search over supports is not one by itself
(:math:`V` restricted to a support is still non-convex), so such results are labelled
``"local (KKT)"`` after the multi-start.

References
----------
THEORY.md section 4 (a), Theorem 1 and "Certificates".
"""

from __future__ import annotations

import numpy as np

from noisealloc.solvers.problem import Problem
from noisealloc.theory.tolerances import SANDWICH_PROPORTIONAL_RTOL

__all__ = ["proportional_factor", "exhaustive_one_parameter", "dirichlet_starts"]


def proportional_factor(prob: Problem) -> float | None:
    r"""The constant :math:`s \ge 0` with :math:`G(\lambda_i) = s A(\lambda_i)` for every level, if there is one.

    .. math:: s = \frac{\sum_i \langle G_i, A_i \rangle}{\sum_i \langle A_i, A_i \rangle},
       \qquad \text{accepted when } \|G - sA\|_F \le \texttt{SANDWICH\_PROPORTIONAL\_RTOL}\,\|G\|_F .

    Parameters
    ----------
    prob : Problem
        A sandwich problem (``prob.G`` None means ``G = A``, ``s = 1``).

    Returns
    -------
    float or None
        ``s``, or None when ``G`` is not proportional to ``A`` (or the problem is not a sandwich).

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.solvers import make_problem
    >>> A = np.stack([np.diag([1.0, 2.0]), np.diag([3.0, 1.0])])
    >>> proportional_factor(make_problem(A, "sandwich", G=2.5 * A, A_eval=np.eye(2)))
    2.5
    """
    if prob.criterion != "sandwich":
        return None
    if prob.G is None:
        return 1.0
    A, G = prob.A, prob.G
    den = float(np.sum(A * A))
    s = float(np.sum(G * A)) / den if den > 0 else 0.0
    norm_g = float(np.linalg.norm(G))
    if s < 0 or not np.linalg.norm(G - s * A) <= SANDWICH_PROPORTIONAL_RTOL * norm_g:
        return None
    return s


def exhaustive_one_parameter(prob: Problem):
    r"""Exact global minimum of the sandwich over the grid for one parameter (:math:`m = 1`).

    On a pair :math:`(i, j)` with :math:`p_i = t`, :math:`a(t) = a_j + t\,\Delta a`,
    :math:`g(t) = g_j + t\,\Delta g`, the derivative of :math:`g/a^2` has the sign of
    :math:`(\Delta g\, a_j - 2 g_j \Delta a) - t\,\Delta g\,\Delta a`, so its only stationary point is
    :math:`t^* = (\Delta g\, a_j - 2 g_j \Delta a) / (\Delta g\, \Delta a)`; the minimum over the
    single levels, the pairs at :math:`t^*\in(0,1)` is the global minimum (see the module docstring).

    Parameters
    ----------
    prob : Problem
        A sandwich problem with ``m = 1`` (ridge included in :math:`a_p` as in the criterion).

    Returns
    -------
    value : float
        :math:`\min_p V(p)` over the grid (``inf`` when every level has :math:`a_i = 0`).
    weights : ndarray, shape (n,)
        A minimiser on at most two levels.

    Raises
    ------
    ValueError
        If ``prob`` is not a sandwich problem with one parameter.

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.solvers import make_problem
    >>> A = np.array([1.0, 2.0, 4.0])[:, None, None]; G = np.array([1.0, 8.0, 64.0])[:, None, None]
    >>> v, w = exhaustive_one_parameter(make_problem(A, "sandwich", G=G, A_eval=np.eye(1)))
    >>> round(v, 12), np.round(w, 6).tolist()
    (0.5, [1.0, 0.0, 0.0])
    """
    if prob.criterion != "sandwich" or prob.m != 1:
        raise ValueError(f"exhaustive_one_parameter needs a sandwich problem with m = 1; got criterion "
                         f"{prob.criterion!r}, m = {prob.m}")
    a = prob.A[:, 0, 0] + prob.regularization
    g = (prob.A if prob.G is None else prob.G)[:, 0, 0]
    w = float(prob.W[0, 0])
    n = a.size
    with np.errstate(divide="ignore", invalid="ignore"):
        single = np.where(a > 0, 0.5 * w * g / a**2, np.inf)
        i, j = np.triu_indices(n, 1)
        da, dg = a[i] - a[j], g[i] - g[j]
        t = (dg * a[j] - 2.0 * g[j] * da) / (dg * da)
        ok = np.isfinite(t) & (t > 0) & (t < 1)
        at = a[j] + t * da
        vt = np.where(ok & (at > 0), 0.5 * w * (g[j] + t * dg) / at**2, np.inf)
    k1 = int(np.argmin(single))
    weights = np.zeros(n)
    if vt.size and np.min(vt) < single[k1]:
        k2 = int(np.argmin(vt))
        weights[i[k2]], weights[j[k2]] = t[k2], 1.0 - t[k2]
        return float(vt[k2]), weights
    weights[k1] = 1.0
    return float(single[k1]), weights


def dirichlet_starts(n: int, count: int, gen: np.random.Generator) -> list[np.ndarray]:
    r"""``count`` random allocations :math:`p \sim \mathrm{Dirichlet}(1, \dots, 1)` on ``n`` levels.

    Parameters
    ----------
    n : int
        Number of grid levels.
    count : int
        Number of starts.
    gen : numpy.random.Generator
        The seeded generator (the only source of randomness).

    Returns
    -------
    list of ndarray, shape (n,)
        Strictly positive probability vectors (uniform on the simplex).

    Examples
    --------
    >>> import numpy as np
    >>> [round(float(p.sum()), 12) for p in dirichlet_starts(4, 2, np.random.default_rng(0))]
    [1.0, 1.0]
    """
    return [p / p.sum() for p in gen.dirichlet(np.ones(n), size=count)]


#: At most this many supports of size m are enumerated for the small-support starts.
_SUPPORT_BUDGET = 20000


def support_starts(prob: Problem, count: int) -> list[np.ndarray]:
    r"""Starts on the best small supports: every set of ``m`` levels, ranked by V at a few weightings.

    For each support :math:`S` of size ``m`` (the fewest levels that can make :math:`A_p` invertible
    for rank-one :math:`A_i`), V is evaluated at weights on a lattice of the simplex of :math:`S`
    (``m = 2``: 31 points of :math:`t \in (0, 1)`; otherwise the uniform weights and, per level, half
    the mass there); the ``count`` best supports' best weights are returned.  A multi-start from dense
    allocations funnels into the basin of the uniform start (the grid's KKT points are many, each a
    different support); these starts sample the supports themselves.  Skipped (empty list) when there
    are more than ``_SUPPORT_BUDGET`` supports.

    Parameters
    ----------
    prob : Problem
        A sandwich problem.
    count : int
        Number of starts.

    Returns
    -------
    list of ndarray, shape (n,)
        Allocations on ``m`` levels with :math:`A_p` well conditioned (cond < 1e8).

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.solvers import make_problem
    >>> x = np.linspace(-1, 1, 5); F = np.stack([np.ones(5), x], 1); A = F[:, :, None] * F[:, None, :]
    >>> [int(np.count_nonzero(q)) for q in support_starts(make_problem(A, "sandwich", G=2 * A + 0.1 * A**2, A_eval=np.eye(2)), 2)]
    [2, 2]
    """
    from math import comb
    from itertools import combinations

    n, m = prob.n, prob.m
    if count <= 0 or comb(n, m) > _SUPPORT_BUDGET or n <= m:
        return []
    S = np.array(list(combinations(range(n), m)))
    if m == 2:
        t = np.linspace(0.0, 1.0, 33)[1:-1]
        lattice = np.stack([t, 1.0 - t], 1)
    else:
        half = np.full((m, m), 0.5 / (m - 1))
        np.fill_diagonal(half, 0.5)
        lattice = np.vstack([np.full((1, m), 1.0 / m), half])
    A = prob.A
    G = A if prob.G is None else prob.G
    reg = prob.regularization * np.eye(m)
    best_v = np.full(S.shape[0], np.inf)
    best_w = np.zeros_like(S, dtype=float)
    for w in lattice:
        Ap = np.einsum("k,skab->sab", w, A[S]) + reg
        Gp = np.einsum("k,skab->sab", w, G[S])
        with np.errstate(all="ignore"):
            ok = np.linalg.cond(Ap) < 1e8
            K = np.linalg.inv(np.where(ok[:, None, None], Ap, np.eye(m)))
            v = 0.5 * np.einsum("ab,sbc,scd,sda->s", prob.W, K, Gp, K)
        v = np.where(ok & np.isfinite(v) & (v >= 0), v, np.inf)
        better = v < best_v
        best_v[better] = v[better]
        best_w[better] = w
    order = np.argsort(best_v)[:count]
    out = []
    for k in order:
        if not np.isfinite(best_v[k]):
            break
        q = np.zeros(n)
        q[S[k]] = best_w[k]
        out.append(q)
    return out
