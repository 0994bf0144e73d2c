"""Compiled double-double kernels of the E interior point: LU, Cholesky, triangular inverse and small products.

The same arithmetic as :mod:`noisealloc.solvers._double_double` (Hida-Li-Bailey accurate addition, Dekker
products, three-digit division, one Newton step for the square root), written on scalars inside numba loops,
in the same order of operations, so the results are those of the numpy versions bit for bit.  The numpy
versions pay tens of array calls per elimination step or inner-product term: their factorisations and
``m x m`` products were most of the double-double interior point's time on Chebyshev E problems (100-candidate
working sets, m = 20).  Without numba (missing, or ``NOISEALLOC_DISABLE_NUMBA``) every function here calls the
numpy version.  This module is imported only by
:func:`noisealloc.solvers.algorithms.e_optimal.barrier_sdp_dd`, so ``import noisealloc.solvers`` does not
import numba.
"""

from __future__ import annotations

import numpy as np

import functools

from noisealloc.theory import _numba
from noisealloc.theory._numba import jit

__all__ = ["add_into", "chol", "lu_factor", "lu_solve", "matmul", "trinv"]


@jit
def _two_sum(a, b):  # pragma: no cover - compiled
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@jit
def _quick_two_sum(a, b):  # pragma: no cover - compiled
    s = a + b
    return s, b - (s - a)


