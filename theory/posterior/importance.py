r"""Importance-sampled Monte Carlo for Dirac mixtures: boundary layers covered at every level (docs/THEORY.md section 3.1).

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
centres and the noises against all atoms, and the true atoms of the midpoint draws), run by worker
threads that then assemble each row's distances and pass over every level while the row is in cache
(:func:`_values_numba`, with the plain engine's level loop; numpy reference :func:`_values_numpy`);
memory is bounded by :data:`MAX_BLOCK_ENTRIES` float64 entries per array.  The pairs come from an
exact nearest-neighbour search screened in float32 on principal directions (:func:`neighbour_pairs`).
"""

from __future__ import annotations

import math
import time

import numpy as np

from noisealloc.theory.posterior._engine_kernels import _CH, _W, _row_levels, near_thresholds, values_from_states
from noisealloc.theory._numba import jit

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
SCREEN_CANDIDATES = 32
#: Principal directions on which :func:`neighbour_pairs` screens (all coordinates when ``D`` is not larger).
SCREEN_RANK = 192
#: Atoms whose covariance gives those directions (every ``ceil(K / this)``-th atom).
_BASIS_ATOMS = 1024
#: Atoms per side of one screening GEMM block.
_SCREEN_BLOCK = 1024
_EPS32 = float(np.finfo(np.float32).eps)
_EPS64 = float(np.finfo(np.float64).eps)


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


@jit(nogil=True)
def _screen_block_numba(g, sq_rows, sq_cols, res_rows, res_cols, row0, col0, top_v, top_i, both):
    """Fold the screening values ``sq_r + sq_c - 2 g + (res_r - res_c)^2`` of one (rows x cols) block into
    the sorted lists of the ``M`` smallest (``top_v``, ``top_i``: (K, M)) of the row atoms and, with
    ``both``, of the column atoms too; the atom itself is skipped.  A row's values are formed in one
    vectorised loop, then compared with the row's and the columns' current last entries (inserts are
    rare once the lists fill).  One thread (``nogil``: the workers of :func:`_screen` run it at once
    on their own lists)."""
    R, C = g.shape
    M = top_v.shape[1]
    buf = np.empty(C)
    thr_col = np.empty(C)
    for c in range(C):
        thr_col[c] = top_v[col0 + c, M - 1]
    for r in range(R):
        s_r = sq_rows[r]
        e_r = res_rows[r]
        for c in range(C):
            dr = e_r - res_cols[c]
            buf[c] = (s_r + sq_cols[c]) - 2.0 * np.float64(g[r, c]) + dr * dr
        i = row0 + r
        thr = top_v[i, M - 1]
        for c in range(C):
            d = buf[c]
            if d < thr:
                _screen_insert(top_v, top_i, i, d, col0 + c)
                thr = top_v[i, M - 1]
            if both and d < thr_col[c]:
                _screen_insert(top_v, top_i, col0 + c, d, i)
                thr_col[c] = top_v[col0 + c, M - 1]


def _screen_block_numpy(g, sq_rows, sq_cols, res_rows, res_cols, row0, col0, top_v, top_i, both):
    """Reference of :func:`_screen_block_numba` (same contract; ties may be kept in another order)."""
    M = top_v.shape[1]
    d = (sq_rows[:, None] + sq_cols[None, :] - 2.0 * g.astype(np.float64)
         + (res_rows[:, None] - res_cols[None, :]) ** 2)
    for d_, r0, c0 in ((d, row0, col0), (d.T, col0, row0))[: 2 if both else 1]:
        R, C = d_.shape
        rows = np.arange(r0, r0 + R)
        cols = np.arange(c0, c0 + C)
        d_ = np.where(rows[:, None] == cols[None, :], np.inf, d_)
        v = np.concatenate([top_v[r0:r0 + R], d_], axis=1)
        ix = np.concatenate([top_i[r0:r0 + R], np.broadcast_to(cols, (R, C))], axis=1)
        o = np.argsort(v, axis=1, kind="stable")[:, :M]
        top_v[r0:r0 + R] = np.take_along_axis(v, o, axis=1)
        top_i[r0:r0 + R] = np.take_along_axis(ix, o, axis=1)


@jit(nogil=True)
def _direct_sq_rows(part, lo, hi, mu, a, b, out):
    """``out[p] = ||mu_a[p] - mu_b[p]||^2`` summed directly for ``p`` in ``[lo, hi)`` (compiled: no gathered
    (P, D) copies; one thread, no GIL)."""
    for p in range(lo, hi):
        x = 0.0
        for d in range(mu.shape[1]):
            v = mu[a[p], d] - mu[b[p], d]
            x += v * v
        out[p] = x


