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

For :math:`m \ge 2` the driver attempts no proof: an exhaustive search over supports is not one by
itself (:math:`V` restricted to a support is still non-convex), so such results are labelled
``"local (KKT)"`` after the multi-start.  :func:`branch_and_bound` (over the entries of
:math:`A_p`, bounded by :func:`box_lower_bound`) proves a rigorous lower bound, but its bound is
first order in the box size: it closes to ``KKT_RTOL`` on nearly convex problems (G close to
:math:`sA`) within a few hundred boxes and not on issue 15's 41-level instance (lower bound 0.06
against V = 1.17 after 2000 boxes), so the driver does not call it.

References
----------
THEORY.md section 4 (a), Theorem 1 and "Certificates".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from noisealloc.solvers.problem import Problem
from noisealloc.theory.tolerances import (
    EPS,
    SANDWICH_BNB_INVERSE_ULPS,
    SANDWICH_BNB_LP_ULPS,
    SANDWICH_BNB_MAX_BOXES,
    SANDWICH_BNB_SIGMA_SHRINK,
    SANDWICH_PROPORTIONAL_RTOL,
    SINGULAR_RCOND,
)

__all__ = ["proportional_factor", "exhaustive_one_parameter", "dirichlet_starts", "sigma_split", "box_lower_bound",
           "branch_and_bound", "BranchAndBound"]


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


def _lp_dual_bound(c: np.ndarray, A_ub: np.ndarray, b_ub: np.ndarray):
    r"""Rigorous lower bound of :math:`\min\{c^\top p : A_{ub} p \le b_{ub},\ p \in \Delta\}` (``+inf`` if infeasible).

    For any :math:`y \ge 0` and feasible :math:`p`,
    :math:`c^\top p \ge (c + A_{ub}^\top y)^\top p - y^\top b_{ub} \ge \min_i (c + A_{ub}^\top y)_i - y^\top b_{ub}`
    (weak duality over the simplex), whatever the LP solver's tolerances: HiGHS only supplies ``y``.
    An infeasible box is proved infeasible the same way from the phase-1 LP
    :math:`\min t` s.t. :math:`A_{ub} p - t s \le b_{ub}`: a :math:`y \ge 0` with
    :math:`\min_i (A_{ub}^\top y)_i - y^\top b_{ub} > 0` contradicts :math:`t = 0`.

    Returns
    -------
    lower : float
        The bound minus ``SANDWICH_BNB_LP_ULPS`` ulps of its terms' magnitude (``+inf``: proved
        infeasible; ``min(c)`` when HiGHS gives no usable multipliers).
    p : ndarray or None
        HiGHS's primal solution (an upper-bound candidate), None if none.
    """
    from scipy.optimize import linprog

    n = c.size
    ones = np.ones((1, n))
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=ones, b_eq=[1.0], bounds=(0, None), method="highs")
    if res.status == 0:
        y = np.maximum(-res.ineqlin.marginals, 0.0)
        red = c + A_ub.T @ y
        margin = SANDWICH_BNB_LP_ULPS * EPS * (np.max(np.abs(c) + np.abs(A_ub).T @ y) + y @ np.abs(b_ub))
        return float(np.min(red) - y @ b_ub - margin), res.x
    if res.status == 2:
        s = np.maximum(np.abs(A_ub).max(axis=1), np.finfo(float).tiny)
        c1 = np.zeros(n + 1)
        c1[-1] = 1.0
        r1 = linprog(c1, A_ub=np.hstack([A_ub, -s[:, None]]), b_ub=b_ub, A_eq=np.append(ones, 0.0)[None],
                     b_eq=[1.0], bounds=[(0, None)] * n + [(None, None)], method="highs")
        if r1.status == 0:
            y = np.maximum(-r1.ineqlin.marginals, 0.0)
            margin = SANDWICH_BNB_LP_ULPS * EPS * (np.max(np.abs(A_ub).T @ y) + y @ np.abs(b_ub))
            if np.min(A_ub.T @ y) - y @ b_ub > margin:
                return np.inf, None
    return float(np.min(c)), None


