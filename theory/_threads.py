"""Thread control shared by the engines and the solvers: the scoped BLAS thread limit and the
number of worker threads of the compiled kernels (one place for both)."""

from __future__ import annotations

import os
import threading as _threading
from contextlib import contextmanager

__all__ = ["single_blas_thread", "kernel_threads", "run_workers", "run_stage_workers", "ChunkCounter", "interruptible"]

#: How often a main thread waiting for workers returns to the interpreter (seconds).  A signal sent
#: to the process may be delivered to any thread that does not block it; the handler's flag is then
#: set, but a main thread blocked in a lock or condition without a timeout is not woken, so the
#: Python handler (the CLI's interrupt) would run only when the workers finish: seconds on MNIST,
#: and in 1 of ~80 SIGTERMs sent to ``bench posterior --mnist`` the run went on to finish with status 0.
#: Waiting in slices of this length bounds the delay.
SIGNAL_POLL_SECONDS = 0.05

_POOLS: dict = {}
_POOL_LOCK = _threading.Lock()
_CONTROLLER = None
# single_blas_thread is process-wide: the first thread to enter limits the BLAS, the last to leave
# restores it (each restoring what it saw on entry would leave the limit in place when two overlap).
_LIMIT_LOCK = _threading.Lock()
_LIMIT_DEPTH = 0
_LIMITER = None


def _forget_pools_in_child() -> None:
    # A forked child inherits the pools but not their threads: work submitted there would wait forever.
    global _POOLS, _POOL_LOCK, _CONTROLLER, _LIMIT_LOCK, _LIMIT_DEPTH, _LIMITER
    _POOLS = {}
    _POOL_LOCK = _threading.Lock()
    _CONTROLLER = None
    _LIMIT_LOCK = _threading.Lock()
    _LIMIT_DEPTH = 0
    _LIMITER = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools_in_child)


@contextmanager
def single_blas_thread():
    """Limit BLAS to one thread inside the ``with`` block; the previous limits are restored on exit.

    The solvers' GEMVs and m x m factorisations are too small for threading to pay, and on a
    shared machine oversubscription slows them about tenfold.  The posterior engine runs one
    single-threaded GEMM per worker thread: a threaded GEMM's workers keep polling for work
    (OpenBLAS: about 0.1 s) after every call, and would take the cores from the level passes.
    The limit is scoped: it is undone on every exit path (normal return or exception), so the
    process-wide BLAS thread count after the block is what it was before.  The limit is
    process-wide, so blocks entered by several threads share it: it holds from the first entry
    to the last exit.  Without threadpoolctl (it comes with scikit-learn) this is a no-op.

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
    global _LIMIT_DEPTH, _LIMITER
    controller = _controller()
    if controller is None:  # pragma: no cover - scikit-learn brings threadpoolctl
        yield
        return
    with _LIMIT_LOCK:
        if _LIMIT_DEPTH == 0:
            _LIMITER = controller.limit(limits=1, user_api="blas")  # applied now; remembers the limits before
        _LIMIT_DEPTH += 1
    try:
        yield
    finally:
        with _LIMIT_LOCK:
            _LIMIT_DEPTH -= 1
            if _LIMIT_DEPTH == 0:
                _LIMITER.restore_original_limits()
                _LIMITER = None


def _controller():
    """threadpoolctl's controller (making one scans the loaded libraries: ~3 ms), or None.

    Remade when modules have been imported since, the cheap sign that a BLAS may have been loaded
    (importing scipy loads its own OpenBLAS, which only a new scan finds).
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
    from noisealloc.theory._numba import num_threads

    return num_threads()


def run_workers(threads: int, work, abort) -> list:
    """``[work(0), ..., work(threads - 1)]``, run at once on the process's kept pool of ``threads`` threads.

    One call at a time per pool (a lock): the workers of one call wait for each other at barriers,
    so two calls sharing the pool's threads could each hold one thread and wait forever for the
    other.  On an error in a worker or an interrupt of the caller, ``abort()`` is called (it must
    release workers waiting for each other) and the call returns only after every worker has
    stopped, so that the next call finds the pool idle.

    Parameters
    ----------
    threads : int
        Workers, ``>= 1``.
    work : callable
        ``work(w)`` for worker ``w``.
    abort : callable
        Called with no argument when a worker fails or the caller is interrupted.

    Returns
    -------
    list
        The workers' results, in order.

    Raises
    ------
    Exception
        The first worker's error (in worker order), after all workers have stopped.
    """
    from concurrent.futures import FIRST_EXCEPTION, wait

    pool, lock = _worker_pool(threads)
    with lock:
        futures = []
        try:
            # Submitted inside the try: an interrupt between two submits must still abort the
            # workers already started (they would wait forever at a barrier for the missing one).
            for w in range(threads):
                futures.append(pool.submit(work, w))
            # Not the results in order: a worker waiting at a barrier for a failed one behind it
            # would never finish.  The first failure, whichever worker it is, stops them all.
            while True:
                done, pending = wait(futures, timeout=SIGNAL_POLL_SECONDS, return_when=FIRST_EXCEPTION)
                failed = [f for f in futures if f in done and f.exception() is not None]
                if failed or not pending:
                    break
        except BaseException:  # an interrupt of the caller
            _stop(futures, abort)
            raise
        if failed:
            _stop(futures, abort)
            raise failed[0].exception()
        return [f.result() for f in futures]


