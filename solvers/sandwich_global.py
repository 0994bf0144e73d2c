r"""Global or local: what a sandwich optimum can say about itself (docs/THEORY.md section 4 (a)).

The sandwich :math:`V(p) = \tfrac12 \operatorname{tr}(A_\omega A_p^{-1} G_p A_p^{-1})` is not convex, so a
KKT point may be a local minimum.  This module holds the global proofs the driver uses and the
starts of its multi-start:

* :func:`proportional_factor` -- where :math:`G = sA` (:math:`s \ge 0` constant),
  :math:`V = \tfrac s2 \operatorname{tr}(A_\omega A_p^{-1})` is convex and a KKT point is global;
* :func:`exhaustive_one_parameter` -- for :math:`m = 1`, :math:`V = \tfrac12 a_\omega g_p / a_p^2`
  and, by Theorem 1's bound :math:`m(m+1)/2 + 1 = 2` (for fixed :math:`a_p` the value is linear in
  :math:`p`, a linear programme with two equality constraints), a global minimiser lies on at most
  two levels; on a pair the stationary point of :math:`g(t)/a(t)^2` is unique and in closed form, so
  the minimum over all singles and pairs is the exact global minimum on the grid;
* :func:`dirichlet_starts` -- random starting allocations from a seeded generator.

For :math:`m \ge 2` an exhaustive search over supports is not a proof by itself (:math:`V` restricted
to a support is still non-convex).  For :math:`m = 2` the driver proves a value :math:`U` global with
:func:`bernstein_proof`: by Theorem 1 a global minimiser lies on at most :math:`m(m+1)/2 + 1 = 4`
levels, and on a 4-level support :math:`V = N(p) / (2\det(A_p)^2)` with :math:`N` cubic, so
":math:`V \ge (1 - \mathrm{rtol})\,U` on the support" is "a quartic is non-negative on a simplex",
decided by the signs of its Bernstein coefficients with subdivision (compiled kernels in
``solvers/_sandwich_kernels.py``; pieces next to a singular :math:`A_p` are closed by
:func:`sigma_margins`, :math:`G_p \succeq \sigma A_p`).  A piece with a negative corner yields a better
allocation, which the driver polishes and proves again.  It runs for grids of at most
``SANDWICH_BERNSTEIN_MAX_LEVELS`` levels.  :func:`branch_and_bound` (over the entries of
:math:`K = A_p^{-1}`, each box bounded by a linear programme and weak duality,
:func:`perspective_lower_bound`) remains for ``global_search=True`` with :math:`m > 2`; an open search
reports its proved lower bound and the result stays ``"local (KKT)"``.

References
----------
docs/THEORY.md section 4 (a), Theorem 1 and "Certificates".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from noisealloc.solvers.problem import Problem
from noisealloc.theory.tolerances import (
    EPS,
    SANDWICH_BNB_LP_ULPS,
    SANDWICH_BNB_MAX_BOXES,
    SANDWICH_BNB_TIGHTEN_ROUNDS,
    SANDWICH_BNB_SIGMA_SHRINK,
    SANDWICH_BERNSTEIN_MAX_DEPTH,
    SANDWICH_BERNSTEIN_MAX_PIECES,
    SANDWICH_BERNSTEIN_ULPS,
    SANDWICH_PROPORTIONAL_RTOL,
    SINGULAR_RCOND,
)

__all__ = ["proportional_factor", "exhaustive_one_parameter", "dirichlet_starts", "sigma_split",
           "perspective_lower_bound", "branch_and_bound", "BranchAndBound", "bernstein_tensors",
           "bernstein_proof"]


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


def _lp_lower_bound(c, A_ub, b_ub, A_eq, b_eq, lb, ub):
    r"""HiGHS on :math:`\min\{c^\top x : A_{ub}x \le b_{ub},\ A_{eq}x = b_{eq},\ l \le x \le u\}`, with a rigorous lower bound.

    For any :math:`\lambda \ge 0` and :math:`\nu`, every feasible :math:`x` has
    :math:`c^\top x \ge r^\top x - \lambda^\top b_{ub} - \nu^\top b_{eq}
    \ge \sum_j \min(r_j l_j, r_j u_j) - \lambda^\top b_{ub} - \nu^\top b_{eq}`,
    :math:`r = c + A_{ub}^\top\lambda + A_{eq}^\top\nu` (weak duality over the bounds box), whatever
    the LP solver's tolerances: HiGHS only supplies the multipliers.  The bound is lowered by
    ``SANDWICH_BNB_LP_ULPS`` ulps of the magnitude of its terms (the rounding of :math:`r` and the sums).
    Infeasibility is proved the same way on the phase-1 programme
    :math:`\min \mathbf 1^\top(e^+ + e^-)` s.t. :math:`A_{eq}x + e^+ - e^- = b_{eq}`: a positive
    rigorous bound there means no feasible :math:`x`.

    Parameters
    ----------
    c : ndarray, shape (N,)
    A_ub : scipy.sparse matrix, shape (R, N)
    b_ub : ndarray, shape (R,)
    A_eq : scipy.sparse matrix, shape (E, N)
    b_eq : ndarray, shape (E,)
    lb, ub : ndarray, shape (N,)
        Finite variable bounds (the bound needs them).

    Returns
    -------
    lower : float
        The rigorous bound (``+inf``: proved infeasible; ``-inf``: HiGHS gave no usable multipliers).
    x : ndarray or None
        HiGHS's primal solution, None if none.
    """
    from scipy import sparse
    from scipy.optimize import linprog

    bounds = np.stack([lb, ub], 1)

    def rigorous(c_, Aub, bub, Aeq, beq, lo_, hi_, res):
        lam = np.maximum(-res.ineqlin.marginals, 0.0)
        nu = -res.eqlin.marginals
        r = c_ + Aub.T @ lam + Aeq.T @ nu
        big = np.maximum(np.abs(lo_), np.abs(hi_))
        mag = (np.abs(c_) + abs(Aub).T @ lam + abs(Aeq).T @ np.abs(nu)) @ big + lam @ np.abs(bub) + np.abs(nu) @ np.abs(beq)
        return float(np.sum(np.minimum(r * lo_, r * hi_)) - lam @ bub - nu @ beq - SANDWICH_BNB_LP_ULPS * EPS * mag)

    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if res.status == 0:
        return rigorous(c, A_ub, b_ub, A_eq, b_eq, lb, ub, res), res.x
    if res.status == 2:
        k = A_eq.shape[0]
        N = c.size
        eye = sparse.identity(k, format="csr")
        c1 = np.concatenate([np.zeros(N), np.ones(2 * k)])
        A1 = sparse.hstack([A_ub, sparse.csr_matrix((A_ub.shape[0], 2 * k))], format="csr")
        E1 = sparse.hstack([A_eq, eye, -eye], format="csr")
        big = np.abs(b_eq).sum() + abs(A_eq) @ np.maximum(np.abs(lb), np.abs(ub))
        lo1 = np.concatenate([lb, np.zeros(2 * k)])
        hi1 = np.concatenate([ub, np.concatenate([big, big])])
        r1 = linprog(c1, A_ub=A1, b_ub=b_ub, A_eq=E1, b_eq=b_eq, bounds=np.stack([lo1, hi1], 1), method="highs")
        if r1.status == 0 and rigorous(c1, A1, b_ub, E1, b_eq, lo1, hi1, r1) > 0:
            return np.inf, None
    return -np.inf, None


class _PerspectiveRelaxation:
    r"""The parts of the perspective relaxation that do not depend on the box (see :func:`perspective_lower_bound`).

    Variables ``x = (p, Z, t)``: ``p`` (n), ``Z`` (n x d, row i the vech coordinates of
    :math:`Z_i = p_i K`), ``t`` (n); ``d = m(m+1)/2``.
    """

    def __init__(self, prob: Problem):
        from scipy import sparse

        m, n = prob.m, prob.n
        iu = np.triu_indices(m)
        d = iu[0].size
        Fb = np.zeros((d, m, m))
        Fb[np.arange(d), iu[0], iu[1]] = 1.0
        Fb[np.arange(d), iu[1], iu[0]] = 1.0
        self.m, self.n, self.d, self.iu = m, n, d, iu
        G = prob.A if prob.G is None else prob.G
        # q_i(z) = tr(W K G_i K) = z^T Q_i z for K = sum_j z_j F_j
        Q = np.einsum("ab,jbc,icd,kda->ijk", prob.W, Fb, G, Fb)
        self.Q = 0.5 * (Q + Q.transpose(0, 2, 1))
        self.absQ = np.abs(self.Q)
        self.wv = np.einsum("ab,jba->j", prob.W, Fb)  # tr(W K) = wv . z
        self.sigma = sigma_split(prob)
        Ad = prob.A + prob.regularization * np.eye(m)
        # sum_i (A_i + delta I) Z_i = I: coefficient of z_ij in entry (a, b) is (Ad_i F_j)_ab
        coef = np.einsum("iac,jcb->abij", Ad, Fb).reshape(m * m, n * d)
        eq = np.zeros((m * m + 1, n + n * d + n))
        eq[:m * m, n:n + n * d] = coef
        eq[m * m, :n] = 1.0
        self.A_eq = sparse.csr_matrix(eq)
        self.b_eq = np.concatenate([np.eye(m).ravel(), [1.0]])
        self.c = np.concatenate([np.zeros(n + n * d), np.full(n, 0.5)])
        self.N = 2 * n + n * d
        # McCormick rows Z_ij - hi_j p_i <= 0 and lo_j p_i - Z_ij <= 0: fixed pattern, box-dependent p entries
        rows = np.arange(2 * n * d)
        i_of = np.repeat(np.arange(n), d)
        j_of = np.tile(np.arange(d), n)
        self._mc_rows = np.concatenate([rows, rows])
        self._mc_cols = np.concatenate([n + i_of * d + j_of, n + i_of * d + j_of, i_of, i_of])
        self._mc_sign = np.concatenate([np.ones(n * d), -np.ones(n * d)])
        self._mc_i, self._mc_j = i_of, j_of
        # a root box of K = A_p^{-1}: V >= sigma/2 tr(W K) bounds K where V <= upper; a ridge bounds K by 1/delta
        self.wmin = float(np.linalg.eigvalsh(prob.W)[0])
        self.ridge = prob.regularization

    def root(self, upper: float):
        """Root box of the vech coordinates of K containing every K with V <= ``upper`` (None: unbounded)."""
        T = np.inf
        if self.sigma > 0 and self.wmin > 0:
            # tr K <= tr(W K) / lambda_min(W) <= 2 V / (sigma lambda_min(W))
            T = 2.0 * upper / (self.sigma * self.wmin) * (1.0 + SANDWICH_BNB_LP_ULPS * EPS)
        if self.ridge > 0:
            T = min(T, self.m / self.ridge)
        if not np.isfinite(T):
            return None
        diag = self.iu[0] == self.iu[1]
        # PSD: |K_ab| <= sqrt(K_aa K_bb) <= (K_aa + K_bb) / 2 <= T / 2
        return np.where(diag, 0.0, -0.5 * T), np.where(diag, T, 0.5 * T)


def _box_lp(rel: _PerspectiveRelaxation, lo: np.ndarray, hi: np.ndarray, upper: float):
    """The inequality rows and variable bounds of :func:`perspective_lower_bound`'s LP (None: empty box)."""
    from scipy import sparse

    n, d, iu = rel.n, rel.d, rel.iu
    diag = iu[0] == iu[1]
    if np.any(hi[diag] < 0):
        return None
    # PSD needs K_ab^2 <= K_aa K_bb for every off-diagonal entry
    pos = {int(a): k for k, a in enumerate(iu[0]) if diag[k]}
    for k in np.flatnonzero(~diag):
        lo2 = 0.0 if lo[k] <= 0.0 <= hi[k] else min(lo[k] ** 2, hi[k] ** 2)
        if lo2 > hi[pos[int(iu[0][k])]] * hi[pos[int(iu[1][k])]] * (1 + 4 * EPS):
            return None
    lo_c = np.where(diag, np.maximum(lo, 0.0), lo)
    # tangent planes on a 3-point lattice per entry (m = 2): more rows per LP, fewer boxes (1.7k against
    # 3.1k with corners and centre on issue 15's instance); corners and centre for larger m (3^6 = 729)
    if d <= 3:
        pts = np.array(np.meshgrid(*[[a, 0.5 * (a + b), b] for a, b in zip(lo_c, hi)], indexing="ij")).reshape(d, -1).T
    else:
        corners = np.array(np.meshgrid(*[[a, b] for a, b in zip(lo_c, hi)], indexing="ij")).reshape(d, -1).T
        pts = np.vstack([corners, 0.5 * (lo_c + hi)])
    P = pts.shape[0]
    Qz = np.einsum("ijk,pk->pij", rel.Q, pts)            # (P, n, d)
    qv = np.einsum("pij,pj->pi", Qz, pts)                 # q_i(z^k)
    zmax = np.maximum(np.abs(lo_c), np.abs(hi))
    # the float tangent plane may sit above q_i by the rounding of q(z^k), Q z^k and the product with Z
    slack = 8 * d * EPS * np.einsum("ijk,pj,k->pi", rel.absQ, np.abs(pts), zmax + np.abs(pts).max(0))
    rows_t = np.arange(P * n)
    ii = rows_t % n
    data = [-(qv + slack).ravel(), (2.0 * Qz).reshape(P * n, d).ravel(), -np.ones(P * n)]
    r_idx = [rows_t, np.repeat(rows_t, d), rows_t]
    c_idx = [ii, (n + ii[:, None] * d + np.arange(d)).ravel(), n + n * d + ii]
    # McCormick rows after the tangent rows: Z_ij - hi_j p_i <= 0, then lo_j p_i - Z_ij <= 0
    off = P * n
    data.append(np.concatenate([rel._mc_sign, -hi[rel._mc_j], lo_c[rel._mc_j]]))
    r_idx.append(off + rel._mc_rows)
    c_idx.append(rel._mc_cols)
    n_rows = off + 2 * n * d
    b_ub = np.zeros(n_rows)
    if rel.sigma > 0 and np.isfinite(upper):
        cut = 0.5 * rel.sigma * np.tile(rel.wv, n)
        data.append(cut)
        r_idx.append(np.full(n * d, n_rows))
        c_idx.append(n + np.arange(n * d))
        b_ub = np.append(b_ub, upper)
        n_rows += 1
    A_ub = sparse.csr_matrix((np.concatenate(data), (np.concatenate(r_idx), np.concatenate(c_idx))),
                             shape=(n_rows, rel.N))
    tmax = np.max(qv, axis=0) * (1 + 16 * EPS) + np.max(slack, axis=0)
    lb = np.concatenate([np.zeros(n), np.tile(np.minimum(lo_c, 0.0), n), np.zeros(n)])
    ub = np.concatenate([np.ones(n), np.tile(np.maximum(hi, 0.0), n), tmax])
    return A_ub, b_ub, lb, ub


