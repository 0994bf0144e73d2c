"""The solver benchmark runs at a tiny size and prints its lines (no timing assertions)."""

from __future__ import annotations

from noisealloc.cli import main
from noisealloc.verify import bench_solver


def test_bench_solver_tiny(capsys):
    assert main(["bench", "solver", "--sizes", "30,60", "--no-cvxpy"]) == 0
    out = capsys.readouterr().out
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