def _stop(futures, abort) -> None:
    """``abort()`` and wait until every worker of ``futures`` has stopped, whatever interrupts come
    meanwhile (a second SIGTERM during the wait must not leave a worker running on the pool)."""
    from concurrent.futures import wait

    while True:
        try:
            abort()
            wait(futures)
            return
        except KeyboardInterrupt:  # the first interrupt is the one the caller re-raises
            continue


def run_stage_workers(threads: int, work, halt, barrier=None) -> list:
    """``[work(0), ..., work(threads - 1)]`` for workers with single-threaded GEMMs, which may meet at
    ``barrier`` between stages.

    Several workers run on the kept pool (:func:`run_workers`) with the BLAS limited to one thread
    (each worker's GEMMs are single-threaded: :func:`single_blas_thread`); one runs in the calling
    thread.  When a worker fails or the caller is interrupted, ``halt`` (a ``threading.Event`` the
    workers poll between tasks) is set and ``barrier`` aborted, so that no worker waits forever.

    Parameters
    ----------
    threads : int
        Workers, ``>= 1``.
    work : callable
        ``work(w)`` for worker ``w``.
    halt : threading.Event
    barrier : threading.Barrier, optional
        Of ``threads`` parties.

    Returns
    -------
    list
        The workers' results, in order.
    """
    def abort():
        halt.set()
        if barrier is not None:
            barrier.abort()

    if threads == 1:
        return [work(0)]
    with single_blas_thread():
        return run_workers(threads, work, abort)


def interruptible(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on a helper thread while the calling thread waits for it.

    A signal handler runs only in the main thread, between bytecodes: during one long C call (a
    LAPACK SVD of MNIST takes seconds) an interrupt would wait for the call to end.  Waiting on an
    event in slices of :data:`SIGNAL_POLL_SECONDS` instead (the signal may have been delivered to
    another thread, which does not wake a blocked wait), the main thread sees the interrupt within
    one slice and raises ``KeyboardInterrupt``;
    the helper (a daemon thread, it holds nothing shared) finishes its call and is discarded, and
    the program ends without waiting for it.  Called from another thread, ``fn`` runs in place.

    Parameters
    ----------
    fn : callable
        A call that releases the GIL (numpy's linear algebra, a compiled kernel).
    *args, **kwargs
        Its arguments.

    Returns
    -------
    object
        ``fn``'s result; its exception is raised here.
    """
    if _threading.current_thread() is not _threading.main_thread():
        return fn(*args, **kwargs)
    box: dict = {}
    done = _threading.Event()

    def call():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc
        finally:
            done.set()

    _threading.Thread(target=call, name="noisealloc-interruptible", daemon=True).start()
    while not done.wait(SIGNAL_POLL_SECONDS):
        pass
    if "error" in box:
        raise box["error"]
    return box["value"]


class ChunkCounter:
    """Chunks of row ranges handed out in turn to worker threads (a shared counter per range).

    Rows cost differently, so a fixed split leaves one worker waiting; each worker instead takes
    the next chunk of a range until the range or the work (``halt``) is done.
    """

    def __init__(self):
        self._lock = _threading.Lock()
        self._next: dict = {}

    def chunks(self, key, start: int, stop: int, step: int, halt):
        """Yield ``(lo, hi)``: the chunks of ``[start, stop)`` of ``step`` rows that this worker takes
        (``key`` names the range; every worker iterating the same key shares its counter)."""
        while not halt.is_set():
            with self._lock:
                lo = self._next.get(key, start)
                self._next[key] = lo + step
            if lo >= stop:
                return
            yield lo, min(stop, lo + step)


def _worker_pool(threads: int):
    """The process-wide thread pool of ``threads`` workers and its lock, made on first use and kept.

    Kept because a fresh thread pays for its first GEMM: OpenBLAS allocates and faults in a
    per-thread buffer (measured: the first block's GEMM took twice as long in a new thread).
    """
    from concurrent.futures import ThreadPoolExecutor

    with _POOL_LOCK:
        entry = _POOLS.get(threads)
        if entry is None:
            entry = _POOLS[threads] = (ThreadPoolExecutor(max_workers=threads, thread_name_prefix="noisealloc-kernel"),
                                       _threading.Lock())
        return entry
