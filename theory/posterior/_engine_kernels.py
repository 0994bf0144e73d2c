r"""Kernels of the blocked posterior engine (private; used by :mod:`noisealloc.theory.posterior.engine`).

One kernel, two implementations with the same contract:

* :func:`level_pass_gram_rows` -- compiled through :func:`noisealloc.theory._numba.jit`;
  one thread per call, without the GIL (the engine's worker threads run it on disjoint
  ranges of rows); each row's squared distances are assembled from the GEMM output, then
  every level is processed while the row sits in cache.
  Per level, two short vectorisable stages per chunk of :data:`_CH` atoms
  (logits and range reduction; polynomial and sums) keep the dependency chains
  short enough for the out-of-order core to overlap iterations; the sums go into
  :data:`_W` lanes (elementwise, so no reassociation is needed).  The only
  fastmath flag is ``contract`` in the polynomial and the sums (FMAs: one
  rounding instead of two, never less accurate; ~20% faster here); the logits
  are computed without it, exactly as numpy does.  Candidates whose exponential
  can never again be nonzero are removed for good once levels rise (see
  :func:`_prune`), so high-SNR levels cost O(survivors), not O(atoms).
* :func:`level_pass_numpy` -- the same arithmetic in plain numpy with ``np.exp``
  and no cutoff; the reference the tests compare the compiled kernel with.

Contract (both; the compiled kernel first builds ``A`` and ``B`` from the GEMM output): for one
block of atoms with logits

.. math::

    l_{ij}(\lambda_t) = c_j - a_t A_{ij} - b_t B_{ij}, \qquad b_t = \sqrt{2 a_t},

update, for every level ``t`` and row ``i``, the running state of an online
log-sum-exp: ``m`` (running shift), ``Z = sum_j e^{l_j - m}``,
``T = sum_j e^{l_j - m} (l_j - m)`` and ``U = sum_j e^{l_j - m} A_ij``.
From the final state: ``H = log Z - T / Z`` is the posterior entropy (nats; the
formula holds for any shift ``m``) and ``U / Z = sum_j w_j A_ij``.

The compiled kernel's ``exp`` is accurate to 2 ulp down to ``e^{-708}``, follows
``np.exp`` into the subnormal range below, and is exactly 0 at or below
``EXP_UNDERFLOW`` (-746), where ``np.exp`` is 0 too; its shift ``m`` never exceeds
the largest logit (see :func:`_row_levels`), so every term that the reference
keeps as a normal number is kept.
"""

from __future__ import annotations

import math

import numpy as np

from noisealloc.theory._numba import jit

__all__ = ["EXP_CUTOFF", "EXP_UNDERFLOW", "level_pass_gram_rows", "level_pass_numpy", "exp_nonpositive",
           "gather_centred_norms", "near_thresholds", "values_from_states"]

#: Below this, exp(s) is subnormal (exp(-708) ~ 3.3e-308 is near the smallest normal number): the
#: kernel's exp then agrees with ``np.exp`` to the subnormal spacing 2**-1074, not to relative precision.
EXP_CUTOFF = -708.0
#: Shifted logits are clamped here; exp(-746) ~ 1.1e-324 rounds to exactly 0 (as ``np.exp`` does
#: below -745.14), so terms at or below it contribute exactly nothing and can be skipped.
EXP_UNDERFLOW = -746.0

# exp(s) = 2**k * exp(r),  k = round(s / ln 2),  |r| <= ln2/2 ~ 0.347.
# fdlibm's split of ln 2: _LN2_HI has 21 trailing zero bits, so k * _LN2_HI is exact for |k| <= 1022.
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
# y = s / ln2 + 1.5 * 2**52 + 1087: for s in [-746, 660] the sum lies in [2**52, 2**53), where the
# ulp is 1, so the addition itself rounds s / ln2 + 1087 to the integer k + 1087 in [11, 2039] -- the
# biased exponent of 2**(k + 64) -- held in the low mantissa bits of y (no float->int conversion,
# which AVX2 lacks for 64-bit integers).  exp(s) = (p(r) 2**(k + 64)) 2**-64: the first product is
# exact (a normal number), the second rounds once, correctly into the subnormal range below
# exp(-708).  Shifted logits reach at most _SHIFT_SLACK (300) above 0.
_MAGIC = 6755399441055744.0
_MAGIC_B = _MAGIC + 1087.0
_MAGIC_BITS = np.uint64(0x4338000000000000)  # bit pattern of _MAGIC
_U52 = np.uint64(52)
_TWO_M64 = 2.0**-64
# Taylor coefficients 1/i! of exp(r), degree 13: remainder < 0.347**14 / 14! ~ 4e-18 relative.
_P = [1.0 / math.factorial(i) for i in range(14)]
_P0, _P1, _P2, _P3, _P4, _P5, _P6, _P7, _P8, _P9, _P10, _P11, _P12, _P13 = _P
del _P