def perspective_lower_bound(rel: _PerspectiveRelaxation, lo: np.ndarray, hi: np.ndarray, upper: float = np.inf):
    r"""A rigorous lower bound of :math:`V(p)` over allocations with :math:`K = (A_p + \delta I)^{-1}` in a box.

    With :math:`q_i(K) = \operatorname{tr}(W K G_i K)` (convex quadratic in :math:`K`),
    :math:`V(p) = \tfrac12 \sum_i p_i\, q_i(K)` and :math:`Z_i = p_i K`, the sandwich is
    :math:`\tfrac12\sum_i \tilde q_i(Z_i, p_i)` with the perspective :math:`\tilde q_i(Z, p) = p\, q_i(Z/p)`,
    jointly convex, subject to the *linear* :math:`\sum_i (A_i + \delta I) Z_i = I` and the non-convex
    :math:`Z_i/p_i = K` for one :math:`K`.  The relaxation keeps only :math:`Z_i/p_i \in` box
    (:math:`p_i\,lo \le Z_i \le p_i\,hi`, McCormick) and replaces each perspective by its tangent planes at
    the points of the box's 3-point lattice (:math:`m = 2`; corners and centre for larger :math:`m`),
    :math:`t_i \ge 2\,(Q_i z^k)^\top Z_i - q_i(z^k)\, p_i`, each lowered by a rounding slack; with the cut
    :math:`\tfrac\sigma2 \operatorname{tr}(W \sum_i Z_i) \le` ``upper`` (valid for every allocation with
    :math:`V \le` ``upper``, :func:`sigma_split`).  The linear programme
    :math:`\min \tfrac12\sum_i t_i` is bounded rigorously from HiGHS's multipliers
    (:func:`_lp_lower_bound`).  As the box shrinks the ``Z_i/p_i`` are forced together and the
    tangent planes close in, so the bound tends to :math:`\min V` over the box.

    Parameters
    ----------
    rel : _PerspectiveRelaxation
        The problem's box-independent parts.
    lo, hi : ndarray, shape (m(m+1)/2,)
        Box of the upper-triangle entries (``numpy.triu_indices`` order) of :math:`K`.
    upper : float
        A value no allocation of interest exceeds (the incumbent), for the cut; ``inf``: no cut.

    Returns
    -------
    lower : float
        ``+inf`` when no positive definite :math:`K` or no allocation fits the box.
    p : ndarray or None
        The LP's allocation (a candidate for the upper bound).
    """
    A = _box_lp(rel, lo, hi, upper)
    if A is None:
        return np.inf, None
    lower, x = _lp_lower_bound(rel.c, *A[:2], rel.A_eq, rel.b_eq, *A[2:])
    return lower, (None if x is None else x[:rel.n])


