"""Tests of the sweep engine (verify/experiments/sweep/) and the ``noisealloc sweep`` command."""

from __future__ import annotations

import json
import time

import pytest
from helpers.extras import requires_extra

from noisealloc.figures.sweep_summary import plot_summary
from noisealloc.verify.experiments import sweep as S
from noisealloc.verify.experiments.sweep import cache as SC, engine as SE, spec as SS

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
        ({"sweep": {"name": "x", "kind": "subprocess:run"}, "fixed": {"args": "touch x", "shell": True}},
         "never a function"),
        ({"sweep": {"name": "x", "kind": "nosuch.module:fn"}}, "kind must be one of"),
        ({"sweep": {"name": "x", "kind": "noisealloc.verify.experiments.sweep.cells:cell_demo"}, "grid": {"a": [1.0]}},
         "kind must be one of"),
        ({"sweep": {"name": "/../../../../elsewhere/x", "kind": "demo"}, "grid": {"a": [1.0]}}, "one path component"),
        ({"sweep": {"name": "..", "kind": "demo"}, "grid": {"a": [1.0]}}, "one path component"),
        ({"sweep": {"name": "a/b", "kind": "demo"}, "grid": {"a": [1.0]}}, "one path component"),
        ({"sweep": {"name": "x", "kind": "demo", "workers": 4}, "grid": {"a": [1.0]}}, r"unknown keys \['workers'\] in \[sweep\]"),
        ({"sweep": {"name": "x", "kind": "demo"}, "grid": {"a": [1.0], "zz": [1]}}, r"unknown keys \['zz'\] in \[grid\].*allowed: a, b, seed, sleep"),
        ({"sweep": {"name": "x", "kind": "demo"}, "grid": {"a": [1.0]}, "fixed": {"bb": 1}}, r"unknown keys \['bb'\] in \[fixed\]"),
        ({"sweep": {"name": "x", "kind": "demo"}, "grid": {"a": [1.0]}, "summary": {"colour": "red"}}, r"in \[summary\]"),
        ({"sweep": {"name": "x", "kind": "demo"}, "grid": {"seed": [0]}}, r"needs \['a'\]"),
        ({"sweep": {"name": "x", "kind": "demo"}, "grid": {"a": ["notanumber"]}}, "must be of type float"),
        ({"sweep": {"name": "x", "kind": "demo"}, "grid": {"a": [float("nan")]}}, "must be a finite number"),
        ({"sweep": {"name": "x", "kind": "demo"}, "fixed": {"a": float("inf")}}, "must be a finite number"),
        ({"sweep": {"name": "x", "kind": "demo"}, "grid": {"a": [1.0], "seed": [1.5]}}, "must be of type int"),
        ({"sweep": {"name": "x", "kind": "coupling"}, "grid": {"data": ["dirac:K=2,D=1,sep=2,seed=0"], "J": [2]},
          "fixed": {"lam_min": float("nan")}}, "lam_min = nan must be a finite number"),
        ({"sweep": {"name": "x", "kind": "coupling"}, "grid": {"data": ["dirac:K=2,D=1,sep=2,seed=0"], "J": [2]},
          "fixed": {"levels": 2}}, "levels = 2 must be >= 3"),
        ({"sweep": {"name": "x", "kind": "demo"}, "grid": {"a": list(range(1000)), "b": list(range(1000)),
                                                          "seed": list(range(1000))}}, "1000000000 cells, above the limit"),
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
        SS._resolve("noisealloc.verify.experiments.sweep.engine:no_such_cell")


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


