r"""Importance-sampled Monte Carlo for Dirac mixtures: boundary layers covered at every level (THEORY.md section 3.1).

Plain sampling of :math:`(k, x)`, :math:`k \sim \pi`, :math:`x = \mu_k + \sigma\varepsilon`, almost never
lands in the boundary layers between atoms at high SNR, where the MMSE lives.  The proposal here is
the defensive mixture (same draws at every level: common random numbers)

.. math::

    q(k, x) = (1 - \beta)\,\pi_k\,\phi_\sigma(x - \mu_k)
        + \beta \sum_{p \ni k} \rho_p\,\tfrac12\,\phi_\sigma(x - m_p),

over pairs :math:`p = \{a, b\}` of nearby atoms (each atom with its ``n_neighbours`` nearest
neighbours, so it scales to 10,000 atoms), :math:`m_p = (\mu_a + \mu_b)/2`,
:math:`\rho_p` from the requested levels (:func:`pair_weights`), and :math:`\beta = 1/2`: with probability :math:`1 - \beta` a
draw is a plain one, otherwise a pair :math:`p \sim \rho`, one of its atoms :math:`k` with
probability 1/2, and :math:`x = m_p + \sigma\varepsilon`.  The target is
:math:`p(k, x) = \pi_k\,\phi_\sigma(x - \mu_k)`, so the weight

.. math::

    \omega = \frac{p(k, x)}{q(k, x)} = \Big[(1-\beta) + \beta \sum_{p \ni k}
        \frac{\rho_p}{2\pi_k}\, e^{-(\|x - m_p\|^2 - \|x - \mu_k\|^2)/2\sigma^2}\Big]^{-1} \le \frac{1}{1-\beta} = 2,

and the per-sample values :math:`\omega\,\tfrac12\sum_j w_j(x)\|\mu_j - \mu_k\|^2` (trace identity:
its conditional mean given :math:`x` is :math:`\mathrm{tr}\,C(x)`) and :math:`\omega\,\mathcal H(w(x))`
have means :math:`\mathrm{mmse}(\lambda)` and :math:`H(\lambda)`; each level subtracts the control
variate :math:`c\,(\omega - 1)` (:math:`E_q\omega = 1`, :math:`c` by regression), which removes the
weights' noise at low SNR.  Distances come from GEMMs per block of samples (level-independent: the
centres and the noises against all atoms, and the true atoms of the midpoint draws), then one compiled
pass per level (:func:`_level_values_numba`; numpy reference :func:`_level_values_numpy`); memory is
bounded by :data:`MAX_BLOCK_ENTRIES` float64 entries per array.  The pairs come from an exact
nearest-neighbour search screened in float32 (:func:`neighbour_pairs`).
"""

from __future__ import annotations

import math
import time

import numpy as np

from noisealloc.theory._empirical_kernels import _CH, _W, _level_sums, _max_logit, _pad
from noisealloc.theory._numba import jit, prange

__all__: list[str] = []

#: Largest number of entries of one (samples x atoms) float64 array (32 MB).
MAX_BLOCK_ENTRIES = 1 << 22
#: Nearest neighbours per atom that define the proposal's pairs.
N_NEIGHBOURS = 4
#: Defensive share beta of the pair component (weights are bounded by 1 / (1 - beta)).
DEFENSIVE = 0.5
#: Share of the pair draws spread over all pairs (the rest follows the levels' boundary mass).
PAIR_FLOOR = 0.1
_REFINE = 64 * np.finfo(np.float64).eps


#: Screening candidates kept per atom by the float32 pass of :func:`neighbour_pairs` (before the exact check).
SCREEN_CANDIDATES = 16
_EPS32 = float(np.finfo(np.float32).eps)


@jit
def _screen_insert(top_v, top_i, i, d, j):
    """Insert candidate ``j`` at screening distance ``d`` into atom ``i``'s sorted list (if it beats the last)."""
    M = top_v.shape[1]
    if d < top_v[i, M - 1] and j != i:
        q = M - 1
        while q > 0 and top_v[i, q - 1] > d:
            top_v[i, q] = top_v[i, q - 1]
            top_i[i, q] = top_i[i, q - 1]
            q -= 1
        top_v[i, q] = d
        top_i[i, q] = j