def sigma_split(prob: Problem) -> float:
    r"""The largest :math:`\sigma \ge 0` (shrunk by ``SANDWICH_BNB_SIGMA_SHRINK``) with :math:`G_i - \sigma A_i \succeq 0` for all levels.

    .. math:: \sigma = (1 - \texttt{SHRINK}) \min_i \frac{1}{\lambda_{\max}(G_i^{-1/2} A_i G_i^{-1/2})},

    0 when some :math:`G_i` is singular or the problem has a ridge (then :math:`K A_p K \ne K`).  With
    :math:`G_p = \sigma A_p + G'_p` the sandwich splits as
    :math:`V = \tfrac\sigma2 \operatorname{tr}(A_\omega A_p^{-1}) + \tfrac12 \operatorname{tr}(A_\omega A_p^{-1} G'_p A_p^{-1})`,
    a convex part that grows without bound towards singular :math:`A_p` plus a sandwich in
    :math:`G' \succeq 0`.

    Parameters
    ----------
    prob : Problem
        A sandwich problem with a separate ``G``.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.solvers import make_problem
    >>> A = np.stack([np.diag([1.0, 2.0]), np.diag([3.0, 1.0])])
    >>> round(sigma_split(make_problem(A, "sandwich", G=2.0 * A + np.eye(2), A_eval=np.eye(2))), 4)
    2.3333
    """
    if prob.G is None or prob.regularization:
        return 0.0
    sig = np.inf
    for Ai, Gi in zip(prob.A, prob.G):
        lg, Ug = np.linalg.eigh(Gi)
        if not lg[0] > SINGULAR_RCOND * lg[-1]:
            return 0.0
        S = Ug / np.sqrt(lg)
        top = np.linalg.eigvalsh(S.T @ Ai @ S)[-1]
        if top > 0:
            sig = min(sig, 1.0 / top)
    if not np.isfinite(sig):
        return 0.0
    sigma = (1.0 - SANDWICH_BNB_SIGMA_SHRINK) * sig
    worst = np.min(np.linalg.eigvalsh(prob.G - sigma * prob.A)[:, 0])
    return sigma if worst >= -SANDWICH_BNB_LP_ULPS * EPS * np.max(np.abs(prob.G)) else 0.0


