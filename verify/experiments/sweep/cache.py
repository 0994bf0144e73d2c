r"""The sweep cache: code versions, cell keys, cell records on disk and shared artifacts.
"""

from __future__ import annotations

import contextvars
import hashlib
import importlib
import importlib.util
import json
import os
import time
from pathlib import Path
from noisealloc.verify.experiments.sweep.spec import _resolve


from noisealloc.theory.output import dumps_json, to_jsonable, write_json, write_text

__all__ = ['code_version', 'cell_key', 'read_cell', 'run_cell', 'shared_artifact']


#: What regime (iii)'s cells (training and schedule) depend on beyond their own module.
_NEURAL_DEPENDENCIES = ("noisealloc.theory", "noisealloc.verify.experiments.neural", "noisealloc.verify.experiments.heldout",
                        "noisealloc.verify.experiments.random_features")

#: Code a built-in cell kind depends on beyond its own module: every source file of these
#: subpackages enters the code version, so a change anywhere in them invalidates cached cells.
CELL_DEPENDENCIES = {
    "noisealloc.verify.experiments.sweep.cells:cell_coupling": ("noisealloc.theory", "noisealloc.solvers", "noisealloc.verify.experiments.coupling",
                                              "noisealloc.verify.checks.loss_recovery"),
    "noisealloc.verify.experiments.sweep.cells:cell_training": ("noisealloc.theory", "noisealloc.verify.experiments.random_features"),
    "noisealloc.verify.experiments.sweep.cells:cell_demo": (),
    "noisealloc.verify.experiments.neural_efficiency:cell_neural": _NEURAL_DEPENDENCIES,
    "noisealloc.verify.experiments.masked_efficiency:cell_masked": _NEURAL_DEPENDENCIES + (
        "noisealloc.verify.experiments.masked_training", "noisealloc.verify.experiments.neural_efficiency"),
    "noisealloc.verify.experiments.neural_efficiency:cell_schedule": _NEURAL_DEPENDENCIES,
    "noisealloc.verify.experiments.regime_cells:cell_coupled": ("noisealloc.theory", "noisealloc.verify.experiments.random_features"),
    "noisealloc.verify.experiments.regime_cells:cell_independent": ("noisealloc.theory", "noisealloc.verify.experiments.learners"),
}


