"""The one gateway to numba.

``jit`` is numba's ``njit`` with ``cache=True`` and ``fastmath=False`` (results
are compared with numpy, so IEEE semantics are kept).  When numba is missing, or
the environment variable ``NOISEALLOC_DISABLE_NUMBA`` is set to a non-empty value
other than ``0``, ``jit`` returns the Python function unchanged, so every kernel
also has a (slow) pure-Python path that the tests can exercise.

numba itself is imported on the first decorated call's definition only by the
modules that need kernels; importing :mod:`noisealloc` does not import numba.
"""

from __future__ import annotations

import os

__all__ = ["HAVE_NUMBA", "jit", "prange", "num_threads"]


def _numba_enabled() -> bool:
    flag = os.environ.get("NOISEALLOC_DISABLE_NUMBA", "")
    return flag in ("", "0")


HAVE_NUMBA = False
prange = range
if _numba_enabled():
    try:
        import numba as _nb

        HAVE_NUMBA = True
        prange = _nb.prange
    except ImportError:  # pragma: no cover - numba is a hard dependency
        HAVE_NUMBA = False


def jit(*args, **kwargs):
    """Decorator: ``numba.njit(cache=True, fastmath=False, **kwargs)`` or a no-op fallback.

    Usable bare (``@jit``) or with options (``@jit(parallel=True)``).
    """
    if not HAVE_NUMBA:
        if args and callable(args[0]) and len(args) == 1 and not kwargs:
            return args[0]
        return lambda f: f
    opts = {"cache": True, "fastmath": False}
    opts.update(kwargs)
    if args and callable(args[0]) and len(args) == 1 and not kwargs:
        return _nb.njit(**opts)(args[0])
    return _nb.njit(*args, **opts)


def num_threads() -> int:
    """numba's thread count for the calling thread (``NUMBA_NUM_THREADS``, :func:`numba.set_num_threads`);
    1 when numba is disabled or missing.
    """
    return max(1, int(_nb.get_num_threads())) if HAVE_NUMBA else 1
