r"""Compiled kernels of the two-parameter sandwich proof (private; see :mod:`noisealloc.solvers.sandwich_global`).

For :math:`m = 2`, :math:`A_p^{-1} = \operatorname{adj}(A_p)/\det A_p` with :math:`\operatorname{adj}` linear, so

.. math:: V(p) = \frac{N(p)}{2\,D(p)}, \qquad
   N(p) = \operatorname{tr}(W \operatorname{adj}(A_p)\, G_p \operatorname{adj}(A_p)), \quad D(p) = (\det A_p)^2,

a cubic over a quartic in :math:`p`.  :math:`V \ge U` on a support :math:`S` iff the homogeneous quartic
:math:`P(p) = \tfrac12 N(p)\,(\textstyle\sum_i p_i) - U\,D(p)` is non-negative on the simplex of :math:`S`;
a quartic is non-negative there when all its Bernstein coefficients are (the coefficients of
:math:`P = \sum_{|\alpha| = 4} b_\alpha \binom{4}{\alpha} p^\alpha` are the entries of its symmetric
coefficient tensor, the blossom at the vertices), and the coefficients of a sub-simplex follow by
de Casteljau's midpoint subdivision.  Subdivision converges quadratically (the coefficients approach the
values of :math:`P` at rate :math:`h^2` in the piece's diameter :math:`h`), so a minimum of :math:`V` equal
to :math:`U/(1 - \text{rtol})` needs pieces of diameter :math:`\sim\sqrt{\text{rtol}}` only near it.

The kernel enumerates every set of four levels (Theorem 1's LP bound :math:`m(m+1)/2 + 1 = 4`: for fixed
:math:`A_p` the value is linear in :math:`p` under four equality constraints, so a global minimiser lies
on at most four levels) and subdivides each until all coefficients of every piece exceed their rounding
bound, or a point with :math:`P < 0` (an allocation below :math:`U`) is found, or the budget is spent.

Every loop here is over small fixed-size arrays (35 coefficients, 4 x 4 vertices), numba's ground: the
numpy path (NOISEALLOC_DISABLE_NUMBA=1) runs the same Python code, for tests on small grids only.
"""

from __future__ import annotations

import numpy as np

from noisealloc.theory._numba import jit, prange

__all__ = ["MULTISETS", "LOOKUP", "CHILD_SRC", "CHILD_W", "VERTEX_ROWS", "bernstein_sweep"]


def _multisets():
    out = []
    for k0 in range(5):
        for k1 in range(5 - k0):
            for k2 in range(5 - k0 - k1):
                out.append((k0, k1, k2, 4 - k0 - k1 - k2))
    ms = np.array(out, dtype=np.int64)
    lookup = -np.ones((5, 5, 5, 5), dtype=np.int64)
    for r, k in enumerate(ms):
        lookup[k[0], k[1], k[2], k[3]] = r
    return ms, lookup


#: The 35 multisets of size 4 over 4 vertices, as counts (k0, k1, k2, k3), and their row index.
MULTISETS, LOOKUP = _multisets()
_BINOM = np.array([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 2, 1, 0, 0], [1, 3, 3, 1, 0], [1, 4, 6, 4, 1]],
                  dtype=np.float64)
#: 4! / k! for each multiset: P(x) = sum_k b_k (4!/k!) x^k.
_MULTINOM = np.array([24.0 / np.prod([[1, 1, 2, 6, 24][c] for c in k]) for k in MULTISETS])