def _sources(name: str) -> dict[str, Path]:
    """Dotted module name -> source file of module ``name``, or of every module of package ``name``
    (subpackages included)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ValueError(f"module {name!r} not found")
    if not spec.submodule_search_locations:
        return {name: Path(spec.origin)}
    root = Path(spec.origin).parent
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = f.relative_to(root).with_suffix("").parts
        out[".".join((name, *parts))] = f
    return out


def code_version(target: str) -> str:
    """Hash of the package version and of the sources the cell function depends on.

    Always this module and the cell function's module; for built-in kinds also the subpackages of
    :data:`CELL_DEPENDENCIES`.

    Parameters
    ----------
    target : str
        The cell function as ``"module:function"``.

    Returns
    -------
    str
        16 hexadecimal digits of a SHA-256 over the version, file names and file contents.
    """
    from noisealloc import __version__

    mod_name = target.split(":", 1)[0]
    h = hashlib.sha256(__version__.encode())
    files = {}
    # the whole sweep engine, the cell's module and its declared dependencies, keyed by dotted name (the
    # same on every machine, and two files of one base name in different subpackages stay apart)
    for name in {__name__.rpartition(".")[0], mod_name, *CELL_DEPENDENCIES.get(target, ())}:
        files.update(_sources(name))
    for dotted in sorted(files):
        h.update(dotted.encode())
        h.update(files[dotted].read_bytes())
    return h.hexdigest()[:16]


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def cell_key(target: str, config: dict, version: str) -> str:
    """Cache key of one cell: sha256 of the cell function, its configuration and the code version.

    Parameters
    ----------
    target : str
        The cell function as ``"module:function"``.
    config : dict
        The cell's options (key order does not matter).
    version : str
        :func:`code_version` of ``target``.

    Returns
    -------
    str
        24 hexadecimal digits; the cell's result file is ``OUT/cells/<key>.json``.
    """
    return hashlib.sha256(_canonical({"kind": target, "config": config, "code": version}).encode()).hexdigest()[:24]


# ----------------------------------------------------------------------------- execution
def read_cell(path, key: str | None = None) -> dict | None:
    """A cached cell record, or ``None`` when the file is absent, truncated or not a cell record.

    Parameters
    ----------
    path : str or os.PathLike
        ``OUT/cells/<key>.json``.
    key : str, optional
        The key the record must carry.

    Returns
    -------
    dict or None
        The record (with ``key``, ``config``, ``result``), or ``None``: the cell must be computed.
    """
    try:
        rec = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError):  # truncated or corrupt: computed again, never trusted
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("config"), dict) or "result" not in rec:
        return None
    if key is not None and rec.get("key") != key:
        return None
    return rec


#: The shared-artifact folder of the cell running in this process (set by :func:`run_cell`), or None.
_SHARED_DIR: contextvars.ContextVar = contextvars.ContextVar("noisealloc_sweep_shared_dir", default=None)


def shared_artifact(name: str, key, compute):
    """A deterministic intermediate result, computed once per ``(name, key)`` by the cells of a run.

    Inside a cell run with a shared folder (``run_sweep(..., shared_dir=...)``) the first caller takes
    an exclusive ``flock`` on ``<folder>/<digest>.lock``, computes ``compute()`` and writes it to
    ``<folder>/<digest>.json`` atomically; a concurrent caller blocks on the lock and then reads the
    file, and a later run reads it without computing.  The operating system releases the lock when its
    holder dies, so an interrupted computation is simply done again.  Outside such a cell (no folder)
    it returns ``compute()`` through the same JSON round trip, so a caller gets the same numbers either way.

    Parameters
    ----------
    name : str
        What the artifact is (part of its key and of its file's record).
    key : JSON-able
        Every input the result depends on (options, data name, code version).
    compute : callable
        ``compute() -> dict`` of JSON-able values (arrays become lists).

    Returns
    -------
    dict
        The result as JSON holds it (floats exact, arrays as lists).
    """
    import fcntl


    def as_json(value) -> str:
        return dumps_json({"name": name, "key": key, "result": value}, indent=None).rstrip("\n")

    folder = _SHARED_DIR.get()
    if folder is None:
        return json.loads(as_json(compute()))["result"]
    digest = hashlib.sha256(_canonical({"name": name, "key": to_jsonable(key)}).encode()).hexdigest()[:24]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{digest}.json"

    def read():
        try:
            rec = json.loads(path.read_text())
        except (FileNotFoundError, ValueError, UnicodeDecodeError):  # absent or truncated: computed again
            return None
        return rec["result"] if isinstance(rec, dict) and rec.get("name") == name and "result" in rec else None

    found = read()
    if found is not None:
        return found
    fd = os.open(folder / f"{digest}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocks while another worker computes the same artifact
        found = read()
        if found is None:
            text = as_json(compute())
            write_text(path, text + "\n")
            found = json.loads(text)["result"]
            # Safe to remove once the file exists: a process that opens a new lock file re-reads the
            # file under it before computing, and one waiting on this lock reads it too.
            (folder / f"{digest}.lock").unlink(missing_ok=True)
        return found
    finally:
        os.close(fd)  # releases the lock


def run_cell(target: str, config: dict, out_dir: str, key: str, shared_dir: str | None = None) -> dict:
    """Compute one cell unless a valid result file exists; write it atomically; return the record.

    Runs on a Dask worker: everything it needs is in its arguments.  An exception raised by the
    cell function (or a result JSON cannot hold) is not raised and not cached as a result: the
    record ``{"key", "config", "error": "Type: message", "seconds"}`` is written to
    ``OUT/failed/<key>.json`` and returned, so the sweep reports it and a rerun retries the cell.
    A cached file that is truncated or not a cell record (:func:`read_cell`) is computed again.

    Parameters
    ----------
    target : str
        The cell function as ``"module:function"``.
    config : dict
        Keyword arguments of the cell function.
    out_dir : str
        The sweep's output directory.
    key : str
        :func:`cell_key` of the cell.
    shared_dir : str, optional
        Folder of the run's shared artifacts (:func:`shared_artifact`); not part of the cell's key.

    Returns
    -------
    dict
        ``{"key", "config", "result", "seconds"}``, as written to ``OUT/cells/<key>.json``, or the
        failure record (with ``error`` instead of ``result``).
    """

    out = Path(out_dir)
    path = out / "cells" / f"{key}.json"
    cached = read_cell(path, key)
    if cached is not None:
        return cached
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The run counter: one line per computation started (O_APPEND writes of one short line are atomic).
    with open(runs / f"{key}.log", "a") as fh:
        fh.write(f"{os.getpid()} {time.time():.3f}\n")
    t0 = time.perf_counter()
    fn = _resolve(target)
    token = _SHARED_DIR.set(shared_dir)
    try:
        result = fn(**config)
        record = {"key": key, "config": config, "result": to_jsonable(result),
                  "seconds": round(time.perf_counter() - t0, 3)}
        text = dumps_json(record)
    except Exception as exc:  # reported by the sweep and retried on rerun, never cached as a result
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        record = {"key": key, "config": to_jsonable(config), "error": message,
                  "seconds": round(time.perf_counter() - t0, 3)}
        failed = out / "failed"
        failed.mkdir(parents=True, exist_ok=True)
        write_json(failed / f"{key}.json", record)
        return record
    finally:
        _SHARED_DIR.reset(token)
    write_text(path, text)
    stale = out / "failed" / f"{key}.json"
    if stale.exists():  # an earlier failure of this cell, now computed
        stale.unlink(missing_ok=True)
    return record