def _direct_sq(mu, a, b):
    """||mu_a - mu_b||^2 summed directly in float64 (no cancellation): compiled, or numpy in chunks of bounded
    memory (the two differ only in the order of the sum's rounding)."""
    from noisealloc.theory._numba import HAVE_NUMBA

    from noisealloc.theory.posterior._scan import split_rows

    out = np.empty(a.size)
    if HAVE_NUMBA:
        split_rows(a.size, _direct_sq_rows, mu, a, b, out)
        return out
    step = max(1, MAX_BLOCK_ENTRIES // max(mu.shape[1], 1))
    for s in range(0, a.size, step):
        diff = mu[a[s:s + step]] - mu[b[s:s + step]]
        out[s:s + step] = np.einsum("pd,pd->p", diff, diff)
    return out


def _screen_basis(mu: np.ndarray, rank: int):
    """Orthonormal (D, rank) basis of the leading principal directions of a subsample of the atoms.

    Any orthonormal basis keeps :func:`neighbour_pairs`' bound valid; a good one only makes the
    bound tight (MNIST, rank 192: 97 % of the variance).  The subsample (every ``ceil(K / 1024)``-th
    atom) keeps the covariance at 1024 x D^2 operations.
    """
    K, D = mu.shape
    sub = mu[:: -(-K // _BASIS_ATOMS)]
    sub = sub - sub.mean(axis=0)
    # All eigenpairs by divide and conquer: faster here than a subset by MRRR or bisection (measured).
    # Seconds for MNIST in one LAPACK call: on a helper thread, so that an interrupt is seen at once.
    from noisealloc.theory._threads import interruptible

    _, vecs = interruptible(np.linalg.eigh, sub.T @ sub)
    return np.ascontiguousarray(vecs[:, D - rank:])


def _screen(y32, sq, res, M, kernel_numba: bool):
    """The (K, M) smallest screening values ``sq_i + sq_j - 2 fl32(y_i . y_j) + (res_i - res_j)^2`` of every
    atom and their indices, from float32 GEMMs over the upper triangle of atom blocks.

    Compiled: worker threads (:func:`noisealloc.theory._threads.kernel_threads`) take blocks from a
    shared counter, each running single-threaded GEMMs (a threaded GEMM's workers poll for work after
    each call and take the cores from the updates) into lists of its own, merged at the end.
    """
    import threading

    from noisealloc.theory._threads import ChunkCounter, kernel_threads, run_stage_workers

    K = y32.shape[0]
    bs = _SCREEN_BLOCK
    tasks = [(s, t) for s in range(0, K, bs) for t in range(s, K, bs)]
    update = _screen_block_numba if kernel_numba else _screen_block_numpy
    threads = min(kernel_threads(), len(tasks)) if kernel_numba else 1
    halt = threading.Event()
    counter = ChunkCounter()

    def work(_w):
        top_v = np.full((K, M), np.inf)
        top_i = np.full((K, M), -1, dtype=np.int64)
        g_flat = np.empty(bs * bs, dtype=np.float32)
        for q, _ in counter.chunks(None, 0, len(tasks), 1, halt):
            s, t = tasks[q]
            rs, cs = slice(s, min(K, s + bs)), slice(t, min(K, t + bs))
            g = g_flat[: (rs.stop - s) * (cs.stop - t)].reshape(rs.stop - s, cs.stop - t)
            np.matmul(y32[rs], y32[cs].T, out=g)
            update(g, sq[rs], sq[cs], res[rs], res[cs], s, t, top_v, top_i, t != s)
        return top_v, top_i

    lists = run_stage_workers(threads, work, halt)
    if threads == 1:
        return lists[0]
    v = np.concatenate([lv for lv, _ in lists], axis=1)
    ix = np.concatenate([li for _, li in lists], axis=1)
    o = np.argsort(v, axis=1, kind="stable")[:, :M]
    return np.take_along_axis(v, o, axis=1), np.take_along_axis(ix, o, axis=1)


def neighbour_pairs(mu: np.ndarray, n_neighbours: int = N_NEIGHBOURS, *, screen: int = SCREEN_CANDIDATES,
                    rank: int = SCREEN_RANK, kernel: str = "auto"):
    r"""Unordered pairs (P, 2), each atom with its ``n_neighbours`` nearest, and their squared distances (P,).

    The result is that of the exact search with distances :math:`d_{ij} = \|\mu_i - \mu_j\|^2` summed
    directly in float64 (ties broken by the smaller index), found cheaply in three stages:

    1. **Lower bounds in a projection.**  With :math:`Q` an orthonormal (D, r) basis of the atoms'
       leading principal directions (:func:`_screen_basis`; :math:`r` = ``rank``; no projection when
       :math:`D \le r`), :math:`y_i = Q^\top\mu_i` and :math:`\rho_i = \|\mu_i - Q y_i\|`,

       .. math::

           d_{ij} = \|y_i - y_j\|^2 + \|(\mu_i - Q y_i) - (\mu_j - Q y_j)\|^2
               \ge \ell_{ij} = \|y_i - y_j\|^2 + (\rho_i - \rho_j)^2 .

    2. **float32 screen.**  One float32 GEMM per pair of atom blocks (the upper triangle only) gives
       :math:`\tilde\ell_{ij} = s_i + s_j - 2\,\mathrm{fl}_{32}(y_i \cdot y_j) + (\rho_i - \rho_j)^2`,
       :math:`s_i = \|y_i\|^2` in float64; each atom keeps its ``screen`` smallest.  In units scaled
       by a power of two to :math:`|y_{id}| \le 1` (exact: no float32 overflow), rounding the inputs
       to float32 and a float32 dot product of :math:`r` terms err by at most
       :math:`(r + 3)\,u\,\|y_i\|\|y_j\|` (:math:`u = 2^{-24}`).  The float64 projection errs by
       far less: with :math:`\eta = \|Q^\top Q - I\|_2` (measured), the cross term that an inexact
       basis leaves in the decomposition above is at most :math:`3\eta\|y_i - y_j\|^2`, and the
       rounding of the products and norms is :math:`O((D + r)\,\varepsilon_{64})`.  So

       .. math::

           \tilde\ell_{ij} - e_{ij} \le d_{ij}, \qquad e_{ij} = (r + 4)\,\varepsilon_{32}\,(s_i + s_j)
               + \big(16\,(D + r)\,\varepsilon_{64} + 6\eta + 4\sqrt{c} + 2c\big)\,(q_i + q_j)
               + (r + 4)\,2^{-125},

       :math:`q_i = \|\mu_i\|^2`, the last term for float32's subnormal range.  The residual norms
       are taken by difference, :math:`\hat\rho_i^2 = q_i - \|y_i\|^2`, which errs by at most
       :math:`c\,q_i`, :math:`c = (2D\sqrt r + 2(D + r))\,\varepsilon_{64} + 2\eta` (the sums'
       rounding, :math:`2|y_i||\delta y_i|` for the GEMM's error :math:`\delta y_i`, and
       :math:`\eta\|y_i\|^2`), so :math:`|\hat\rho_i - \rho_i| \le \sqrt{c\,q_i}` and
       :math:`(\hat\rho_i - \hat\rho_j)^2` exceeds :math:`(\rho_i - \rho_j)^2` by at most
       :math:`(4\sqrt c + 2c)(q_i + q_j)`.  (Without a projection, :math:`y = \mu`, :math:`\rho = 0`
       and :math:`\eta = c = 0`.)
    3. **Exact check.**  The exact distances to the first ``n_neighbours`` kept candidates bound the
       ``n_neighbours``-th true distance from above by :math:`U_i^0`; the kept candidates with
       :math:`\tilde\ell_{ij} - e_{ij} \le U_i^0` get their exact distance, and :math:`U_i` is the
       ``n_neighbours``-th smallest of those.  If the kept list's largest value :math:`v_i` satisfies
       :math:`v_i - \max_j e_{ij} > U_i`, no atom outside the list can qualify; otherwise the atom's
       float64 bounds :math:`\ell_{ij}` to all atoms are formed and every atom with
       :math:`\ell_{ij} - e_{ij} \le U_i` gets its exact distance.

    On MNIST (K = 10,000, D = 668 varying pixels) the screen is a rank-192 float32 half-Gram,
    under a third of the full-dimension one, and the exact check takes about 10 distances per atom
    (a few atoms need their full row of bounds); the search takes about half the time of the
    full-dimension screen.  The proposal of :func:`importance_samples` is valid for any pairs (its
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
    rank : int
        Dimension ``r`` of the projection (``>= 1``); none when ``D <= rank``.
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
    if int(rank) < 1 or int(screen) < 1:
        raise ValueError(f"rank and screen must be >= 1; got rank={rank!r}, screen={screen!r}")
    big = float(np.max(np.abs(mu)))
    # Working units: the atoms times 2**-shift (exact), rescaled only far from 1 (squares would over- or
    # underflow); screen units: times 2**-(shift + y_shift), to |y| <= 1 (no float32 overflow, underflow
    # only below 2**-126 of the largest coordinate: the bound's absolute term).
    shift = math.frexp(big)[1] if big > 0 else 0
    if abs(shift) < 256:
        shift, mu_w = 0, mu
    else:
        mu_w = np.ldexp(mu, -shift)
    q = np.einsum("kd,kd->k", mu_w, mu_w)
    r = min(int(rank), D)
    eta = c_res = 0.0
    if r < D:
        basis = _screen_basis(mu_w, r)
        # Orthonormality error (spectral norm), measured: it enters the bound.
        from noisealloc.theory._threads import interruptible

        eta = float(interruptible(np.linalg.norm, basis.T @ basis - np.eye(r), 2))
        y = mu_w @ basis
        # Residual norms by difference, rho^2 = ||mu||^2 - ||y||^2: off by at most c_res ||mu||^2 (rounding of
        # the sums and of y, and the basis' orthonormality error), so |rho - true rho| <= sqrt(c_res) ||mu||,
        # which the bound's e64 term absorbs (saves a (K, D) pass and a GEMM).
        res = np.sqrt(np.maximum(q - np.einsum("kd,kd->k", y, y), 0.0))
        c_res = (2.0 * D * math.sqrt(r) + 2.0 * (D + r)) * _EPS64 + 2.0 * eta
    else:
        y, res = mu_w, np.zeros(K)
    y_big = float(np.max(np.abs(y)))
    y_shift = math.frexp(y_big)[1] if y_big > 0 else 0
    y, res, q = np.ldexp(y, -y_shift), np.ldexp(res, -y_shift), np.ldexp(q, -2 * y_shift)
    shift += y_shift
    s_y = np.einsum("kd,kd->k", y, y)
    kernel_numba = kernel == "numba" or (kernel == "auto" and HAVE_NUMBA)
    top_v, top_i = _screen(y.astype(np.float32), s_y, res, M, kernel_numba)
    e32 = (r + 4) * _EPS32
    e64 = 16 * (D + r) * _EPS64 + 6.0 * eta + 4.0 * math.sqrt(c_res) + 2.0 * c_res
    tiny = (r + 4) * 2.0**-125

    def err(i, j):
        return e32 * (s_y[i] + s_y[j]) + e64 * (q[i] + q[j]) + tiny

    # Exact distances: first the n_neighbours best screened, whose largest bounds the true n_neighbours-th.
    rows = np.repeat(np.arange(K), nn)
    cols = top_i[:, :nn].ravel()
    d2 = _direct_sq(mu, rows, cols)
    u0 = np.ldexp(d2.reshape(K, nn).max(axis=1), -2 * shift)  # in screen units (d2: the atoms as given)
    ri, ci = np.nonzero(top_v[:, nn:] - err(np.arange(K)[:, None], top_i[:, nn:]) <= u0[:, None])
    more_c = top_i[:, nn:][ri, ci]
    rows, cols = np.concatenate([rows, ri]), np.concatenate([cols, more_c])
    d2 = np.concatenate([d2, _direct_sq(mu, ri, more_c)])
    # U_i: the n_neighbours-th smallest exact distance found (>= the true one).
    o = np.lexsort((d2, rows))
    first = np.searchsorted(rows[o], np.arange(K))
    upper = np.ldexp(d2[o][first + nn - 1], -2 * shift)
    complete = (M == K - 1) | (top_v[:, -1] - (e32 * (s_y + s_y.max()) + e64 * (q + q.max()) + tiny) > upper)
    lost = np.flatnonzero(~complete)
    if lost.size:
        keep = complete[rows]
        rows, cols, d2 = rows[keep], cols[keep], d2[keep]
        extra_r, extra_c = [], []
        step = max(1, MAX_BLOCK_ENTRIES // K)
        for s in range(0, lost.size, step):
            li = lost[s:s + step]
            lb = s_y[li][:, None] + s_y[None, :] - 2.0 * (y[li] @ y.T) + (res[li][:, None] - res[None, :]) ** 2
            lb -= err(li[:, None], np.arange(K)[None, :])
            lb[np.arange(li.size), li] = np.inf
            a, b = np.nonzero(lb <= upper[li][:, None])
            extra_r.append(li[a])
            extra_c.append(b)
        extra_r, extra_c = np.concatenate(extra_r), np.concatenate(extra_c)
        rows, cols = np.concatenate([rows, extra_r]), np.concatenate([cols, extra_c])
        d2 = np.concatenate([d2, _direct_sq(mu, extra_r, extra_c)])
    o = np.lexsort((cols, d2, rows))  # by row, then distance, then index
    rows, cols, d2 = rows[o], cols[o], d2[o]
    first = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    rank_in_row = np.arange(rows.size) - np.repeat(first, np.diff(np.r_[first, rows.size]))
    sel = rank_in_row < nn
    lo, hi = np.minimum(rows[sel], cols[sel]), np.maximum(rows[sel], cols[sel])
    code, idx = np.unique(lo * K + hi, return_index=True)  # 1-D: far faster than unique rows
    return np.stack([code // K, code % K], axis=1), d2[sel][idx]


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


@jit(nogil=True)
def _proposal_rows(part, lo, hi, cen, eps, mu, kk, slots, pairs, ck2, e1, e2):
    D = mu.shape[1]
    for i in range(lo, hi):
        k = kk[i]
        for j in range(slots.shape[1]):
            p = slots[i, j]
            if p < 0:
                e1[i, j] = 0.0
                e2[i, j] = 0.0
                continue
            a = pairs[p, 0]
            b = pairs[p, 1]
            s1 = 0.0
            s2 = 0.0
            for d in range(D):
                m = 0.5 * (mu[a, d] + mu[b, d])
                v = cen[i, d] - m
                s1 += v * v
                s2 += eps[i, d] * (mu[k, d] - m)
            e1[i, j] = s1 - ck2[i]
            e2[i, j] = s2


def proposal_terms(cen, eps, mu, kk, slots, pairs, ck2):
    r"""The proposal's exponents per sample and incident pair: :math:`e_1 = \|c - m_p\|^2 - \|c - \mu_k\|^2`
    and :math:`e_2 = \varepsilon\cdot(\mu_k - m_p)` (``slots[i, j] = p``, ``-1``: none; then 0), so that
    :math:`\|x - m_p\|^2 - \|x - \mu_k\|^2 = e_1 + 2\sigma e_2` at :math:`x = c + \sigma\varepsilon`.

    Direct sums without gathered (n, D) midpoint arrays (compiled, on the worker threads), or numpy.

    Parameters
    ----------
    cen, eps : ndarray, shape (n, D)
        Centres and noises (centred atoms' coordinates).
    mu : ndarray, shape (K, D)
    kk : ndarray of int, shape (n,)
        Sampled atoms.
    slots : ndarray of int, shape (n, M)
        Pair indices, ``-1`` padded.
    pairs : ndarray of int, shape (P, 2)
    ck2 : ndarray, shape (n,)
        :math:`\|c - \mu_k\|^2`.

    Returns
    -------
    e1, e2 : ndarray, shape (n, M)
    """
    from noisealloc.theory._numba import HAVE_NUMBA

    e1 = np.zeros(slots.shape)
    e2 = np.zeros(slots.shape)
    if HAVE_NUMBA:
        from noisealloc.theory.posterior._scan import split_rows

        split_rows(kk.size, _proposal_rows, cen, eps, mu, kk, slots, pairs, ck2, e1, e2)
        return e1, e2
    valid = slots >= 0
    for j in range(slots.shape[1]):
        ok = valid[:, j]
        if not np.any(ok):
            continue
        mp = _midpoints(mu, pairs, slots[ok, j])
        cm = cen[ok] - mp
        e1[ok, j] = np.einsum("id,id->i", cm, cm) - ck2[ok]
        e2[ok, j] = np.einsum("id,id->i", eps[ok], mu[kk[ok]] - mp)
    return e1, e2


def _midpoints(mu, pairs, which):
    """Midpoints (mu_a + mu_b) / 2 of the pairs ``pairs[which]``."""
    return 0.5 * (mu[pairs[which, 0]] + mu[pairs[which, 1]])


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


@jit
def _refine_row(Arow, Brow, Wrow, has_w, x, e, xk, mu, norm_x, norm_k, mu_sq, factor, near):
    """Direct sums where the GEMM form is not accurate enough: ``A_j = ||x - mu_j||^2`` and
    ``B_j = e . (x - mu_j)`` where ``A_j < factor (norm_x + mu_sq[j])`` (cancellation) or ``A_j < near``
    (:func:`near_thresholds`); with ``has_w`` (a midpoint draw), ``W_j = ||xk - mu_j||^2`` where
    ``W_j < factor (norm_k + mu_sq[j])`` or ``A_j < near``."""
    D = mu.shape[1]
    for j in range(mu.shape[0]):
        close = Arow[j] < near
        if close or Arow[j] < factor * (norm_x + mu_sq[j]):
            acc = 0.0
            bb = 0.0
            for d in range(D):
                v = x[d] - mu[j, d]
                acc += v * v
                bb += e[d] * v
            Arow[j] = acc
            Brow[j] = bb
        if has_w and (close or Wrow[j] < factor * (norm_k + mu_sq[j])):
            acc = 0.0
            for d in range(D):
                v = xk[d] - mu[j, d]
                acc += v * v
            Wrow[j] = acc


@jit(nogil=True)
def importance_rows(lo, hi, Gc, Ge, Gt, mid_row, c_sq, ec, mu_sq, cen, eps, mu, kk, log_w, refine, near, a_lev,
                    b_lev, order, m_st, z_st, t_st, u_st):
    r"""Rows ``lo .. hi - 1`` of a block: distances from the GEMM outputs, then every level (one thread, no GIL).

    ``Gc[i, j] = c_i . mu_j``, ``Ge[i, j] = eps_i . mu_j`` and, for a midpoint draw (``mid_row[i] = r >= 0``),
    ``Gt[r, j] = mu_k . mu_j`` (centred atoms ``mu``, centres ``cen``).  Per row:
    :math:`A_j = \|c - \mu_j\|^2` (from ``c_sq + mu_sq - 2 Gc``), :math:`B_j = \varepsilon\cdot(c - \mu_j)`,
    and the trace-identity weights :math:`T_j = \|\mu_k - \mu_j\|^2` (``A`` itself on a plain draw,
    where :math:`c = \mu_k`; there :math:`A_k = B_k = 0` exactly), with direct sums where the GEMM form
    is not accurate enough (:func:`_refine_row`: below ``refine`` times the norms, or ``A_j < near[i]``).
    On a midpoint draw the row is shifted, :math:`A'_j = A_j - A_k`, :math:`B'_j = B_j - B_k`: each
    level's logits move by one constant, so the posterior is unchanged, and the sampled atom's logit
    is :math:`\log\pi_k` at every level, which the plain engine's level loop
    (:func:`noisealloc.theory.posterior._engine_kernels._row_levels`: shift bounds without a maximum pass,
    pruning of atoms that stay below the underflow) requires.  Its online state (``m, Z, T, U``) per
    level goes to ``*_st[t, i]``.
    """
    K = mu_sq.shape[0]
    k_pad = ((K + _CH - 1) // _CH) * _CH
    a_row = np.empty(k_pad)
    b_row = np.empty(k_pad)
    w_row = np.empty(k_pad)
    c_row = np.empty(k_pad)
    buf = np.empty(3 * _CH)
    acc = np.empty(3 * _W)
    for i in range(lo, hi):
        k = kk[i]
        ci2 = c_sq[i]
        eci = ec[i]
        for j in range(K):
            av = (ci2 + mu_sq[j]) - 2.0 * Gc[i, j]
            a_row[j] = av if av > 0.0 else 0.0
            b_row[j] = eci - Ge[i, j]
            c_row[j] = log_w[j]
        r = mid_row[i]
        if r >= 0:
            k2 = mu_sq[k]
            for j in range(K):
                tv = (k2 + mu_sq[j]) - 2.0 * Gt[r, j]
                w_row[j] = tv if tv > 0.0 else 0.0
        _refine_row(a_row, b_row, w_row, r >= 0, cen[i], eps[i], mu[k], mu, ci2, mu_sq[k], mu_sq, refine, near[i])
        if r < 0:
            a_row[k] = 0.0
            b_row[k] = 0.0
            _row_levels(c_row, a_row, b_row, a_row, K, log_w[k], a_lev, b_lev, order, m_st, z_st, t_st, u_st, i,
                        buf, acc)
        else:
            w_row[k] = 0.0
            ak = a_row[k]
            bk = b_row[k]
            for j in range(K):
                a_row[j] -= ak
                b_row[j] -= bk
            a_row[k] = 0.0
            b_row[k] = 0.0
            _row_levels(c_row, a_row, b_row, w_row, K, log_w[k], a_lev, b_lev, order, m_st, z_st, t_st, u_st, i,
                        buf, acc)


# Rows per level-pass task of a worker thread (a few ms of work on MNIST; the workers take them in turn).
_PASS_ROWS = 8


def _values_numba(cen, eps, kk, mid, mu, mu_sq, log_w, lam, refine, near, rows, clock):
    """Per-sample (entropy, half trace sum) at every level, (L, n) each, on the kept worker threads.

    Per block of ``rows`` samples the workers (i) each compute single-threaded GEMMs of a share of
    the block's rows (centres, noises and the sampled atoms of midpoint draws against all atoms)
    into shared arrays, and (ii) after a barrier take :data:`_PASS_ROWS`-row tasks of
    :func:`importance_rows` from a shared counter; a second barrier ends the block (its arrays are
    reused).  Single-threaded GEMMs: a threaded GEMM's workers keep polling for work after each call
    and take the cores from the level passes (:mod:`noisealloc.theory._threads`).
    """
    import threading

    from noisealloc.theory._threads import ChunkCounter, kernel_threads, run_stage_workers

    n = kk.size
    K = mu.shape[0]
    L = lam.size
    order = np.argsort(lam, kind="stable")
    a_lev = np.exp(lam) / 2.0
    b_lev = np.exp(lam / 2.0)
    m_st = np.full((L, n), -np.inf)
    z_st = np.zeros((L, n))
    t_st = np.zeros((L, n))
    u_st = np.zeros((L, n))
    c_sq = np.einsum("id,id->i", cen, cen)
    ec = np.einsum("id,id->i", eps, cen)
    mid_row = np.full(n, -1, dtype=np.int64)
    mid_row[mid] = np.arange(mid.size)
    n_blocks = -(-n // rows)
    rows = -(-n // n_blocks)  # equal blocks: no short tail block
    width = min(rows, n)
    g_c = np.empty((width, K))
    g_e = np.empty((width, K))
    g_t = np.empty((width, K))
    muT = mu.T
    threads = max(1, min(kernel_threads(), n))
    barrier = threading.Barrier(threads)
    halt = threading.Event()
    counter = ChunkCounter()  # per block: the row chunks handed out

    def work(w):
        times = np.zeros(4)
        for b, s in enumerate(range(0, n, rows)):
            e_ = min(n, s + rows)
            c0, t0 = time.thread_time(), time.perf_counter()
            r0 = s + ((e_ - s) * w) // threads
            r1 = s + ((e_ - s) * (w + 1)) // threads
            if r1 > r0:
                np.matmul(cen[r0:r1], muT, out=g_c[r0 - s:r1 - s])
                np.matmul(eps[r0:r1], muT, out=g_e[r0 - s:r1 - s])
            # midpoint rows of this block, numbered from the block's first
            m_lo, m_hi = np.searchsorted(mid, [s, e_])
            q0 = m_lo + ((m_hi - m_lo) * w) // threads
            q1 = m_lo + ((m_hi - m_lo) * (w + 1)) // threads
            if q1 > q0:
                np.matmul(mu[kk[mid[q0:q1]]], muT, out=g_t[q0 - m_lo:q1 - m_lo])
            barrier.wait()
            c1, t1 = time.thread_time(), time.perf_counter()
            blk_mid = mid_row[s:e_] - np.where(mid_row[s:e_] >= 0, m_lo, 0)  # rows of g_t
            for lo, hi in counter.chunks(b, s, e_, _PASS_ROWS, halt):
                importance_rows(lo - s, hi - s, g_c, g_e, g_t, blk_mid, c_sq[s:e_], ec[s:e_], mu_sq, cen[s:e_],
                                eps[s:e_], mu, kk[s:e_], log_w, refine, near[s:e_], a_lev, b_lev, order,
                                m_st[:, s:e_], z_st[:, s:e_], t_st[:, s:e_], u_st[:, s:e_])
            barrier.wait()
            c2, t2 = time.thread_time(), time.perf_counter()
            times += (t1 - t0, t2 - t1, c1 - c0, c2 - c1)
        return times

    tot = np.sum(run_stage_workers(threads, work, halt, barrier), axis=0)
    clock["gemm"][0] += tot[0] / threads
    clock["levels"][0] += tot[1] / threads
    clock["gemm"][1] += tot[2]
    clock["levels"][1] += tot[3]
    return values_from_states(z_st, t_st, u_st)


def _values_numpy(cen, eps, kk, mid, mu, mu_sq, log_w, lam, refine, near, rows, clock):
    """The reference of :func:`_values_numba`: the same distances as numpy matrices per block of ``rows``
    samples (GEMM form in the same order of operations, the same direct sums where
    :func:`_refine_row` makes them), then :func:`_level_values_numpy`."""
    n = kk.size
    L = lam.size
    h = np.empty((L, n))
    m = np.empty((L, n))
    is_mid = np.zeros(n, bool)
    is_mid[mid] = True

    def direct(x, e, ri, ci):
        diff = x[ri] - mu[ci]
        return np.einsum("ij,ij->i", diff, diff), (np.einsum("ij,ij->i", e[ri], diff) if e is not None else None)

    for s in range(0, n, rows):
        t0 = (time.perf_counter(), time.process_time())
        sl = slice(s, min(n, s + rows))
        c, e, k = cen[sl], eps[sl], kk[sl]
        c_sq = np.einsum("kd,kd->k", c, c)
        A = np.maximum((c_sq[:, None] + mu_sq[None, :]) - 2.0 * (c @ mu.T), 0.0)  # ||c - mu_j||^2
        B = np.einsum("id,id->i", e, c)[:, None] - e @ mu.T  # eps . (c - mu_j)
        close = A < near[sl][:, None]
        ri, ci = np.nonzero(close | (A < refine * (c_sq[:, None] + mu_sq[None, :])))
        A[ri, ci], B[ri, ci] = direct(c, e, ri, ci)
        # ||mu_k - mu_j||^2 (trace identity): on a plain draw c = mu_k, so T = A; a GEMM only for the
        # midpoint draws' rows.  The sampled atom's entries are exactly 0 on a plain draw.
        T = A.copy()
        rows_mid = np.flatnonzero(is_mid[sl])
        if rows_mid.size:
            xk = mu[k[rows_mid]]
            k_sq = mu_sq[k[rows_mid]]
            Tm = np.maximum((k_sq[:, None] + mu_sq[None, :]) - 2.0 * (xk @ mu.T), 0.0)
            ri, ci = np.nonzero(close[rows_mid] | (Tm < refine * (k_sq[:, None] + mu_sq[None, :])))
            Tm[ri, ci] = direct(xk, None, ri, ci)[0]
            T[rows_mid] = Tm
        plain = np.flatnonzero(~is_mid[sl])
        A[plain, k[plain]] = 0.0
        B[plain, k[plain]] = 0.0
        T[np.arange(k.size), k] = 0.0
        now = (time.perf_counter(), time.process_time())
        clock["gemm"][0] += now[0] - t0[0]
        clock["gemm"][1] += now[1] - t0[1]
        _level_values_numpy(A, B, T, log_w, lam, h[:, sl], m[:, sl])
        end = (time.perf_counter(), time.process_time())
        clock["levels"][0] += end[0] - now[0]
        clock["levels"][1] += end[1] - now[1]
    return h, m


def importance_samples(mu, w, lam, *, n_samples: int, gen, n_neighbours: int = N_NEIGHBOURS,
                       defensive: float = DEFENSIVE, kernel: str = "auto", centre=None, live=None):
    """Per-sample weighted (entropy, mmse) arrays (L, n) and the proposal's description (module docstring).

    ``kernel``: ``'auto'`` (numba when available), ``'numba'`` or ``'numpy'`` for the distances and
    per-level passes (:func:`_values_numba`; :func:`_values_numpy` is the reference); the draws do not
    depend on it.
    ``centre``, ``live``: the atoms' weighted mean and live coordinates when the caller has them
    (as :func:`noisealloc.theory.posterior.engine.information_samples`).
    """
    from noisealloc.theory._numba import HAVE_NUMBA

    use_numba = kernel == "numba" or (kernel == "auto" and HAVE_NUMBA)
    from noisealloc.theory.posterior.asymptotics import live_coordinates

    K, D = mu.shape
    # Centred (smaller norms, smaller GEMM rounding), on the coordinates where the atoms differ: the
    # others add exactly 0 to every distance below (MNIST: 116 of 784).  The noises are drawn in all D.
    from noisealloc.theory.posterior._scan import weighted_mean

    live = live_coordinates(mu) if live is None else live
    centre = weighted_mean(mu, w) if centre is None else centre
    mu = mu[:, live] - centre[live]
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
    ent = np.empty((L, n))
    mmse = np.empty((L, n))
    weights = np.ones((L, n))
    mu_sq = np.einsum("kd,kd->k", mu, mu)
    rows = max(1, MAX_BLOCK_ENTRIES // max(K, 1))  # samples per block of the (rows x K) distance arrays
    mid = np.flatnonzero(branch)
    refine = _REFINE * (mu.shape[1] + 2)
    ck = centre - mu[k]
    ck2 = np.einsum("id,id->i", ck, ck)
    near = near_thresholds(np.einsum("id,id->i", eps, eps), np.einsum("id,id->i", centre, centre), ck2,
                           float(np.exp(lam.max())) / 2.0, mu.shape[1], float(log_w.max() - log_w.min()))
    values = _values_numba if use_numba else _values_numpy
    h_all, m_all = values(centre, eps, k, mid, mu, mu_sq, log_w, lam, refine, near, rows, clock)
    # The proposal's weights omega = p / q per sample and level, from the exponents of each sample's
    # incident pairs ((n, maxdeg) arrays: no blocks needed).
    t0 = (time.perf_counter(), time.process_time())
    slots = inc[k]  # each sample's atom's incident pairs, -1 padded
    e1, e2 = proposal_terms(centre, eps, mu, k, slots, pairs, ck2)
    with np.errstate(divide="ignore"):
        lr = np.where(slots >= 0, np.log(rho[np.maximum(slots, 0)] if P else np.ones(slots.shape))
                      - math.log(2.0) - log_w[k][:, None], -np.inf)
    for t in range(L):
        if P:
            expo = lr - (e1 + 2.0 * sig[t] * e2) / (2.0 * sig2[t])
            top = np.max(expo, axis=1)
            with np.errstate(invalid="ignore"):
                log_s = np.where(np.isneginf(top), -np.inf,
                                 top + np.log(np.sum(np.exp(expo - np.where(np.isneginf(top), 0.0, top)[:, None]),
                                                     axis=1)))
            log_omega = -np.logaddexp(math.log1p(-defensive), math.log(defensive) + log_s)
            weights[t] = np.exp(log_omega)
        ent[t] = weights[t] * h_all[t]
        mmse[t] = weights[t] * m_all[t]
    lap("gemm", t0)
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
