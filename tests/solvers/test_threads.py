"""The solvers limit BLAS to one thread only inside their calls (issue 11: scoped, never left changed)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg  # noqa: F401  (loads scipy's BLAS so that threadpoolctl sees it)

from noisealloc.solvers import certify, single_blas_thread, solve

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]


def _design():
    x = np.linspace(-1, 1, 7)
    F = np.stack([np.ones_like(x), x, x**2], 1)
    return F[:, :, None] * F[:, None, :]


@pytest.fixture
def two_blas_threads():
    """Run the test with every BLAS pool at 2 threads, so that a limit left at 1 is visible."""
    if not _blas_threads():
        pytest.skip("no BLAS thread pool visible to threadpoolctl")
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        if all(n == 1 for n in before):
            pytest.skip("BLAS cannot run more than one thread here: a leaked limit of 1 would be invisible")
        yield before


def test_single_blas_thread_is_scoped(two_blas_threads):
    with single_blas_thread():
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == two_blas_threads


def test_single_blas_thread_restores_after_an_exception(two_blas_threads):
    with pytest.raises(RuntimeError, match="inside"):
        with single_blas_thread():
            assert set(_blas_threads()) == {1}
            raise RuntimeError("raised inside the block")
    assert _blas_threads() == two_blas_threads


def test_solve_and_certify_leave_the_thread_count_unchanged(two_blas_threads):
    A = _design()
    res = solve(A, "A")
    assert _blas_threads() == two_blas_threads
    certify(A, res.weights, "A")
    assert _blas_threads() == two_blas_threads


def test_solve_leaves_the_thread_count_unchanged_when_it_raises(two_blas_threads):
    with pytest.raises(ValueError, match="p0 must be non-negative"):
        solve(_design(), "A", p0=[-1.0, 1, 1, 1, 1, 1, 1])  # raised inside the limited block
    assert _blas_threads() == two_blas_threads
