r"""Double-double arithmetic on float64 arrays (about 32 significant digits), vectorised with numpy.

A double-double number is a pair ``(hi, lo)`` of float64 arrays with ``|lo| <= ulp(hi) / 2`` whose
unevaluated sum is the value.  The error-free transformations (Knuth's two-sum, Dekker's split and
two-product) make each operation exact up to about :math:`2^{-104} \approx 5 \cdot 10^{-32}` relative.
Used where float64 runs out: the interior point of E-optimality stalls near :math:`\sqrt{\varepsilon}`
on degenerate problems (its Newton system has condition number of order :math:`1/\mu^2`).

Only what that interior point needs is here: sums, products, quotients, square roots, batched matrix
products, Cholesky, triangular inverse and a pivoted LU solve.  Slow (tens of numpy calls per
operation) but the problems are small (working sets of tens of candidates, matrices up to ~40 x 40).

References
----------
.. [1] T. J. Dekker, "A floating-point technique for extending the available precision",
   Numer. Math. 18, 1971.
.. [2] Y. Hida, X. S. Li, D. H. Bailey, "Algorithms for quad-double precision floating point
   arithmetic", ARITH-15, 2001 (the double-double algorithms, sec. 3-4).
"""

from __future__ import annotations

import numpy as np

__all__ = ["dd", "add", "sub", "neg", "mul", "div", "sqrt", "dsum", "matmul", "chol", "trinv", "lu_factor", "lu_solve", "to_float"]

_SPLIT = 134217729.0  # 2^27 + 1: Dekker's split of a 53-bit significand into two 26-bit halves


def dd(a):
    """A float64 array (or scalar) as a double-double ``(hi, lo)`` with ``lo = 0``."""
    a = np.array(a, dtype=np.float64)
    return (a, np.zeros_like(a))


def to_float(x):
    """Nearest float64 of a double-double."""
    return x[0] + x[1]


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _quick_two_sum(a, b):
    s = a + b
    return s, b - (s - a)


def _split(a):
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def add(x, y):
    """:math:`x + y` (Hida-Li-Bailey's accurate addition)."""
    s, e = _two_sum(x[0], y[0])
    t, f = _two_sum(x[1], y[1])
    s, e = _quick_two_sum(s, e + t)
    return _quick_two_sum(s, e + f)


def neg(x):
    """:math:`-x`."""
    return (-x[0], -x[1])


def sub(x, y):
    """:math:`x - y`."""
    return add(x, neg(y))


def mul(x, y):
    """:math:`x y`."""
    p, e = _two_prod(x[0], y[0])
    return _quick_two_sum(p, e + (x[0] * y[1] + x[1] * y[0]))


def div(x, y):
    """:math:`x / y` (three quotient digits, each corrected by an exact remainder)."""
    q1 = x[0] / y[0]
    r = sub(x, mul(y, dd(q1)))
    q2 = r[0] / y[0]
    r = sub(r, mul(y, dd(q2)))
    q3 = r[0] / y[0]
    return add(_quick_two_sum(q1, q2), dd(q3))


def sqrt(x):
    """:math:`\\sqrt{x}` for ``x > 0`` (one Newton correction of the float64 root)."""
    q = np.sqrt(x[0])
    r = sub(x, _two_prod(q, q))
    return _quick_two_sum(q, r[0] / (2.0 * q))


def dsum(x, axis: int = 0):
    r"""Sum along ``axis``, pairwise: each level adds the two halves in one vectorised double-double addition.

    ``ceil(log2 n)`` array additions instead of ``n - 1`` (the interior point sums 400-term inner products
    each iteration); the error bound is that of pairwise summation, :math:`\lceil \log_2 n\rceil` units
    of about :math:`2^{-104}` relative to the sum of the magnitudes.
    """
    h, lo = np.moveaxis(x[0], axis, 0), np.moveaxis(x[1], axis, 0)
    while h.shape[0] > 1:
        k = h.shape[0] // 2
        sh, sl = add((h[:k], lo[:k]), (h[k:2 * k], lo[k:2 * k]))
        if h.shape[0] % 2:
            sh, sl = np.concatenate([sh, h[2 * k:]]), np.concatenate([sl, lo[2 * k:]])
        h, lo = sh, sl
    return h[0], lo[0]