@jit
def _root(S, SN3, SN3a, B2, B2a, target, ms, b, mag):  # pragma: no cover - compiled
    idx = np.empty(4, np.int64)
    for r in range(ms.shape[0]):
        t = 0
        for v in range(4):
            for _c in range(ms[r, v]):
                idx[t] = S[v]
                t += 1
        i1, i2, i3, i4 = idx[0], idx[1], idx[2], idx[3]
        bN = 0.25 * (SN3[i2, i3, i4] + SN3[i1, i3, i4] + SN3[i1, i2, i4] + SN3[i1, i2, i3])
        aN = 0.25 * (SN3a[i2, i3, i4] + SN3a[i1, i3, i4] + SN3a[i1, i2, i4] + SN3a[i1, i2, i3])
        bD = (B2[i1, i2] * B2[i3, i4] + B2[i1, i3] * B2[i2, i4] + B2[i1, i4] * B2[i2, i3]) / 3.0
        aD = (B2a[i1, i2] * B2a[i3, i4] + B2a[i1, i3] * B2a[i2, i4] + B2a[i1, i4] * B2a[i2, i3]) / 3.0
        b[r] = 0.5 * bN - target * bD
        mag[r] = 0.5 * aN + target * aD


@jit
def _n_sets(nL):  # pragma: no cover - compiled
    return nL * (nL - 1) * (nL - 2) * (nL - 3) // 24


@jit
def _unrank(q, nL, L, S):  # pragma: no cover - compiled
    """The q-th 4-subset (lexicographic, i0 < i1 < i2 < i3) of positions 0..nL-1, as levels L[i]."""
    i0 = 0
    while True:
        c = (nL - i0 - 1) * (nL - i0 - 2) * (nL - i0 - 3) // 6
        if q < c:
            break
        q -= c
        i0 += 1
    i1 = i0 + 1
    while True:
        c = (nL - i1 - 1) * (nL - i1 - 2) // 2
        if q < c:
            break
        q -= c
        i1 += 1
    i2 = i1 + 1
    while True:
        c = nL - i2 - 1
        if q < c:
            break
        q -= c
        i2 += 1
    i3 = i2 + 1 + q
    S[0], S[1], S[2], S[3] = L[i0], L[i1], L[i2], L[i3]


def _child_tables():
    """Gather tables of the midpoint subdivision: for the ordered edge (a, b) (vertex b replaced by the
    midpoint), child coefficient r = sum_j W[a, b, r, j] * parent[SRC[a, b, r, j]] (five terms, zero-padded)."""
    src = np.zeros((4, 4, 35, 5), dtype=np.int64)
    wts = np.zeros((4, 4, 35, 5))
    for a in range(4):
        for b in range(4):
            if a == b:
                continue
            for r, k in enumerate(MULTISETS):
                kb = int(k[b])
                for j in range(kb + 1):
                    kk = k.copy()
                    kk[a] += j
                    kk[b] -= j
                    src[a, b, r, j] = LOOKUP[kk[0], kk[1], kk[2], kk[3]]
                    wts[a, b, r, j] = _BINOM[kb, j] * 0.5 ** kb
    return src, wts


#: The subdivision's gather tables (:func:`_child_tables`).
CHILD_SRC, CHILD_W = _child_tables()
#: Rows of the four vertex coefficients (k = 4 e_a).
VERTEX_ROWS = np.array([LOOKUP[4, 0, 0, 0], LOOKUP[0, 4, 0, 0], LOOKUP[0, 0, 4, 0], LOOKUP[0, 0, 0, 4]])


@jit
def _gather(c, src, wts, out):  # pragma: no cover - compiled
    for r in range(35):
        s = 0.0
        for j in range(5):
            w = wts[r, j]
            # the kb + 1 terms of a row have positive weights, the padding is 0 (on average 2 of 5 are
            # used): stopping there skips only exact zeros, so the sum is bit-identical
            if w == 0.0:
                break
            s += w * c[src[r, j]]
        out[r] = s