def _tighten(rel: _PerspectiveRelaxation, lo: np.ndarray, hi: np.ndarray, upper: float, rounds: int):
    r"""Shrink a box of :math:`K` to what the relaxation allows with :math:`V \le` ``upper`` (bound tightening).

    For each entry :math:`j`, the rigorous LP bounds of :math:`\min` and :math:`\max \sum_i Z_{ij}`
    (:math:`= K_j`, as :math:`\sum_i p_i = 1`) subject to the relaxation and
    :math:`\tfrac12\sum_i t_i \le` ``upper``; repeated ``rounds`` times, as each shrink tightens the
    tangent planes.  Every allocation with :math:`V \le` ``upper`` keeps its :math:`K` in the result.

    Returns
    -------
    (lo, hi) or None
        None when no allocation with :math:`V \le` ``upper`` has its :math:`K` in the box.
    """
    from scipy import sparse

    n, d = rel.n, rel.d
    vrow = sparse.csr_matrix(rel.c[None, :])
    for _ in range(rounds):
        A = _box_lp(rel, lo, hi, upper)
        if A is None:
            return None
        A_ub = sparse.vstack([A[0], vrow], format="csr")
        b_ub = np.append(A[1], upper * (1 + SANDWICH_BNB_LP_ULPS * EPS))
        new_lo, new_hi = lo.copy(), hi.copy()
        for j in range(d):
            e = np.zeros(rel.N)
            e[n + j + d * np.arange(n)] = 1.0
            low, _ = _lp_lower_bound(e, A_ub, b_ub, rel.A_eq, rel.b_eq, *A[2:])
            if low == np.inf:
                return None
            high, _ = _lp_lower_bound(-e, A_ub, b_ub, rel.A_eq, rel.b_eq, *A[2:])
            new_lo[j] = max(lo[j], low)
            new_hi[j] = min(hi[j], -high)
        if np.any(new_lo > new_hi):
            return None
        lo, hi = new_lo, new_hi
    return lo, hi