def matmul(A, B):
    """Batched :math:`A B` over the last two axes (numpy broadcasting of the leading axes)."""
    acc = None
    for j in range(A[0].shape[-1]):
        t = mul((A[0][..., :, j:j + 1], A[1][..., :, j:j + 1]), (B[0][..., j:j + 1, :], B[1][..., j:j + 1, :]))
        acc = t if acc is None else add(acc, t)
    return acc


def _get(x, i):
    return (x[0][i], x[1][i])


def _put(x, i, v):
    x[0][i] = v[0]
    x[1][i] = v[1]


def chol(X):
    """Lower Cholesky factor of a symmetric ``(n, n)`` double-double matrix; None if not positive definite."""
    n = X[0].shape[0]
    A = (X[0].copy(), X[1].copy())
    L = (np.zeros((n, n)), np.zeros((n, n)))
    for j in range(n):
        d = _get(A, (j, j))
        if not d[0] > 0:
            return None
        ljj = sqrt(d)
        _put(L, (j, j), ljj)
        if j + 1 < n:
            col = div(_get(A, (slice(j + 1, None), j)), ljj)
            _put(L, (slice(j + 1, None), j), col)
            up = mul((col[0][:, None], col[1][:, None]), (col[0][None, :], col[1][None, :]))
            _put(A, (slice(j + 1, None), slice(j + 1, None)), sub(_get(A, (slice(j + 1, None), slice(j + 1, None))), up))
    return L


def trinv(L):
    """Inverse of a lower-triangular ``(n, n)`` double-double matrix (column-oriented forward substitution)."""
    n = L[0].shape[0]
    Y = dd(np.eye(n))
    for k in range(n):
        row = div(_get(Y, k), _get(L, (k, k)))
        _put(Y, k, row)
        if k + 1 < n:
            col = _get(L, (slice(k + 1, None), k))
            up = mul((col[0][:, None], col[1][:, None]), (row[0][None, :], row[1][None, :]))
            _put(Y, slice(k + 1, None), sub(_get(Y, slice(k + 1, None)), up))
    return Y


def lu_factor(K):
    """LU factors with partial pivoting of an ``(n, n)`` double-double matrix: ``(LU, perm)``."""
    n = K[0].shape[0]
    A = (K[0].copy(), K[1].copy())
    perm = np.arange(n)
    for k in range(n):
        p = k + int(np.argmax(np.abs(A[0][k:, k])))
        if p != k:
            for arr in (*A, perm):
                arr[[k, p]] = arr[[p, k]]
        f = div(_get(A, (slice(k + 1, None), k)), _get(A, (k, k)))
        _put(A, (slice(k + 1, None), k), f)  # the multipliers: unit lower factor
        up = mul((f[0][:, None], f[1][:, None]), (A[0][k:k + 1, k + 1:], A[1][k:k + 1, k + 1:]))
        _put(A, (slice(k + 1, None), slice(k + 1, None)), sub(_get(A, (slice(k + 1, None), slice(k + 1, None))), up))
    return A, perm


def lu_solve(factors, b):
    """Solve :math:`K x = b` (``b`` (n,)) with ``factors = lu_factor(K)`` (column-oriented substitutions)."""
    A, perm = factors
    n = b[0].shape[0]
    x = (b[0][perm].copy(), b[1][perm].copy())
    for k in range(n - 1):
        xk = (np.full(n - k - 1, x[0][k]), np.full(n - k - 1, x[1][k]))
        _put(x, slice(k + 1, None), sub(_get(x, slice(k + 1, None)), mul(_get(A, (slice(k + 1, None), k)), xk)))
    for k in range(n - 1, -1, -1):
        xk = div(_get(x, k), _get(A, (k, k)))
        _put(x, k, xk)
        if k > 0:
            xv = (np.full(k, xk[0]), np.full(k, xk[1]))
            _put(x, slice(0, k), sub(_get(x, slice(0, k)), mul(_get(A, (slice(0, k), k)), xv)))
    return x
