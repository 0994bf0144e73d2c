"""The solver benchmark runs at a tiny size and prints its lines (no timing assertions)."""

from __future__ import annotations

import pytest

from noisealloc.cli import main
from noisealloc.theory.tolerances import FW_GAP_RTOL
from noisealloc.verify.bench import solver as bench_solver


def test_bench_solver_tiny(capsys):
    assert main(["bench", "solver", "--sizes", "30,60", "--no-cvxpy", "--e-sizes", "3:41", "--near-tied", "101"]) == 0
    out = capsys.readouterr().out
    for crit in ("D", "A", "c"):  # the near-tied rows, D first (the time A and c are compared with)
        assert f"ours ({crit}):" in out
    assert out.count("time / D's") == 2 and "near-tied levels" in out
    for name in ("cheb19", "rank3", "model-like"):
        assert f"{name}" in out and "certified rel gap" in out
    assert out.count("ours:") == 6
    assert "scaling" in out


def test_bench_solver_measure_returns_certified_rows():
    r = bench_solver.measure(("rank3",), (40, 80), use_cvxpy=False)
    assert [row.n for row in r.rows] == [40, 80] and not r.cvxpy_available
    for row in r.rows:
        assert row.certificate.certified or row.certificate.optimality_ok
        assert row.n_reduced <= row.certificate.atom_bound and row.njev > 0 and row.cvxpy is None
    assert set(r.scaling) == {"rank3"} and r.scaling["rank3"][:2] == (40, 80)


def test_bad_sizes_are_one_line_naming_the_option(capsys):
    for argv, option in ((["--sizes", "abc"], "--sizes"), (["--sizes", "1"], "--sizes"),
                         (["--sizes", "30", "--cvxpy-sizes", "x"], "--cvxpy-sizes")):
        assert main(["bench", "solver", *argv, "--no-cvxpy"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{option} must be comma-separated integers >= 2" in err[0], err


@pytest.mark.slow
def test_bench_solver_kernels_prints_each_kernel_and_the_reduction_row(capsys):
    from noisealloc.theory import _numba

    assert main(["bench", "solver", "--kernels"]) == 0
    out = capsys.readouterr().out
    if _numba.HAVE_NUMBA:
        lines = [ln for ln in out.splitlines() if ln.startswith("  bernstein _sweep_one ")]
        assert sum("uncompiled/numba =" in ln for ln in lines) == 2  # n = 41 and 64
        assert all("max rel diff 0.0e+00" in ln and "numba wins" in ln for ln in lines if "uncompiled/numba" in ln)
        assert out.count("bernstein_sweep (the whole proof) issue n=") == 2
        assert "  dd lu_factor + lu_solve 100 x 100 double-double system" in out
        assert "first call (numba compile or cache load) is excluded" in out and "wired: runs in solve" in out
        for gone in ("weighted_sum", "sensitivities", "hessian_logdet", "multiplicative_weights"):
            assert f"  {gone} " not in out
    assert "reduce_support (D, Chebyshev m=10, dense weights) n=1000" in out and "atoms 1000 -> 19" in out


def test_bench_solver_sandwich_tiny_prints_the_table(capsys):
    assert main(["bench", "solver", "--sandwich", "--sandwich-cases", "issue:9,3:8"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith(("issue ", "seed=3 "))]
    assert len(rows) == 2 and all(" global " in ln for ln in rows)
    assert "global on 2 of 2; mean solve time" in out and "no proved bound above it" in out


def test_bench_solver_sandwich_bad_cases_are_one_line(capsys):
    for text in ("x:9", "3", "3:2", "issue:9:1", ","):
        assert main(["bench", "solver", "--sandwich", "--sandwich-cases", text]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--sandwich-cases must" in err[0], err


def test_measure_reduction_row():
    r = bench_solver.measure_reduction(300, 6, baseline_n=60)
    # products T_j T_k (j, k < 6) span T_0..T_10: 11 atoms remain
    assert (r.n, r.m, r.atoms_before, r.atoms_after) == (300, 6, 300, 11)
    assert r.moment_residual < 1e-14 and r.seconds > 0 and r.baseline_seconds > 0 and r.ratio > 0


@pytest.mark.slow
def test_bench_solver_e_rows_print_and_certify(capsys):
    assert main(["bench", "solver", "--sizes", "30", "--problems", "rank3", "--no-cvxpy", "--e-sizes", "3:41,4:61"]) == 0
    out = capsys.readouterr().out
    assert out.count("ours (E):") == 2 and "cheb-E" in out and "lambda_min" in out
    rows, have = bench_solver.measure_e([(3, 41)], use_cvxpy=False)
    assert not have and rows[0].cvxpy is None and (rows[0].m, rows[0].n) == (3, 41)
    # basis (1, x, 2x^2 - 1): weights (1/3, 1/3, 1/3) on -1, 0, 1 give M = [[1, 0, 1/3], [0, 2/3, 0],
    # [1/3, 0, 1]], lambda_min = 2/3; E = (2/3) e1 e1^T + (1/3) v v^T, v = (1, 0, -1)/sqrt(2), has trace one
    # and f^T E f = (2/3)(1 - x^2 + x^4) <= 2/3 on [-1, 1]: so 2/3 is the optimum on any grid with -1, 0, 1
    assert rows[0].certificate.certified and abs(rows[0].lam_min - 2.0 / 3.0) <= FW_GAP_RTOL * 2.0 / 3.0


def test_bad_e_sizes_are_one_line_before_anything_runs(capsys):
    for text in ("3:x", "3", "1:40", "3:40:5"):
        assert main(["bench", "solver", "--sizes", "30", "--no-cvxpy", "--e-sizes", text]) == 2
        cap = capsys.readouterr()
        err = cap.err.strip().splitlines()
        assert len(err) == 1 and "--e-sizes must be comma-separated m:n pairs" in err[0], err
        assert "ours:" not in cap.out


def test_near_tied_rows_certify():
    rows, have = bench_solver.measure_near_tied(201, criteria=("A", "c"), use_cvxpy=False)
    assert not have and [r.criterion for r in rows] == ["A", "c"]
    for row in rows:
        assert row.status == 0 and row.certificate.optimality_ok and row.cvxpy is None and row.m == 10


def test_bad_near_tied_is_one_line_before_anything_runs(capsys):
    for text in ("x", "1", "200,300"):
        assert main(["bench", "solver", "--sizes", "30", "--no-cvxpy", "--near-tied", text]) == 2
        cap = capsys.readouterr()
        err = cap.err.strip().splitlines()
        assert len(err) == 1 and "--near-tied" in err[0], err
        assert "ours:" not in cap.out
    with pytest.raises(ValueError, match="n must be an integer >= 2"):
        bench_solver.measure_near_tied(1)
    with pytest.raises(ValueError, match="criteria must be among"):
        bench_solver.measure_near_tied(50, criteria=("E",))


@pytest.mark.parametrize("mode", ["--kernels", "--sandwich"])
@pytest.mark.parametrize("bad", [["--e-sizes", "20x"], ["--near-tied", "-3"], ["--sizes", "0"], ["--sandwich-cases", "zz"]])
def test_every_solver_option_is_checked_whatever_the_table(capsys, mode, bad):
    """A bad value of an option the chosen table does not use is refused too, before any work (it was ignored)."""
    import time

    t0 = time.monotonic()
    assert main(["bench", "solver", mode, *bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("noisealloc bench: error: ") and bad[0] in err[0]
    assert time.monotonic() - t0 < 2.0