def box_lower_bound(prob: Problem, lo: np.ndarray, hi: np.ndarray, sigma: float | None = None):
    r"""A valid lower bound of :math:`V(p)` over :math:`\{p \in \Delta : \mathrm{vech}(A_p) \in [lo, hi]\}`.

    With :math:`\Delta_p = A_p - A_c` (:math:`A_c` the box centre, :math:`M_c = A_c + \delta I`,
    :math:`K_c = M_c^{-1}`), :math:`h` the box half-widths,
    :math:`r = \|h\|_F \ge \|\Delta_p\|_2` (off-diagonal entries counted twice) and
    :math:`\lambda_c = \lambda_{\min}(M_c)`, :math:`\mu = \lambda_c - r \le \lambda_{\min}(A_p + \delta I)` (Weyl).
    :math:`G = \sigma A + G'` as in :func:`sigma_split`.

    * :math:`\mu > 0`: from :math:`K = K_c - K_c\Delta K_c + K_c\Delta K_c\Delta K`, dropping the PSD
      term :math:`(K-K_c)A_\omega(K-K_c)` and using the tangent plane of the convex
      :math:`\operatorname{tr}(A_\omega M^{-1})`,

      .. math:: V(p) \ge \tfrac\sigma2\big(\operatorname{tr}(A_\omega K_c) - \langle K_cA_\omega K_c, \Delta_p\rangle\big)
         + \sum_i p_i\Big(\tfrac12\langle K_cA_\omega K_c, G'_i\rangle - \sum_{k\le l} h_{kl}\,|S_{i,kl}|\,(2-\delta_{kl})
         - \frac{\|A_\omega\|_2\, r^2}{\lambda_c^3\mu}\operatorname{tr} G'_i\Big),

      :math:`S_i = \operatorname{sym}(K_cA_\omega K_cG'_iK_c)`: linear in :math:`p`, minimised by an LP
      over the box (:func:`_lp_dual_bound`).  First order in the box size (the middle term).
    * :math:`\mu \le 0`: with :math:`u` the unit eigenvector of :math:`\lambda_c`,
      :math:`\|A_p u\| \le \|M_c u\| + r`, :math:`\operatorname{tr}(KG'K) \ge u^\top G' u / \|M u\|^2`
      (take :math:`x = Mu` in :math:`x^\top KG'Kx \le \|x\|^2 \operatorname{tr}(KG'K)`) and
      :math:`M \preceq M_c + rI`:

      .. math:: V(p) \ge \tfrac\sigma2\operatorname{tr}\big(A_\omega (M_c + rI)^{-1}\big)
         + \frac{\lambda_{\min}(A_\omega)}{2(\|M_cu\| + r)^2}\, u^\top G'_p u,

      and ``+inf`` when :math:`\lambda_c + r \le 0` (no positive definite :math:`A_p` in the box).

    Parameters
    ----------
    prob : Problem
        A sandwich problem with a separate ``G`` (its preconditioned arrays are used as they are).
    lo, hi : ndarray, shape (m(m+1)/2,)
        Box of the upper-triangle entries (row-major, ``numpy.triu_indices``) of :math:`A_p` without ridge.
    sigma : float, optional
        :func:`sigma_split`'s value (computed when None).

    Returns
    -------
    lower : float
        The bound, minus ``SANDWICH_BNB_INVERSE_ULPS`` eps cond(M_c) of its magnitude for the rounding of
        :math:`K_c` (``+inf``: no allocation in the box, or none with :math:`A_p` invertible).
    p : ndarray or None
        The LP's allocation (feasible for the box up to HiGHS's tolerance), for an upper bound.
    info : tuple
        ``(r, mu)``.
    """
    m = prob.m
    iu = np.triu_indices(m)
    twice = np.where(iu[0] == iu[1], 1.0, 2.0)
    if sigma is None:
        sigma = sigma_split(prob)
    A = prob.A
    Gq = prob.G - sigma * A
    W = prob.W
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    h = 0.5 * (hi - lo)
    Ac = np.zeros((m, m))
    Ac[iu] = 0.5 * (lo + hi)
    Ac = Ac + np.triu(Ac, 1).T
    Mc = Ac + prob.regularization * np.eye(m)
    r = float(np.sqrt(np.sum(twice * h * h)))
    lam, U = np.linalg.eigh(Mc)
    eig_err = 4 * m * EPS * max(abs(lam[0]), abs(lam[-1]))
    if lam[0] + r + eig_err <= 0:
        return np.inf, None, (r, lam[0] - r)
    lc = lam[0] - eig_err
    mu = lc - r
    E = A[:, iu[0], iu[1]]
    A_ub = np.vstack([E.T, -E.T])
    b_ub = np.concatenate([hi, -lo])
    trG = np.einsum("iaa->i", Gq)
    if mu > 0:
        K = np.linalg.inv(Mc)
        KWK = K @ W @ K
        S = np.einsum("ab,jbc,cd->jad", KWK, Gq, K)
        S = 0.5 * (S + S.transpose(0, 2, 1))
        first = np.abs(S[:, iu[0], iu[1]] * twice) @ h
        second = np.linalg.norm(W, 2) * r * r / (lc**3 * mu)
        half_c = 0.5 * np.einsum("ab,iab->i", KWK, Gq)
        tangent = 0.5 * sigma * (np.trace(W @ K) - np.einsum("ab,iab->i", KWK, A - Ac))
        c = half_c - first - second * trG + tangent
        lower, p = _lp_dual_bound(c, A_ub, b_ub)
        margin = SANDWICH_BNB_INVERSE_ULPS * EPS * np.linalg.cond(Mc) * (np.max(np.abs(half_c) + np.abs(tangent)))
        return lower - margin, p, (r, mu)
    wmin = max(float(np.linalg.eigvalsh(W)[0]), 0.0)
    u = U[:, 0]
    nu = float(np.linalg.norm(Mc @ u)) + r
    c = 0.5 * wmin * np.einsum("a,iab,b->i", u, Gq, u) / nu**2
    lower, p = _lp_dual_bound(c, A_ub, b_ub)
    if sigma > 0:
        Mr = Mc + r * np.eye(m)
        part = 0.5 * sigma * float(np.trace(W @ np.linalg.inv(Mr)))
        lower += part * (1.0 - SANDWICH_BNB_INVERSE_ULPS * EPS * np.linalg.cond(Mr))
    return lower, p, (r, mu)