# Atoms per stage chunk: three float64 chunk buffers (6 KB) plus the chunk's inputs stay in L1.
_CH = 256
_UCH = np.uint64(_CH)
_UCH2 = np.uint64(2 * _CH)
# Lanes of the elementwise accumulators (a multiple of the vector width).
_W = 64
_UW = np.uint64(_W)
_UW2 = np.uint64(2 * _W)
# Fewer candidates than this: one scalar pass (exact maximum and sums) instead of padded chunks.
_SCALAR_MAX = 64
# A shift may lie below the largest logit by at most this (see _row_levels): terms up to
# e^300 ~ 2e130 keep every sum far from overflow.
_SHIFT_SLACK = 300.0
# Margin (nats) of the permanent pruning test against rounding of the logits.
_PRUNE_MARGIN = 1.0


@jit(fastmath={"contract"})
def _poly(r):
    """``exp(r)`` for ``|r| <= ln2/2`` (Estrin's scheme: dependency depth 4 instead of Horner's 13).

    ``fastmath={"contract"}`` only: the multiply-adds may become FMAs (one rounding instead
    of two, never less accurate; no reassociation).  The vector stage and the scalar paths
    call this one routine, so they agree to the bit.
    """
    r2 = r * r
    r4 = r2 * r2
    r8 = r4 * r4
    w0 = (_P0 + _P1 * r) + (_P2 + _P3 * r) * r2
    w1 = (_P4 + _P5 * r) + (_P6 + _P7 * r) * r2
    w2 = (_P8 + _P9 * r) + (_P10 + _P11 * r) * r2
    return (w0 + w1 * r4) + (w2 + (_P12 + _P13 * r) * r4) * r8


@jit
def _reduce(s):
    """Range reduction of ``s`` in ``[EXP_UNDERFLOW, 660]``: ``(r, 2**(k + 64))`` with ``s = k ln2 + r``."""
    y = s * _INV_LN2 + _MAGIC_B
    kf = y - _MAGIC_B
    r = (s - kf * _LN2_HI) - kf * _LN2_LO
    scale = np.uint64((np.float64(y).view(np.uint64) - _MAGIC_BITS) << _U52).view(np.float64)
    return r, scale


@jit
def _exp_scalar(s):
    """``exp(s)`` (``s <= 660``) by the same operations as the vector stages; 0 at or below the underflow."""
    s = max(s, EXP_UNDERFLOW)
    r, scale = _reduce(s)
    return (_poly(r) * scale) * _TWO_M64


@jit
def _stage_reduce(c, A, B, j0, a, b, shift, buf):
    """Chunk ``[j0, j0 + _CH)``: shifted logits ``s`` (clamped at the underflow), ``r`` and ``2**(k + 64)``.

    ``buf`` holds ``[s | r | 2**(k + 64)]`` (one array with fixed section offsets: a single
    output array keeps the compiler's runtime alias checks few enough to vectorise).
    Unsigned indices: no negative-index wraparound code, which blocks vectorisation.
    """
    uj0 = np.uint64(j0)
    for q in range(_CH):
        uq = np.uint64(q)
        j = uj0 + uq
        s = max(((c[j] - a * A[j]) - b * B[j]) - shift, EXP_UNDERFLOW)
        y = s * _INV_LN2 + _MAGIC_B
        kf = y - _MAGIC_B
        buf[uq] = s
        buf[_UCH + uq] = (s - kf * _LN2_HI) - kf * _LN2_LO
        buf[_UCH2 + uq] = np.uint64((np.float64(y).view(np.uint64) - _MAGIC_BITS) << _U52).view(np.float64)


