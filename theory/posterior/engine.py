r"""Blocked posterior engine for large empirical Dirac mixtures (MNIST: K = 10,000 atoms, D = 784).

Data ``P = sum_k pi_k delta_{mu_k}`` in the VE/EDM scaling of the observation,
``x = x0 + sigma eps`` with ``sigma = exp(-lam/2)`` (``alpha = 1``); a VP
observation divided by ``alpha`` is the same, so every quantity is a function
of the log-SNR ``lam`` alone (docs/THEORY.md section 1).  Posterior weights

.. math::

    w_j(x) = \frac{\pi_j \exp(-\|x - \mu_j\|^2 e^{\lambda} / 2)}
                  {\sum_l \pi_l \exp(-\|x - \mu_l\|^2 e^{\lambda} / 2)}

are computed by log-sum-exp, block by block of atoms, so memory is bounded by
the block size (docs/THEORY.md section 3.1).

Common random numbers
---------------------
:func:`monte_carlo_information` draws ``(k_i, eps_i)``, ``i = 1..n``, once and
reuses them at every level.  With ``x_i = mu_{k_i} + sigma eps_i``

.. math::

    \|x_i - \mu_j\|^2 = A_{ij} + 2 \sigma B_{ij} + \sigma^2 \|\varepsilon_i\|^2,
    \quad A_{ij} = \|\mu_{k_i} - \mu_j\|^2,\quad B_{ij} = \varepsilon_i \cdot (\mu_{k_i} - \mu_j),

and the last term does not depend on ``j``, so the logits are
``log pi_j - A_ij e^lam / 2 - B_ij e^{lam/2}``: one GEMM of shape
``(2n x D)(D x K)`` (the sampled atoms and the noises against all atoms) serves
every level, and each level costs one ``O(nK)`` log-sum-exp pass.  Per sample,

.. math::

    \tfrac12 \sum_j w_j \|\mu_j - \mu_{k}\|^2
      = \tfrac12\bigl(\operatorname{tr} C(x) + \|m(x) - \mu_k\|^2\bigr),

whose expectation is ``mmse(lam)`` (both terms have expectation ``mmse``), so
the MMSE needs no per-level GEMM for the posterior mean ("trace identity"
estimator; the direct estimator ``||mu_k - m(x)||^2`` is available for checks
through :func:`posterior_weights_blocked`).  The per-sample posterior entropy
``-sum_j w_j log w_j`` (nats) averages to ``H(lam) = H[x0 | x]``.

The sampled atom index is stratified (strata of 2 or 3 samples along the
cumulative weights), and standard errors use the within-stratum variances, so
they stay honest (unbiased variance estimate) under stratification.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.errors import as_float_array, as_generator, as_int_scalar, check_finite, check_weight_vector
from noisealloc.theory.estimates import Estimate, InformationEstimates
from noisealloc.theory.posterior.asymptotics import live_coordinates, refuse_complex
from noisealloc.theory._threads import ChunkCounter, kernel_threads, run_stage_workers, single_blas_thread
from noisealloc.theory.posterior.common_random_numbers import CommonRandomNumbers, _samples_and_seed, draw_common_random_numbers, stratified_mean_stderr

__all__ = ['LAM_ABS_MAX', 'InformationSamples', 'information_samples', 'monte_carlo_information', 'estimates_from_samples', 'posterior_weights_blocked', 'default_block_size', 'validate_atoms', 'validate_weights']


#: |lam| above this is refused: e^lam would overflow float64 near 709.
LAM_ABS_MAX = 700.0
# Elements (rows x atoms) of one distance block; two float64 blocks of this size are ~32 MB.
_BLOCK_ELEMENTS = 1 << 21
# Squared distances below this multiple of their rounding-error bound are recomputed directly
# (near-duplicate atoms), so every other one keeps a relative error below 1e-8 (float64 GEMM) or
# 1e-2 in the worst case (float32 GEMM, whose typical error is ~sqrt(D) times below the bound).
_REFINE_FACTOR = 1e8
_REFINE_FACTOR_32 = 1e2
# A live squared distance is recomputed directly only where that is at least this much more accurate
# than the GEMM expansion (ratio of the two rounding bounds, (||x||^2 + ||mu||^2) / ||x - mu||^2).
_DIRECT_GAIN = 4.0
_EPS = float(np.finfo(np.float64).eps)
_EPS32 = float(np.finfo(np.float32).eps)


# --- validation -----------------------------------------------------------------------------------


def validate_atoms(atoms) -> np.ndarray:
    """Atoms as a finite ``(K, D)`` float64 array, ``K >= 1``, ``D >= 1``; ``ValueError`` naming ``atoms`` otherwise.

    Parameters
    ----------
    atoms : array_like, shape (K, D)

    Returns
    -------
    ndarray, shape (K, D), float64
    """
    refuse_complex(atoms, "atoms")
    arr = as_float_array(atoms, "atoms")
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"atoms must be a (K, D) array with K >= 1 and D >= 1; got shape {arr.shape}")
    return check_finite(arr, "atoms")


def validate_weights(weights, n_atoms: int) -> np.ndarray:
    """Weights as a ``(K,)`` float64 probability vector (``None`` gives ``1/K``).

    Entries must be finite and ``>= 0`` with a sum within ``1e-9`` of 1 (renormalised
    to remove that rounding); zero entries are allowed.

    Parameters
    ----------
    weights : array_like, shape (K,), or None
        Probabilities.
    n_atoms : int
        ``K``.

    Returns
    -------
    ndarray, shape (K,), float64
    """
    if isinstance(n_atoms, bool) or as_int_scalar(n_atoms, "n_atoms") != n_atoms:
        raise ValueError(f"n_atoms must be an integer; got {n_atoms!r}")
    return check_weight_vector(weights, n_atoms)


def _validate_lam(lam) -> np.ndarray:
    arr = as_float_array(lam, "lam")
    check_finite(arr, "lam")
    if np.any(np.abs(arr) > LAM_ABS_MAX):
        raise ValueError(f"lam must satisfy |lam| <= {LAM_ABS_MAX} (e^lam overflows beyond); got max |lam| = {np.abs(arr).max()}")
    return arr


def _check_block_size(block_size, n_rows: int, n_atoms: int) -> int:
    if block_size is None:
        return default_block_size(n_rows, n_atoms)
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)) or block_size < 1:
        raise ValueError(f"block_size must be a positive integer (atoms per block) or None; got {block_size!r}")
    return int(min(block_size, n_atoms))


def default_block_size(n_rows: int, n_atoms: int) -> int:
    """Atoms per block so that one ``(n_rows x block)`` float64 array has at most 2**21 entries (16 MB).

    The atoms are split into blocks of (nearly) equal size: no short tail block, whose GEMM
    would run at a fraction of the speed of the others.

    Parameters
    ----------
    n_rows : int
        Rows of the distance block (points or samples).
    n_atoms : int
        Number of atoms ``K``.

    Returns
    -------
    int
        Atoms per block, in ``[1, K]``.

    Examples
    --------
    >>> default_block_size(1024, 10_000)
    2000
    """
    cap = int(max(1, min(n_atoms, max(64, _BLOCK_ELEMENTS // max(n_rows, 1)))))
    n_blocks = -(-n_atoms // cap)
    return int(-(-n_atoms // n_blocks))


def _use_numba() -> bool:
    from noisealloc.theory._numba import HAVE_NUMBA

    return HAVE_NUMBA


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="atom", desc=desc, leave=False)


# --- posterior at given points ------------------------------------------------------------------------


def posterior_weights_blocked(atoms, log_pi, x, lam, *, block_size=None, float32_distances=False):
    r"""Denoiser, posterior entropy and log-normaliser at points ``x`` for one level, block by block.

    .. math::

        m(x) = \sum_j w_j(x) \mu_j, \qquad H(x) = -\sum_j w_j \log w_j, \qquad
        \log Z(x) = \log \sum_j \pi_j e^{-\|x - \mu_j\|^2 e^{\lambda}/2},

    with ``w_j = pi_j exp(-||x - mu_j||^2 e^lam / 2) / Z`` (VE scaling ``x = x0 + sigma eps``,
    ``sigma = exp(-lam/2)``).  Note ``log p(x) = log Z - (D/2) log(2 pi sigma^2)``.

    Parameters
    ----------
    atoms : array_like, shape (K, D)
    log_pi : array_like, shape (K,)
        Log prior weights (``-inf`` allowed for absent atoms; need not be normalised).
    x : array_like, shape (n, D)
    lam : float
        Log-SNR.
    block_size : int, optional
        Atoms per block; memory is ``O(n * block_size + n * D)``.
    float32_distances : bool
        Cross products ``x . mu_j`` in float32 (faster GEMM), everything else float64.
        Squared distances then carry an absolute error of about ``1e-7 (||x||^2 + ||mu||^2)``.

    Returns
    -------
    denoiser : ndarray, shape (n, D)
    entropy : ndarray, shape (n,)
        Nats.
    log_normaliser : ndarray, shape (n,)

    Notes
    -----
    Squared distances come from ``||x||^2 + ||mu||^2 - 2 x . mu`` (a GEMM).  At high
    SNR the rounding error of that expansion would be amplified by ``e^lam``, so the
    entries that can carry weight (within 50 nats of the row maximum, widened by the
    error bound) are recomputed directly as ``||x - mu_j||^2`` when ``e^lam`` times
    the error bound exceeds ``1e-12`` and the direct route is the more accurate one
    (``||x||^2 + ||mu_j||^2 > 4 ||x - mu_j||^2``, centred coordinates).  The direct sum
    of ``D`` squares has its own rounding bound ``(D + 2) eps ||x - mu_j||^2``; at low
    SNR, where ``||x - mu_j||^2`` is about ``||x||^2 + ||mu_j||^2``, recomputing would
    cost ``n K D`` gathered operations and gain nothing.  Every logit is therefore as
    accurate as the better of the two routes, within a factor of 4.
    """
    mu = validate_atoms(atoms)
    K, D = mu.shape
    lp = as_float_array(log_pi, "log_pi")
    if lp.shape != (K,):
        raise ValueError(f"log_pi must have shape ({K},) to match atoms; got {lp.shape}")
    if np.any(np.isnan(lp)) or np.any(lp == np.inf):
        raise ValueError("log_pi must not contain NaN or +inf")
    keep = lp > -np.inf
    if not np.any(keep):
        raise ValueError("log_pi must have at least one finite entry (all prior weights are zero)")
    mu, lp = mu[keep], lp[keep]
    mu_orig = mu
    K = mu.shape[0]
    xx = as_float_array(x, "x")
    if xx.ndim != 2 or xx.shape[1] != D:
        raise ValueError(f"x must have shape (n, {D}) to match atoms; got {xx.shape}")
    check_finite(xx, "x")
    lam_arr = _validate_lam(lam)
    if lam_arr.ndim != 0:
        raise ValueError(f"lam must be a scalar here; got shape {lam_arr.shape}")
    n = xx.shape[0]
    bs = _check_block_size(block_size, n, K)
    a = math.exp(float(lam_arr)) / 2.0

    # Shift invariance: centring shrinks the norms and hence the rounding error of the expansion.
    centre = mu.mean(axis=0)
    mu = mu - centre
    xc = xx - centre
    nx = np.einsum("ij,ij->i", xc, xc)
    nrm = np.einsum("ij,ij->i", mu, mu)
    eps_gemm = _EPS32 if float32_distances else _EPS
    xg = xc.astype(np.float32) if float32_distances else xc

    m_run = np.full(n, -np.inf)
    z_run = np.zeros(n)
    t_run = np.zeros(n)
    s_run = np.zeros((n, D))
    for start in range(0, K, bs):
        stop = min(K, start + bs)
        mub = mu[start:stop]
        g = xg @ (mub.astype(np.float32) if float32_distances else mub).T
        d2 = nx[:, None] + nrm[None, start:stop] - 2.0 * g.astype(np.float64)
        np.maximum(d2, 0.0, out=d2)
        # Error bound of the expansion (D-term dot products, each |x||mu|-sized).
        bound = (D + 2) * eps_gemm * (nx[:, None] + nrm[None, start:stop])
        logits = lp[None, start:stop] - a * d2
        rows = np.flatnonzero(a * bound.max(axis=1) > 1e-12)
        if rows.size:
            # Entries that could carry weight: within 50 nats of the row max after allowing for the error,
            # and only where the direct route is more accurate: its own rounding bound is about
            # (D + 2) eps d2, so recomputing pays only where d2 << ||x||^2 + ||mu||^2 (x near the atom,
            # i.e. high SNR).  At low SNR d2 ~ ||x||^2 + ||mu||^2 and both routes carry the same error.
            rmax = logits[rows].max(axis=1)
            slack = 50.0 + 2.0 * a * bound[rows].max(axis=1)
            gain = (nx[rows, None] + nrm[None, start:stop]) > _DIRECT_GAIN * d2[rows]
            rr, cc = np.nonzero((logits[rows] >= (rmax - slack)[:, None]) & gain)
            ri = rows[rr]
            # Original coordinates: the centring itself rounds at the scale eps * |centre|.
            diff = xx[ri] - mu_orig[start + cc]
            exact = np.einsum("ij,ij->i", diff, diff)
            logits[ri, cc] = lp[start + cc] - a * exact
        m_new = np.maximum(m_run, logits.max(axis=1))
        s = logits - m_new[:, None]
        e = np.exp(s)
        first = np.isneginf(m_run)
        d = np.where(first, 0.0, m_run - m_new)
        f = np.where(first, 0.0, np.exp(d))
        z_old = z_run
        t_run = np.where(first, 0.0, t_run + d * z_old) * f + np.einsum("ij,ij->i", e, s)
        z_run = z_old * f + e.sum(axis=1)
        s_run = s_run * f[:, None] + e @ mub
        m_run = m_new
    denoiser = s_run / z_run[:, None] + centre
    entropy = np.log(z_run) - t_run / z_run
    log_normaliser = m_run + np.log(z_run)
    return denoiser, np.maximum(entropy, 0.0), log_normaliser


# --- per-sample values -------------------------------------------------------------------------------


@dataclass(frozen=True)
class InformationSamples:
    """Per-sample values at every level, from one set of common random numbers.

    Attributes
    ----------
    lam : ndarray, shape (L,)
        Levels (flattened).
    entropy : ndarray, shape (L, n)
        Posterior entropy ``-sum_j w_j log w_j`` (nats) of sample ``i`` at level ``t``.
    mmse : ndarray, shape (L, n)
        ``1/2 sum_j w_j ||mu_j - mu_{k_i}||^2`` (trace-identity estimator; mean = ``mmse(lam)``).
    draws : CommonRandomNumbers
    info : dict
        Block size, distance precision, kernel, timings.
    """

    lam: np.ndarray
    entropy: np.ndarray
    mmse: np.ndarray
    draws: CommonRandomNumbers
    info: dict = field(default_factory=dict, compare=False)

    def mean_stderr(self, values) -> tuple[np.ndarray, np.ndarray]:
        r"""Mean over samples (last axis) and its standard error under the stratified design.

        .. math::

            \widehat{\operatorname{Var}} = \frac{1}{n^2} \sum_s n_s\, s_s^2,

        with ``s_s^2`` the unbiased within-stratum sample variance (``n_s`` samples).
        """
        return stratified_mean_stderr(values, self.draws.stratum)


# Sample rows per level-pass task of a worker thread (~2 ms of work on MNIST).
_PASS_ROWS = 16


def _numba_blocks(mu_all, live, centre_live, mk, eps_live, nk, ek, k, eps, log_w, a_lev, b_lev, order, ref,
                  states, bs, dtype, refine, near, threads, bar):
    """The blocked engine's GEMMs and level passes with the compiled kernels, on ``threads`` worker threads.

    For every block of atoms in turn, the workers (i) centre a share of its atoms into one of two
    shared buffers, (ii) after a barrier, each compute one single-threaded GEMM of a share of the
    sample rows against the block into the shared product, and (iii) after a second barrier, run
    the level passes on chunks of :data:`_PASS_ROWS` rows taken in turn from a shared counter (the
    rows' costs differ, so a fixed split left one worker waiting).  A row's level passes do not
    depend on the other rows or on which worker runs them, and the workers write disjoint rows of
    ``states``.  Single-threaded GEMMs, because a threaded GEMM's workers keep polling for work
    after each call (OpenBLAS: about 0.1 s) and take the cores from the level passes (measured: the
    level passes ran 1.6 times slower).  Buffers: the product (2n x block, as with one thread) and
    two centred blocks; a worker centres block b + 1 only after its level passes of block b, and the
    barrier after each centring guarantees that no worker still reads the product or the buffer of
    block b - 1.

    Returns
    -------
    (wall_gemm, wall_levels, cpu_gemm, cpu_levels) : tuple of float
        Seconds in (centring + GEMM, barriers included) and (distance assembly + level passes): wall,
        mean over the workers; CPU, summed over the workers' threads.
    """
    import threading
    import time

    from noisealloc.theory.posterior import _engine_kernels as kern

    K = mu_all.shape[0]
    n = mk.shape[0]
    m_st, z_st, t_st, u_st = states
    c_blk = np.ascontiguousarray(log_w)
    width = min(bs, K)
    mu_cb = np.empty((2, width, live.size))
    mu_cb32 = np.empty((2, width, live.size), dtype=np.float32) if dtype == np.float32 else None
    nrm_cb = np.empty((2, width))
    stacked = np.vstack([mk, eps_live]).astype(dtype, copy=False)
    g_flat = np.empty(2 * n * width, dtype=dtype)
    rows = np.linspace(0, n, threads + 1).round().astype(np.int64)
    barrier = threading.Barrier(threads)
    halt = threading.Event()
    counter = ChunkCounter()  # per block: the level-pass chunks handed out

    def work(w):
        r0, r1 = int(rows[w]), int(rows[w + 1])
        times = np.zeros(4)
        for b, start in enumerate(range(0, K, bs)):
            stop = min(K, start + bs)
            nb = stop - start
            c0, t0 = time.thread_time(), time.perf_counter()
            j0, j1 = (nb * w) // threads, (nb * (w + 1)) // threads
            kern.gather_centred_norms(mu_all[start + j0:start + j1], live, centre_live, mu_cb[b % 2, j0:j1],
                                      nrm_cb[b % 2, j0:j1])
            if mu_cb32 is not None:
                mu_cb32[b % 2, j0:j1] = mu_cb[b % 2, j0:j1]
            barrier.wait()
            mub = (mu_cb if mu_cb32 is None else mu_cb32)[b % 2, :nb]
            g = g_flat[: 2 * n * nb].reshape(2 * n, nb)
            if r1 > r0:
                np.matmul(stacked[r0:r1], mub.T, out=g[r0:r1])
                np.matmul(stacked[n + r0:n + r1], mub.T, out=g[n + r0:n + r1])
            barrier.wait()
            c1, t1 = time.thread_time(), time.perf_counter()
            k_local = k - start
            for lo, hi in counter.chunks(b, 0, n, _PASS_ROWS, halt):
                kern.level_pass_gram_rows(g, lo, hi, nk, nrm_cb[b % 2, :nb], ek, k_local, refine,
                                          near, mu_all, k, eps, start, c_blk[start:stop], a_lev, b_lev, order, ref,
                                          m_st, z_st, t_st, u_st)
            c2, t2 = time.thread_time(), time.perf_counter()
            times += (t1 - t0, t2 - t1, c1 - c0, c2 - c1)
            if bar is not None and w == 0:
                bar.update(nb)
        return times

    # A failed worker or an interrupt: the others stop at their next level-pass chunk or barrier.
    tot = np.sum(run_stage_workers(threads, work, halt, barrier), axis=0)
    return tot[0] / threads, tot[1] / threads, tot[2], tot[3]


def _numpy_blocks(mu_all, live, centre_live, mk, eps_live, nk, ek, k, eps, log_w, a_lev, b_lev, states, bs,
                  dtype, refine, near, bar):
    """The blocked engine with the pure-numpy reference kernel (one thread; the BLAS's own threads).

    Returns
    -------
    (wall_gemm, wall_levels, cpu_gemm, cpu_levels) : tuple of float
    """
    import time

    from noisealloc.theory.posterior import _engine_kernels as kern

    K = mu_all.shape[0]
    n = mk.shape[0]
    m_st, z_st, t_st, u_st = states
    stacked = np.vstack([mk, eps_live]).astype(dtype)
    mu_cb = np.empty((min(bs, K), live.size))
    g_flat = np.empty(2 * n * min(bs, K), dtype=dtype)
    rows = np.arange(n)
    t_gemm = t_pass = c_gemm = c_pass = 0.0
    for start in range(0, K, bs):
        stop = min(K, start + bs)
        nb = stop - start
        c0, t0 = time.process_time(), time.perf_counter()
        mub = np.take(mu_all[start:stop], live, axis=1, out=mu_cb[:nb])
        mub -= centre_live
        nrm_b = np.einsum("ij,ij->i", mub, mub)
        g = np.matmul(stacked, mub.astype(dtype, copy=False).T, out=g_flat[: 2 * n * nb].reshape(2 * n, nb))
        c1, t1 = time.process_time(), time.perf_counter()
        g = g.astype(np.float64, copy=False)
        A = nk[:, None] + nrm_b[None, :] - 2.0 * g[:n]
        np.maximum(A, 0.0, out=A)
        B = ek[:, None] - g[n:]
        # Near-duplicate atoms, and those that can carry weight at the top level: direct sums.
        ri, ci = np.nonzero((A < refine * (nk[:, None] + nrm_b[None, :])) | (A < near[:, None]))
        if ri.size:
            # Original coordinates: the centring itself rounds at the scale eps * |centre|.
            diff = mu_all[k[ri]] - mu_all[start + ci]
            A[ri, ci] = np.einsum("ij,ij->i", diff, diff)
            B[ri, ci] = np.einsum("ij,ij->i", eps[ri], diff)
        inside = (k >= start) & (k < stop)
        A[rows[inside], k[inside] - start] = 0.0  # the true atom: exactly zero distance
        B[rows[inside], k[inside] - start] = 0.0
        kern.level_pass_numpy(A, B, log_w[start:stop], a_lev, b_lev, m_st, z_st, t_st, u_st)
        c2, t2 = time.process_time(), time.perf_counter()
        t_gemm += t1 - t0
        t_pass += t2 - t1
        c_gemm += c1 - c0
        c_pass += c2 - c1
        if bar is not None:
            bar.update(nb)
    return t_gemm, t_pass, c_gemm, c_pass


def information_samples(
    atoms,
    weights,
    lam,
    *,
    n_samples: int,
    rng=None,
    block_size=None,
    float32_distances: bool = False,
    progress: bool = False,
    stratify: bool = True,
    kernel: str = "auto",
    importance: bool = False,
    centre=None,
    live=None,
) -> InformationSamples:
    r"""Per-sample posterior entropy and trace-identity MMSE at every level (common random numbers).

    Parameters
    ----------
    atoms, weights, lam, n_samples, rng, block_size, float32_distances, progress, stratify
        As :func:`monte_carlo_information`.
    kernel : {'auto', 'numba', 'numpy'}
        ``'auto'`` (numba when available), ``'numba'`` or ``'numpy'`` (the reference implementation).
    importance : bool
        Draw from the defensive nearest-neighbour-midpoint proposal of
        :mod:`noisealloc.theory.posterior.importance` (per-sample values carry the weight
        :math:`\omega = p/q \le 2`; i.i.d. draws, one stratum; ``block_size``, ``float32_distances``
        and ``stratify`` do not apply) instead of plain draws from the data law.  Needed at high
        SNR, where plain draws miss the boundary layers (docs/THEORY.md section 3.1).
    centre : array_like, shape (D,), optional
        The weighted mean of the atoms, when the caller has it (a model's cached value); computed
        otherwise.  It only centres the distance GEMMs (smaller rounding), so any nearby point gives
        the same results up to rounding.
    live : array_like of int, optional
        Increasing indices of the coordinates in which the atoms differ (or a superset), when the
        caller has them (:attr:`noisealloc.theory.posterior._scan.AtomScan.live`); computed otherwise.

    Returns
    -------
    InformationSamples
        ``entropy`` and ``mmse`` of shape ``(L, n)`` at the flattened levels, the draws, and
        ``info`` (seed, block size, kernel, timings).

    References
    ----------
    docs/THEORY.md section 3.1 (Monte Carlo with common random numbers).
    """
    mu = validate_atoms(atoms)
    w = validate_weights(weights, mu.shape[0])
    lam_arr = _validate_lam(lam).ravel()
    if lam_arr.size == 0:
        raise ValueError("lam must hold at least one level")
    if kernel not in ("auto", "numba", "numpy"):
        raise ValueError(f"kernel must be one of 'auto', 'numba', 'numpy'; got {kernel!r}")
    centre, live = _check_hints(centre, live, mu.shape[1])
    if importance:
        if block_size is not None or float32_distances:
            raise ValueError(f"block_size and float32_distances are options of the plain engine (importance=False); "
                             f"got block_size={block_size!r}, float32_distances={float32_distances!r} with importance=True")
        return _importance_information_samples(mu, w, lam_arr, n_samples=n_samples, rng=rng, centre=centre,
                                               live=live)
    use_numba = kernel == "numba" or (kernel == "auto" and _use_numba())
    threads = kernel_threads() if use_numba else 1
    # The worker threads run single-threaded GEMMs; a threaded BLAS call just before them (the centre
    # below) would leave BLAS threads polling on the cores they need (theory._threads).
    with single_blas_thread() if threads > 1 else contextlib.nullcontext():
        return _plain_information_samples(mu, w, lam_arr, n_samples, rng, block_size, float32_distances,
                                          progress, stratify, use_numba, threads, centre, live)


def _check_hints(centre, live, dim: int):
    """``centre`` as a finite (D,) float64 array and ``live`` as increasing int64 indices in ``[0, D)`` (or None)."""
    if centre is not None:
        centre = check_finite(as_float_array(centre, "centre"), "centre")
        if centre.shape != (dim,):
            raise ValueError(f"centre must have shape ({dim},); got {centre.shape}")
    if live is not None:
        live = np.asarray(live)
        if (live.ndim != 1 or live.size == 0 or live.dtype.kind not in "iu" or live[0] < 0 or live[-1] >= dim
                or np.any(np.diff(live) <= 0)):
            shown = np.array2string(live, threshold=8, edgeitems=3)
            raise ValueError(f"live must be non-empty increasing coordinate indices in [0, {dim}); got {shown} "
                             f"(dtype {live.dtype})")
        live = live.astype(np.int64, copy=False)
    return centre, live


def _plain_information_samples(mu, w, lam_arr, n_samples, rng, block_size, float32_distances, progress, stratify,
                               use_numba, threads, centre=None, live=None) -> InformationSamples:
    """:func:`information_samples` with the plain GEMM engine (arguments checked; ``threads`` workers)."""
    draws = draw_common_random_numbers(w, n_samples, mu.shape[1], rng=rng, stratify=stratify)
    n = len(draws.atom_index)

    # Zero-weight atoms never carry posterior mass and are never sampled: drop them.
    if np.all(w > 0):
        mu_all, k = mu, draws.atom_index  # no copy of a large atom array
    else:
        keep = np.flatnonzero(w > 0)
        remap = np.full(len(w), -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        mu_all, w = mu[keep], w[keep]
        k = remap[draws.atom_index]
    K, D = mu_all.shape
    bs = _check_block_size(block_size, n, K)

    # Centring (smaller norms, smaller rounding error in A), block by block into one reused
    # buffer: no centred copy of all atoms, no fresh page-faulting allocation per block.
    # Coordinates where every atom agrees add exactly 0 to every A and B (MNIST test set: 116 of 784
    # border pixels): the GEMM runs over the others only.
    from noisealloc.theory.posterior._scan import weighted_mean

    # A superset of the kept atoms' live coordinates and any centre give the same distances.
    live = live_coordinates(mu_all) if live is None else live
    centre = weighted_mean(mu_all, w) if centre is None else centre
    centre_live = centre[live]
    mk = mu_all[k][:, live] - centre_live
    eps_live = draws.eps[:, live]
    nk = np.einsum("ij,ij->i", mk, mk)
    ek = np.einsum("ij,ij->i", eps_live, mk)
    dtype = np.float32 if float32_distances else np.float64
    eps_gemm = _EPS32 if float32_distances else _EPS
    refine = (_REFINE_FACTOR_32 if float32_distances else _REFINE_FACTOR) * (D + 2) * eps_gemm
    log_w = np.log(w)
    from noisealloc.theory.posterior._engine_kernels import near_thresholds

    # Atoms that can carry weight at the top level, where it magnifies the GEMM form's absolute error.
    near = near_thresholds(np.einsum("ij,ij->i", eps_live, eps_live), nk, np.zeros(n),
                           float(np.exp(lam_arr.max())) / 2.0, live.size, float(log_w.max() - log_w.min()), eps_gemm)
    a_lev = np.exp(lam_arr) / 2.0
    b_lev = np.exp(lam_arr / 2.0)
    L = lam_arr.size
    m_st = np.full((L, n), -np.inf)
    z_st = np.zeros((L, n))
    t_st = np.zeros((L, n))
    u_st = np.zeros((L, n))
    # The compiled kernel visits the levels in ascending order (its pruning of atoms that can
    # never again carry weight relies on it) and floors each shift at the sampled atom's logit.
    order = np.argsort(a_lev, kind="stable")
    ref = log_w[k]
    states = (m_st, z_st, t_st, u_st)
    bar = _progress(K, progress, "posterior")
    try:
        if use_numba:
            threads = min(threads, n)
            timings = _numba_blocks(mu_all, live, centre_live, mk, eps_live, nk, ek, k, draws.eps, log_w, a_lev,
                                    b_lev, order, ref, states, bs, dtype, refine, near, threads, bar)
        else:
            timings = _numpy_blocks(mu_all, live, centre_live, mk, eps_live, nk, ek, k, draws.eps, log_w, a_lev,
                                    b_lev, states, bs, dtype, refine, near, bar)
    finally:
        if bar is not None:
            bar.close()
    t_gemm, t_pass, c_gemm, c_pass = timings
    from noisealloc.theory.posterior._engine_kernels import values_from_states

    entropy, mmse = values_from_states(z_st, t_st, u_st)
    info = {
        "seed": draws.seed,
        "block_size": bs,
        "float32_distances": bool(float32_distances),
        "stratified": bool(stratify),
        "kernel": "numba" if use_numba else "numpy",
        "n_atoms": int(K),
        "dim": int(D),
        "estimator": "trace-identity",
        "threads": int(threads),
        "seconds_gemm": t_gemm,  # wall seconds, block centring + GEMM (mean over the worker threads)
        "seconds_levels": t_pass,  # wall seconds, distance assembly + level passes
        "seconds_cpu_gemm": c_gemm,  # CPU seconds (numba kernels: summed over the worker threads; numpy: the process)
        "seconds_cpu_levels": c_pass,
    }
    return InformationSamples(lam_arr, entropy, mmse, draws, info)


def _importance_information_samples(mu, w, lam_arr, *, n_samples, rng, centre=None, live=None) -> InformationSamples:
    import time

    from noisealloc.theory.posterior.importance import importance_samples

    n, seed, rng = _samples_and_seed(n_samples, rng)
    keep = np.flatnonzero(w > 0)
    t0 = time.perf_counter()
    ent, mmse, k, eps, info = importance_samples(mu if keep.size == w.size else mu[keep], w[keep], lam_arr,
                                                 n_samples=n, gen=as_generator(rng), centre=centre, live=live)
    draws = CommonRandomNumbers(keep[k].astype(np.int64), eps, np.zeros(n, dtype=np.int64), seed)
    info.update({"seed": seed, "n_atoms": int(keep.size), "dim": int(mu.shape[1]),
                 "stratified": False, "seconds": time.perf_counter() - t0})
    return InformationSamples(lam_arr, ent, mmse, draws, info)


def estimates_from_samples(samples: InformationSamples, shape=None) -> InformationEstimates:
    r"""Per-level means and stratified standard errors of :func:`information_samples`' output.

    .. math::

        \widehat{\mathrm{mmse}}(\lambda_t) = \frac1n \sum_i \mathrm{mmse}_{ti}, \qquad
        \widehat H(\lambda_t) = \frac1n \sum_i H_{ti}, \qquad
        \hat h(\lambda_t) = \tfrac12 e^{\lambda_t}\,\widehat{\mathrm{mmse}}(\lambda_t),

    with the standard errors of :meth:`InformationSamples.mean_stderr`.

    Parameters
    ----------
    samples : InformationSamples
        Per-sample values at the levels ``samples.lam``.
    shape : tuple, optional
        Shape of the returned estimates (default ``samples.lam.shape``).

    Returns
    -------
    InformationEstimates
        ``mmse``, ``conditional_entropy`` (nats) and ``entropy_rate`` (per unit :math:`\lambda`,
        :func:`~noisealloc.theory.entropy_rate.entropy_rate_from_mmse`), each a ``'monte-carlo'``
        :class:`~noisealloc.theory.estimates.Estimate` with ``n_samples`` and the engine's ``info``.
    """
    from noisealloc.theory.entropy_rate import entropy_rate_from_mmse

    shape = samples.lam.shape if shape is None else tuple(shape)
    m_val, m_se = samples.mean_stderr(samples.mmse)
    h_val, h_se = samples.mean_stderr(samples.entropy)
    n = len(samples.draws.atom_index)
    info = dict(samples.info)

    def est(v, s):
        return Estimate(v.reshape(shape), s.reshape(shape), "monte-carlo", n_samples=n, info=info)

    mmse = est(m_val, m_se)
    return InformationEstimates(mmse=mmse, conditional_entropy=est(h_val, h_se),
                                entropy_rate=entropy_rate_from_mmse(np.reshape(samples.lam, shape), mmse))


def monte_carlo_information(
    atoms,
    weights,
    lam,
    *,
    n_samples: int,
    rng=None,
    block_size=None,
    float32_distances: bool = False,
    progress: bool = False,
    stratify: bool = True,
) -> InformationEstimates:
    r"""Monte-Carlo MMSE, conditional entropy and entropy rate of a Dirac mixture at many levels.

    .. math::

        \mathrm{mmse}(\lambda) = \tfrac12\,\mathbb E\Bigl[\sum_j w_j(x)\,\|\mu_j - \mu_k\|^2\Bigr],\quad
        H(\lambda) = \mathbb E\Bigl[-\sum_j w_j(x) \log w_j(x)\Bigr],\quad
        h(\lambda) = \tfrac12 e^{\lambda}\,\mathrm{mmse}(\lambda),

    with ``k ~ pi``, ``x = mu_k + sigma eps``, ``sigma = exp(-lam/2)`` (VE scaling), the
    same draws at every level (common random numbers; see the module docstring).

    Parameters
    ----------
    atoms : array_like, shape (K, D)
    weights : array_like, shape (K,), or None
        Probabilities (``None``: uniform).
    lam : array_like
        Levels (log-SNR), any shape, finite, ``|lam| <= 700``.
    n_samples : int
        Number of ``(k, eps)`` draws, ``>= 2``.
    rng : Generator, int or None
        Seed or generator; the integer seed (drawn from the OS when ``None``) is recorded in ``info``.
    block_size : int, optional
        Atoms per block; default keeps ``n_samples x block_size`` under 2**21 entries (16 MB).  Memory
        beyond the inputs and outputs: the product ``(2 n_samples x block_size)`` and two centred blocks
        ``(block_size x D)`` (float64), plus one row of ``block_size`` per worker thread.
    float32_distances : bool
        The GEMM in float32 (about 2x faster); accumulation stays float64.  Squared
        distances then carry an absolute error of about ``1e-7 (||mu_k||^2 + ||mu_j||^2)``
        (atoms are centred first).
    progress : bool
        Show a tqdm progress bar over atom blocks.
    stratify : bool
        Stratify the sampled atom index (default) or draw it i.i.d.

    Returns
    -------
    InformationEstimates
        ``mmse``, ``conditional_entropy`` (nats) and ``entropy_rate`` (per unit of
        ``lam``): :class:`~noisealloc.theory.estimates.Estimate` with ``method='monte-carlo'``,
        value and stderr of ``lam``'s shape.

    References
    ----------
    docs/THEORY.md section 3.1 (Monte Carlo with common random numbers, with a standard error).

    Examples
    --------
    >>> import numpy as np
    >>> out = monte_carlo_information(np.array([[0.0], [1.0]]), None, [-50.0, 50.0], n_samples=64, rng=0)
    >>> np.round(out.conditional_entropy.value, 6).tolist()
    [0.693147, 0.0]
    """
    shape = np.shape(lam)
    smp = information_samples(
        atoms, weights, lam, n_samples=n_samples, rng=rng, block_size=block_size,
        float32_distances=float32_distances, progress=progress, stratify=stratify,
    )
    return estimates_from_samples(smp, shape)
