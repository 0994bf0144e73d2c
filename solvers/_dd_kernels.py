"""Compiled double-double LU factorisation and solve (the Newton systems of the double-double E interior point).

The same arithmetic as :mod:`noisealloc.solvers._double_double` (Hida-Li-Bailey accurate addition, Dekker
products, three-digit division), written on scalars inside numba loops: the numpy version pays ~30 array
calls per elimination step, which made :func:`~noisealloc.solvers._double_double.lu_factor` and
:func:`~noisealloc.solvers._double_double.lu_solve` about half of the double-double interior point's time
on Chebyshev E problems (100-candidate working sets).  Without numba (missing, or
``NOISEALLOC_DISABLE_NUMBA``) :func:`lu_factor` and :func:`lu_solve` call the numpy versions.  This module is
imported only by :func:`noisealloc.solvers.algorithms.e_optimal.barrier_sdp_dd`, so ``import
noisealloc.solvers`` does not import numba.
"""

from __future__ import annotations

import numpy as np

from noisealloc.theory import _numba
from noisealloc.theory._numba import jit

__all__ = ["lu_factor", "lu_solve"]


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


def lu_factor(K):
    """LU factors with partial pivoting of an ``(n, n)`` double-double matrix: ``(LU, perm)``.

    Same factors (to rounding of the same operations) as
    :func:`noisealloc.solvers._double_double.lu_factor`, compiled when numba is available.
    """
    if not _numba.HAVE_NUMBA:
        from noisealloc.solvers import _double_double as dd_

        return dd_.lu_factor(K)
    Ah = np.array(K[0], dtype=np.float64, copy=True)
    Al = np.array(K[1], dtype=np.float64, copy=True)
    perm = np.arange(Ah.shape[0])
    _lu_factor(Ah, Al, perm)
    return (Ah, Al), perm


def lu_solve(factors, b):
    """Solve :math:`K x = b` with ``factors = lu_factor(K)`` (``b`` a double-double ``(n,)``)."""
    if not _numba.HAVE_NUMBA:
        from noisealloc.solvers import _double_double as dd_

        return dd_.lu_solve(factors, b)
    (Ah, Al), perm = factors
    n = Ah.shape[0]
    xh, xl = np.empty(n), np.empty(n)
    _lu_solve(Ah, Al, perm, np.ascontiguousarray(b[0], dtype=np.float64), np.ascontiguousarray(b[1], dtype=np.float64),
              xh, xl)
    return xh, xl