# Columns per task of the transposed update: 16 float32 = one 64-byte cache line of each row of g.
_COLS_PER_TASK = 16


@jit(parallel=True)
def _screen_update_numba(g, sq_rows, sq_cols, row0, col0, top_v, top_i, transposed):
    """Fold the screening distances ``sq_r + sq_c - 2 g`` of one (rows x cols) block into the sorted lists
    of the ``M`` smallest (``top_v``, ``top_i``: (K, M)) of the row atoms, or with ``transposed`` of the
    column atoms (read a cache line of columns at a time: no transposed copy); the atom itself is skipped."""
    R, C = g.shape
    if not transposed:
        for r in prange(R):
            for c in range(C):
                _screen_insert(top_v, top_i, row0 + r, (sq_rows[r] + sq_cols[c]) - 2.0 * np.float64(g[r, c]), col0 + c)
    else:
        for task in prange((C + _COLS_PER_TASK - 1) // _COLS_PER_TASK):
            c0 = task * _COLS_PER_TASK
            c1 = min(C, c0 + _COLS_PER_TASK)
            for r in range(R):
                for c in range(c0, c1):
                    _screen_insert(top_v, top_i, col0 + c, (sq_rows[r] + sq_cols[c]) - 2.0 * np.float64(g[r, c]),
                                   row0 + r)


def _screen_update_numpy(g, sq_rows, sq_cols, row0, col0, top_v, top_i, transposed):
    """Reference of :func:`_screen_update_numba` (same contract; ties may be kept in another order)."""
    if transposed:
        g, sq_rows, sq_cols, row0, col0 = g.T, sq_cols, sq_rows, col0, row0
    R, C = g.shape
    M = top_v.shape[1]
    d = sq_rows[:, None] + sq_cols[None, :] - 2.0 * g.astype(np.float64)
    rows = np.arange(row0, row0 + R)
    cols = np.arange(col0, col0 + C)
    d[rows[:, None] == cols[None, :]] = np.inf
    v = np.concatenate([top_v[row0:row0 + R], d], axis=1)
    ix = np.concatenate([top_i[row0:row0 + R], np.broadcast_to(cols, (R, C))], axis=1)
    o = np.argsort(v, axis=1, kind="stable")[:, :M]
    top_v[row0:row0 + R] = np.take_along_axis(v, o, axis=1)
    top_i[row0:row0 + R] = np.take_along_axis(ix, o, axis=1)


@jit(parallel=True)
def _direct_sq_numba(mu, a, b, out):
    """``out[p] = ||mu_a[p] - mu_b[p]||^2`` summed directly (compiled: no gathered (P, D) copies)."""
    for p in prange(a.size):
        x = 0.0
        for d in range(mu.shape[1]):
            v = mu[a[p], d] - mu[b[p], d]
            x += v * v
        out[p] = x


def _direct_sq(mu, a, b):
    """||mu_a - mu_b||^2 summed directly in float64 (no cancellation): compiled, or numpy in chunks of bounded
    memory (the two differ only in the order of the sum's rounding)."""
    from noisealloc.theory._numba import HAVE_NUMBA

    out = np.empty(a.size)
    if HAVE_NUMBA:
        _direct_sq_numba(mu, a, b, out)
        return out
    step = max(1, MAX_BLOCK_ENTRIES // max(mu.shape[1], 1))
    for s in range(0, a.size, step):
        diff = mu[a[s:s + step]] - mu[b[s:s + step]]
        out[s:s + step] = np.einsum("pd,pd->p", diff, diff)
    return out


def neighbour_pairs(mu: np.ndarray, n_neighbours: int = N_NEIGHBOURS, *, screen: int = SCREEN_CANDIDATES,
                    kernel: str = "auto"):
    r"""Unordered pairs (P, 2), each atom with its ``n_neighbours`` nearest, and their squared distances (P,).

    The result is that of the exact search with distances :math:`\|\mu_i - \mu_j\|^2` summed directly
    in float64 (ties broken by the smaller index), found cheaply in two stages:

    1. **float32 screen.**  One float32 GEMM per pair of atom blocks (the upper triangle only:
       the Gram matrix is symmetric) gives :math:`\tilde d_{ij} = s_i + s_j - 2\,\mathrm{fl}_{32}(\mu_i
       \cdot \mu_j)`, :math:`s_i = \|\mu_i\|^2` in float64; each atom keeps its ``screen`` smallest.
       Rounding the inputs to float32 and a float32 dot product of :math:`D` terms err by at most
       :math:`(D + 3)\,u\,|\mu_i||\mu_j|` (:math:`u = 2^{-24}`), so

       .. math::

           |\tilde d_{ij} - d_{ij}| \le e_{ij} = (D + 4)\,\varepsilon_{32}\,(s_i + s_j)

       (a factor ~2 above that bound), computed on the atoms scaled by a power of two to
       :math:`|\mu_{id}| \le 1` (exact: no float32 overflow), plus :math:`(D + 4)\,2^{-125}` for
       float32's subnormal range.
    2. **exact check.**  With :math:`U_i` the ``n_neighbours``-th smallest :math:`\tilde d_{ij} + e_{ij}`
       over the kept ones (an upper bound on the true ``n_neighbours``-th distance), every true
       neighbour has :math:`\tilde d_{ij} - e_{ij} \le U_i`.  If the kept list's largest value
       :math:`v_i` satisfies :math:`v_i - (D + 4)\,\varepsilon_{32}(s_i + \max_j s_j) > U_i`, no atom
       outside the list can qualify, and the kept candidates with :math:`\tilde d_{ij} - e_{ij} \le U_i`
       get their exact distance; otherwise (never seen on MNIST or digits) the atom's distances to
       all atoms are computed exactly.

    On MNIST (K = 10,000, D = 784) this is a float32 half-Gram instead of a float64 full Gram with a
    (K x K) argpartition.  The proposal of :func:`importance_samples` is valid for any pairs (its
    weights are the density ratio of the pairs actually used); exactness keeps the pairs those of
    the plain nearest-neighbour definition.

    Parameters
    ----------
    mu : ndarray, shape (K, D)
        Atoms (float64).
    n_neighbours : int
        Neighbours per atom.
    screen : int
        Candidates kept per atom by the float32 screen (``>= n_neighbours``).
    kernel : {'auto', 'numba', 'numpy'}
        The screen's implementation (the result does not depend on it).

    Returns
    -------
    pairs : ndarray, shape (P, 2), int64
        ``pairs[:, 0] < pairs[:, 1]``, sorted.
    d2 : ndarray, shape (P,)
        Their squared distances (direct float64 sums).
    """
    from noisealloc.theory._numba import HAVE_NUMBA

    K, D = mu.shape
    nn = min(n_neighbours, K - 1)
    if nn < 1:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0)
    M = min(max(int(screen), nn), K - 1)
    update = _screen_update_numba if (kernel == "numba" or (kernel == "auto" and HAVE_NUMBA)) else _screen_update_numpy
    # The screen works on the atoms scaled by a power of two (exact) to |coordinates| <= 1: no float32
    # overflow, and underflow only below 2**-126 of the largest coordinate (the bound's absolute term).
    big = float(np.max(np.abs(mu)))
    scale = math.ldexp(1.0, -math.frexp(big)[1]) if big > 0 else 1.0
    mu32 = (mu * scale).astype(np.float32)
    sq = np.einsum("kd,kd->k", mu, mu) * scale * scale
    top_v = np.full((K, M), np.inf)
    top_i = np.full((K, M), -1, dtype=np.int64)
    bs = max(1, int(math.isqrt(MAX_BLOCK_ENTRIES)))
    for s in range(0, K, bs):
        rs = slice(s, min(K, s + bs))
        for t in range(s, K, bs):
            cs = slice(t, min(K, t + bs))
            g = mu32[rs] @ mu32[cs].T
            update(g, sq[rs], sq[cs], s, t, top_v, top_i, False)
            if t != s:
                update(g, sq[rs], sq[cs], s, t, top_v, top_i, True)
    tiny = (D + 4) * 2.0**-125  # float32 subnormals: absolute rounding of inputs and products
    err = (D + 4) * _EPS32 * (sq[:, None] + sq[np.maximum(top_i, 0)]) + tiny
    upper = np.partition(top_v + err, nn - 1, axis=1)[:, nn - 1]
    cand = (top_v - err <= upper[:, None]) & (top_i >= 0)
    complete = (M == K - 1) | (top_v[:, -1] - (D + 4) * _EPS32 * (sq + sq.max()) - tiny > upper)
    ri, ci = np.nonzero(cand & complete[:, None])
    rows, cols = ri, top_i[ri, ci]
    lost = np.flatnonzero(~complete)
    if lost.size:
        every = np.arange(K)
        extra_r = np.repeat(lost, K - 1)
        extra_c = np.concatenate([every[every != i] for i in lost])
        rows, cols = np.concatenate([rows, extra_r]), np.concatenate([cols, extra_c])
    d2 = _direct_sq(mu, rows, cols)
    o = np.lexsort((cols, d2, rows))  # by row, then distance, then index
    rows, cols, d2 = rows[o], cols[o], d2[o]
    first = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    rank = np.arange(rows.size) - np.repeat(first, np.diff(np.r_[first, rows.size]))
    sel = rank < nn
    pairs, idx = np.unique(np.sort(np.stack([rows[sel], cols[sel]], axis=1), axis=1), axis=0, return_index=True)
    return pairs, d2[sel][idx]


def pair_weights(mu, w, pairs, lam, floor: float = PAIR_FLOOR, *, d2=None) -> np.ndarray:
    r"""Pair probabilities :math:`\rho_p`: each level's Bhattacharyya share of the boundary mass, averaged.

    .. math::

        \rho_p = (1 - f)\,\frac1L \sum_t \frac{s_p(\lambda_t)}{\sum_{p'} s_{p'}(\lambda_t)}
            + f\,\frac{\pi_a + \pi_b}{\sum_{p'} (\pi_{a'} + \pi_{b'})}, \qquad
        s_p(\lambda) = \sqrt{\pi_a\pi_b}\,e^{-d_p^2 e^\lambda/8},

    so that at every requested level the pairs that carry its boundary mass get draws (the closest
    pairs dominate exponentially at high SNR), with a floor ``f`` on every pair.  ``d2``: the pairs'
    squared distances if already known (else formed here from the atoms).
    """
    a, b = pairs[:, 0], pairs[:, 1]
    if d2 is None:
        diff = mu[a] - mu[b]
        d2 = np.einsum("pd,pd->p", diff, diff)
    base = 0.5 * (np.log(w[a]) + np.log(w[b]))
    ls = base[None, :] - d2[None, :] * np.exp(np.asarray(lam, dtype=np.float64).reshape(-1))[:, None] / 8.0
    ls -= ls.max(axis=1, keepdims=True)
    share = np.exp(ls)
    share /= share.sum(axis=1, keepdims=True)
    uni = w[a] + w[b]
    rho = (1.0 - floor) * share.mean(axis=0) + floor * uni / uni.sum()
    return rho / rho.sum()


def _midpoints(mu, pairs, which):
    """Midpoints (mu_a + mu_b) / 2 of the pairs ``pairs[which]``."""
    return 0.5 * (mu[pairs[which, 0]] + mu[pairs[which, 1]])


def _sq_dist(c, mu, c_sq, mu_sq):
    """||c_i - mu_j||^2 by GEMM, small entries recomputed directly (cancellation)."""
    a = c @ mu.T
    a *= -2.0  # in place: no (R x K) temporaries; rounding as (c_sq + mu_sq) - 2 g up to the order of the sum
    a += c_sq[:, None]
    a += mu_sq[None, :]
    np.maximum(a, 0.0, out=a)
    # Entries to recompute: a < r (c_sq_i + mu_sq_j).  A row-wise threshold with the largest mu_sq finds a
    # superset in one pass; the exact test runs on it alone.
    r = _REFINE * (mu.shape[1] + 2)
    ri, ci = np.nonzero(a < (r * (c_sq + mu_sq.max()))[:, None])
    keep = a[ri, ci] < r * (c_sq[ri] + mu_sq[ci])
    ri, ci = ri[keep], ci[keep]
    if ri.size:
        diff = c[ri] - mu[ci]
        a[ri, ci] = np.einsum("ij,ij->i", diff, diff)
    return a


def _level_values_numpy(A, B, T, log_w, lam, h_out, m_out):
    r"""Per level ``t`` and row ``i``: posterior entropy and half the trace-identity sum (numpy reference).

    .. math::

        l_{ij} = \log\pi_j - \frac{A_{ij} + 2\sigma_t B_{ij}}{2\sigma_t^2}, \quad w_{ij} = \frac{e^{l_{ij}}}
        {\sum_{j'} e^{l_{ij'}}}, \quad h_{ti} = -\sum_j w_{ij}\log w_{ij}, \quad m_{ti} = \tfrac12\sum_j w_{ij} T_{ij},

    :math:`\sigma_t = e^{-\lambda_t/2}` (log-sum-exp with the row maximum as shift; ``h`` floored at 0).
    """
    sig2 = np.exp(-lam)
    sig = np.exp(-0.5 * lam)
    for t in range(lam.size):
        logits = log_w[None, :] - (A + 2.0 * sig[t] * B) / (2.0 * sig2[t])
        sh = logits - logits.max(axis=1, keepdims=True)
        ex = np.exp(sh)
        z = ex.sum(axis=1)
        h_out[t] = np.maximum(np.log(z) - (ex * sh).sum(axis=1) / z, 0.0)
        m_out[t] = 0.5 * (ex * T).sum(axis=1) / z


@jit(parallel=True)
def _level_values_numba(A, B, T, log_w, lam, h_out, m_out):
    """:func:`_level_values_numpy` compiled: rows in parallel, each row's logits formed as
    ``log pi_j - a_t A_ij - b_t B_ij`` (``a_t = e^lam / 2``, ``b_t = e^(lam/2)``, the same numbers up to
    rounding) and summed by the plain engine's vectorised exp and lane sums
    (:func:`noisealloc.theory._empirical_kernels._level_sums`, shift = the row's largest logit)."""
    R, K = A.shape
    k_pad = ((K + _CH - 1) // _CH) * _CH
    for i in prange(R):
        c = np.empty(k_pad)
        a_row = np.empty(k_pad)
        b_row = np.empty(k_pad)
        t_row = np.zeros(k_pad)
        buf = np.empty(3 * _CH)
        acc = np.empty(3 * _W)
        for j in range(K):
            c[j] = log_w[j]
            a_row[j] = A[i, j]
            b_row[j] = B[i, j]
            t_row[j] = T[i, j]
        _pad(c, a_row, b_row, K)
        for t in range(lam.shape[0]):
            a = 0.5 * math.exp(lam[t])
            b = math.exp(0.5 * lam[t])
            mx = _max_logit(c, a_row, b_row, K, a, b, acc)
            z, ts, u = _level_sums(c, a_row, b_row, t_row, K, a, b, mx, buf, acc)
            h = math.log(z) - ts / z
            h_out[t, i] = h if h > 0.0 else 0.0
            m_out[t, i] = 0.5 * u / z


def importance_samples(mu, w, lam, *, n_samples: int, gen, n_neighbours: int = N_NEIGHBOURS,
                       defensive: float = DEFENSIVE, kernel: str = "auto"):
    """Per-sample weighted (entropy, mmse) arrays (L, n) and the proposal's description (module docstring).

    ``kernel``: ``'auto'`` (numba when available), ``'numba'`` or ``'numpy'`` for the per-level
    passes (:func:`_level_values_numpy` is the reference); the draws do not depend on it.
    """
    from noisealloc.theory._numba import HAVE_NUMBA

    use_numba = kernel == "numba" or (kernel == "auto" and HAVE_NUMBA)
    level_values = _level_values_numba if use_numba else _level_values_numpy
    from noisealloc.theory._limits import live_coordinates

    K, D = mu.shape
    # Centred (smaller norms, smaller GEMM rounding), on the coordinates where the atoms differ: the
    # others add exactly 0 to every distance below (MNIST: 116 of 784).  The noises are drawn in all D.
    live = live_coordinates(mu)
    mu = mu[:, live] - (w @ mu)[live]
    # Timings (wall, CPU) of the three costly stages, reported in ``info`` (bench posterior prints them).
    clock = {"neighbours": [0.0, 0.0], "gemm": [0.0, 0.0], "levels": [0.0, 0.0]}

    def lap(stage, since):
        now = (time.perf_counter(), time.process_time())
        clock[stage][0] += now[0] - since[0]
        clock[stage][1] += now[1] - since[1]
        return now

    t0 = lap("neighbours", (time.perf_counter(), time.process_time()))
    pairs, pair_d2 = neighbour_pairs(mu, n_neighbours)
    lap("neighbours", t0)
    P = pairs.shape[0]
    n = int(n_samples)
    log_w = np.log(w)
    # --- draws (level independent) ---
    lam = np.asarray(lam, dtype=np.float64)
    if P:
        # The search's distances are direct float64 sums: no (P x D) gather of pair differences (MNIST:
        # 30,000 x 784, 0.9 s).
        rho = pair_weights(mu, w, pairs, lam, d2=pair_d2)
        branch = gen.random(n) < defensive
        k = gen.choice(K, size=n, p=w)
        pid = gen.choice(P, size=n, p=rho)
        side = gen.integers(0, 2, size=n)
        k = np.where(branch, pairs[pid, side], k)
        # Midpoints only of the pairs drawn (and below, of the pairs incident to a sample's atom): the
        # full (P, D) array is a 190 MB gather on MNIST.
        centre = np.where(branch[:, None], _midpoints(mu, pairs, pid), mu[k])
    else:
        rho = np.zeros(0)
        branch = np.zeros(n, bool)
        k = gen.choice(K, size=n, p=w)
        centre = mu[k]
    eps_all = gen.standard_normal((n, D))
    eps = eps_all[:, live]
    # incident pairs of every atom, padded with -1
    deg = np.bincount(pairs.ravel(), minlength=K) if P else np.zeros(K, np.int64)
    maxdeg = int(deg.max()) if P else 0
    inc = np.full((K, max(maxdeg, 1)), -1, dtype=np.int64)
    if P:  # each atom's pairs in increasing pair order (a stable sort of the endpoints; no Python loop)
        ends = pairs.ravel()
        order = np.argsort(ends, kind="stable")
        atom = ends[order]
        slot = np.arange(atom.size) - np.searchsorted(atom, atom, side="left")
        inc[atom, slot] = order // 2
    L = lam.size
    sig2 = np.exp(-lam)
    sig = np.exp(-0.5 * lam)
    ent = np.zeros((L, n))
    mmse = np.zeros((L, n))
    weights = np.ones((L, n))
    mu_sq = np.einsum("kd,kd->k", mu, mu)
    rows = max(1, MAX_BLOCK_ENTRIES // max(K, maxdeg, 1))
    for s in range(0, n, rows):
        t0 = (time.perf_counter(), time.process_time())
        sl = slice(s, min(n, s + rows))
        c, e, kk = centre[sl], eps[sl], k[sl]
        c_sq = np.einsum("kd,kd->k", c, c)
        A = _sq_dist(c, mu, c_sq, mu_sq)  # ||c - mu_j||^2
        B = e @ mu.T
        np.subtract(np.einsum("id,id->i", e, c)[:, None], B, out=B)  # eps . (c - mu_j), in place
        # ||mu_k - mu_j||^2 (trace identity): on a plain draw c = mu_k, so T = A (whose entry k is exactly 0:
        # the refinement recomputes it directly); a GEMM only for the midpoint draws' rows.
        T = A.copy()
        mid = np.flatnonzero(branch[sl])
        if mid.size:
            T[mid] = _sq_dist(mu[kk[mid]], mu, mu_sq[kk[mid]], mu_sq)
        T[np.arange(kk.size), kk] = 0.0
        # proposal terms of the incident pairs: e1 = ||c - m_p||^2 - ||c - mu_k||^2, e2 = eps.(mu_k - m_p)
        slots = inc[kk]  # (R, maxdeg)
        e1 = np.zeros(slots.shape)
        e2 = np.zeros(slots.shape)
        valid = slots >= 0
        ck = c - mu[kk]
        ck2 = np.einsum("id,id->i", ck, ck)
        for j in range(slots.shape[1]):
            ok = valid[:, j]
            if not np.any(ok):
                continue
            mp = _midpoints(mu, pairs, slots[ok, j])
            cm = c[ok] - mp
            e1[ok, j] = np.einsum("id,id->i", cm, cm) - ck2[ok]
            e2[ok, j] = np.einsum("id,id->i", e[ok], mu[kk[ok]] - mp)
        with np.errstate(divide="ignore"):
            lr = np.where(valid, np.log(rho[np.maximum(slots, 0)] if P else np.ones(slots.shape))
                          - math.log(2.0) - log_w[kk][:, None], -np.inf)
        h_blk = np.empty((L, kk.size))
        m_blk = np.empty((L, kk.size))
        t0 = lap("gemm", t0)
        level_values(A, B, T, log_w, lam, h_blk, m_blk)
        lap("levels", t0)
        for t in range(L):
            h_val, m_val = h_blk[t], m_blk[t]
            if P:
                expo = lr - (e1 + 2.0 * sig[t] * e2) / (2.0 * sig2[t])
                top = np.max(expo, axis=1)
                with np.errstate(invalid="ignore"):
                    log_s = np.where(np.isneginf(top), -np.inf,
                                     top + np.log(np.sum(np.exp(expo - np.where(np.isneginf(top), 0.0, top)[:, None]),
                                                         axis=1)))
                log_omega = -np.logaddexp(math.log1p(-defensive), math.log(defensive) + log_s)
                omega = np.exp(log_omega)
            else:
                omega = np.ones(kk.size)
            ent[t, sl] = omega * h_val
            mmse[t, sl] = omega * m_val
            weights[t, sl] = omega
    # Control variate: E_q[omega] = 1 exactly, so v_i = omega_i f_i - c (omega_i - 1) has the same mean;
    # c = Cov(omega f, omega) / Var(omega) per level (the regression estimator; its O(1/n) bias is far
    # below the standard error).  At low SNR, where f is nearly constant and omega is not, this removes
    # the weights' noise; at high SNR c is ~0 and nothing changes.
    dw = weights - weights.mean(axis=1, keepdims=True)
    var_w = np.einsum("ln,ln->l", dw, dw)
    for vals in (ent, mmse):
        cov = np.einsum("ln,ln->l", vals - vals.mean(axis=1, keepdims=True), dw)
        c = np.where(var_w > 0, cov / np.where(var_w > 0, var_w, 1.0), 0.0)
        vals -= c[:, None] * (weights - 1.0)
    info = {"estimator": "importance-sampled trace identity", "proposal": "defensive nearest-neighbour midpoints",
            "n_pairs": int(P), "n_neighbours": int(n_neighbours), "defensive": float(defensive),
            "pair_draws": int(branch.sum()), "kernel": "numba" if use_numba else "numpy"}
    for stage, (wall, cpu) in clock.items():
        info[f"seconds_{stage}"] = wall  # wall seconds: neighbour search; distance GEMMs and proposal terms; level passes
        info[f"seconds_cpu_{stage}"] = cpu  # CPU seconds of the process (all threads)
    return ent, mmse, k, eps_all, info
