"""The compiled kernels that ``solve`` runs (noisealloc.solvers._sandwich_kernels: the two-parameter sandwich's
Bernstein proof; noisealloc.solvers._dd_kernels: E's double-double LU) against their paths without numba, and the gateway fixture of tests/conftest.py.

The per-candidate kernels of the convex solvers (the former noisealloc.solvers._kernels) lost to BLAS in
``bench solver --kernels`` and were never wired; they were removed with their tests.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from noisealloc.solvers import make_problem
from noisealloc.theory import _numba
from noisealloc.theory.tolerances import SANDWICH_GLOBAL_RTOL

needs_numba = pytest.mark.skipif(not _numba.HAVE_NUMBA, reason="numba is not available (or disabled)")


def _instance(n, seed):
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(n, 2))
    A = F[:, :, None] * F[:, None, :]
    R = rng.normal(size=(n, 2)) * rng.uniform(0, 1, (n, 1))
    G = rng.uniform(0.1, 3.0, n)[:, None, None] * A + R[:, :, None] * R[:, None, :]
    return make_problem(A, "sandwich", G=G, A_eval=np.eye(2))


@needs_numba
@pytest.mark.parametrize("seed", [0, 1])
def test_sweep_kernel_compiled_equals_uncompiled_on_every_support(seed, monkeypatch):
    """Status and number of simplices of every support: the compiled kernel and the same Python code (helpers
    uncompiled too) agree exactly, above, at and below the true minimum (where a point below is found)."""
    from noisealloc.solvers import _sandwich_kernels as K
    from noisealloc.verify.bench.solver import _proof_inputs, _sweep_sample

    prob = _instance(7, seed)
    supports = [np.array(S, dtype=np.int64) for S in itertools.combinations(range(7), 4)]
    from noisealloc.solvers import solve

    v = solve(prob.A, "sandwich", G=prob.G, A_eval=prob.W, global_search=False).value
    for target in (0.5 * v, (1 - SANDWICH_GLOBAL_RTOL) * v, 1.5 * v):
        args = _proof_inputs(prob, target)
        out_nb = _sweep_sample(K._sweep_one, supports, args)
        for h in ("_root", "_gather", "_n_sets", "_unrank"):
            monkeypatch.setattr(K, h, getattr(K, h).py_func)
        out_py = _sweep_sample(K._sweep_one.py_func, supports, args)
        monkeypatch.undo()
        np.testing.assert_array_equal(out_nb, out_py)
    assert out_nb[:, 0].max() == 1  # 1.5 v: some support holds a point below it


@needs_numba
def test_bench_kernels_rows_at_a_small_size():
    from noisealloc.verify.bench.solver import measure_kernels

    r = measure_kernels(sizes=(9,), sample=20, repeat=1, full_sweep=False)
    assert r.have_numba and len(r.rows) == 6 and not r.sweeps
    row, *dd = r.rows
    assert row.wired and row.max_rel_diff == 0.0 and row.numba_seconds > 0 and row.numpy_seconds > 0
    assert "20 of 126 supports" in row.case
    # E's double-double kernels, then the whole E solve: the compiled path does the numpy path's operations
    # in the same order, so the results (and the solve's weights) are the same numbers
    assert [x.name for x in dd] == ["dd lu_factor + lu_solve", "dd chol + trinv", "dd matmul", "dd add_into", "E solve"]
    assert all(x.wired and x.max_rel_diff == 0.0 and x.numba_seconds > 0 and x.numpy_seconds > 0 for x in dd)


def test_no_solver_module_imports_the_removed_convex_kernels():
    from pathlib import Path

    import noisealloc.solvers as S

    root = Path(S.__file__).parent
    assert not (root / "_kernels.py").exists()
    for p in root.rglob("*.py"):
        text = p.read_text()
        assert "solvers._kernels" not in text and "from noisealloc.solvers import _kernels" not in text, p


_HAVE_NUMBA_AT_IMPORT = _numba.HAVE_NUMBA


def test_solver_kernel_fixture_switches_the_gateway(solver_kernel):
    """The conftest fixture that runs solver modules on both paths really turns numba off for 'numpy'."""
    assert _numba.HAVE_NUMBA == (_HAVE_NUMBA_AT_IMPORT and solver_kernel == "numba")


def test_gateway_restored_after_the_fixture():
    assert _numba.HAVE_NUMBA == _HAVE_NUMBA_AT_IMPORT


def test_without_numba_the_default_proof_is_limited_to_small_grids(monkeypatch):
    """With the gateway off the proof's kernels would run as plain Python: the default global search then
    stops at SANDWICH_BERNSTEIN_MAX_LEVELS_PYTHON levels and the message says why."""
    import warnings

    from noisealloc.solvers import solve
    from noisealloc.theory.tolerances import SANDWICH_BERNSTEIN_MAX_LEVELS_PYTHON

    prob = _instance(SANDWICH_BERNSTEIN_MAX_LEVELS_PYTHON + 1, 3)
    monkeypatch.setattr(_numba, "HAVE_NUMBA", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = solve(prob.A, "sandwich", G=prob.G, A_eval=prob.W, n_random_starts=0)
    assert res.optimality == "local (KKT)"
    assert "SANDWICH_BERNSTEIN_MAX_LEVELS_PYTHON (numba is missing or disabled)" in res.message
