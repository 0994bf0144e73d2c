"""Tests of the sweep engine (verify/sweep.py) and the ``noisealloc sweep`` command."""

from __future__ import annotations

import json

import pytest

from noisealloc.figures.sweep_summary import plot_summary
from noisealloc.verify import sweep as S

DEMO = {
    "sweep": {"name": "demo", "kind": "demo"},
    "fixed": {"b": 2.0, "sleep": 0.4},
    "grid": {"a": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "seed": [0, 1]},
    "summary": {"x": "a", "y": "mean"},
}


def _write_toml(path, doc):
    lines = []
    for table, body in doc.items():
        lines.append(f"[{table}]")
        for k, v in body.items():
            lines.append(f"{k} = {json.dumps(v)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_expand_grid_order_and_fixed():
    spec = S.parse_sweep(DEMO)
    cells = S.expand_grid(spec)
    assert len(cells) == spec.n_cells == 12
    assert cells[0] == {"b": 2.0, "sleep": 0.4, "a": 1.0, "seed": 0}
    assert cells[1] == {"b": 2.0, "sleep": 0.4, "a": 1.0, "seed": 1}  # last axis fastest
    assert cells[-1]["a"] == 6.0 and cells[-1]["seed"] == 1


def test_cell_key_depends_on_config_and_code_version():
    spec = S.parse_sweep(DEMO)
    v = S.code_version(spec.kind)
    c = S.expand_grid(spec)
    assert S.cell_key(spec.kind, c[0], v) == S.cell_key(spec.kind, dict(reversed(list(c[0].items()))), v)
    assert S.cell_key(spec.kind, c[0], v) != S.cell_key(spec.kind, c[1], v)
    assert S.cell_key(spec.kind, c[0], v) != S.cell_key(spec.kind, c[0], v + "x")


def test_load_sweep_toml_roundtrip(tmp_path):
    spec = S.load_sweep(_write_toml(tmp_path / "demo.toml", DEMO))
    assert spec.kind == S.CELL_KINDS["demo"] and spec.grid["seed"] == [0, 1]


@pytest.mark.parametrize(
    "doc, match",
    [
        ({"grid": {"a": [1]}}, r"\[sweep\]"),
        ({"sweep": {"name": "x", "kind": "nope"}}, "kind must be one of"),
        ({"sweep": {"name": "", "kind": "demo"}}, "name must be a non-empty string"),
        ({"sweep": {"name": "x", "kind": "demo"}, "grid": {"a": []}}, "axis 'a' must be a non-empty list"),
        ({"sweep": {"name": "x", "kind": "demo"}, "grid": {"a": [1]}, "fixed": {"a": 2}}, "both"),
        ({"sweep": {"name": "x", "kind": "demo"}, "grids": {}}, "unknown tables"),
        ({"sweep": {"name": "x", "kind": "demo"}, "grid": {"a": [1]}, "summary": {"x": "z"}}, "summary.x"),
    ],
)
def test_bad_sweep_files(doc, match):
    with pytest.raises(ValueError, match=match):
        S.parse_sweep(doc)


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        S.load_sweep(tmp_path / "absent.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[sweep\nname=1")
    with pytest.raises(ValueError, match="not valid TOML"):
        S.load_sweep(bad)


def test_unimportable_cell_function_is_a_value_error():
    with pytest.raises(ValueError, match="cannot be imported"):
        S._resolve("noisealloc.verify.sweep:no_such_cell")


def test_run_cell_caches_and_counts(tmp_path):
    spec = S.parse_sweep(DEMO)
    cfg = {**S.expand_grid(spec)[0], "sleep": 0.0}
    key = S.cell_key(spec.kind, cfg, S.code_version(spec.kind))
    r1 = S.run_cell(spec.kind, cfg, str(tmp_path), key)
    r2 = S.run_cell(spec.kind, cfg, str(tmp_path), key)
    assert r1["result"] == r2["result"]
    assert S.run_counts(tmp_path) == {key: 1}
    # The cell's own definition: mean of a x + b over a seeded N(0,1) sample (independent recomputation).
    import numpy as np

    x = np.random.default_rng(0).standard_normal(1000)
    assert r1["result"]["mean"] == float(np.mean(1.0 * x + 2.0))


def test_cli_sweep_bad_input_exit_code(tmp_path, capsys):
    from noisealloc.cli import main

    assert main(["sweep", str(tmp_path / "absent.toml"), "--out", str(tmp_path / "o")]) == 2
    bad = _write_toml(tmp_path / "bad.toml", {"sweep": {"name": "x", "kind": "nope"}})
    assert main(["sweep", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "kind must be one of" in capsys.readouterr().err


def test_interrupted_sweep_resumes_on_local_cluster(tmp_path):
    """A real LocalCluster with two worker processes: stop after 2 cells, rerun, compare with an uninterrupted run."""
    from distributed import Client, LocalCluster

    spec = S.parse_sweep(DEMO)
    out_b = tmp_path / "interrupted"
    first = S.run_sweep(spec, out_b, n_workers=2, stop_after=2)
    assert not first.complete and first.n_computed == 2
    finished = {p.stem for p in (out_b / "cells").glob("*.json")}
    assert 2 <= len(finished) < spec.n_cells, "the interruption must leave unfinished cells for the test to mean anything"
    counts_before = S.run_counts(out_b)

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        second = S.run_sweep(spec, out_b, client=client, plot=plot_summary)
        ref = S.run_sweep(spec, tmp_path / "reference", client=client)
    assert second.complete and ref.complete
    assert second.n_cached == len(finished)
    assert second.n_computed == spec.n_cells - len(finished)
    counts = S.run_counts(out_b)
    for key in finished:  # finished cells were not recomputed
        assert counts[key] == counts_before[key] == 1
    assert set(counts) == set(second.keys)
    assert all(S.run_counts(tmp_path / "reference")[k] == 1 for k in ref.keys)
    assert (out_b / "summary.csv").read_bytes() == (tmp_path / "reference" / "summary.csv").read_bytes()
    assert (out_b / "summary.png").stat().st_size > 0 and second.summary_png == out_b / "summary.png"
    assert ref.summary_png is None and not (tmp_path / "reference" / "summary.png").exists()  # no plot function


_ENGINE_RUN = """
import sys
import noisealloc.verify.sweep as S
spec = S.parse_sweep({"sweep": {"name": "d", "kind": "demo"}, "grid": {"a": [1.0]}, "summary": {"x": "a", "y": "mean"}})
records = [S.run_cell(spec.kind, {"a": 1.0}, sys.argv[1], "k" * 24)]
S.write_summary_csv(spec, records, sys.argv[1] + "/summary.csv")
"""


def _matplotlib_loaded_after(code, out_dir) -> bool:
    import subprocess
    import sys

    code += "print('matplotlib' in sys.modules)\n"
    proc = subprocess.run([sys.executable, "-c", code, str(out_dir)], capture_output=True, text=True, check=True)
    return proc.stdout.strip() == "True"


def test_sweep_engine_does_not_import_matplotlib(tmp_path):
    """verify/ computes and tabulates; the summary plot lives in figures/ (the CLI passes it in)."""
    assert not _matplotlib_loaded_after(_ENGINE_RUN, tmp_path)
    # the check can fire: drawing the plot with the figure helper does load matplotlib
    plotting = _ENGINE_RUN + ("from noisealloc.figures.sweep_summary import plot_summary\n"
                              "plot_summary(spec, records, sys.argv[1] + '/summary.png')\n")
    assert _matplotlib_loaded_after(plotting, tmp_path)
    assert (tmp_path / "summary.png").stat().st_size > 0


def test_failing_cell_is_recorded_not_raised(tmp_path):
    key = "k" * 24
    rec = S.run_cell("noisealloc.verify.sweep:cell_demo", {"a": "not-a-number", "seed": 0}, str(tmp_path), key)
    assert "TypeError" in rec["result"]["error"]  # numpy raises a TypeError subclass (UFuncTypeError)
    assert S.run_counts(tmp_path) == {key: 1}


def test_code_version_covers_dependencies():
    v_demo = S.code_version(S.CELL_KINDS["demo"])
    v_cpl = S.code_version(S.CELL_KINDS["coupling"])
    assert v_demo != v_cpl and len(v_demo) == 16
    files = S._sources("noisealloc.solvers")
    assert any(f.name == "problems.py" for f in files)
