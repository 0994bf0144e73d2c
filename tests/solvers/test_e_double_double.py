"""The fast double-double pieces of the E interior point: exact-slice products and the compiled LU.

References are 50-60 digit mpmath computations of the same sums, not the code under test.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np

from noisealloc.solvers import _dd_kernels as ddk
from noisealloc.solvers import _double_double as dd_
from noisealloc.solvers.algorithms.e_optimal import _dd_matmul, _split_exact


def _dd_random(rng, shape, spread=0):
    """A double-double array with entries over 2^-spread .. 2^spread and a full low part."""
    hi = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, size=shape))
    return hi, hi * 2.0**-54 * rng.uniform(-1, 1, shape)


def test_split_exact_slices_sum_back_and_multiply_exactly():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 400)) * np.exp2(rng.integers(-40, 40, size=(7, 1)))
    sl = _split_exact(x, 1, 400, 6)
    rest = x - sum(sl[:-1])
    assert np.array_equal(rest - sl[-1], x - sum(sl))  # remainders are exact
    assert np.max(np.abs(x - sum(sl)) / np.max(np.abs(x), axis=1, keepdims=True)) <= 2.0**-120
    # one product of two slices summed over 400 terms is exact: compare with integer-exact fractions
    y = rng.standard_normal((400, 3))
    t = _split_exact(y, 0, 400, 6)
    mp.mp.dps = 80
    for a, b in ((0, 0), (1, 2), (3, 1)):
        P = sl[a] @ t[b]
        ref = mp.fsum(mp.mpf(sl[a][2, l]) * mp.mpf(t[b][l, 1]) for l in range(400))
        assert mp.mpf(P[2, 1]) == ref


def test_dd_matmul_against_mpmath():
    rng = np.random.default_rng(1)
    A = _dd_random(rng, (9, 400), spread=20)
    B = _dd_random(rng, (400, 5), spread=20)
    C = _dd_matmul(A, B)
    mp.mp.dps = 60
    for i, j in ((0, 0), (4, 3), (8, 4)):
        ref = mp.fsum((mp.mpf(A[0][i, l]) + mp.mpf(A[1][i, l])) * (mp.mpf(B[0][l, j]) + mp.mpf(B[1][l, j]))
                      for l in range(400))
        scale = mp.fsum(abs((mp.mpf(A[0][i, l])) * mp.mpf(B[0][l, j])) for l in range(400))
        assert abs(mp.mpf(C[0][i, j]) + mp.mpf(C[1][i, j]) - ref) <= 1e-29 * scale


def test_compiled_lu_solves_to_double_double_accuracy(solver_kernel):
    rng = np.random.default_rng(2)
    n = 12
    K = _dd_random(rng, (n, n))
    b = _dd_random(rng, (n,))
    x = ddk.lu_solve(ddk.lu_factor(K), b)
    mp.mp.dps = 50
    Km = mp.matrix([[mp.mpf(K[0][i, j]) + mp.mpf(K[1][i, j]) for j in range(n)] for i in range(n)])
    xm = mp.lu_solve(Km, mp.matrix([mp.mpf(b[0][i]) + mp.mpf(b[1][i]) for i in range(n)]))
    err = max(abs(mp.mpf(x[0][i]) + mp.mpf(x[1][i]) - xm[i]) for i in range(n)) / max(abs(v) for v in xm)
    assert err <= 1e-28
    # the compiled factors are those of the numpy double-double version (same operations, same order)
    ref = dd_.lu_solve(dd_.lu_factor(K), b)
    assert np.array_equal(x[0], ref[0]) and np.array_equal(x[1], ref[1])


def _mp(x, idx):
    return mp.mpf(x[0][idx]) + mp.mpf(x[1][idx])


def test_compiled_small_kernels_equal_the_numpy_ones_and_mpmath(solver_kernel):
    """Cholesky, triangular inverse, m x m product and in-place accumulation: the compiled kernels give the
    numpy double-double results bit for bit (same operations, same order), and those agree with 50-digit
    mpmath to ~1e-28.  ``solver_kernel`` (tests/conftest.py) runs it with numba and with HAVE_NUMBA off."""
    rng = np.random.default_rng(3)
    n = 9
    G = _dd_random(rng, (n, n))
    X = dd_.add(dd_.matmul(G, (G[0].T.copy(), G[1].T.copy())), dd_.dd(0.5 * np.eye(n)))  # SPD
    L = ddk.chol(X)
    Lref = dd_.chol(X)
    assert np.array_equal(L[0], Lref[0]) and np.array_equal(L[1], Lref[1])
    Y = ddk.trinv(L)
    Yref = dd_.trinv(Lref)
    assert np.array_equal(Y[0], Yref[0]) and np.array_equal(Y[1], Yref[1])
    A, B = _dd_random(rng, (n, 7), spread=8), _dd_random(rng, (7, 5), spread=8)
    C = ddk.matmul(A, B)
    Cref = dd_.matmul(A, B)
    assert np.array_equal(C[0], Cref[0]) and np.array_equal(C[1], Cref[1])
    t = rng.standard_normal((n, 5))
    acc = (C[0].copy(), C[1].copy())
    S = ddk.add_into(acc, t)
    Sref = dd_.add(Cref, dd_.dd(t))
    assert np.array_equal(S[0], Sref[0]) and np.array_equal(S[1], Sref[1])
    mp.mp.dps = 50
    Xm = mp.matrix([[_mp(X, (i, j)) for j in range(n)] for i in range(n)])
    Lm = mp.cholesky(Xm)
    assert max(abs(_mp(L, (i, j)) - Lm[i, j]) for i in range(n) for j in range(i + 1)) <= 1e-28 * mp.norm(Lm)
    Ym = Lm**-1
    assert max(abs(_mp(Y, (i, j)) - Ym[i, j]) for i in range(n) for j in range(n)) <= 1e-27 * mp.norm(Ym)
    for i, j in ((0, 0), (4, 3), (8, 4)):
        ref = mp.fsum(_mp(A, (i, k)) * _mp(B, (k, j)) for k in range(7))
        scale = mp.fsum(abs(_mp(A, (i, k)) * _mp(B, (k, j))) for k in range(7))
        assert abs(_mp(C, (i, j)) - ref) <= 1e-30 * scale
        assert abs(_mp(S, (i, j)) - (ref + mp.mpf(t[i, j]))) <= 1e-30 * (scale + abs(t[i, j]))
    # not positive definite: None, as the numpy version
    Xbad = dd_.sub(X, dd_.dd(1e3 * np.eye(n)))
    assert ddk.chol(Xbad) is None and dd_.chol(Xbad) is None


def test_pairwise_dsum_against_mpmath():
    """dd_.dsum (pairwise) of 1001 terms of mixed signs and magnitudes 2^-30..2^30, along either axis."""
    rng = np.random.default_rng(4)
    x = _dd_random(rng, (1001, 3), spread=30)
    mp.mp.dps = 60
    for axis in (0, 1):
        s = dd_.dsum(x, axis=axis)
        xs = x if axis == 0 else (x[0].T, x[1].T)
        for j in range(s[0].shape[0]):
            terms = [_mp(xs, (i, j)) for i in range(xs[0].shape[0])]
            ref, scale = mp.fsum(terms), mp.fsum(abs(v) for v in terms)
            assert abs(mp.mpf(s[0][j]) + mp.mpf(s[1][j]) - ref) <= 1e-29 * scale
