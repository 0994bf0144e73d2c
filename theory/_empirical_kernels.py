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
_MAGIC_BITS = 0x4338000000000000  # bit pattern of _MAGIC
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
        y = s * _INV_LN2_64 + _MAGIC
        kf = y - _MAGIC
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
def _scale_stage(y_bits, e_bits, idx, n):
    for j in range(n):
        # y's low bits hold k (two's complement, k in [-65408, 0]); k = 64 q + idx with
        # q = k >> 6 (floor) in [-1022, 0], so 2**q has exponent field q + 1023 >= 1.
        k = y_bits[j] - _MAGIC_BITS
        idx[j] = k & 63
        e_bits[j] = ((k >> 6) + 1023) << 52


@jit
def exp_nonpositive(s):
    """``exp(s)`` for a 1-D float64 array ``s <= 0`` by the kernel's vectorisable routine.

    Entries at or below :data:`EXP_CUTOFF` give 0.  Exposed so that tests can compare it with ``np.exp``.
    """
    n = s.shape[0]
    s_buf = s.copy()
    p_buf = np.empty(n)
    y_buf = np.empty(n)
    e_bits = np.empty(n, dtype=np.int64)
    idx = np.empty(n, dtype=np.int64)
    _exp_stage(s, 0.0, s_buf, p_buf, y_buf, n)
    _scale_stage(y_buf.view(np.int64), e_bits, idx, n)
    scale = e_bits.view(np.float64)
    out = np.empty(n)
    for j in range(n):
        out[j] = 0.0 if s_buf[j] <= EXP_CUTOFF else p_buf[j] * EXP2_TABLE[idx[j]] * scale[j]
    return out


#: 2**(-q), q = 0..1022 (exact powers of two): the integer part of the scaling, gathered from a table
#: because a bit-cast inside the gather loop would stop vectorisation.
EXP2_NEG_INT = np.ldexp(1.0, -np.arange(1023))
# Atoms per inner chunk: five float64 buffers of this length stay in a 32 KB L1 cache.
_CHUNK = 512
# Use the scalar pass over surviving terms when at most 1/_SPARSE_RATIO of them survive the cutoff.
_SPARSE_RATIO = 8


@jit
def _weights_stage(y_bits, p_buf, s_buf, e_buf, n):
    for j in range(n):
        k = y_bits[j] - _MAGIC_BITS
        v = p_buf[j] * EXP2_TABLE[k & 63] * EXP2_NEG_INT[-(k >> 6)]
        e_buf[j] = 0.0 if s_buf[j] <= EXP_CUTOFF else v


@jit
def _row_levels(Arow, Brow, c, a_lev, b_lev, m_st, z_st, t_st, u_st, i, l_buf, s_buf, p_buf, y_buf, e_buf):
    """All levels for one row: logits, running max, exp, sums; merge into the state of row ``i``."""
    kb = Arow.shape[0]
    n_lev = a_lev.shape[0]
    chunk = s_buf.shape[0]
    y_bits = y_buf.view(np.int64)
    for t in range(n_lev):
        a = a_lev[t]
        b = b_lev[t]
        mx0 = mx1 = mx2 = mx3 = -np.inf
        j = 0
        while j + 4 <= kb:
            l0 = c[j] - a * Arow[j] - b * Brow[j]
            l1 = c[j + 1] - a * Arow[j + 1] - b * Brow[j + 1]
            l2 = c[j + 2] - a * Arow[j + 2] - b * Brow[j + 2]
            l3 = c[j + 3] - a * Arow[j + 3] - b * Brow[j + 3]
            l_buf[j] = l0
            l_buf[j + 1] = l1
            l_buf[j + 2] = l2
            l_buf[j + 3] = l3
            mx0 = l0 if l0 > mx0 else mx0
            mx1 = l1 if l1 > mx1 else mx1
            mx2 = l2 if l2 > mx2 else mx2
            mx3 = l3 if l3 > mx3 else mx3
            j += 4
        while j < kb:
            l0 = c[j] - a * Arow[j] - b * Brow[j]
            l_buf[j] = l0
            mx0 = l0 if l0 > mx0 else mx0
            j += 1
        mb = max(max(mx0, mx1), max(mx2, mx3))
        m_old = m_st[t, i]
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
            _weights_stage(y_bits, p_buf, s_buf, e_buf, nc)
            # Four independent accumulators: a single running sum is latency-bound
            # (fastmath=False forbids the compiler to reassociate it).
            z0 = z1 = z2 = z3 = 0.0
            t0 = t1 = t2 = t3 = 0.0
            u0 = u1 = u2 = u3 = 0.0
            j = 0
            while j + 4 <= nc:
                z0 += e_buf[j]
                z1 += e_buf[j + 1]
                z2 += e_buf[j + 2]
                z3 += e_buf[j + 3]
                t0 += e_buf[j] * s_buf[j]
                t1 += e_buf[j + 1] * s_buf[j + 1]
                t2 += e_buf[j + 2] * s_buf[j + 2]
                t3 += e_buf[j + 3] * s_buf[j + 3]
                u0 += e_buf[j] * Arow[j0 + j]
                u1 += e_buf[j + 1] * Arow[j0 + j + 1]
                u2 += e_buf[j + 2] * Arow[j0 + j + 2]
                u3 += e_buf[j + 3] * Arow[j0 + j + 3]
                j += 4
            while j < nc:
                z0 += e_buf[j]
                t0 += e_buf[j] * s_buf[j]
                u0 += e_buf[j] * Arow[j0 + j]
                j += 1
            zb += (z0 + z1) + (z2 + z3)
            tb += (t0 + t1) + (t2 + t3)
            ub += (u0 + u1) + (u2 + u3)
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