@jit(fastmath={'contract'})
def _stage_sums(A, j0, buf, acc):
    """Chunk ``[j0, j0 + _CH)``: ``e = p(r) 2**(k + 64) 2**-64`` and the lane sums
    ``acc = [Z | T | U]`` (``_W`` lanes each).

    Clamped entries (``s = EXP_UNDERFLOW``) give ``e = 0`` exactly, so no select is needed.
    ``fastmath={"contract"}`` (as in :func:`_poly`): the sums may use FMAs.  The logits
    (stage 1) are computed without contraction, exactly as the numpy reference does.
    """
    uj0 = np.uint64(j0)
    for q0 in range(0, _CH, _W):
        uq0 = np.uint64(q0)
        for q in range(_W):
            uq = np.uint64(q)
            i = uq0 + uq
            p = _poly(buf[_UCH + i])
            e = (p * buf[_UCH2 + i]) * _TWO_M64
            acc[uq] += e
            acc[_UW + uq] += e * buf[i]
            acc[_UW2 + uq] += e * A[uj0 + i]


@jit
def _lane_sum(acc, off):
    s0 = s1 = s2 = s3 = 0.0
    for q in range(0, _W, 4):
        s0 += acc[off + q]
        s1 += acc[off + q + 1]
        s2 += acc[off + q + 2]
        s3 += acc[off + q + 3]
    return (s0 + s1) + (s2 + s3)


