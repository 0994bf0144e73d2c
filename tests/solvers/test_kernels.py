"""Compiled solver kernels (noisealloc.solvers._kernels) against their numpy references, and the
solvers on the numba path against the numpy path: equal within KERNEL_PATH_RTOL."""

from __future__ import annotations

import numpy as np
import pytest

from noisealloc.solvers import solve
from noisealloc.theory import _numba
from noisealloc.theory.tolerances import FW_GAP_RTOL

#: The two paths differ only in the order of summation of sums of <= a few thousand terms, and the
#: solvers' results only through such sums (the brief's bound, 1e-12 relative: ~4500 eps).
KERNEL_PATH_RTOL = 1e-12

needs_numba = pytest.mark.skipif(not _numba.HAVE_NUMBA, reason="numba is not available (or disabled)")


def _stack(n, m, seed):
    rng = np.random.default_rng(seed)
    f = rng.standard_normal((n, m))
    g = rng.standard_normal((n, m))
    return f[:, :, None] * f[:, None, :] + 0.5 * g[:, :, None] * g[:, None, :]


@needs_numba
@pytest.mark.parametrize("n,m", [(7, 1), (200, 3), (1000, 10)])
def test_each_kernel_matches_its_numpy_reference(n, m):
    from noisealloc.solvers import _kernels as K

    rng = np.random.default_rng(n + m)
    A = _stack(n, m, n)
    Af = A.reshape(n, m * m)
    idx = np.sort(rng.choice(n, min(n, 40), replace=False))
    w = rng.dirichlet(np.ones(idx.size))
    out = np.empty(m * m)
    K.weighted_sum(Af, idx, w, out)
    np.testing.assert_allclose(out, K.weighted_sum_numpy(Af, idx, w), rtol=KERNEL_PATH_RTOL, atol=0)
    D = rng.standard_normal((m, m))
    D = (D + D.T).ravel()
    g = np.empty(n)
    K.sensitivities(Af, D, g)
    ref = K.sensitivities_numpy(Af, D)
    # a sum of terms of both signs: relative to the sum of magnitudes, not to the (possibly tiny) result
    np.testing.assert_array_less(np.abs(g - ref), KERNEL_PATH_RTOL * (np.abs(Af) @ np.abs(D)) + 1e-300)
    Kinv = np.linalg.inv(A.mean(axis=0))
    H = np.empty((idx.size, idx.size))
    K.hessian_logdet(A, idx, Kinv, H)
    np.testing.assert_allclose(H, K.hessian_logdet_numpy(A, idx, Kinv), rtol=KERNEL_PATH_RTOL,
                               atol=KERNEL_PATH_RTOL * np.abs(H).max())
    p = rng.dirichlet(np.ones(n))
    gg = -rng.uniform(0.1, 2.0, n)
    gg[0] = 0.5  # a positive sensitivity is clipped to 0 by both
    q = np.empty(n)
    K.multiplicative_weights(p, gg, 0.5, q)
    np.testing.assert_allclose(q, K.multiplicative_weights_numpy(p, gg, 0.5), rtol=KERNEL_PATH_RTOL, atol=0)
    assert q[0] == 0.0


def _on_path(path, monkeypatch, fn):
    with monkeypatch.context() as mp:
        if path == "numpy":
            mp.setattr(_numba, "HAVE_NUMBA", False)
        return fn()


def test_only_wired_kernels_are_called_by_the_solvers():
    """A kernel that lost in ``bench solver --kernels`` is not wired: no solver module names it."""
    from pathlib import Path

    import noisealloc.solvers as S

    wired = {"weighted_sum": False, "sensitivities": False, "hessian_logdet": False, "multiplicative_weights": False}
    src = {p.name: p.read_text() for p in Path(S.__file__).parent.glob("*.py") if p.name != "_kernels.py"}
    for name, is_wired in wired.items():
        users = [f for f, text in src.items() if f"_kernels import {name}" in text or f"_kernels.{name}" in text]
        assert bool(users) == is_wired, (name, users)
    if _numba.HAVE_NUMBA:
        from noisealloc.solvers._kernels import VERDICTS, WIRED

        assert WIRED == wired and set(VERDICTS) == set(wired)


@needs_numba
@pytest.mark.parametrize("crit,method", [("A", "multiplicative"), ("D", "frank-wolfe"), ("D", "rex"),
                                         ("L", "multiplicative")])
def test_solve_equal_on_both_paths(crit, method, monkeypatch):
    """The same solve on the numba and the numpy path: values within KERNEL_PATH_RTOL.

    The weights are compared at the solver's own accuracy, FW_GAP_RTOL: the two paths' moment
    matrices differ in the last bits, so the iterates do too, and an iterative solver stopping at a
    relative gap of 1e-8 pins the weights of a flat optimum only to about that (D/rex: 7.5e-10 seen)."""
    x = np.linspace(-1.0, 1.0, 201)
    F = np.polynomial.chebyshev.chebvander(x, 4)
    A = F[:, :, None] * F[:, None, :]
    kw = {"W": np.diag(np.arange(1.0, 6.0))} if crit == "L" else {}
    ra = _on_path("numba", monkeypatch, lambda: solve(A, crit, method=method, grid=x, rng=5, **kw))
    rb = _on_path("numpy", monkeypatch, lambda: solve(A, crit, method=method, grid=x, rng=5, **kw))
    assert ra.success and rb.success
    np.testing.assert_allclose(ra.value, rb.value, rtol=KERNEL_PATH_RTOL)
    np.testing.assert_allclose(ra.weights, rb.weights, rtol=0, atol=FW_GAP_RTOL)
    np.testing.assert_array_equal(ra.support, rb.support)


_HAVE_NUMBA_AT_IMPORT = _numba.HAVE_NUMBA


def test_solver_kernel_fixture_switches_the_gateway(solver_kernel):
    """The conftest fixture that runs solver modules on both paths really turns numba off for 'numpy'."""
    assert _numba.HAVE_NUMBA == (_HAVE_NUMBA_AT_IMPORT and solver_kernel == "numba")


def test_gateway_restored_after_the_fixture():
    assert _numba.HAVE_NUMBA == _HAVE_NUMBA_AT_IMPORT