@dataclass(frozen=True)
class BranchAndBound:
    """Outcome of :func:`branch_and_bound`.

    Attributes
    ----------
    closed : bool
        ``upper - lower <= rtol * upper``: no allocation has :math:`V < (1 - \\text{rtol})\\,` ``upper``.
    lower : float
        Proved lower bound of :math:`\\min_p V` (the smallest bound of an open box; ``upper`` if none).
    upper : float
        Best value known (the incumbent or a point the LPs found).
    weights : ndarray or None
        The allocation of ``upper`` when the search found one below the incumbent, else None.
    boxes : int
        Boxes bounded.
    seconds : float
        Wall time.
    """

    closed: bool
    lower: float
    upper: float
    weights: np.ndarray | None
    boxes: int
    seconds: float


def branch_and_bound(prob: Problem, upper: float, *, rtol: float, max_boxes: int = SANDWICH_BNB_MAX_BOXES,
                     value=None) -> BranchAndBound:
    r"""Branch and bound over the entries of :math:`A_p` for a global lower bound of the sandwich.

    The root box holds every :math:`\mathrm{vech}(A_i)`, so every allocation; boxes are bounded by
    :func:`box_lower_bound`, the box of smallest bound is split at the midpoint of its widest entry
    (off-diagonal widths counted :math:`\sqrt2` times), a child keeps its parent's bound when its own
    is lower (it is a subset), and boxes whose bound is at least :math:`(1 - \text{rtol})\,U` are
    discarded.  The search stops when :math:`U - L \le \text{rtol}\, U` (closed) or after
    ``max_boxes`` boxes; :math:`U` is the incumbent or V at an LP's allocation if lower.

    The bound is first order in the box size, so closing to a tight ``rtol`` needs the value to grow
    linearly away from the optimum (in moment space) at a rate the bound's constants resolve;
    near-singular regions (rank-one :math:`A_i` make every vertex of the feasible set singular) cost
    many boxes.  An open search proves only ``lower``.

    Parameters
    ----------
    prob : Problem
        A sandwich problem with a separate ``G`` (any m; the box has m(m+1)/2 dimensions).
    upper : float
        The incumbent value (e.g. the solver's certified KKT point).
    rtol : float
        Relative bound gap at which the search closes.
    max_boxes : int
        Budget.
    value : callable, optional
        :math:`p \mapsto V(p)` for the upper bounds (default: the criterion's value).

    Returns
    -------
    BranchAndBound
    """
    import heapq
    import time

    if value is None:
        from noisealloc.solvers.problem import criterion_value as value_fn

        def value(q):
            return value_fn(prob, q)

    t0 = time.perf_counter()
    m = prob.m
    iu = np.triu_indices(m)
    twice = np.where(iu[0] == iu[1], 1.0, 2.0)
    E = prob.A[:, iu[0], iu[1]]
    sigma = sigma_split(prob)
    best = [float(upper), None]

    def bound(lo, hi):
        lower, p, info = box_lower_bound(prob, lo, hi, sigma)
        if p is not None:
            q = np.clip(p, 0.0, None)
            q = q / q.sum()
            try:
                v = float(value(q))
            except Exception:  # a singular LP allocation is only a failed upper-bound candidate
                v = np.inf
            if v < best[0]:
                best[0], best[1] = v, q
        return lower

    lo0, hi0 = E.min(axis=0), E.max(axis=0)
    heap = [(bound(lo0, hi0), 0, lo0, hi0)]
    boxes, count = 1, 1
    floor = np.inf  # smallest bound of a discarded box: the proof's lower bound once the heap is empty
    while heap and heap[0][0] < best[0] - rtol * best[0] and boxes < max_boxes:
        lower, _, lo, hi = heapq.heappop(heap)
        k = int(np.argmax((hi - lo) * np.sqrt(twice)))
        mid = 0.5 * (lo[k] + hi[k])
        for a, b in ((lo[k], mid), (mid, hi[k])):
            l2, h2 = lo.copy(), hi.copy()
            l2[k], h2[k] = a, b
            child = max(bound(l2, h2), lower)
            boxes += 1
            if child < best[0] - rtol * best[0]:
                count += 1
                heapq.heappush(heap, (child, count, l2, h2))
            else:
                floor = min(floor, child)
    lower = min(heap[0][0] if heap else np.inf, floor, best[0])
    closed = bool(best[0] - lower <= rtol * best[0])
    return BranchAndBound(closed, float(lower), best[0], best[1], boxes, time.perf_counter() - t0)
