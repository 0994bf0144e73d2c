"""Thread control shared by the engines and the solvers: the scoped BLAS thread limit and the
number of worker threads of the compiled kernels (one place for both)."""

from __future__ import annotations

from contextlib import contextmanager

__all__ = ["single_blas_thread", "kernel_threads", "worker_pool"]

import threading as _threading

_POOLS: dict = {}
_POOL_LOCK = _threading.Lock()
_CONTROLLER = None


@contextmanager
def single_blas_thread():
    """Limit BLAS to one thread inside the ``with`` block; the previous limits are restored on exit.

    The solvers' GEMVs and m x m factorisations are too small for threading to pay, and on a
    shared machine oversubscription slows them about tenfold.  The posterior engine runs one
    single-threaded GEMM per worker thread: a threaded GEMM's workers keep polling for work
    (OpenBLAS: about 0.1 s) after every call, and would take the cores from the level passes.  The limit is scoped: it is undone
    on every exit path (normal return or exception), so the process-wide BLAS thread count after
    the block is what it was before.  Without threadpoolctl (it comes with scikit-learn) this is a
    no-op.

    Yields
    ------
    None

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.solvers import single_blas_thread
    >>> with single_blas_thread():
    ...     x = np.linalg.solve(np.eye(3), np.ones(3))
    >>> x.tolist()
    [1.0, 1.0, 1.0]
    """
    controller = _controller()
    if controller is None:  # pragma: no cover - scikit-learn brings threadpoolctl
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield


def _controller():
    """threadpoolctl's controller, made once (making one scans the loaded libraries: ~3 ms), or None.

    Remade when a new process-wide library has been loaded since (the scan is what finds it).
    """
    global _CONTROLLER
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - scikit-learn brings threadpoolctl
        return None
    import sys

    key = len(sys.modules)
    with _POOL_LOCK:
        if _CONTROLLER is None or _CONTROLLER[0] != key:
            _CONTROLLER = (key, ThreadpoolController())
        return _CONTROLLER[1]


def kernel_threads() -> int:
    """Worker threads for the compiled kernels: numba's thread count (``NUMBA_NUM_THREADS``,
    :func:`numba.set_num_threads`), 1 without numba.

    Returns
    -------
    int
        At least 1.
    """
    from noisealloc.theory._numba import HAVE_NUMBA

    if not HAVE_NUMBA:
        return 1
    import numba

    return max(1, int(numba.get_num_threads()))


def worker_pool(threads: int):
    """A process-wide thread pool of ``threads`` workers, made on first use and kept.

    Kept because a fresh thread pays for its first GEMM: OpenBLAS allocates and faults in a
    per-thread buffer (measured: the first block's GEMM took twice as long in a new thread).

    Parameters
    ----------
    threads : int
        Workers, ``>= 1``.

    Returns
    -------
    concurrent.futures.ThreadPoolExecutor
    """
    from concurrent.futures import ThreadPoolExecutor

    with _POOL_LOCK:
        pool = _POOLS.get(threads)
        if pool is None:
            pool = _POOLS[threads] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="noisealloc-kernel")
        return pool