@requires_extra("sweep")
def test_cli_sweep_bad_input_exit_code(tmp_path, capsys):
    from noisealloc.cli import main

    assert main(["sweep", str(tmp_path / "absent.toml"), "--out", str(tmp_path / "o")]) == 2
    bad = _write_toml(tmp_path / "bad.toml", {"sweep": {"name": "x", "kind": "nope"}})
    assert main(["sweep", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "kind must be one of" in capsys.readouterr().err


@pytest.mark.slow  # moved out of the default tier: it ran 260 s against its 240 s budget
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
import noisealloc.verify.experiments.sweep as S
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


def test_failing_cell_is_reported_not_cached(tmp_path):
    key = "k" * 24
    rec = S.run_cell("noisealloc.verify.experiments.sweep.cells:cell_demo", {"a": "not-a-number", "seed": 0}, str(tmp_path), key)
    assert "TypeError" in rec["error"] and "result" not in rec  # numpy raises a TypeError subclass
    assert not (tmp_path / "cells" / f"{key}.json").exists()  # never cached as a result
    assert json.loads((tmp_path / "failed" / f"{key}.json").read_text())["error"] == rec["error"]
    assert S.run_counts(tmp_path) == {key: 1}
    # retried: a second call computes again (and a success removes the failure record)
    ok = S.run_cell("noisealloc.verify.experiments.sweep.cells:cell_demo", {"a": 1.0, "seed": 0}, str(tmp_path), key)
    assert "result" in ok and S.run_counts(tmp_path) == {key: 2}
    assert not (tmp_path / "failed" / f"{key}.json").exists()


def test_code_version_covers_dependencies():
    v_demo = S.code_version(S.CELL_KINDS["demo"])
    v_cpl = S.code_version(S.CELL_KINDS["coupling"])
    assert v_demo != v_cpl and len(v_demo) == 16
    files = SC._sources("noisealloc.solvers")
    # subpackages count: an edit of an algorithm invalidates the cells that depend on the solvers
    assert "noisealloc.solvers.problem" in files and "noisealloc.solvers.algorithms.frank_wolfe" in files
    assert files["noisealloc.solvers.algorithms.frank_wolfe"].name == "frank_wolfe.py"
    assert "noisealloc.theory.models.dirac" in SC._sources("noisealloc.theory")


def test_huge_grid_refused_fast_and_allowed_with_override():
    import time

    doc = {"sweep": {"name": "x", "kind": "demo"},
           "grid": {"a": [float(i) for i in range(1000)], "b": [1.0] * 1000, "seed": list(range(1000))}}
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="--allow-large"):
        S.parse_sweep(doc)
    assert time.perf_counter() - t0 < 1.0
    assert S.parse_sweep(doc, allow_large=True).n_cells == 10**9


def test_coupling_cell_refuses_two_levels():
    with pytest.raises(ValueError, match="levels must be >= 3"):
        S.cell_coupling(data="dirac:K=2,D=1,sep=2,seed=0", J=2, levels=2)


def _demo_cells(out, a_values):
    spec = S.parse_sweep({"sweep": {"name": "d", "kind": "demo"}, "grid": {"a": a_values}})
    return spec


class _InlineClient:
    """A stand-in for a Dask client that runs each task at once in this process (fast engine tests)."""

    def submit(self, fn, *args, key=None, pure=None):

        class F:
            def __init__(self, value):
                self.value = value

            def result(self):
                return self.value

            def done(self):
                return True

            def cancel(self):
                pass

        return F(fn(*args))


def _run_inline(spec, out, monkeypatch, **kw):
    import distributed

    monkeypatch.setattr(distributed, "as_completed", lambda futs: iter(futs))
    return S.run_sweep(spec, out, client=_InlineClient(), **kw)


def _corrupt_npz(tmp_path):
    # passes the sweep's up-front checks (the file exists) and fails inside the cell, as a bad input
    # that only the computation can see would
    bad = tmp_path / "corrupt.npz"
    bad.write_bytes(b"PK\x03\x04 not really a zip archive")
    return f"npz:{bad}"


@requires_extra("sweep")
def test_failed_cell_makes_sweep_incomplete_and_is_retried(tmp_path, monkeypatch):
    spec = S.parse_sweep({"sweep": {"name": "d", "kind": "coupling"},
                          "grid": {"data": [_corrupt_npz(tmp_path)], "J": [1]}, "fixed": {"levels": 5}})
    res = _run_inline(spec, tmp_path / "o", monkeypatch)
    assert not res.complete and len(res.failed) == 1 and res.summary_csv is None
    assert "corrupt.npz" in res.failed[0]["error"]
    assert list((tmp_path / "o" / "cells").iterdir()) == []
    again = _run_inline(spec, tmp_path / "o", monkeypatch)
    assert again.n_cached == 0 and len(again.failed) == 1  # retried, not read from a cache
    assert S.run_counts(tmp_path / "o") == {again.keys[0]: 2}


@requires_extra("sweep")
def test_cli_sweep_failed_cell_exits_nonzero(tmp_path, capsys, monkeypatch):
    from noisealloc.cli import main

    monkeypatch.setattr(SE, "_client", lambda scheduler, n: (_InlineClient(), None))
    import distributed

    monkeypatch.setattr(distributed, "as_completed", lambda futs: iter(futs))
    monkeypatch.setattr(_InlineClient, "close", lambda self: None, raising=False)
    f = _write_toml(tmp_path / "f.toml", {"sweep": {"name": "f", "kind": "coupling"},
                                          "grid": {"data": [_corrupt_npz(tmp_path)], "J": [1]}})
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--no-progress"]) == 1
    cap = capsys.readouterr()
    err = cap.err.strip().splitlines()
    assert len(err) == 1 and "1 of 1 cells failed" in err[0] and "Traceback" not in cap.err
    assert "1 failed" in cap.out and "computed" in cap.out


@requires_extra("sweep")
def test_truncated_or_configless_cell_is_recomputed(tmp_path, monkeypatch):
    spec = _demo_cells(tmp_path, [1.0, 2.0])
    out = tmp_path / "o"
    first = _run_inline(spec, out, monkeypatch)
    assert first.complete
    p0 = out / "cells" / f"{first.keys[0]}.json"
    p1 = out / "cells" / f"{first.keys[1]}.json"
    p0.write_text(p0.read_text()[:20])  # truncated
    rec = json.loads(p1.read_text())
    del rec["config"]
    p1.write_text(json.dumps(rec))
    second = _run_inline(spec, out, monkeypatch)
    assert second.complete and sorted(second.recomputed) == sorted([p0, p1])
    assert (out / "summary.csv").read_bytes() == first.summary_csv.read_bytes()
    assert S.read_cell(p0, first.keys[0]) is not None


@requires_extra("sweep")
def test_other_sweep_refuses_the_directory(tmp_path, monkeypatch):
    out = tmp_path / "o"
    _run_inline(_demo_cells(tmp_path, [1.0]), out, monkeypatch)
    before = (out / "summary.csv").read_bytes()
    with pytest.raises(ValueError, match="holds another sweep"):
        _run_inline(_demo_cells(tmp_path, [2.0]), out, monkeypatch)
    assert (out / "summary.csv").read_bytes() == before
    (out / "sweep.json").write_text("{trunc")
    with pytest.raises(ValueError, match=r"sweep.json: corrupt"):
        _run_inline(_demo_cells(tmp_path, [1.0]), out, monkeypatch)


@requires_extra("sweep")
def test_lock_refuses_a_second_run(tmp_path, monkeypatch):
    out = tmp_path / "o"
    out.mkdir()
    with S.SweepLock(out):
        # another process holds the lock: flock locks belong to open file descriptions, so a second
        # open in this process conflicts just as another process would
        with pytest.raises(ValueError, match="in use by another sweep"):
            _run_inline(_demo_cells(tmp_path, [1.0]), out, monkeypatch)
    assert _run_inline(_demo_cells(tmp_path, [1.0]), out, monkeypatch).complete  # released


@requires_extra("sweep")
def test_read_only_complete_cache_is_summarised(tmp_path, monkeypatch):
    out = tmp_path / "o"
    spec = _demo_cells(tmp_path, [1.0, 2.0])
    first = _run_inline(spec, out, monkeypatch)
    table = first.summary_csv.read_bytes()
    monkeypatch.setattr(SE, "_writable", lambda path: False)  # root passes chmod, so the probe is replaced
    res = S.run_sweep(spec, out)
    assert res.complete and res.summary_csv == out / "summary.csv" and res.summary_text is None
    (out / "summary.csv").unlink()
    res = S.run_sweep(spec, out)
    assert res.summary_text.encode() == table and res.summary_csv is None
    (out / "cells" / f"{first.keys[0]}.json").unlink()
    with pytest.raises(ValueError, match="read-only and 1 of 2 cells"):
        S.run_sweep(spec, out)


@requires_extra("sweep")
def test_unreachable_scheduler_is_one_line_fast(tmp_path, capsys):
    import time

    from noisealloc.cli import main

    f = _write_toml(tmp_path / "f.toml", {"sweep": {"name": "f", "kind": "demo"}, "grid": {"a": [1.0]}})
    t0 = time.perf_counter()
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert time.perf_counter() - t0 < 10
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot connect" in err[0]
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--scheduler", "http://x"]) == 2
    assert "tcp://HOST:PORT" in capsys.readouterr().err


# ------------------------------------------------------------------ shared artifacts
def _artifact_in_process(folder, counter, barrier):
    import numpy as np

    from noisealloc.verify.experiments import sweep as S2
    from noisealloc.verify.experiments.sweep import cache as SC2

    def compute():
        with open(counter, "a") as fh:  # one line per computation
            fh.write("x\n")
        time.sleep(0.5)  # long enough that the other process asks while this one holds the lock
        return {"h": np.array([0.1, 1 / 3]), "method": "m"}

    token = SC2._SHARED_DIR.set(str(folder))
    try:
        barrier.wait()
        return S2.shared_artifact("test artifact", {"a": 1}, compute)
    finally:
        SC2._SHARED_DIR.reset(token)


def test_shared_artifact_is_computed_once_by_concurrent_processes(tmp_path):
    import multiprocessing as mp

    counter = tmp_path / "count.txt"
    ctx = mp.get_context("spawn")
    barrier = ctx.Manager().Barrier(2)
    with ctx.Pool(2) as pool:
        results = pool.starmap(_artifact_in_process, [(tmp_path / "shared", counter, barrier)] * 2)
    assert counter.read_text().count("x") == 1, "two processes computed the same artifact"
    assert [f.suffix for f in (tmp_path / "shared").iterdir()] == [".json"]  # no lock file left behind
    assert results[0] == results[1] == {"h": [0.1, 1 / 3], "method": "m"}
    # a later call reads the file: no computation
    token = SC._SHARED_DIR.set(str(tmp_path / "shared"))
    try:
        again = S.shared_artifact("test artifact", {"a": 1}, lambda: pytest.fail("recomputed a stored artifact"))
        other = S.shared_artifact("test artifact", {"a": 2}, lambda: {"h": [2.0]})  # another key: computed
    finally:
        SC._SHARED_DIR.reset(token)
    assert again == results[0] and other == {"h": [2.0]}


def test_shared_artifact_without_folder_and_corrupt_file(tmp_path):
    import numpy as np

    # No folder (a cell called directly): computed, through the same JSON round trip (exact floats).
    out = S.shared_artifact("t", {"k": 0}, lambda: {"x": np.array([np.pi, 1e-300])})
    assert out == {"x": [np.pi, 1e-300]} and not any(tmp_path.iterdir())
    token = SC._SHARED_DIR.set(str(tmp_path))
    try:
        S.shared_artifact("t", {"k": 0}, lambda: {"x": [1.0]})
        (f,) = tmp_path.glob("*.json")
        f.write_text(f.read_text()[:10])  # truncated by a crash: never trusted, computed again
        assert S.shared_artifact("t", {"k": 0}, lambda: {"x": [2.0]}) == {"x": [2.0]}
        # non-finite numbers are kept as the cell cache keeps them (strings numpy reads back)
        got = S.shared_artifact("t", {"k": 1}, lambda: {"x": np.array([np.nan, -np.inf])})
        assert np.asarray(got["x"], dtype=float).tolist()[1] == -np.inf and np.isnan(float(got["x"][0]))
    finally:
        SC._SHARED_DIR.reset(token)
    assert len(list(tmp_path.glob("*.json"))) == 2


def _worker_env():
    import os

    return {k: os.environ.get(k) for k in ("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS", "XLA_FLAGS")}


@requires_extra("sweep")
def test_worker_spawn_env_drops_the_malloc_trim_threshold():
    """Dask sets MALLOC_TRIM_THRESHOLD_=65536 in its workers, which turns off glibc's dynamic mmap
    threshold: 10x the system time of a coupling cell (issue 29's 'system time as large as user time')."""
    import dask

    env = SE.worker_spawn_env()
    assert "MALLOC_TRIM_THRESHOLD_" in dask.config.get("distributed.nanny.pre-spawn-environ")  # what is dropped
    assert "MALLOC_TRIM_THRESHOLD_" not in env and str(env["OMP_NUM_THREADS"]) == "1"


@pytest.mark.slow
def test_local_cluster_workers_start_without_the_malloc_trim_threshold():
    client, cluster = SE._client(None, 2)
    try:
        envs = list(client.run(_worker_env).values())
    finally:
        client.close()
        cluster.close()
    assert len(envs) == 2
    for env in envs:
        assert env["MALLOC_TRIM_THRESHOLD_"] is None and env["OMP_NUM_THREADS"] == "1"
        assert env["XLA_FLAGS"] == SE.WORKER_ENV["XLA_FLAGS"]