@jit
def _sweep_one(S, SN3, SN3a, B2, B2a, target, tau, max_depth, ms, src, wts, vrows, multinom, margins, Aq,
               cs, vx, dp, b0, m0, bad_point):  # pragma: no cover - compiled
    """One support's subdivision.  Returns (status, pieces, n_open): 0 proved, 1 a point of P < 0 in bad_point.

    ``margins[0]`` holds sigma_j (G_j >= sigma_j A_j) and ``margins[1, 0]`` lambda_min(W) / (2 target)
    (:func:`noisealloc.solvers.sandwich_global.sigma_margins`); ``Aq`` the rows (a11, a12, a22) of the A_j.
    """
    sS = np.inf
    for v in range(4):
        sS = min(sS, margins[0, S[v]])
    cW = margins[1, 0]
    _root(S, SN3, SN3a, B2, B2a, target, ms, b0, m0)
    big = 0.0
    for r in range(35):
        # shift by the rounding bound once: every later coefficient is a convex combination of these
        cs[0, r] = b0[r] - tau * m0[r]
        if m0[r] > big:
            big = m0[r]
    for a in range(4):
        for v in range(4):
            vx[0, a, v] = 1.0 if a == v else 0.0
    dp[0] = 0
    top = 1
    pieces = 0
    n_open = 0
    while top > 0:
        top -= 1
        pieces += 1
        c = cs[top]
        ok = True
        for r in range(35):
            if c[r] < 0.0:
                ok = False
                break
        if ok:
            continue
        # the sigma bound V >= sigma_S lambda_min(W) / (2 lambda_min(A_p)) >= target on the whole piece, with
        # lambda_min(A_p) <= u^T A_p u / u^T u for the centroid's lowest eigenvector u (linear in p: the
        # maximum over the piece's corners bounds it)
        if sS > 0.0:
            c11 = 0.0
            c12 = 0.0
            c22 = 0.0
            for a in range(4):
                for v in range(4):
                    w = 0.25 * vx[top, a, v]
                    c11 += w * Aq[S[v], 0]
                    c12 += w * Aq[S[v], 1]
                    c22 += w * Aq[S[v], 2]
            # lowest eigenvector of [[c11, c12], [c12, c22]]
            half = 0.5 * (c11 - c22)
            rad = np.sqrt(half * half + c12 * c12)
            if half >= 0.0:
                u0, u1 = c12, -(half + rad)
            else:
                u0, u1 = (rad - half), -c12
            uu = u0 * u0 + u1 * u1
            if uu == 0.0:
                u0, u1, uu = 1.0, 0.0, 1.0
            ray = 0.0
            for a in range(4):
                r11 = 0.0
                r12 = 0.0
                r22 = 0.0
                for v in range(4):
                    r11 += vx[top, a, v] * Aq[S[v], 0]
                    r12 += vx[top, a, v] * Aq[S[v], 1]
                    r22 += vx[top, a, v] * Aq[S[v], 2]
                q = (u0 * u0 * r11 + 2.0 * u0 * u1 * r12 + u1 * u1 * r22) / uu
                q = q * (1.0 + 1e-9) + 1e-14 * (abs(r11) + abs(r22) + 2.0 * abs(r12))
                if q > ray:
                    ray = q
            if ray > 0.0 and sS * cW >= ray:
                continue
        # a vertex or the centroid of the piece clearly below zero: an allocation with V < target
        worst = -1
        for a in range(4):
            if c[vrows[a]] < -2.0 * tau * big:
                worst = a
        if worst >= 0:
            for v in range(4):
                bad_point[v] = vx[top, worst, v]
            return 1, pieces, n_open
        pc = 0.0
        for r in range(35):
            pc += c[r] * multinom[r]
        if pc < -2.0 * tau * big * 256.0:
            for v in range(4):
                bad_point[v] = 0.25 * (vx[top, 0, v] + vx[top, 1, v] + vx[top, 2, v] + vx[top, 3, v])
            return 1, pieces, n_open
        d = dp[top]
        if d >= max_depth:
            n_open += 1
            continue
        ea, eb, best = 0, 1, -1.0
        for a in range(4):
            for bb in range(a + 1, 4):
                ln = 0.0
                for v in range(4):
                    ln += (vx[top, a, v] - vx[top, bb, v]) ** 2
                if ln > best:
                    best, ea, eb = ln, a, bb
        # child 2 (vertex ea replaced) into the next slot, child 1 (vertex eb replaced) in place
        _gather(c, src[eb, ea], wts[eb, ea], cs[top + 1])
        _gather(c, src[ea, eb], wts[ea, eb], b0)
        for r in range(35):
            cs[top, r] = b0[r]
        for a in range(4):
            for v in range(4):
                vx[top + 1, a, v] = vx[top, a, v]
        for v in range(4):
            mid = 0.5 * (vx[top, ea, v] + vx[top, eb, v])
            vx[top + 1, ea, v] = mid
            vx[top, eb, v] = mid
        dp[top] = d + 1
        dp[top + 1] = d + 1
        top += 2
    return 0, pieces, n_open


