"""Tests of the training step-time benchmark (verify/bench/training.py; issue 14 acceptance 5)."""

from __future__ import annotations

import pytest
from helpers.extras import requires_extra

from noisealloc.verify.bench.training import CASES, TrainingBench, bench_case


@requires_extra("train")
def test_bench_case_times_compile_and_steps_separately():
    r = bench_case("digits", "mlp", batch_size=16, steps=5)
    assert isinstance(r, TrainingBench)
    assert r.data == "digits" and r.dim == 64 and r.steps == 5 and r.batch_size == 16
    assert r.compile_time > 0 and r.step_time > 0  # a fresh compile, never a cached zero
    assert 0 < r.compile_share < 1
    assert r.n_params > 0 and set(r.to_dict()) >= {"compile_time", "step_time", "compile_share"}


@pytest.mark.slow
def test_cnn_case_runs_with_or_without_mnist(tmp_path):
    r = bench_case("mnist", "cnn", batch_size=8, steps=2, mnist=tmp_path)  # empty dir: synthetic images
    assert r.data == "mnist (synthetic 28x28)" and r.dim == 784 and r.network.startswith("cnn")


def test_cases_cover_every_data_set_and_network():
    assert {d for d, _ in CASES} == {"dirac", "digits", "mnist"} and {n for _, n in CASES} == {"mlp", "cnn"}


@pytest.mark.parametrize("kwargs, needle", [
    (dict(data="cifar", network="mlp"), "data"),
    (dict(data="digits", network="rnn"), "network"),
    (dict(data="digits", network="cnn"), "needs 28 x 28 images"),
])
@requires_extra("train")
def test_bad_input_raises_value_error(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        bench_case(**kwargs)


@requires_extra("train")
def test_cli_bench_training_prints_cases_and_ratio(capsys):
    from noisealloc.cli import main

    assert main(["bench", "training", "--only", "digits:mlp,dirac:mlp", "--steps", "3", "--batch-size", "8"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [ln.split() for ln in out if ln.startswith(("digits", "dirac"))]
    assert [r[0] for r in rows] == ["digits", "dirac:K=64,D=16,sep=1"]
    assert float(rows[0][6]) == 1.0 and float(rows[1][6]) > 0  # the first case is the baseline


@pytest.mark.parametrize("argv, needle", [
    (["--only", "digits:cnn"], "--only must be a comma-separated subset"),
    (["--steps", "0"], "--steps and --batch-size must be >= 1"),
    (["--mnist", "/nonexistent/mnist", "--only", "mnist:mlp"], "/nonexistent/mnist"),
])
def test_cli_bench_training_bad_input(argv, needle, capsys):
    from noisealloc.cli import main

    assert main(["bench", "training", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
