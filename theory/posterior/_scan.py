r"""One-pass statistics of a large atom array, on all cores (private).

A Dirac mixture of MNIST's 10,000 images (63 MB) is read several times before its posterior
engine starts: its extremes, the row hashes that find duplicate atoms, the coordinates in which
the atoms differ, the weighted mean, the atoms' distances from it, and the projections that bound
the smallest pair distance.  Each was a single-threaded numpy pass (some with temporaries the
size of the atoms) while the second core idled: about 35 ms of a 0.3 s profile.  The compiled
kernels here fold them into fewer passes over the rows, split across the kept worker threads of
:mod:`noisealloc.theory._threads` (not numba's ``parallel``, whose OpenMP layer makes a process
that forks after using it abort); without numba the same quantities come from numpy.

Every result is the same quantity as the numpy expression it replaces; sums are accumulated in
another order (per-thread partial sums), so they agree to rounding, not bitwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from noisealloc.theory._numba import HAVE_NUMBA, jit

__all__: list[str] = []

# Bits of -0.0: hashed as 0.0 (the same point).
_NEG_ZERO_BITS = np.uint64(0x8000000000000000)
# Row chunks of the partial column reductions (a few per thread: load balance on a shared machine).
_CHUNKS = 16
# Seed of the row hash's per-coordinate multipliers.
_HASH_SEED = 0x5EED
# Rows per block of the numpy fallbacks (a few MB of temporaries).
_NUMPY_ROWS = 512
# Fewer rows than this per thread: one thread (a small array is not worth a hand-off).
_MIN_ROWS_PER_THREAD = 256


@dataclass(frozen=True)
class AtomScan:
    """What one pass over the atoms gives.

    Attributes
    ----------
    row_hash : ndarray of uint64, shape (K,)
        :math:`\\sum_d m_d\\,\\mathrm{bits}(\\mu_{kd} + 0)` modulo :math:`2^{64}` (odd seeded multipliers
        :math:`m_d`; ``-0.0`` hashes as ``0.0``): equal rows have equal hashes.
    col_max, col_min : ndarray, shape (D,)
        Largest and smallest coordinate per column (NaN when the column holds a NaN).
    """

    row_hash: np.ndarray
    col_max: np.ndarray
    col_min: np.ndarray

    @property
    def live(self) -> np.ndarray:
        """Indices of the columns in which not all atoms agree (all columns when none does); as
        :func:`noisealloc.theory.posterior.asymptotics.live_coordinates`."""
        live = np.flatnonzero(self.col_max != self.col_min)
        return live if live.size else np.arange(self.col_max.size)


def hash_multipliers(dim: int) -> np.ndarray:
    """The row hash's odd multipliers (seeded: hashes are reproducible)."""
    return np.random.default_rng(_HASH_SEED).integers(1, 2**62, size=dim, dtype=np.uint64) | np.uint64(1)


