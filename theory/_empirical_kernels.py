"""Kernels of the blocked posterior engine (private; used by :mod:`noisealloc.theory.empirical`).

One kernel, two implementations with the same contract:

* :func:`level_pass_gram` -- compiled through :func:`noisealloc.theory._numba.jit`;
  rows in parallel; each row's squared distances are assembled from the GEMM
  output and then every level is processed while the row sits in cache; a
  branch-free, vectorisable ``exp`` (``2**(k/64)`` table + degree-5 Taylor
  polynomial, <= 2 ulp) replaces numba's scalar ``math.exp``, which was the
  bottleneck (about 5 ns per call on the development machine, where no SVML is
  available); levels where at most 1/8 of the terms survive the cutoff (high
  SNR) take a scalar pass over the survivors instead.
* :func:`level_pass_numpy` -- the same arithmetic in plain numpy with ``np.exp``;
  the reference the tests compare the compiled kernel with.

Contract (both; the compiled kernel first builds ``A`` and ``B`` from the GEMM output): for one
block of atoms with logits

.. math::

    l_{ij}(\\lambda_t) = c_j - a_t A_{ij} - b_t B_{ij}

update, for every level ``t`` and row ``i``, the running state of an online
log-sum-exp: ``m`` (running maximum), ``Z = sum_j e^{l_j - m}``,
``T = sum_j e^{l_j - m} (l_j - m)`` (<= 0) and ``U = sum_j e^{l_j - m} A_ij``.
From the final state: ``log Z`` is the log-normaliser relative to ``m``,
``H = log Z - T / Z`` the posterior entropy (nats, no cancellation since
``T <= 0``) and ``U / Z = sum_j w_j A_ij``.

Terms with ``l_j - m < EXP_CUTOFF`` (= -708) are dropped: each is below
``e^{-708} ~ 3e-308`` relative to the largest term, beneath float64 resolution
of ``Z``.
"""

from __future__ import annotations

import math

import numpy as np

from noisealloc.theory._numba import jit, prange

__all__ = ["EXP_CUTOFF", "level_pass_gram", "level_pass_numpy", "exp_nonpositive"]

#: Shifted logits below this are treated as exp(.) = 0 (exp(-708) ~ 3.3e-308, the normal-number floor).
EXP_CUTOFF = -708.0
# exp(s) = 2**(k/64) * exp(r),  k = round(64 s / ln 2),  |r| <= ln2/128 ~ 0.0054.
# fdlibm's split of ln 2 divided by 64 (exact): _LN2_HI has 32 trailing zero bits, so k * _LN2_HI_64
# is exact for |k| < 2**20 (here |k| <= 65408).
_LN2_HI_64 = 6.93147180369123816490e-01 / 64.0
_LN2_LO_64 = 1.90821492927058770002e-10 / 64.0
_INV_LN2_64 = 64.0 * 1.44269504088896338700e00
# 1.5 * 2**52: adding it rounds a double of magnitude < 2**51 to an integer held in the low mantissa bits.
_MAGIC = 6755399441055744.0
# Offset 65536 = 1024 * 64 keeps the rounded integer non-negative (k >= -65408 for s >= -708), so
# unsigned (logical) shifts apply: AVX2 has no vector arithmetic shift of 64-bit integers.
_OFFSET = 65536.0
_MAGIC_OFF = _MAGIC + _OFFSET
_MAGIC_BITS_U = np.uint64(0x4338000000000000)  # bit pattern of _MAGIC
_U63 = np.uint64(63)
_U6 = np.uint64(6)
_U1 = np.uint64(1)
_U52 = np.uint64(52)
# Taylor coefficients 1/i!, i = 5..2; the degree-5 remainder is < 0.0055**6/720 ~ 3e-17 relative.
_C5 = 1.0 / 120.0
_C4 = 1.0 / 24.0
_C3 = 1.0 / 6.0
_C2 = 0.5
#: 2**(j/64), j = 0..63, correctly rounded (exp2 of an exact binary fraction).
EXP2_TABLE = np.exp2(np.arange(64) / 64.0)


@jit
def _exp_stage(l_buf, shift, s_buf, p_buf, y_buf, n):
    # Branch-free and free of float->int conversions, so LLVM vectorises it (AVX2 has no
    # vector double->int64 conversion; the _MAGIC addition replaces it).  Short polynomial:
    # a long Horner chain made the loop latency-bound.
    for j in range(n):
        s = l_buf[j] - shift
        if s < EXP_CUTOFF:
            s = EXP_CUTOFF
        s_buf[j] = s
        y = s * _INV_LN2_64 + _MAGIC_OFF
        kf = (y - _MAGIC_OFF)
        r = (s - kf * _LN2_HI_64) - kf * _LN2_LO_64
        p = _C5
        p = p * r + _C4
        p = p * r + _C3
        p = p * r + _C2
        p = p * r + 1.0
        p = p * r + 1.0
        p_buf[j] = p
        y_buf[j] = y