@dataclass(frozen=True)
class BranchAndBound:
    """Outcome of :func:`branch_and_bound`.

    Attributes
    ----------
    closed : bool
        ``upper - lower <= rtol * upper``: no allocation has :math:`V < (1 - \\text{rtol})\\,` ``upper``.
    lower : float
        Proved lower bound of :math:`\\min_p V` (``-inf`` when no proof was attempted).
    upper : float
        Best value known (the incumbent or a point the LPs found).
    weights : ndarray or None
        The allocation of ``upper`` when the search found one below the incumbent, else None.
    boxes : int
        Boxes bounded.
    seconds : float
        Wall time.
    note : str
        Why no proof was attempted, or ``''``.
    """

    closed: bool
    lower: float
    upper: float
    weights: np.ndarray | None
    boxes: int
    seconds: float
    note: str = ""


def branch_and_bound(prob: Problem, upper: float, *, rtol: float, max_boxes: int = SANDWICH_BNB_MAX_BOXES,
                     value=None) -> BranchAndBound:
    r"""Branch and bound over :math:`K = (A_p + \delta I)^{-1}` for a global lower bound of the sandwich.

    Every allocation with :math:`V(p) \le U` has :math:`\operatorname{tr} K \le 2U/(\sigma\,\lambda_{\min}(W))`
    (:math:`G_p \succeq \sigma A_p`, :func:`sigma_split`; or :math:`K \preceq I/\delta` under a ridge), so
    a root box of the :math:`d = m(m+1)/2` entries of :math:`K` holds them all.  Boxes are bounded by
    :func:`perspective_lower_bound`; the box of smallest bound is split at the midpoint of its entry
    widest relative to the root, a child keeps its parent's bound when its own is lower, and boxes
    whose bound is at least :math:`(1 - \text{rtol})\,U` are discarded.  The search stops when
    :math:`U - L \le \text{rtol}\, U` (closed: proved) or after ``max_boxes`` boxes (only ``lower`` is
    proved); :math:`U` is the incumbent or V at an LP's allocation if lower.  Each box costs one
    LP with :math:`(d + 2) n` variables and :math:`(2^d + 1 + 2d) n` rows, so the search is meant for
    small ``m`` (``m = 2``: d = 3).

    Parameters
    ----------
    prob : Problem
        A sandwich problem.
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
        ``closed`` False with ``note`` when no root box exists (:math:`\sigma = 0`, singular
        :math:`W` and no ridge).

    References
    ----------
    docs/THEORY.md section 4 (a); the perspective of a convex function and McCormick envelopes are standard
    (Boyd and Vandenberghe, *Convex Optimization*, 3.2.6; McCormick, Math. Programming 10, 1976).
    """
    import heapq
    import time

    if value is None:
        from noisealloc.solvers.problem import criterion_value as value_fn

        def value(q):
            return value_fn(prob, q)

    t0 = time.perf_counter()
    rel = _PerspectiveRelaxation(prob)
    best = [float(upper), None]
    root = rel.root(best[0])
    if root is None:
        return BranchAndBound(False, -np.inf, best[0], None, 0, time.perf_counter() - t0,
                              "no bounded region of A_p^-1: G_i - sigma A_i is PSD only for sigma = 0 (or W is "
                              "singular) and there is no ridge")
    lo0, hi0 = root
    tight = _tighten(rel, lo0, hi0, best[0], SANDWICH_BNB_TIGHTEN_ROUNDS)
    if tight is None:  # no allocation below the incumbent at all
        return BranchAndBound(True, best[0], best[0], None, 1, time.perf_counter() - t0)
    lo0, hi0 = tight
    width0 = np.maximum(hi0 - lo0, np.finfo(float).tiny)

    def bound(lo, hi):
        lower, p = perspective_lower_bound(rel, lo, hi, best[0])
        if p is not None:
            q = np.clip(p, 0.0, None)
            v = float(value(q / q.sum())) if q.sum() > 0 else np.inf
            if v < best[0]:
                best[0], best[1] = v, q / q.sum()
        return lower

    heap = [(bound(lo0, hi0), 0, lo0, hi0)]
    boxes, count = 1, 1
    floor = np.inf  # smallest bound of a discarded box: the proof's lower bound once the heap is empty
    while heap and heap[0][0] < best[0] - rtol * best[0] and boxes < max_boxes:
        lower, _, lo, hi = heapq.heappop(heap)
        k = int(np.argmax((hi - lo) / width0))
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


