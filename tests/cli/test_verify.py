"""``noisealloc verify``: quick tier passes, JSON written atomically, failures give exit code 1."""

from __future__ import annotations

import json

import pytest

from noisealloc.cli import main


def test_verify_quick_passes(tmp_path, capsys):
    out = tmp_path / "verify.json"
    assert main(["verify", "--quick", "--quiet", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "PASS" in text and "FAIL  " not in text
    doc = json.loads(out.read_text())
    assert doc["passed"] is True and doc["tier"] == "quick"
    names = {r["name"] for r in doc["reports"]}
    for name in ("i-mmse", "theorem1", "theorem1p", "theorem2", "decoupling", "sandwich-vs-training",
                 "coordinate-covariance", "rmt.i.ols", "rmt.i.ridge", "rmt.ii.finite-n", "rmt.iii.convergence",
                 "rmt.iv.decoupling-failure"):
        assert name in names
    assert not list(tmp_path.glob(".verify.json.*"))  # no temp file left behind


def test_verify_exit_code_on_failure(tmp_path, monkeypatch, capsys):
    from noisealloc.verify import checks, suite

    bad = checks.CheckReport(name="fake", holds=False, measured={"x": 2.0}, tolerance=1.0, headline="x")
    monkeypatch.setattr(suite, "run", lambda tier, rng=0, progress=True: [bad])
    assert main(["verify", "--quick", "--out", str(tmp_path / "v.json")]) == 1
    assert "FAIL" in capsys.readouterr().out
    assert json.loads((tmp_path / "v.json").read_text())["passed"] is False


def test_verify_bad_arguments(tmp_path, capsys):
    assert main(["verify", "--quick", "--out", str(tmp_path / "missing" / "v.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["verify", "--quick", "--full"])


def test_suite_rejects_unknown_tier():
    from noisealloc.verify.suite import run

    with pytest.raises(ValueError, match="tier"):
        run("medium")


@pytest.mark.slow
def test_verify_full_passes(tmp_path):
    assert main(["verify", "--full", "--quiet", "--out", str(tmp_path / "full.json")]) == 0
