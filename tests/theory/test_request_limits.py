"""Size limits and the memory estimate (theory/request_limits.py) and the commands that apply them (issue 16 item 2)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers.strategies import examples

from noisealloc.cli import main
from noisealloc.theory import request_limits as limits
from noisealloc.theory.information.rates import grid_quadrature_weights


def test_check_size_range_and_override():
    assert limits.check_size("--levels", 5, 10) == 5
    with pytest.raises(ValueError, match=r"--levels = 11 is above the limit 10; pass --allow-large"):
        limits.check_size("--levels", 11, 10)
    assert limits.check_size("--levels", 11, 10, allow_large=True) == 11
    with pytest.raises(ValueError, match=r"--levels must be >= 3; got 2"):
        limits.check_size("--levels", 2, 10, minimum=3, allow_large=True)
    for bad in (True, 2.5, "7", None):
        with pytest.raises(ValueError, match="must be an integer"):
            limits.check_size("--levels", bad, 10)


def test_check_memory_against_given_available():
    limits.check_memory(0.8e9, "x", available=10**9)
    with pytest.raises(ValueError, match=r"x needs about 0.9 GB of memory but 1 GB are available"):
        limits.check_memory(0.9e9, "x", available=10**9)
    with pytest.raises(ValueError, match="not finite"):
        limits.check_memory(float("inf"), "x", available=10**9)


def test_available_memory_is_plausible():
    avail = limits.available_memory()
    assert avail is None or 10**7 < avail < 10**15


@pytest.mark.parametrize("argv, needle", [
    (["entropy", "--data", "dirac:K=3,D=1,sep=2,seed=0", "--levels", "100000000", "--out", "{tmp}/e.json"],
     "above the limit"),
    (["entropy", "--data", "dirac:K=3,D=1,sep=2,seed=0", "--levels", "100000000", "--allow-large",
      "--out", "{tmp}/e.json"], "GB of memory"),
    (["entropy", "--data", "dirac:K=3,D=1,sep=2,seed=0", "--samples", "100000000000", "--out", "{tmp}/e.json"],
     "--samples = 100000000000 is above the limit"),
    (["optimize", "--data", "dirac:K=3,D=1,sep=2,seed=0", "--model", "posterior-weights", "--levels", "1000000"],
     "above the limit 10000"),
    (["optimize", "--data", "dirac:K=3,D=1,sep=2,seed=0", "--model", "posterior-weights", "--levels", "1000000",
      "--allow-large"], "GB of memory"),
    (["optimize", "--data", "dirac:K=3,D=1,sep=2,seed=0", "--model", "random-features", "--features", "0"],
     "--features must be >= 1"),
    (["schedules", "--points", "100000000", "--out", "{tmp}/s.json"], "above the limit"),
    (["schedules", "--points", "100000000", "--allow-large", "--out", "{tmp}/s.json"], "GB of memory"),
])
def test_huge_requests_refused_fast(tmp_path, capsys, argv, needle):
    import importlib

    importlib.import_module(f"noisealloc.commands.{argv[0]}")  # the command's import time is not the refusal's
    t0 = time.perf_counter()
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    assert time.perf_counter() - t0 < 1.0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert list(tmp_path.iterdir()) == []


def test_limits_are_in_the_help(capsys):
    for cmd, text in (("entropy", str(limits.MAX_LEVELS)), ("optimize", str(limits.MAX_OPTIMIZE_LEVELS)),
                      ("schedules", str(limits.MAX_POINTS)), ("sweep", str(limits.MAX_SWEEP_CELLS))):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        out = capsys.readouterr().out
        assert text in out and "--allow-large" in out, cmd


@pytest.mark.parametrize("lam, match", [
    ([1.0], "at least 2 levels"),
    ([], "at least 2 levels"),
    ([[0.0, 1.0], [1.0, 2.0]], "one-dimensional"),
    ([0.0, 2.0, 1.0], "strictly increasing"),
    ([0.0, 1.0, 1.0], "strictly increasing"),
    ([0.0, np.nan, 1.0], "finite"),
    ([0.0, np.inf], "finite"),
])
def test_grid_quadrature_weights_refuses_bad_grids(lam, match):
    with pytest.raises(ValueError, match=match):
        grid_quadrature_weights(lam)


@settings(max_examples=examples(20))
@given(st.lists(st.floats(-50, 50, allow_nan=False), min_size=2, max_size=12, unique=True))
def test_grid_quadrature_weights_of_sorted_grids_are_positive_and_exact_for_linear(values):
    lam = np.sort(np.asarray(values))
    if np.any(np.diff(lam) < 1e-6 * (lam[-1] - lam[0])):
        return  # near-coincident levels: Simpson's weights of wildly uneven steps may be negative
    trap, simp = grid_quadrature_weights(lam)
    assert np.all(trap > 0)
    np.testing.assert_allclose(trap.sum(), lam[-1] - lam[0], rtol=1e-12)
    np.testing.assert_allclose(simp @ lam, (lam[-1] ** 2 - lam[0] ** 2) / 2, rtol=1e-9, atol=1e-9)