def bernstein_tensors(prob: Problem):
    r"""The coefficient tensors of :math:`N` and :math:`\det A_p` for the two-parameter Bernstein proof.

    .. math:: N_3[i, j, k] = \operatorname{tr}(W \operatorname{adj}(\tilde A_i)\, G_j \operatorname{adj}(\tilde A_k)),
       \qquad B_2[i, j] = \tfrac12\big(\tilde a^{(i)}_{11}\tilde a^{(j)}_{22} + \tilde a^{(i)}_{22}\tilde a^{(j)}_{11}
       - 2\,\tilde a^{(i)}_{12}\tilde a^{(j)}_{12}\big),

    with :math:`\tilde A_i = A_i + \delta I` (the ridge; :math:`\sum_i p_i = 1`), so that
    :math:`N(p) = \sum_{ijk} N_3[i,j,k]\, p_i p_j p_k` and :math:`\det(A_p + \delta I) = p^\top B_2 p`.
    ``SN3`` is :math:`N_3` symmetrised over its three indices; ``SN3a`` and ``B2a`` are the same sums
    of absolute values (the scale of their rounding).

    Parameters
    ----------
    prob : Problem
        A two-parameter sandwich problem (``A``, ``G``, ``W`` in the solver's coordinates).

    Returns
    -------
    SN3, SN3a : ndarray, shape (n, n, n)
    B2, B2a : ndarray, shape (n, n)
    """
    A = prob.A + prob.regularization * np.eye(2)
    G = prob.A if prob.G is None else prob.G
    adj = np.empty_like(A)
    adj[:, 0, 0], adj[:, 1, 1] = A[:, 1, 1], A[:, 0, 0]
    adj[:, 0, 1], adj[:, 1, 0] = -A[:, 0, 1], -A[:, 1, 0]
    W = prob.W
    N3 = np.einsum("ab,ibc,jcd,kda->ijk", W, adj, G, adj, optimize=True)
    N3a = np.einsum("ab,ibc,jcd,kda->ijk", abs(W), abs(adj), abs(G), abs(adj), optimize=True)

    def sym3(T):
        return (T + T.transpose(0, 2, 1) + T.transpose(1, 0, 2) + T.transpose(1, 2, 0) + T.transpose(2, 0, 1)
                + T.transpose(2, 1, 0)) / 6.0

    a11, a22, a12 = A[:, 0, 0], A[:, 1, 1], 0.5 * (A[:, 0, 1] + A[:, 1, 0])
    B2 = 0.5 * (np.outer(a11, a22) + np.outer(a22, a11) - 2.0 * np.outer(a12, a12))
    B2a = 0.5 * (np.abs(np.outer(a11, a22)) + np.abs(np.outer(a22, a11)) + 2.0 * np.abs(np.outer(a12, a12)))
    return sym3(N3), sym3(N3a), B2, B2a