def split_rows(K: int, kernel, *args):
    """Run ``kernel(part, row_lo, row_hi, *args)`` on ``parts`` row ranges, on the kept worker threads.

    The worker threads of :func:`noisealloc.theory._threads.run_workers`, not numba's ``parallel``:
    numba's OpenMP layer makes a process that forks after using it abort (process pools fork).
    Returns the number of parts.
    """
    import threading

    from noisealloc.theory._threads import kernel_threads, run_workers

    threads = max(1, min(kernel_threads(), K // _MIN_ROWS_PER_THREAD))
    parts = max(1, min(_CHUNKS, K))
    bounds = [(K * c) // parts for c in range(parts + 1)]
    halt = threading.Event()  # set on an interrupt or a failed worker: the others stop at their next part

    def work(w):
        for c in range(w, parts, threads):
            if halt.is_set():
                return
            kernel(c, bounds[c], bounds[c + 1], *args)

    if threads == 1:
        work(0)
    else:
        run_workers(threads, work, halt.set)
    return parts


@jit(nogil=True)
def _scan_rows(part, lo, hi, atoms, bits, mult, row_hash, part_max, part_min):
    D = atoms.shape[1]
    for d in range(D):
        part_max[part, d] = -np.inf
        part_min[part, d] = np.inf
    for i in range(lo, hi):
        acc = np.uint64(0)
        for d in range(D):
            b = bits[i, d]
            if b == _NEG_ZERO_BITS:
                b = np.uint64(0)
            acc += b * mult[d]
            x = atoms[i, d]
            # NaN propagates, as in np.max / np.min: it replaces any number and is never replaced.
            m = part_max[part, d]
            if m == m and not x <= m:
                part_max[part, d] = x
            m = part_min[part, d]
            if m == m and not x >= m:
                part_min[part, d] = x
        row_hash[i] = acc


def scan_atoms(atoms: np.ndarray) -> AtomScan:
    """Row hashes and column extremes of ``atoms`` (K, D) in one pass (compiled, on the worker threads; else numpy).

    Parameters
    ----------
    atoms : ndarray, shape (K, D), float64

    Returns
    -------
    AtomScan
    """
    atoms = np.ascontiguousarray(atoms, dtype=np.float64)
    K, D = atoms.shape
    mult = hash_multipliers(D)
    row_hash = np.empty(K, dtype=np.uint64)
    if HAVE_NUMBA:
        part_max = np.empty((_CHUNKS, D))
        part_min = np.empty((_CHUNKS, D))
        parts = split_rows(K, _scan_rows, atoms, atoms.view(np.uint64), mult, row_hash, part_max, part_min)
        return AtomScan(row_hash, part_max[:parts].max(axis=0), part_min[:parts].min(axis=0))
    buf = np.empty((min(K, _NUMPY_ROWS), D))
    for s in range(0, K, _NUMPY_ROWS):
        b = buf[: min(K, s + _NUMPY_ROWS) - s]
        np.add(atoms[s:s + b.shape[0]], 0.0, out=b)  # -0.0 -> 0.0: equal points, equal bytes
        u = b.view(np.uint64)
        np.multiply(u, mult, out=u)
        np.sum(u, axis=1, dtype=np.uint64, out=row_hash[s:s + b.shape[0]])
    return AtomScan(row_hash, atoms.max(axis=0), atoms.min(axis=0))


@jit(nogil=True)
def _weighted_sum_rows(part, lo, hi, atoms, w, out):
    D = atoms.shape[1]
    for d in range(D):
        out[part, d] = 0.0
    for i in range(lo, hi):
        wi = w[i]
        for d in range(D):
            out[part, d] += wi * atoms[i, d]


def weighted_mean(atoms: np.ndarray, w: np.ndarray) -> np.ndarray:
    r""":math:`\bar\mu = \sum_k w_k \mu_k` (D,): partial sums over row ranges, added at the end (compiled),
    else ``w @ atoms``."""
    if not HAVE_NUMBA:
        return w @ atoms
    atoms = np.ascontiguousarray(atoms, dtype=np.float64)
    part = np.empty((_CHUNKS, atoms.shape[1]))
    parts = split_rows(atoms.shape[0], _weighted_sum_rows, atoms, np.ascontiguousarray(w, dtype=np.float64), part)
    return part[:parts].sum(axis=0)


@jit(nogil=True)
def _centred_sq_norm_rows(part, lo, hi, atoms, centre, out):
    D = atoms.shape[1]
    for i in range(lo, hi):
        acc = 0.0
        for d in range(D):
            v = atoms[i, d] - centre[d]
            acc += v * v
        out[i] = acc


def centred_sq_norms(atoms: np.ndarray, centre: np.ndarray) -> np.ndarray:
    r""":math:`\|\mu_k - \bar\mu\|^2` per row, each summed directly (no cancellation); numpy in row blocks
    without numba."""
    K = atoms.shape[0]
    out = np.empty(K)
    if HAVE_NUMBA:
        split_rows(K, _centred_sq_norm_rows, np.ascontiguousarray(atoms, dtype=np.float64),
                    np.ascontiguousarray(centre, dtype=np.float64), out)
        return out
    for s in range(0, K, _NUMPY_ROWS):
        c = atoms[s:s + _NUMPY_ROWS] - centre
        out[s:s + _NUMPY_ROWS] = np.einsum("kd,kd->k", c, c)
    return out


def _project_rows(part, lo, hi, points, g, out):
    np.matmul(points[lo:hi], g, out=out[lo:hi])  # releases the GIL


def project(points: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``points @ g`` for a few columns ``g`` (D, P): single-threaded GEMMs of row ranges on the worker threads.

    A GEMM this thin runs on one core however many threads the BLAS has (measured: 10 ms on
    MNIST, against ~3 ms split over two workers).
    """
    from noisealloc.theory._threads import single_blas_thread

    out = np.empty((points.shape[0], g.shape[1]))
    with single_blas_thread():
        split_rows(points.shape[0], _project_rows, points, np.ascontiguousarray(g, dtype=np.float64), out)
    return out