@jit
def _logits_stage(c, Arow, Brow, a, b, l_buf, n):
    # Separate from _exp_stage: with six arrays in one loop the compiler's runtime alias checks
    # exceed its limit and the loop stays scalar.
    for j in range(n):
        l_buf[j] = c[j] - a * Arow[j] - b * Brow[j]


@jit
def _scale_stage(y_bits, e_bits, idx, n):
    for j in range(n):
        # y's low bits hold kk = k + 65536 in [128, 65536] (k in [-65408, 0]); k = 64 q + idx with
        # q = (kk >> 6) - 1024 in [-1022, 0], so 2**q has exponent field (kk >> 6) - 1 >= 1.
        kk = y_bits[j] - _MAGIC_BITS_U
        idx[j] = kk & _U63
        e_bits[j] = ((kk >> _U6) - _U1) << _U52


@jit
def exp_nonpositive(s):
    """``exp(s)`` for a 1-D float64 array ``s <= 0`` by the kernel's vectorisable routine.

    Entries at or below :data:`EXP_CUTOFF` give 0.  Exposed so that tests can compare it with ``np.exp``.
    """
    n = s.shape[0]
    s_buf = s.copy()
    p_buf = np.empty(n)
    y_buf = np.empty(n)
    e_bits = np.empty(n, dtype=np.uint64)
    idx = np.empty(n, dtype=np.uint64)
    _exp_stage(s, 0.0, s_buf, p_buf, y_buf, n)
    _scale_stage(y_buf.view(np.uint64), e_bits, idx, n)
    scale = e_bits.view(np.float64)
    out = np.empty(n)
    for j in range(n):
        out[j] = 0.0 if s_buf[j] <= EXP_CUTOFF else p_buf[j] * EXP2_TABLE[idx[j]] * scale[j]
    return out


# Atoms per inner chunk: five float64 buffers of this length stay in a 32 KB L1 cache.
_CHUNK = 512
# Use the scalar pass over surviving terms when at most 1/_SPARSE_RATIO of them survive the cutoff.
_SPARSE_RATIO = 8
# A shift may exceed the row's true maximum logit by at most this (see _row_levels).
_SHIFT_SLACK = 300.0


