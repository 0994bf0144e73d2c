"""``noisealloc schedules`` (issue 2, acceptance item 5)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from noisealloc.cli import main
from noisealloc.theory.schedules import io as IO
from noisealloc.theory import schedules as S
from noisealloc.theory import tolerances as tol

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def check_identical(loaded, expected):
    assert list(loaded) == list(expected)
    for name, tab in expected.items():
        got = loaded[name]
        assert got.coordinate.name == tab.coordinate.name and got.name == tab.name
        np.testing.assert_array_equal(got.knots, tab.knots)
        np.testing.assert_allclose(got.pdf_values, tab.pdf_values, rtol=tol.EXPORT_ROUNDTRIP_RTOL, atol=0)
        np.testing.assert_allclose(got.cdf_values, tab.cdf_values, rtol=tol.EXPORT_ROUNDTRIP_RTOL, atol=1e-300)


def test_schedules_command_subprocess(tmp_path):
    """The documented command line writes both files; the JSON loads back into identical schedules."""
    proc = subprocess.run([sys.executable, "-m", "noisealloc", "schedules", "--out", "s.json", "--plot", "s.png"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "s.png").read_bytes()[:8] == PNG_MAGIC
    assert (tmp_path / "s.png").stat().st_size > 10_000
    loaded = IO.load_schedules_json(tmp_path / "s.json")
    expected = {k: s.tabulate(513) for k, s in S.builtin_schedules().items()}
    check_identical(loaded, expected)
    for name in S.BUILTIN_NAMES:
        assert name in proc.stdout
    # table values: EDM row shows the truncated mean and std of lambda
    row = next(line for line in proc.stdout.splitlines() if line.startswith("edm_lognormal"))
    assert "2.3997" in row and "2.3994" in row  # scipy truncnorm(-6, 4, 2.4, 2.4): 2.39968, 2.39936


@pytest.mark.parametrize("coordinate", ["sigma", "t"])
def test_schedules_command_other_coordinate(tmp_path, coordinate, capsys):
    rc = main(["schedules", "--coordinate", coordinate, "--lam-min", "-8", "--lam-max", "10", "--points", "65",
               "--out", str(tmp_path / "s.json"), "--plot", str(tmp_path / "s.png")])
    assert rc == 0
    loaded = IO.load_schedules_json(tmp_path / "s.json")
    expected = {k: s.tabulate(65) for k, s in S.builtin_schedules(-8.0, 10.0, coordinate=coordinate).items()}
    check_identical(loaded, expected)
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["meta"]["coordinate"] == ("t-cosine" if coordinate == "t" else coordinate)
    assert doc["meta"]["lam_min"] == -8.0 and doc["meta"]["points"] == 65
    assert (tmp_path / "s.png").read_bytes()[:8] == PNG_MAGIC


def test_schedules_command_without_outputs_prints_table(capsys):
    assert main(["schedules"]) == 0
    out = capsys.readouterr().out
    assert "mean(lam)" in out and "laplace_lambda" in out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--lam-min", "3", "--lam-max", "-3"], r"\[lam_min, lam_max\] must satisfy lo < hi"),
        (["--lam-min", "1", "--lam-max", "1"], r"\[lam_min, lam_max\] must satisfy lo < hi"),
        (["--points", "1"], r"--points must be >= 2"),
    ],
)
def test_schedules_command_bad_input(argv, message, capsys):
    assert main(["schedules", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("noisealloc schedules: error:")
    assert re.search(message, err), err


def test_schedules_command_unknown_coordinate(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["schedules", "--coordinate", "time"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--coordinate" in err and "'lambda'" in err and "'t-rf'" in err
