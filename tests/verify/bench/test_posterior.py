"""``noisealloc bench posterior`` runs on a tiny profile and prints its lines (no timing assertions)."""

from __future__ import annotations

import re

from noisealloc.cli import main


def test_bench_posterior_tiny_profile(mnist_dir, capsys):
    code = main(["bench", "posterior", "--mnist", str(mnist_dir), "--atoms", "300", "--levels", "4",
                 "--samples", "8", "--repeat", "1"])
    assert code == 0
    out = capsys.readouterr().out
    assert "K=300 D=784, samples=8, levels=4" in out
    assert re.search(r"profile \(noisealloc entropy without file I/O\): [0-9.]+ s wall, [0-9.]+ s CPU", out)
    assert re.search(r"threads: BLAS .*, numba ", out)
    assert "baseline 1, the GEMMs the profile performs: 1 x (16 x 784)(784 x 300)" in out
    assert "baseline 2, the GEMMs a naive per-level implementation needs: 4 x (8 x 784)(784 x 300)" in out
    assert re.search(r"ratio profile / baseline 1 = [0-9.]+ wall .* [0-9.]+ CPU", out)
    assert re.search(r"ratio profile / baseline 2 = [0-9.]+ wall, [0-9.]+ CPU", out)
    assert re.search(r"CPU seconds .* ratio [0-9.]+", out)
    assert re.search(r"importance sampler .* ratio to baseline 1 = [0-9.]+ wall .* added cost x[0-9.]+ wall", out)
    assert re.search(r"importance split: neighbour search [0-9.]+ s wall / [0-9.]+ s CPU, distance GEMMs and proposal "
                     r"terms [0-9.]+ s wall / [0-9.]+ s CPU, level passes [0-9.]+ s wall / [0-9.]+ s CPU", out)
    assert re.search(r"peak resident memory of this benchmark process: [0-9]+ MiB", out)


def test_peak_memory_of_a_child_is_measured():
    """A child that holds 300 MB reports at least that, and far less than that without the array."""
    import sys

    from noisealloc.verify.bench.posterior import peak_memory

    big = peak_memory([sys.executable, "-c", "import numpy as np; a = np.ones(300 * 2**20 // 8); print(a.sum())"])
    small = peak_memory([sys.executable, "-c", "import numpy as np"])
    assert big.returncode == 0 and small.returncode == 0
    assert big.peak_rss >= 300 * 2**20 and small.peak_rss < 200 * 2**20
    assert peak_memory([sys.executable, "-c", "raise SystemExit(3)"]).returncode == 3


def test_bench_posterior_bad_input(mnist_dir, capsys):
    assert main(["bench", "posterior", "--mnist", str(mnist_dir), "--levels", "2"]) == 2
    assert "--levels must be >= 3" in capsys.readouterr().err