@jit
def _two_prod(a, b):  # pragma: no cover - compiled
    p = a * b
    c = 134217729.0 * a
    ah = c - (c - a)
    al = a - ah
    c = 134217729.0 * b
    bh = c - (c - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@jit
def _add(xh, xl, yh, yl):  # pragma: no cover - compiled
    s, e = _two_sum(xh, yh)
    t, f = _two_sum(xl, yl)
    s, e = _quick_two_sum(s, e + t)
    return _quick_two_sum(s, e + f)


@jit
def _mul(xh, xl, yh, yl):  # pragma: no cover - compiled
    p, e = _two_prod(xh, yh)
    return _quick_two_sum(p, e + (xh * yl + xl * yh))


@jit
def _div(xh, xl, yh, yl):  # pragma: no cover - compiled
    q1 = xh / yh
    ph, pl = _mul(yh, yl, q1, 0.0)
    rh, rl = _add(xh, xl, -ph, -pl)
    q2 = rh / yh
    ph, pl = _mul(yh, yl, q2, 0.0)
    rh, rl = _add(rh, rl, -ph, -pl)
    q3 = rh / yh
    sh, sl = _quick_two_sum(q1, q2)
    return _add(sh, sl, q3, 0.0)


@jit
def _sqrt(xh, xl):  # pragma: no cover - compiled
    q = np.sqrt(xh)
    ph, pl = _two_prod(q, q)
    rh, _rl = _add(xh, xl, -ph, -pl)
    return _quick_two_sum(q, rh / (2.0 * q))


@jit
def _chol(Ah, Al, Lh, Ll):  # pragma: no cover - compiled
    n = Ah.shape[0]
    for j in range(n):
        if not Ah[j, j] > 0:
            return False
        dh, dl = _sqrt(Ah[j, j], Al[j, j])
        Lh[j, j] = dh
        Ll[j, j] = dl
        for i in range(j + 1, n):
            Lh[i, j], Ll[i, j] = _div(Ah[i, j], Al[i, j], dh, dl)
        for i in range(j + 1, n):
            for k in range(j + 1, n):
                uh, ul = _mul(Lh[i, j], Ll[i, j], Lh[k, j], Ll[k, j])
                Ah[i, k], Al[i, k] = _add(Ah[i, k], Al[i, k], -uh, -ul)
    return True


@jit
def _trinv(Lh, Ll, Yh, Yl):  # pragma: no cover - compiled
    n = Lh.shape[0]
    for k in range(n):
        for j in range(n):
            Yh[k, j], Yl[k, j] = _div(Yh[k, j], Yl[k, j], Lh[k, k], Ll[k, k])
        for i in range(k + 1, n):
            for j in range(n):
                uh, ul = _mul(Lh[i, k], Ll[i, k], Yh[k, j], Yl[k, j])
                Yh[i, j], Yl[i, j] = _add(Yh[i, j], Yl[i, j], -uh, -ul)


@jit
def _matmul(Ah, Al, Bh, Bl, Ch, Cl):  # pragma: no cover - compiled
    n, k = Ah.shape
    p = Bh.shape[1]
    for i in range(n):
        for j in range(p):
            sh, sl = _mul(Ah[i, 0], Al[i, 0], Bh[0, j], Bl[0, j])
            for t in range(1, k):
                uh, ul = _mul(Ah[i, t], Al[i, t], Bh[t, j], Bl[t, j])
                sh, sl = _add(sh, sl, uh, ul)
            Ch[i, j] = sh
            Cl[i, j] = sl


@jit
def _add_into(acc_h, acc_l, t):  # pragma: no cover - compiled
    for i in range(acc_h.size):
        acc_h[i], acc_l[i] = _add(acc_h[i], acc_l[i], t[i], 0.0)


@jit
def _lu_factor(Ah, Al, perm):  # pragma: no cover - compiled
    n = Ah.shape[0]
    for k in range(n):
        p = k
        best = abs(Ah[k, k])
        for i in range(k + 1, n):
            if abs(Ah[i, k]) > best:
                best = abs(Ah[i, k])
                p = i
        if p != k:
            for j in range(n):
                t = Ah[k, j]
                Ah[k, j] = Ah[p, j]
                Ah[p, j] = t
                t = Al[k, j]
                Al[k, j] = Al[p, j]
                Al[p, j] = t
            t2 = perm[k]
            perm[k] = perm[p]
            perm[p] = t2
        dh, dl = Ah[k, k], Al[k, k]
        for i in range(k + 1, n):
            fh, fl = _div(Ah[i, k], Al[i, k], dh, dl)
            Ah[i, k] = fh
            Al[i, k] = fl
            for j in range(k + 1, n):
                uh, ul = _mul(fh, fl, Ah[k, j], Al[k, j])
                Ah[i, j], Al[i, j] = _add(Ah[i, j], Al[i, j], -uh, -ul)


@jit
def _lu_solve(Ah, Al, perm, bh, bl, xh, xl):  # pragma: no cover - compiled
    n = Ah.shape[0]
    for i in range(n):
        xh[i] = bh[perm[i]]
        xl[i] = bl[perm[i]]
    for k in range(n - 1):
        for i in range(k + 1, n):
            uh, ul = _mul(Ah[i, k], Al[i, k], xh[k], xl[k])
            xh[i], xl[i] = _add(xh[i], xl[i], -uh, -ul)
    for k in range(n - 1, -1, -1):
        xh[k], xl[k] = _div(xh[k], xl[k], Ah[k, k], Al[k, k])
        for i in range(k):
            uh, ul = _mul(Ah[i, k], Al[i, k], xh[k], xl[k])
            xh[i], xl[i] = _add(xh[i], xl[i], -uh, -ul)



def _numpy_unless_compiled(fn):
    """Without numba (missing, or ``NOISEALLOC_DISABLE_NUMBA``; asked at call time) the function of the same
    name in :mod:`noisealloc.solvers._double_double` runs instead: the same operations in numpy."""

    @functools.wraps(fn)
    def dispatch(*args):
        if not _numba.HAVE_NUMBA:
            from noisealloc.solvers import _double_double as dd_

            return getattr(dd_, fn.__name__)(*args)
        return fn(*args)

    return dispatch

@_numpy_unless_compiled
def lu_factor(K):
    """LU factors with partial pivoting of an ``(n, n)`` double-double matrix: ``(LU, perm)``.

    Same factors (to rounding of the same operations) as
    :func:`noisealloc.solvers._double_double.lu_factor`, compiled when numba is available.
    """
    Ah = np.array(K[0], dtype=np.float64, copy=True)
    Al = np.array(K[1], dtype=np.float64, copy=True)
    perm = np.arange(Ah.shape[0])
    _lu_factor(Ah, Al, perm)
    return (Ah, Al), perm


@_numpy_unless_compiled
def lu_solve(factors, b):
    """Solve :math:`K x = b` with ``factors = lu_factor(K)`` (``b`` a double-double ``(n,)``)."""
    (Ah, Al), perm = factors
    n = Ah.shape[0]
    xh, xl = np.empty(n), np.empty(n)
    _lu_solve(Ah, Al, perm, np.ascontiguousarray(b[0], dtype=np.float64), np.ascontiguousarray(b[1], dtype=np.float64),
              xh, xl)
    return xh, xl


def _arrays(x):
    return np.array(x[0], dtype=np.float64, copy=True), np.array(x[1], dtype=np.float64, copy=True)


@_numpy_unless_compiled
def chol(X):
    """Lower Cholesky factor of a symmetric ``(n, n)`` double-double matrix; None if not positive definite.

    :func:`noisealloc.solvers._double_double.chol`, compiled when numba is available.
    """
    Ah, Al = _arrays(X)
    n = Ah.shape[0]
    Lh, Ll = np.zeros((n, n)), np.zeros((n, n))
    return (Lh, Ll) if _chol(Ah, Al, Lh, Ll) else None


@_numpy_unless_compiled
def trinv(L):
    """Inverse of a lower-triangular ``(n, n)`` double-double matrix.

    :func:`noisealloc.solvers._double_double.trinv`, compiled when numba is available.
    """
    Lh, Ll = _arrays(L)
    n = Lh.shape[0]
    Yh, Yl = np.eye(n), np.zeros((n, n))
    _trinv(Lh, Ll, Yh, Yl)
    return Yh, Yl


@_numpy_unless_compiled
def matmul(A, B):
    """:math:`A B` of 2-D double-double matrices (``(n, k)`` times ``(k, p)``, ``k >= 1``).

    :func:`noisealloc.solvers._double_double.matmul` on 2-D operands, compiled when numba is available.
    """
    Ah, Al = (np.ascontiguousarray(a, dtype=np.float64) for a in A)
    Bh, Bl = (np.ascontiguousarray(b, dtype=np.float64) for b in B)
    Ch, Cl = np.empty((Ah.shape[0], Bh.shape[1])), np.empty((Ah.shape[0], Bh.shape[1]))
    _matmul(Ah, Al, Bh, Bl, Ch, Cl)
    return Ch, Cl


def add_into(acc, t):
    """``acc + t`` for a double-double ``acc`` and a float64 ``t`` of the same shape, in place when compiled.

    :func:`noisealloc.solvers._double_double.add` with ``(t, 0)``; returns the sum (``acc`` itself when
    numba is available, a new pair otherwise).
    """
    if not _numba.HAVE_NUMBA or not (acc[0].flags.c_contiguous and acc[1].flags.c_contiguous):
        from noisealloc.solvers import _double_double as dd_

        return dd_.add(acc, dd_.dd(t))
    _add_into(acc[0].reshape(-1), acc[1].reshape(-1), np.ascontiguousarray(t, dtype=np.float64).reshape(-1))
    return acc
