"""``noisealloc reproduce`` resumes and never mixes runs (issue 16 item 5).

The six figure modules are replaced by stubs that count their runs and write numbers that depend on
the mode and seed, so the bookkeeping is tested without the minutes the real figures take.
"""

from __future__ import annotations

import json
import types

import pytest
from helpers.extras import requires_extra

from noisealloc.cli import main
from noisealloc.commands.reproduce import FIGURES
from noisealloc.figures import provenance as P


@pytest.fixture
def stub_figures(monkeypatch):
    runs = {name: 0 for name in FIGURES}
    state = {"interrupt_after": None}

    def make(name):
        def run(out, *, quick, seed, mnist, progress=None):
            if state["interrupt_after"] is not None and FIGURES.index(name) > FIGURES.index(state["interrupt_after"]):
                raise KeyboardInterrupt
            runs[name] += 1
            (out / f"{name}.json").write_text(json.dumps({"quick": quick, "seed": seed}))
            (out / f"{name}.png").write_bytes(b"png")
            return {"seconds": 0.01}

        return types.SimpleNamespace(run=run)

    import sys

    for name in FIGURES:
        monkeypatch.setitem(sys.modules, f"noisealloc.figures.{name}", make(name))
    import noisealloc.figures.report as report

    monkeypatch.setattr(report, "evaluate_claims", lambda out: {})
    monkeypatch.setattr(report, "_checks_section", lambda out: [])
    monkeypatch.setattr(report, "_load", lambda out, name: None)
    return runs, state


@requires_extra("train", "sweep")
def test_interrupted_run_resumes_without_recomputing(tmp_path, stub_figures, capsys):
    runs, state = stub_figures
    out = tmp_path / "out"
    state["interrupt_after"] = "fig3_coupling"
    assert main(["reproduce", "--quick", "--out", str(out)]) == 130
    assert [runs[n] for n in FIGURES] == [1, 1, 1] + [0] * (len(FIGURES) - 3)
    state["interrupt_after"] = None
    capsys.readouterr()
    assert main(["reproduce", "--quick", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert [runs[n] for n in FIGURES] == [1] * len(FIGURES)  # figures 1-3 were not recomputed
    for name in FIGURES[:3]:
        assert f"skip {name}" in captured.out + captured.err
    assert f"wrote {len(FIGURES) - 3} figures (reused 3: fig1_entropy, fig2_atoms, fig3_coupling)" in captured.out
    report = (out / "REPORT.md").read_text()
    assert "## Provenance of the numbers" in report
    assert report.count("| reused |") == 3 and report.count("| computed |") == len(FIGURES) - 3
    # --force recomputes everything
    assert main(["reproduce", "--quick", "--out", str(out), "--force"]) == 0
    assert [runs[n] for n in FIGURES] == [2] * len(FIGURES)


@requires_extra("train", "sweep")
def test_report_refuses_to_mix_modes(tmp_path, stub_figures, capsys):
    runs, _ = stub_figures
    out = tmp_path / "out"
    assert main(["reproduce", "--quick", "--out", str(out)]) == 0
    before = (out / "REPORT.md").read_text()
    capsys.readouterr()
    assert main(["reproduce", "--full", "--only", "fig2_atoms", "--out", str(out)]) == 2
    err = [l for l in capsys.readouterr().err.splitlines() if l.startswith("noisealloc")]
    assert len(err) == 1 and "would mix numbers of different runs" in err[0] and "mode '--full' vs '--quick'" in err[0]
    assert (out / "REPORT.md").read_text() == before  # the old report was not overwritten
    assert runs["fig2_atoms"] == 1  # refused before computing anything


def test_changed_numbers_or_seed_are_recomputed(tmp_path, stub_figures):
    runs, _ = stub_figures
    out = tmp_path / "out"
    assert main(["reproduce", "--quick", "--only", "fig1_entropy", "--out", str(out)]) == 0
    (out / "fig1_entropy.json").write_text("{}")  # edited by hand: no longer the recorded numbers
    assert main(["reproduce", "--quick", "--only", "fig1_entropy", "--out", str(out)]) == 0
    assert runs["fig1_entropy"] == 2
    assert main(["reproduce", "--quick", "--only", "fig1_entropy", "--seed", "1", "--out", str(out)]) == 0
    assert runs["fig1_entropy"] == 3


@pytest.mark.parametrize("only", [",", "", " , "])
def test_only_naming_no_figure_is_an_error(tmp_path, stub_figures, capsys, only):
    runs, _ = stub_figures
    assert main(["reproduce", "--only", only, "--out", str(tmp_path / "o")]) == 2
    assert "names no figure" in capsys.readouterr().err
    assert not (tmp_path / "o").exists() and sum(runs.values()) == 0


def test_request_hash_depends_on_every_field():
    base = P.make_request("fig1_entropy", quick=True, seed=0, mnist=None, code="abc")
    variants = [P.make_request("fig2_atoms", quick=True, seed=0, mnist=None, code="abc"),
                P.make_request("fig1_entropy", quick=False, seed=0, mnist=None, code="abc"),
                P.make_request("fig1_entropy", quick=True, seed=1, mnist=None, code="abc"),
                P.make_request("fig1_entropy", quick=True, seed=0, mnist="/tmp", code="abc"),
                P.make_request("fig1_entropy", quick=True, seed=0, mnist=None, code="abd")]
    hashes = {P.request_hash(base)} | {P.request_hash(v) for v in variants}
    assert len(hashes) == 6
