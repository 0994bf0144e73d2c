"""The solver benchmark runs at a tiny size and prints its lines (no timing assertions)."""

from __future__ import annotations

import argparse

from noisealloc.verify import bench_solver


def test_bench_solver_tiny(capsys):
    parser = argparse.ArgumentParser()
    bench_solver.add_arguments(parser)
    args = parser.parse_args(["--sizes", "30,60", "--no-cvxpy"])
    assert bench_solver.run(args) == 0
    out = capsys.readouterr().out
    for name in ("cheb19", "rank3", "model-like"):
        assert f"{name}" in out and "certified rel gap" in out
    assert out.count("ours:") == 6
    assert "scaling" in out
