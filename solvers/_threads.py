"""Scoped BLAS thread limit for the solvers (one place, one context manager)."""

from __future__ import annotations

from contextlib import contextmanager

__all__ = ["single_blas_thread"]


@contextmanager
def single_blas_thread():
    """Limit BLAS to one thread inside the ``with`` block; the previous limits are restored on exit.

    The solvers' GEMVs and m x m factorisations are too small for threading to pay, and on a
    shared machine oversubscription slows them about tenfold.  The limit is scoped: it is undone
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
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings threadpoolctl
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