def sigma_margins(prob: Problem, target: float) -> np.ndarray:
    r"""Per-level :math:`\sigma_j` for the piece test of :func:`bernstein_proof`, and :math:`\lambda_{\min}(W)/(2\,\text{target})`.

    :math:`\sigma_j` is the largest :math:`\sigma` with :math:`G_j \succeq \sigma A_j` (the smallest root of
    :math:`\det(G_j - \sigma A_j)`, shrunk by ``SANDWICH_BNB_SIGMA_SHRINK`` and checked by an eigenvalue,
    halved where rounding leaves :math:`G_j - \\sigma_j A_j` just outside the cone; 0 if that fails).  On the simplex of a support :math:`S`, :math:`G_p \succeq \sigma_S A_p` with
    :math:`\sigma_S = \min_{j\in S}\sigma_j`, so without a ridge

    .. math:: V(p) \ge \tfrac{\sigma_S}{2}\operatorname{tr}(W A_p^{-1})
       \ge \frac{\sigma_S\,\lambda_{\min}(W)}{2\,\lambda_{\min}(A_p)}, \qquad
       \lambda_{\min}(A_p) \le \frac{u^\top A_p u}{u^\top u}\ \text{for any } u,

    and :math:`u^\top A_p u` is linear in :math:`p`: a piece on which its maximum over the corners is at most
    :math:`\sigma_S\lambda_{\min}(W)/(2\,\text{target})` has :math:`V \ge` target everywhere.  Near a singular
    :math:`A_p` (rank-one levels, nearly parallel ones) both :math:`N` and :math:`D` vanish to rounding and no
    Bernstein coefficient can decide the sign of :math:`P`; this test decides it.

    Returns
    -------
    ndarray, shape (2, n)
        Row 0 the :math:`\sigma_j`; ``[1, 0]`` :math:`\lambda_{\min}(W)/(2\,\text{target})` rounded down.  All
        zero (no test) with a ridge, ``G = A`` or a singular ``W``.
    """
    n = prob.n
    out = np.zeros((2, n))
    wmin = float(np.linalg.eigvalsh(prob.W)[0])
    if prob.G is None or prob.regularization or not (wmin > 0 and target > 0):
        return out
    A, G = prob.A, prob.G
    dA = A[:, 0, 0] * A[:, 1, 1] - A[:, 0, 1] * A[:, 1, 0]
    dG = G[:, 0, 0] * G[:, 1, 1] - G[:, 0, 1] * G[:, 1, 0]
    b = G[:, 0, 0] * A[:, 1, 1] + G[:, 1, 1] * A[:, 0, 0] - G[:, 0, 1] * A[:, 1, 0] - G[:, 1, 0] * A[:, 0, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        sig = 2.0 * dG / (b + np.sqrt(np.maximum(b * b - 4.0 * dA * dG, 0.0)))
    sig = np.where(np.isfinite(sig) & (sig > 0) & (dG > 0), sig, 0.0) * (1.0 - SANDWICH_BNB_SIGMA_SHRINK)
    for _ in range(8):  # where rounding puts G_j - sigma_j A_j just outside the cone, back off
        worst = np.linalg.eigvalsh(G - sig[:, None, None] * A)[:, 0]
        if np.all(worst >= 0.0):
            break
        sig = np.where(worst >= 0.0, sig, 0.5 * sig)
    out[0] = np.where(worst >= 0.0, sig, 0.0)
    out[1, 0] = wmin / (2.0 * target) * (1.0 - 1e-6)
    return out


def bernstein_proof(prob: Problem, upper: float, *, rtol: float, max_depth: int = SANDWICH_BERNSTEIN_MAX_DEPTH,
                    max_pieces: int = SANDWICH_BERNSTEIN_MAX_PIECES) -> BranchAndBound:
    r"""Prove :math:`V(p) \ge (1 - \text{rtol})\, U` for every allocation (:math:`m = 2`), by Bernstein subdivision.

    With :math:`V = N / (2D)`, :math:`N(p) = \operatorname{tr}(W \operatorname{adj}(A_p) G_p \operatorname{adj}(A_p))`
    cubic and :math:`D(p) = \det(A_p)^2` quartic (:math:`m = 2`), the claim on a support :math:`S` is
    the non-negativity of the homogeneous quartic

    .. math:: P(p) = \tfrac12 N(p) \textstyle\sum_i p_i - L\, D(p), \qquad L = (1 - \text{rtol})\, U,

    on the simplex of :math:`S` (where :math:`D = 0`, :math:`V = +\infty` and :math:`P = N/2 \ge 0`).
    Theorem 1's LP argument (for fixed :math:`A_p` the value is linear in :math:`p`, under
    :math:`m(m+1)/2 + 1 = 4` equality constraints) puts a global minimiser on at most four levels, so it
    suffices to show :math:`P \ge 0` on the simplex of every set of four levels.  Each is certified by
    the signs of :math:`P`'s 35 Bernstein coefficients (the entries of its symmetric coefficient tensor,
    from :func:`bernstein_tensors`), each required to exceed its rounding bound
    (``SANDWICH_BERNSTEIN_ULPS`` ulps of its magnitude per subdivision level), with midpoint subdivision
    of the longest edge where they do not.  A vertex or centroid of a piece with :math:`P` below minus its
    rounding bound is an allocation with :math:`V < L`: the search stops there and returns it.  A piece
    whose coefficients do not decide is also closed by the :math:`\sigma` test of :func:`sigma_margins`
    (near singular :math:`A_p`, where :math:`N` and :math:`D` both vanish to rounding).

    Parameters
    ----------
    prob : Problem
        A sandwich problem with ``m = 2``.
    upper : float
        The incumbent value :math:`U` (e.g. the solver's certified KKT point).
    rtol : float
        Relative margin: the proof is of :math:`V \ge (1 - \text{rtol})\,U`.
    max_depth, max_pieces : int
        Subdivision depth per piece and the total budget of pieces.

    Returns
    -------
    BranchAndBound
        ``closed`` True with ``lower`` :math:`= L` when proved; ``weights`` an allocation with
        :math:`V < L` when one was found (``closed`` False, ``upper`` its value); ``boxes`` counts the
        pieces examined.  ``note`` says why a proof is open.

    References
    ----------
    docs/THEORY.md section 4 (a), Theorem 1; Bernstein coefficients on a simplex and their convergence
    under subdivision: Farin, *Triangular Bernstein-Bezier patches*, CAGD 3 (1986); Lai and Schumaker,
    *Spline functions on triangulations* (2007), ch. 2.
    """
    import time

    from noisealloc.solvers import _sandwich_kernels as K

    if prob.criterion != "sandwich" or prob.m != 2:
        raise ValueError(f"bernstein_proof needs a sandwich problem with m = 2; got criterion {prob.criterion!r}, "
                         f"m = {prob.m}")
    t0 = time.perf_counter()
    target = (1.0 - rtol) * float(upper)
    SN3, SN3a, B2, B2a = bernstein_tensors(prob)
    n = prob.n
    L = np.arange(n, dtype=np.int64)
    if n < 4:
        L = np.concatenate([L, np.full(4 - n, n - 1, dtype=np.int64)])
    tau = SANDWICH_BERNSTEIN_ULPS * EPS * (int(max_depth) + 4)
    status, pieces, bad_S, bad_x, n_open = K.bernstein_sweep(
        L, SN3, SN3a, B2, B2a, target, tau, int(max_depth), int(max_pieces),
        K.MULTISETS, K.CHILD_SRC, K.CHILD_W, K.VERTEX_ROWS, K._MULTINOM, sigma_margins(prob, target),
        np.ascontiguousarray(np.stack([prob.A[:, 0, 0], 0.5 * (prob.A[:, 0, 1] + prob.A[:, 1, 0]), prob.A[:, 1, 1]], 1)))
    seconds = time.perf_counter() - t0
    if status == 0:
        return BranchAndBound(True, target, float(upper), None, int(pieces), seconds)
    if status == 1:
        w = np.zeros(n)
        np.add.at(w, bad_S, np.clip(bad_x, 0.0, None))
        w /= w.sum()
        from noisealloc.solvers.problem import criterion_value

        return BranchAndBound(False, -np.inf, float(criterion_value(prob, w)), w, int(pieces), seconds,
                              "an allocation below the incumbent was found")
    return BranchAndBound(False, -np.inf, float(upper), None, int(pieces), seconds,
                          f"{int(n_open)} pieces left open (depth {max_depth} or the budget of {max_pieces} pieces)")