@jit
def _weights_stage(idx, scale, p_buf, s_buf, e_buf, n):
    for j in range(n):
        v = p_buf[j] * EXP2_TABLE[idx[j]] * scale[j]
        e_buf[j] = 0.0 if s_buf[j] <= EXP_CUTOFF else v


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
def _row_levels(Arow, Brow, c, a_lev, b_lev, m_st, z_st, t_st, u_st, i, l_buf, s_buf, p_buf, y_buf, e_buf):
    """All levels for one row: logits, running max, exp, sums; merge into the state of row ``i``."""
    kb = Arow.shape[0]
    n_lev = a_lev.shape[0]
    chunk = s_buf.shape[0]
    y_bits = y_buf.view(np.uint64)
    idx = np.empty(chunk, dtype=np.uint64)
    e_bits = np.empty(chunk, dtype=np.uint64)
    scale = e_bits.view(np.float64)
    ones = np.ones(chunk)
    # Bounds for a safe shift: every logit of this block is <= cmax - a amin - b bmin.
    cmax = c[0]
    amin = Arow[0]
    bmin = Brow[0]
    for j in range(1, kb):
        cmax = c[j] if c[j] > cmax else cmax
        amin = Arow[j] if Arow[j] < amin else amin
        bmin = Brow[j] if Brow[j] < bmin else bmin
    for t in range(n_lev):
        a = a_lev[t]
        b = b_lev[t]
        m_old = m_st[t, i]
        shift = cmax - a * amin - b * bmin
        l_first = c[0] - a * Arow[0] - b * Brow[0]
        if shift - l_first <= _SHIFT_SLACK:
            # Low SNR: the upper bound is within _SHIFT_SLACK of an actual logit, hence of the
            # row's true maximum, so it serves as the log-sum-exp shift (terms are <= 1 and the
            # largest >= e^-_SHIFT_SLACK) and the max and count passes are skipped.  By induction
            # every running shift stays <= true max + _SHIFT_SLACK, so the cutoff only drops terms
            # below e^(_SHIFT_SLACK + EXP_CUTOFF) ~ 1e-177 relative to the largest one.
            m_new = shift if shift > m_old else m_old
            zb = 0.0
            tb = 0.0
            ub = 0.0
            for j0 in range(0, kb, chunk):
                nc = min(chunk, kb - j0)
                _logits_stage(c[j0 : j0 + nc], Arow[j0 : j0 + nc], Brow[j0 : j0 + nc], a, b, l_buf[j0 : j0 + nc], nc)
                _exp_stage(l_buf[j0 : j0 + nc], m_new, s_buf, p_buf, y_buf, nc)
                _scale_stage(y_bits, e_bits, idx, nc)
                _weights_stage(idx, scale, p_buf, s_buf, e_buf, nc)
                zb += np.dot(e_buf[:nc], ones[:nc])
                tb += np.dot(e_buf[:nc], s_buf[:nc])
                ub += np.dot(e_buf[:nc], Arow[j0 : j0 + nc])
            _merge(m_st, z_st, t_st, u_st, t, i, m_old, m_new, zb, tb, ub)
            continue
        _logits_stage(c, Arow, Brow, a, b, l_buf, kb)
        mx0 = mx1 = mx2 = mx3 = -np.inf
        j = 0
        while j + 4 <= kb:
            mx0 = l_buf[j] if l_buf[j] > mx0 else mx0
            mx1 = l_buf[j + 1] if l_buf[j + 1] > mx1 else mx1
            mx2 = l_buf[j + 2] if l_buf[j + 2] > mx2 else mx2
            mx3 = l_buf[j + 3] if l_buf[j + 3] > mx3 else mx3
            j += 4
        while j < kb:
            mx0 = l_buf[j] if l_buf[j] > mx0 else mx0
            j += 1
        mb = max(max(mx0, mx1), max(mx2, mx3))
        m_new = mb if mb > m_old else m_old
        zb = 0.0
        tb = 0.0
        ub = 0.0
        # Count the terms above the cutoff (a vectorised integer sum); when few survive -- high
        # SNR, where the posterior has resolved the atom -- a scalar pass over them is cheaper.
        cut = m_new + EXP_CUTOFF
        alive = 0
        for j in range(kb):
            alive += l_buf[j] > cut
        if alive * _SPARSE_RATIO <= kb:
            for j in range(kb):
                if l_buf[j] > cut:
                    sj = l_buf[j] - m_new
                    ej = math.exp(sj)
                    zb += ej
                    tb += ej * sj
                    ub += ej * Arow[j]
            j0_start = kb
        else:
            j0_start = 0
        for j0 in range(j0_start, kb, chunk):
            nc = min(chunk, kb - j0)
            _exp_stage(l_buf[j0 : j0 + nc], m_new, s_buf, p_buf, y_buf, nc)
            _scale_stage(y_bits, e_bits, idx, nc)
            _weights_stage(idx, scale, p_buf, s_buf, e_buf, nc)
            # BLAS dot products: vectorised sums (fastmath=False forbids the compiler to
            # reassociate a loop sum, so a plain loop would be latency-bound).
            zb += np.dot(e_buf[:nc], ones[:nc])
            tb += np.dot(e_buf[:nc], s_buf[:nc])
            ub += np.dot(e_buf[:nc], Arow[j0 : j0 + nc])
        _merge(m_st, z_st, t_st, u_st, t, i, m_old, m_new, zb, tb, ub)


@jit(parallel=True)
def level_pass_gram(G, nk, nrm, ek, k_local, refine_factor, atoms, k_global, eps, start,
                    c, a_lev, b_lev, m_st, z_st, t_st, u_st):
    """Compiled kernel working from the GEMM output directly (no distance matrices in memory).

    ``G`` (2n, Kb): rows ``0..n-1`` hold ``mu_k . mu_j`` and rows ``n..2n-1`` hold ``eps . mu_j``
    (centred atoms).  Per row: ``A_ij = nk_i + nrm_j - 2 G_ij`` (clamped at 0),
    ``B_ij = ek_i - G_{n+i, j}``; entries with ``A_ij < refine_factor (nk_i + nrm_j)``
    (near-duplicates, where the expansion loses its relative accuracy) are recomputed from the
    original ``atoms`` (K, D); the true atom (``k_local[i]`` in ``[0, Kb)``) gets exactly 0.
    Then :func:`_row_levels`.
    """
    n2, kb = G.shape
    n = n2 // 2
    dim = atoms.shape[1]
    chunk = min(_CHUNK, kb)
    for i in prange(n):
        Arow = np.empty(kb)
        Brow = np.empty(kb)
        l_buf = np.empty(kb)
        s_buf = np.empty(chunk)
        p_buf = np.empty(chunk)
        y_buf = np.empty(chunk)
        e_buf = np.empty(chunk)
        nki = nk[i]
        eki = ek[i]
        for j in range(kb):
            a = nki + nrm[j] - 2.0 * G[i, j]
            Arow[j] = a if a > 0.0 else 0.0
            Brow[j] = eki - G[n + i, j]
        kg = k_global[i]
        for j in range(kb):
            if Arow[j] < refine_factor * (nki + nrm[j]):
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
        _row_levels(Arow, Brow, c, a_lev, b_lev, m_st, z_st, t_st, u_st, i, l_buf, s_buf, p_buf, y_buf, e_buf)


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