@jit(parallel=True)
def bernstein_sweep(L, SN3, SN3a, B2, B2a, target, tau, max_depth, max_pieces,
                    ms, src, wts, vrows, multinom, margins, Aq):  # pragma: no cover - compiled
    """Prove :math:`P \\ge 0` on the simplex of every set of 4 entries of the level list ``L``
    (``len(L) >= 4``; a grid of fewer levels is padded with repeats, which only duplicates a vertex).

    Every coefficient is first lowered by ``tau`` times its magnitude (the rounding bound of the root
    coefficients and of ``max_depth`` subdivisions: subdivided coefficients are convex combinations of the
    root's, each adding at most a few ulps of that magnitude), so "proved" is "all shifted coefficients
    >= 0".  Supports are split over numba's threads in blocks.

    Returns ``(status, pieces, bad_support, bad_point, n_open)``: status 0 proved, 1 a point with
    :math:`P < 0` (``bad_support``, barycentric ``bad_point``), 2 pieces left open at ``max_depth`` or
    the budget ``max_pieces`` spent (``n_open``).
    """
    nL = L.shape[0]
    total = _n_sets(nL)
    nblk = 64
    blk_status = np.zeros(nblk, np.int64)
    blk_pieces = np.zeros(nblk, np.int64)
    blk_open = np.zeros(nblk, np.int64)
    blk_S = np.zeros((nblk, 4), np.int64)
    blk_x = np.zeros((nblk, 4))
    depth_cap = max_depth + 2
    per = (total + nblk - 1) // nblk
    budget = max_pieces // nblk + 1
    for blk in prange(nblk):
        cs = np.empty((depth_cap, 35))
        vx = np.empty((depth_cap, 4, 4))
        dp = np.empty(depth_cap, np.int64)
        b0 = np.empty(35)
        m0 = np.empty(35)
        bp = np.zeros(4)
        S = np.empty(4, np.int64)
        q0 = blk * per
        q1 = min(total, q0 + per)
        for q in range(q0, q1):
            _unrank(q, nL, L, S)
            st, pcs, no = _sweep_one(S, SN3, SN3a, B2, B2a, target, tau, max_depth, ms, src, wts, vrows,
                                     multinom, margins, Aq, cs, vx, dp, b0, m0, bp)
            blk_pieces[blk] += pcs
            blk_open[blk] += no
            if st == 1:
                blk_status[blk] = 1
                for v in range(4):
                    blk_S[blk, v] = S[v]
                    blk_x[blk, v] = bp[v]
                break
            if blk_pieces[blk] > budget:
                blk_open[blk] += 1
                break
    pieces = 0
    n_open = 0
    for blk in range(nblk):
        pieces += blk_pieces[blk]
        n_open += blk_open[blk]
    for blk in range(nblk):
        if blk_status[blk] == 1:
            return 1, pieces, blk_S[blk], blk_x[blk], n_open
    return (0 if n_open == 0 else 2), pieces, blk_S[0], blk_x[0], n_open