@jit
def exp_nonpositive(s):
    """``exp(s)`` for a 1-D float64 array ``s <= 660`` by the kernel's vectorised stages.

    Subnormal below :data:`EXP_CUTOFF`, 0 at or below :data:`EXP_UNDERFLOW`.  Exposed so that
    tests can compare it with ``np.exp``.
    """
    n = s.shape[0]
    n_pad = ((n + _CH - 1) // _CH) * _CH
    c = np.full(n_pad, -np.inf)
    c[:n] = s
    zeros = np.zeros(n_pad)
    buf = np.empty(3 * _CH)
    out = np.empty(n_pad)
    for j0 in range(0, n_pad, _CH):
        _stage_reduce(c, zeros, zeros, j0, 0.0, 0.0, 0.0, buf)
        for q in range(_CH):
            out[j0 + q] = (_poly(buf[_CH + q]) * buf[2 * _CH + q]) * _TWO_M64
    return out[:n]


@jit
def _level_sums(c, A, B, W, n, a, b, shift, buf, acc):
    """``(Z, T, U)`` over the first ``n`` candidates, ``U = sum_j e_j W_j`` (``W = A`` in this module; the
    importance sampler weights by other distances); entries ``[n, ceil(n / _CH) _CH)`` must be padding
    (``W`` finite there)."""
    if n < _SCALAR_MAX:
        z = t = u = 0.0
        for j in range(n):
            s = max(((c[j] - a * A[j]) - b * B[j]) - shift, EXP_UNDERFLOW)
            e = _exp_scalar(s)
            z += e
            t += e * s
            u += e * W[j]
        return z, t, u
    for q in range(3 * _W):
        acc[q] = 0.0
    n_pad = ((n + _CH - 1) // _CH) * _CH
    for j0 in range(0, n_pad, _CH):
        _stage_reduce(c, A, B, j0, a, b, shift, buf)
        _stage_sums(W, j0, buf, acc)
    return _lane_sum(acc, 0), _lane_sum(acc, _W), _lane_sum(acc, 2 * _W)


@jit
def _max_logit(c, A, B, n, a, b, acc):
    """Largest logit of the first ``n`` candidates (lanes; the padding has logit -inf)."""
    if n < _SCALAR_MAX:
        mx = -np.inf
        for j in range(n):
            lj = (c[j] - a * A[j]) - b * B[j]
            mx = lj if lj > mx else mx
        return mx
    for q in range(_W):
        acc[q] = -np.inf
    n_pad = ((n + _CH - 1) // _CH) * _CH
    for j0 in range(0, n_pad, _W):
        uj0 = np.uint64(j0)
        for q in range(_W):
            uq = np.uint64(q)
            j = uj0 + uq
            lj = (c[j] - a * A[j]) - b * B[j]
            acc[uq] = lj if lj > acc[uq] else acc[uq]
    mx = -np.inf
    for q in range(_W):
        mx = acc[q] if acc[q] > mx else mx
    return mx


@jit
def _pad(c, A, B, W, n):
    """Padding after the first ``n`` candidates up to the next multiple of ``_CH``: logit -inf, A = B = W = 0."""
    n_pad = min(((n + _CH - 1) // _CH) * _CH, c.shape[0])
    for j in range(n, n_pad):
        c[j] = -np.inf
        A[j] = 0.0
        B[j] = 0.0
        W[j] = 0.0


@jit
def _bounds(c, A, B, n):
    """``(max c, min c, min A, max A, min B, max B)`` over the first ``n`` candidates."""
    cmax = cmin = c[0]
    amin = amax = A[0]
    bmin = bmax = B[0]
    for j in range(1, n):
        cj = c[j]
        aj = A[j]
        bj = B[j]
        cmax = cj if cj > cmax else cmax
        cmin = cj if cj < cmin else cmin
        amin = aj if aj < amin else amin
        amax = aj if aj > amax else amax
        bmin = bj if bj < bmin else bmin
        bmax = bj if bj > bmax else bmax
    return cmax, cmin, amin, amax, bmin, bmax


@jit
def _count_drops(c, A, B, n, a, b, lim, acc):
    """How many of the first ``n`` candidates :func:`_prune` would remove (vectorised lanes; padding counts 0)."""
    for q in range(_W):
        acc[q] = 0.0
    n_pad = ((n + _W - 1) // _W) * _W
    for j0 in range(0, n_pad, _W):
        uj0 = np.uint64(j0)
        for q in range(_W):
            uq = np.uint64(q)
            j = uj0 + uq
            aj = A[j]
            bj = B[j]
            lj = (c[j] - a * aj) - b * bj
            acc[uq] += 1.0 if (lj < lim) & (bj + b * aj >= 0.0) & (aj >= 0.0) & (lj > -np.inf) else 0.0
    return _lane_sum(acc, 0)


@jit
def _prune(c, A, B, W, n, a, b, ref, acc):
    r"""Remove, in place, the candidates that stay below the underflow at this and every higher level.

    With ``a = u^2`` and ``b = \sqrt2 u``, ``l_j(u) - ref = c_j - ref - u^2 A_j - \sqrt2 u B_j``
    is, for ``A_j >= 0``, a concave parabola in ``u`` with its vertex at ``u = -B_j / (\sqrt2 A_j)``;
    when ``B_j + b A_j >= 0`` the vertex lies at or below the current ``u``, so the logit only
    decreases as the level rises (candidates with ``A_j < 0``, which the importance sampler's
    shifted rows have, are never removed).  ``ref`` is a logit present at every level (the sampled
    atom's, ``log pi_k``), so the running shift is ``>= ref`` and a candidate with
    ``l_j - ref < EXP_UNDERFLOW - _PRUNE_MARGIN`` now has ``exp(l_j - shift) = 0`` exactly at
    every later level: dropping it changes nothing.  A vectorised count first; the
    (scalar, branch-free) compaction runs only when it removes at least 1/8 of the
    candidates.  ``W`` (the weights of ``U``; may be ``A`` itself) is compacted alongside.  Returns the new
    count.
    """
    lim = ref + EXP_UNDERFLOW - _PRUNE_MARGIN
    if _count_drops(c, A, B, n, a, b, lim, acc) * 8.0 < n:
        return n
    w = 0
    for j in range(n):
        cj = c[j]
        aj = A[j]
        bj = B[j]
        wj = W[j]
        lj = (cj - a * aj) - b * bj
        c[w] = cj
        A[w] = aj
        B[w] = bj
        W[w] = wj
        drop = (lj < lim) & (bj + b * aj >= 0.0) & (aj >= 0.0)
        w += 0 if drop else 1
    return w


@jit
def _merge(m_st, z_st, t_st, u_st, t, i, m_old, m_new, zb, tb, ub):
    """Fold a block's sums (relative to ``m_new``) into the running state (relative to ``m_old``)."""
    if m_old == -np.inf:
        z_st[t, i] = zb
        t_st[t, i] = tb
        u_st[t, i] = ub
    else:
        d = m_old - m_new
        f = math.exp(d)
        z_old = z_st[t, i]
        z_st[t, i] = z_old * f + zb
        t_st[t, i] = (t_st[t, i] + d * z_old) * f + tb
        u_st[t, i] = u_st[t, i] * f + ub
    m_st[t, i] = m_new


@jit
def _row_levels(c, A, B, W, n, ref, a_lev, b_lev, order, m_st, z_st, t_st, u_st, i, buf, acc):
    """All levels (in the order ``order``, ascending ``a``) for row ``i`` of a block of ``n`` candidates,
    ``U`` weighted by ``W`` (``A`` itself in this module's engine; the importance sampler's midpoint
    draws weight by other distances).

    Shift: always an actual logit or a maximum of actual logits -- the running shift,
    ``ref`` (the sampled atom's logit, present at every level), the block's first
    logit, or the block's exact maximum -- so it never exceeds the row's largest
    logit, and only terms whose exponential underflows to 0 relative to it are lost.
    When the upper bound ``max c - a min A - b min B`` of the block's logits is within
    ``_SHIFT_SLACK`` of that lower bound, the lower bound serves as the shift (the
    terms are then at most ``e^_SHIFT_SLACK``, far from overflow) and no maximum pass
    is needed; otherwise the block's exact maximum is taken.
    """
    if n == 0:
        return
    _pad(c, A, B, W, n)
    cmax, cmin, amin, amax, bmin, bmax = _bounds(c, A, B, n)
    for tt in range(order.shape[0]):
        t = order[tt]
        a = a_lev[t]
        b = b_lev[t]
        m_old = m_st[t, i]
        floor = ref if ref > m_old else m_old
        if n < _SCALAR_MAX:
            mx = _max_logit(c, A, B, n, a, b, acc)
            m_new = mx if mx > floor else floor
        else:
            l_first = (c[0] - a * A[0]) - b * B[0]
            lb = l_first if l_first > floor else floor
            if ((cmax - a * amin) - b * bmin) - lb <= _SHIFT_SLACK:
                m_new = lb
            else:
                mx = _max_logit(c, A, B, n, a, b, acc)
                m_new = mx if mx > floor else floor
        zb, tb, ub = _level_sums(c, A, B, W, n, a, b, m_new, buf, acc)
        _merge(m_st, z_st, t_st, u_st, t, i, m_old, m_new, zb, tb, ub)
        # Prune once the lowest possible logit falls below the underflow relative to ref.
        if ((cmin - a * amax) - b * bmax) - ref < EXP_UNDERFLOW - _PRUNE_MARGIN:
            n_new = _prune(c, A, B, W, n, a, b, ref, acc)
            if n_new < n:
                n = n_new
                if n == 0:
                    return
                _pad(c, A, B, W, n)
                cmax, cmin, amin, amax, bmin, bmax = _bounds(c, A, B, n)


@jit
def _gram_row(G, i, n, nk, nrm, ek, k_local, refine_factor, near, atoms, k_global, eps, start,
              c, a_lev, b_lev, order, ref, m_st, z_st, t_st, u_st, Arow, Brow, crow, buf, acc):
    """Sample row ``i`` of ``G`` (``n`` sample rows): distances, then every level."""
    kb = G.shape[1]
    dim = atoms.shape[1]
    nki = nk[i]
    eki = ek[i]
    ui = np.uint64(i)
    un = np.uint64(n)
    for j in range(kb):
        uj = np.uint64(j)
        av = (nki + nrm[uj]) - 2.0 * G[ui, uj]
        Arow[uj] = av if av > 0.0 else 0.0
        Brow[uj] = eki - G[un + ui, uj]
        crow[uj] = c[uj]
    kg = k_global[i]
    near_i = near[i]
    for j in range(kb):
        if Arow[j] < refine_factor * (nki + nrm[j]) or Arow[j] < near_i:
            aa = 0.0
            bb = 0.0
            for d in range(dim):
                diff = atoms[kg, d] - atoms[start + j, d]
                aa += diff * diff
                bb += eps[i, d] * diff
            Arow[j] = aa
            Brow[j] = bb
    kl = k_local[i]
    if kl >= 0 and kl < kb:
        Arow[kl] = 0.0
        Brow[kl] = 0.0
    _row_levels(crow, Arow, Brow, Arow, kb, ref[i], a_lev, b_lev, order, m_st, z_st, t_st, u_st, i, buf, acc)


@jit(nogil=True)
def level_pass_gram_rows(G, row_lo, row_hi, nk, nrm, ek, k_local, refine_factor, near, atoms, k_global, eps, start,
                         c, a_lev, b_lev, order, ref, m_st, z_st, t_st, u_st):
    """Compiled kernel working from the GEMM output directly (no distance matrices in memory), on one
    thread and without the GIL, for the sample rows ``row_lo .. row_hi - 1``.

    ``G`` (2n, Kb): rows ``0..n-1`` hold ``mu_k . mu_j`` and rows ``n..2n-1`` hold ``eps . mu_j``
    (centred atoms).  Several threads may run it at once on disjoint row ranges; a row's arithmetic
    does not depend on the other rows.  Per row: ``A_ij = nk_i + nrm_j - 2 G_ij`` (clamped at 0),
    ``B_ij = ek_i - G_{n+i, j}``; entries with ``A_ij < refine_factor (nk_i + nrm_j)``
    (near-duplicates, where the expansion loses its relative accuracy) or ``A_ij < near[i]`` (atoms
    that can carry weight at the highest level, where the level magnifies the expansion's absolute
    error: :func:`near_thresholds`) are recomputed from the original
    ``atoms`` (K, D); the true atom (``k_local[i]`` in ``[0, Kb)``) gets exactly 0.  Then
    :func:`_row_levels` with levels in the order ``order`` (``a_lev[order]`` ascending,
    ``b_lev = sqrt(2 a_lev)``) and ``ref[i]`` = the log-weight of row ``i``'s sampled atom.
    """
    n = G.shape[0] // 2
    kb_pad = ((G.shape[1] + _CH - 1) // _CH) * _CH
    Arow = np.empty(kb_pad)
    Brow = np.empty(kb_pad)
    crow = np.empty(kb_pad)
    buf = np.empty(3 * _CH)
    acc = np.empty(3 * _W)
    for i in range(row_lo, row_hi):
        _gram_row(G, i, n, nk, nrm, ek, k_local, refine_factor, near, atoms, k_global, eps, start,
                  c, a_lev, b_lev, order, ref, m_st, z_st, t_st, u_st, Arow, Brow, crow, buf, acc)


@jit(nogil=True)
def gather_centred_norms(src, cols, centre, out, nrm):
    """``out[i, q] = src[i, cols[q]] - centre[q]`` and ``nrm[i] = ||out[i]||^2``: a block of atoms, centred, on the
    coordinates ``cols`` (one pass, one thread, without the GIL; numpy's ``take`` along the columns, a
    subtraction and the norms are three passes, and ``take`` is slow)."""
    for i in range(src.shape[0]):
        acc = 0.0
        for q in range(cols.shape[0]):
            v = src[i, cols[q]] - centre[q]
            out[i, q] = v
            acc += v * v
        nrm[i] = acc


#: Logit error below which the GEMM form of the distances is left as it is at every level.
_LOGIT_TOL = 1e-13


def near_thresholds(eps_sq, c_sq, ck_sq, a_max, dim, log_weight_ratio, eps_gemm=float(np.finfo(np.float64).eps)):
    r"""Per row, the distance :math:`A_j = \|c - \mu_j\|^2` below which an atom can carry weight at the
    highest level, where its GEMM-form distances must be replaced by direct sums (0: none needed).

    The GEMM form :math:`\|c\|^2 + \|\mu_j\|^2 - 2\,c\cdot\mu_j` errs by about
    :math:`(D + 2)\,\varepsilon\,(\|c\|^2 + \|\mu_j\|^2)` in absolute terms, which the level
    multiplies by :math:`a = e^\lambda/2` in the logit: near-duplicate atoms at high SNR, whose weights
    hang on tiny distances, would get weights wrong far beyond rounding.  An atom with
    :math:`a (A_j - A_k) = \tau` has logit at most :math:`\log(\pi_{\max}/\pi_{\min}) - \tau +
    |\varepsilon|\sqrt{2\tau}` relative to the sampled atom's (:math:`B_j - B_k \le |\varepsilon|
    \sqrt{A_j - A_k}` up to the midpoint offset), which is below :math:`-750` (weight under the float64
    subnormals) once :math:`\sqrt\tau \ge (\sqrt2|\varepsilon| + \sqrt{2|\varepsilon|^2 + 4(750 +
    \log(\pi_{\max}/\pi_{\min}))})/2`.  The threshold is :math:`A_k + \tau / a_{\max}`
    (:math:`A_k = \|c - \mu_k\|^2`, 0 on a plain draw); the atoms below it have
    :math:`\|\mu_j\| \le \|c\| + \sqrt{A_j}`, so rows where even their logit error
    :math:`a_{\max}(D + 2)\,\varepsilon\,(\|c\|^2 + \|\mu_j\|^2)` stays below :data:`_LOGIT_TOL` get 0.

    Parameters
    ----------
    eps_sq, c_sq, ck_sq : ndarray, shape (n,)
        :math:`|\varepsilon|^2`, :math:`\|c\|^2`, :math:`\|c - \mu_k\|^2` per row.
    a_max : float
        :math:`e^{\lambda_{\max}}/2`.
    dim : int
        Coordinates of the GEMMs.
    log_weight_ratio : float
        :math:`\log(\pi_{\max}/\pi_{\min})`.
    eps_gemm : float
        Unit roundoff of the GEMMs (:math:`\varepsilon`; float32 GEMMs: its own).

    Returns
    -------
    ndarray, shape (n,)
    """
    eps_n = np.sqrt(eps_sq)
    root = 0.5 * (math.sqrt(2.0) * eps_n + np.sqrt(2.0 * eps_sq + 4.0 * (750.0 + log_weight_ratio)))
    thr = ck_sq + root * root / a_max
    reach = (np.sqrt(c_sq) + np.sqrt(thr)) ** 2  # largest ||mu_j||^2 below the threshold
    needed = a_max * (dim + 2) * eps_gemm * (c_sq + reach) > _LOGIT_TOL
    return np.where(needed, thr, 0.0)


def values_from_states(z_st, t_st, u_st):
    """Per-sample posterior entropy ``H = log Z - T / Z`` (floored at 0: rounding may leave -1e-16) and
    ``U / (2 Z)`` (half the trace-identity sum) from a level loop's final states."""
    return np.maximum(np.log(z_st) - t_st / z_st, 0.0), 0.5 * u_st / z_st


def level_pass_numpy(A, B, c, a_lev, b_lev, m_st, z_st, t_st, u_st):
    """Pure-numpy kernel (``np.exp``, no cutoff) from the distance matrices ``A``, ``B`` (n, Kb)."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    for t in range(len(a_lev)):
        logits = c[None, :] - a_lev[t] * A - b_lev[t] * B
        m_old = m_st[t]
        m_new = np.maximum(m_old, logits.max(axis=1))
        s = logits - m_new[:, None]
        e = np.exp(s)
        zb = e.sum(axis=1)
        tb = (e * s).sum(axis=1)
        ub = (e * A).sum(axis=1)
        first = np.isneginf(m_old)
        d = np.where(first, 0.0, m_old - m_new)
        f = np.where(first, 0.0, np.exp(d))
        z_old = np.where(first, 0.0, z_st[t])
        t_st[t] = np.where(first, 0.0, t_st[t] + d * z_old) * f + tb
        u_st[t] = np.where(first, 0.0, u_st[t]) * f + ub
        z_st[t] = z_old * f + zb
        m_st[t] = m_new
