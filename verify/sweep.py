"""Ablation sweeps on ``dask.distributed``: a TOML grid of cells, cached on disk, resumable.

A sweep file::

    [sweep]
    name = "coupling-dirac"
    kind = "coupling"                 # a key of CELL_KINDS (never an import path: a sweep file runs no code)

    [fixed]                           # options shared by every cell
    levels = 97

    [grid]                            # the Cartesian product of these lists (in file order) is the set of cells
    data = ["dirac:K=3,D=1,sep=2,seed=0", "dirac:K=5,D=1,sep=2,seed=0"]
    J = [1, 2, 4, 8]
    criterion = ["L"]
    seed = [0]

    [summary]                         # the plot drawn at the end (optional)
    x = "J"
    y = "efficiency"
    group = "data"

The name is one path component (letters, digits, ``.``, ``_``, ``-``); the keys of ``[fixed]`` and
``[grid]`` are the cell kind's parameters (:func:`cell_parameters`), checked with their types when
the file is parsed, so a misspelt key or a value of the wrong type never reaches a worker.

Each cell is the dict ``fixed | grid point``.  Its result is cached as ``OUT/cells/<key>.json`` where
``key = sha256(kind, config, code version)`` and the code version hashes the package version and the
source of this module and of the cell function's module, so editing the code invalidates the cache.
Results are written atomically by the worker that computed them, so an interrupted sweep (a killed
client, a stopped cluster) keeps every finished cell and a rerun computes only the missing ones.  Each
computation appends one line to ``OUT/runs/<key>.log`` (the cell-level run counter).  A cell whose
function raises is recorded in ``OUT/failed/<key>.json``, never as a result: the sweep reports it
and exits non-zero, and a rerun retries it.  ``OUT/sweep.json`` holds the sweep's identity (name,
kind, fixed, grid): another sweep refuses that directory.  ``OUT/.lock`` (an ``flock``) keeps two
runs from sharing one directory.  At the end
``OUT/summary.csv`` is written (one row per cell in grid order: configuration then results), and
``OUT/summary.png`` when the caller passes a plot function (``noisealloc sweep`` passes
:func:`noisealloc.figures.sweep_summary.plot_summary`): this module computes and tabulates but never
plots, so importing it does not load matplotlib.

A cell may compute a deterministic intermediate result that other cells need too (an entropy-rate
profile, a pilot run): :func:`shared_artifact` computes it once per key under an ``flock`` and keeps
it as JSON in the run's shared folder (``run_sweep(..., shared_dir=...)``; without one every cell
computes its own), so two workers never compute it twice and a rerun reads it back.

Cells run on a :class:`distributed.LocalCluster` (worker processes) by default, or on an existing
cluster when a scheduler address is given, so the same sweep scales from one machine to many.
"""

from __future__ import annotations

import contextvars
import csv
import hashlib
import importlib
import importlib.util
import io
import itertools
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = [
    "CELL_KINDS",
    "SweepSpec",
    "SweepResult",
    "load_sweep",
    "parse_sweep",
    "expand_grid",
    "code_version",
    "cell_parameters",
    "SweepLock",
    "cell_key",
    "read_cell",
    "run_cell",
    "run_sweep",
    "run_counts",
    "shared_artifact",
    "summary_rows",
    "write_summary_csv",
    "cell_coupling",
    "cell_training",
    "cell_demo",
]

#: Built-in cell functions (``name -> "module:function"``).
CELL_KINDS = {
    "coupling": "noisealloc.verify.sweep:cell_coupling",
    "training": "noisealloc.verify.sweep:cell_training",
    "demo": "noisealloc.verify.sweep:cell_demo",
    "neural": "noisealloc.verify.neural_efficiency:cell_neural",
    # The shared artifacts (entropy-rate profiles, pilot runs) of regime (iii)'s schedules, built first.
    "fig6-schedule": "noisealloc.verify.neural_efficiency:cell_schedule",
    # Figure 6's regimes (i) and (ii), one cell per data set / schedule, so that `reproduce` caches them too.
    "fig6-coupled": "noisealloc.verify.regime_cells:cell_coupled",
    "fig6-independent": "noisealloc.verify.regime_cells:cell_independent",
}


# ----------------------------------------------------------------------------- specification
@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep file.

    Attributes
    ----------
    name : str
        The sweep's name (``[sweep] name``).
    kind : str
        The cell function as ``"module:function"`` (a key of :data:`CELL_KINDS` resolved).
    fixed : dict
        Options shared by every cell (``[fixed]``).
    grid : dict of str to list
        The axes whose Cartesian product is the set of cells (``[grid]``, in file order).
    summary : dict
        The summary plot's options (``[summary]``: ``x``, ``y``, ``group``, labels).
    n_cells : int
        Number of cells (product of the axis lengths).
    """

    name: str
    kind: str
    fixed: dict
    grid: dict
    summary: dict = field(default_factory=dict)

    @property
    def n_cells(self) -> int:
        # Python integers: a numpy product of axis lengths overflows silently for huge grids.
        return math.prod(len(v) for v in self.grid.values())


def _atomic_bytes(path: Path, data: bytes) -> None:
    from noisealloc.theory.schedule_io import atomic_write

    atomic_write(path, lambda fh: fh.write(data))


#: Keys of the ``[sweep]`` table.
SWEEP_KEYS = ("name", "kind")
#: Keys of the ``[summary]`` table (the plot's options).
SUMMARY_KEYS = ("x", "y", "group", "logx", "logy", "xlabel", "ylabel", "title")
#: A sweep name: one path component, so ``sweep-<name>`` never leaves the working directory.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: Smallest value of integer cell parameters, where a smaller one cannot give a result.
_PARAM_MINIMUM = {"levels": 3, "J": 1, "N": 1, "q": 1, "eval_levels": 2, "eval_n": 1, "h_levels": 3,
                  "h_samples": 2, "steps": 1, "batch_size": 1, "width": 1, "depth": 1, "checkpoints": 1,
                  "online_refresh": 1, "pilot_steps": 1}


def cell_parameters(kind: str) -> dict:
    """The parameters a registered cell kind accepts, with their type and whether they are required.

    Read from the cell function's keyword-only signature, so a kind declares its parameters once.

    Parameters
    ----------
    kind : str
        A key of :data:`CELL_KINDS`.

    Returns
    -------
    dict of str to tuple
        ``name -> (type annotation as a string, required)``.

    Raises
    ------
    ValueError
        ``kind`` is not registered.

    Examples
    --------
    >>> cell_parameters("demo")["a"]
    ('float', True)
    """
    import inspect

    if kind not in CELL_KINDS:
        raise ValueError(f"cell kind {kind!r} is not registered; allowed: {', '.join(CELL_KINDS)}")
    fn = _resolve(CELL_KINDS[kind])
    out = {}
    for name, par in inspect.signature(fn).parameters.items():
        if par.kind is par.KEYWORD_ONLY:
            ann = par.annotation if isinstance(par.annotation, str) else getattr(par.annotation, "__name__", "")
            out[name] = (str(ann), par.default is par.empty)
    return out


def _check_value(source: str, where: str, key: str, value, ann: str) -> None:
    """Refuse a cell option whose type does not match its annotation, or a non-finite number."""
    types = {t.strip() for t in ann.split("|")}
    bad = None
    if isinstance(value, bool):
        bad = "bool" not in types
    elif isinstance(value, int):
        bad = not types & {"int", "float"}
    elif isinstance(value, float):
        if "float" not in types:
            bad = True
        elif not math.isfinite(value):
            raise ValueError(f"{source}: {where} {key} = {value!r} must be a finite number")
    elif isinstance(value, str):
        bad = "str" not in types
    else:
        bad = True
    if bad and types & {"int", "float", "str", "bool"}:
        raise ValueError(f"{source}: {where} {key} = {value!r} must be of type {ann}")
    minimum = _PARAM_MINIMUM.get(key)
    if minimum is not None and isinstance(value, (int, float)) and not isinstance(value, bool) and value < minimum:
        raise ValueError(f"{source}: {where} {key} = {value!r} must be >= {minimum}")


def parse_sweep(doc: dict, *, source: str = "<dict>", allow_large: bool = False) -> SweepSpec:
    """Validate a sweep document (the TOML as a dict).

    Every check happens here, before any cell runs: the kind is a key of :data:`CELL_KINDS` (a
    sweep file never names a callable), the name is one path component, the keys of every table are
    known (those of ``[fixed]`` and ``[grid]`` are the kind's :func:`cell_parameters`), values have
    the parameter's type and are finite, and the grid has at most
    :data:`noisealloc.theory.limits.MAX_SWEEP_CELLS` cells.

    Parameters
    ----------
    doc : dict
        Tables ``sweep`` (``name``, ``kind``), and optionally ``fixed``, ``grid``, ``summary``.
    source : str
        Where the document came from, for the error messages.
    allow_large : bool
        Lift the limit on the number of cells.

    Returns
    -------
    SweepSpec

    Raises
    ------
    ValueError
        Naming the table or key that is missing, misspelt or of the wrong type.

    Examples
    --------
    >>> spec = parse_sweep({"sweep": {"name": "demo", "kind": "demo"}, "grid": {"a": [1.0, 2.0], "seed": [0, 1, 2]}})
    >>> spec.kind, spec.n_cells
    ('noisealloc.verify.sweep:cell_demo', 6)
    """
    from noisealloc.theory.limits import MAX_SWEEP_CELLS

    if not isinstance(doc, dict) or not isinstance(doc.get("sweep"), dict):
        raise ValueError(f"{source}: a sweep file needs a [sweep] table with 'name' and 'kind'")
    head = doc["sweep"]
    unknown = sorted(set(head) - set(SWEEP_KEYS))
    if unknown:
        raise ValueError(f"{source}: unknown keys {unknown} in [sweep]; allowed: {', '.join(SWEEP_KEYS)}")
    name = head.get("name")
    kind = head.get("kind")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{source}: [sweep] name must be a non-empty string; got {name!r}")
    if not _NAME_RE.fullmatch(name):
        raise ValueError(f"{source}: [sweep] name {name!r} must be one path component: letters, digits, '.', '_', "
                         "'-', starting with a letter or digit, at most 100 characters")
    if not isinstance(kind, str) or kind not in CELL_KINDS:
        raise ValueError(f"{source}: [sweep] kind must be one of {tuple(CELL_KINDS)} (a sweep file names a "
                         f"registered kind, never a function); got {kind!r}")
    target = CELL_KINDS[kind]
    grid = doc.get("grid", {})
    if not isinstance(grid, dict):
        raise ValueError(f"{source}: [grid] must be a table of lists")
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise ValueError(f"{source}: grid axis {k!r} must be a non-empty list; got {v!r}")
    fixed = doc.get("fixed", {})
    if not isinstance(fixed, dict):
        raise ValueError(f"{source}: [fixed] must be a table")
    both = set(fixed) & set(grid)
    if both:
        raise ValueError(f"{source}: keys {sorted(both)} appear in both [fixed] and [grid]")
    extra = set(doc) - {"sweep", "grid", "fixed", "summary"}
    if extra:
        raise ValueError(f"{source}: unknown tables {sorted(extra)}; allowed: sweep, fixed, grid, summary")
    params = cell_parameters(kind)
    for table, keys in (("[fixed]", fixed), ("[grid]", grid)):
        unknown = [k for k in keys if k not in params]
        if unknown:
            raise ValueError(f"{source}: unknown keys {unknown} in {table} for kind {kind!r}; allowed: "
                             f"{', '.join(params)}")
    missing = [k for k, (_ann, required) in params.items() if required and k not in fixed and k not in grid]
    if missing:
        raise ValueError(f"{source}: kind {kind!r} needs {missing} in [fixed] or [grid]")
    for k, v in fixed.items():
        _check_value(source, "[fixed]", k, v, params[k][0])
    for k, values in grid.items():
        for v in values:
            _check_value(source, "[grid]", k, v, params[k][0])
    n_cells = math.prod(len(v) for v in grid.values())
    if n_cells > MAX_SWEEP_CELLS and not allow_large:
        raise ValueError(f"{source}: the grid has {n_cells} cells, above the limit {MAX_SWEEP_CELLS}; pass "
                         "--allow-large to lift it")
    if not isinstance(doc.get("summary", {}), dict):
        raise ValueError(f"{source}: [summary] must be a table")
    summary = dict(doc.get("summary", {}))
    unknown = sorted(set(summary) - set(SUMMARY_KEYS))
    if unknown:
        raise ValueError(f"{source}: unknown keys {unknown} in [summary]; allowed: {', '.join(SUMMARY_KEYS)}")
    for k in ("x", "group"):
        if k in summary and summary[k] not in grid:
            raise ValueError(f"{source}: summary.{k} = {summary[k]!r} must name a grid axis {tuple(grid)}")
    return SweepSpec(name, target, dict(fixed), {k: list(v) for k, v in grid.items()}, summary)


def load_sweep(path, *, allow_large: bool = False) -> SweepSpec:
    """Read and validate a sweep TOML file.

    Parameters
    ----------
    path : str or os.PathLike
        The TOML file (format in the module docstring).
    allow_large : bool
        Lift the limit on the number of cells (:func:`parse_sweep`).

    Returns
    -------
    SweepSpec

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not valid TOML, or not a valid sweep (see :func:`parse_sweep`).
    """
    import tomllib

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"sweep file not found: {path}")
    with open(path, "rb") as fh:
        try:
            doc = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: not valid TOML: {exc}") from None
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: not valid TOML (not UTF-8: {exc.reason})") from None
    return parse_sweep(doc, source=str(path), allow_large=allow_large)


def expand_grid(spec: SweepSpec) -> list[dict]:
    """The cells: ``fixed | point`` for each point of the Cartesian product (first axis slowest).

    Parameters
    ----------
    spec : SweepSpec

    Returns
    -------
    list of dict
        One configuration per cell, ``spec.n_cells`` of them, last grid axis varying fastest.

    Examples
    --------
    >>> spec = parse_sweep({"sweep": {"name": "d", "kind": "demo"}, "fixed": {"b": 2.0},
    ...                     "grid": {"a": [1, 2], "seed": [0, 1]}})
    >>> expand_grid(spec)[:2]
    [{'b': 2.0, 'a': 1, 'seed': 0}, {'b': 2.0, 'a': 1, 'seed': 1}]
    """
    axes = list(spec.grid)
    cells = []
    for values in itertools.product(*(spec.grid[a] for a in axes)):
        cells.append({**spec.fixed, **dict(zip(axes, values))})
    return cells


def _resolve(target: str):
    # Only registered targets are ever imported: a sweep file or a cached record cannot make a
    # worker import and call an arbitrary function.
    if target not in CELL_KINDS.values():
        raise ValueError(f"cell function {target!r} cannot be imported: not a registered kind "
                         f"({', '.join(CELL_KINDS)})")
    mod_name, fn_name = target.split(":", 1)
    try:
        mod = importlib.import_module(mod_name)
        return getattr(mod, fn_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cell function {target!r} cannot be imported: {exc}") from None


#: What regime (iii)'s cells (training and schedule) depend on beyond their own module.
_NEURAL_DEPENDENCIES = ("noisealloc.theory", "noisealloc.verify.neural", "noisealloc.verify.heldout",
                        "noisealloc.verify.training")

#: Code a built-in cell kind depends on beyond its own module: every source file of these
#: subpackages enters the code version, so a change anywhere in them invalidates cached cells.
CELL_DEPENDENCIES = {
    "noisealloc.verify.sweep:cell_coupling": ("noisealloc.theory", "noisealloc.solvers", "noisealloc.verify.coupling",
                                              "noisealloc.verify.loss_recovery"),
    "noisealloc.verify.sweep:cell_training": ("noisealloc.theory", "noisealloc.verify.training"),
    "noisealloc.verify.sweep:cell_demo": (),
    "noisealloc.verify.neural_efficiency:cell_neural": _NEURAL_DEPENDENCIES,
    "noisealloc.verify.neural_efficiency:cell_schedule": _NEURAL_DEPENDENCIES,
    "noisealloc.verify.regime_cells:cell_coupled": ("noisealloc.theory", "noisealloc.verify.training"),
    "noisealloc.verify.regime_cells:cell_independent": ("noisealloc.theory", "noisealloc.verify.learners"),
}


def _sources(name: str) -> list[Path]:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ValueError(f"module {name!r} not found")
    if spec.submodule_search_locations:  # a package: every .py file in it
        return sorted(Path(spec.origin).parent.glob("*.py"))
    return [Path(spec.origin)]


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
    files = set()
    for name in {__name__, mod_name, *CELL_DEPENDENCIES.get(target, ())}:
        files.update(_sources(name))
    for f in sorted(files):
        h.update(f.name.encode())
        h.update(f.read_bytes())
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

    from noisealloc.verify._json import to_jsonable

    def as_json(value) -> str:
        return json.dumps(to_jsonable({"name": name, "key": key, "result": value}), sort_keys=True, allow_nan=False)

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
            _atomic_bytes(path, (text + "\n").encode())
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
    from noisealloc.verify._json import to_jsonable

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
        text = json.dumps(to_jsonable(record), sort_keys=True, indent=1, allow_nan=False) + "\n"
    except Exception as exc:  # reported by the sweep and retried on rerun, never cached as a result
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        record = {"key": key, "config": to_jsonable(config), "error": message,
                  "seconds": round(time.perf_counter() - t0, 3)}
        failed = out / "failed"
        failed.mkdir(parents=True, exist_ok=True)
        _atomic_bytes(failed / f"{key}.json", (json.dumps(record, sort_keys=True, indent=1, default=str) + "\n").encode())
        return record
    finally:
        _SHARED_DIR.reset(token)
    _atomic_bytes(path, text.encode())
    stale = out / "failed" / f"{key}.json"
    if stale.exists():  # an earlier failure of this cell, now computed
        stale.unlink(missing_ok=True)
    return record


@dataclass(frozen=True)
class SweepResult:
    """Outcome of :func:`run_sweep`.

    Attributes
    ----------
    name : str
        The sweep's name.
    out_dir : pathlib.Path
        Its output directory.
    keys : list of str
        Cache key of each cell, in grid order.
    records : list of dict or None
        Cell records in grid order (``None`` where a cell is unfinished).
    n_cells, n_cached, n_computed : int
        Cells in the grid, found in the cache, computed by this call (failed ones included).
    complete : bool
        Every cell has a result (none missing, none failed).
    summary_csv, summary_png : pathlib.Path or None
        The summary files written (``None`` when incomplete, or no plot function / nothing to plot).
    failed : list of dict
        Failure records (``key``, ``config``, ``error``) of the cells that raised in this call.
    recomputed : list of pathlib.Path
        Cached cell files that were truncated or not cell records, computed again.
    summary_text : str or None
        The summary table when the directory is read-only and its ``summary.csv`` is missing or
        stale (the caller prints it); ``None`` otherwise.
    """

    name: str
    out_dir: Path
    keys: list
    records: list
    n_cells: int
    n_cached: int
    n_computed: int
    complete: bool
    summary_csv: Path | None
    summary_png: Path | None
    failed: list = field(default_factory=list)
    recomputed: list = field(default_factory=list)
    summary_text: str | None = None


class SweepLock:
    """An exclusive lock on a sweep's output directory (``OUT/.lock``, ``fcntl.flock``).

    A second run into the same directory is refused at once, not left to compute every cell
    twice; the operating system releases the lock when the holder exits, even when killed.

    Parameters
    ----------
    out_dir : str or os.PathLike
        The sweep's output directory (must exist).

    Raises
    ------
    ValueError
        On entering, when another process holds the lock.
    """

    def __init__(self, out_dir):
        self.path = Path(out_dir) / ".lock"
        self._fd = None

    def __enter__(self):
        import fcntl

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise ValueError(f"{self.path.parent} is in use by another sweep (pid {holder}); wait for it to "
                             "finish or give another --out") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc):
        import fcntl

        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        return False


def _identity(doc: dict) -> str:
    return _canonical({k: doc.get(k) for k in ("name", "kind", "fixed", "grid")})


def _check_identity(spec: SweepSpec, out: Path) -> None:
    """Refuse a directory that holds another sweep (its ``sweep.json`` names other cells)."""
    path = out / "sweep.json"
    if not path.exists():
        if (out / "summary.csv").exists():
            raise ValueError(f"{out} holds sweep files but no sweep.json (its identity); give another --out")
        return
    try:
        stored = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"{path}: corrupt sweep identity file (not JSON); remove it or give another --out") from None
    if not isinstance(stored, dict):
        raise ValueError(f"{path}: corrupt sweep identity file (not a JSON object)")
    mine = {"name": spec.name, "kind": spec.kind, "fixed": spec.fixed, "grid": spec.grid}
    if _identity(json.loads(_canonical(mine))) != _identity(stored):
        raise ValueError(f"{out} holds another sweep ({stored.get('name')!r}, different kind, [fixed] or [grid]); "
                         "it is not overwritten: give another --out")


def _writable(out: Path) -> bool:
    """Whether files can be created in ``out`` (tried, since root passes every permission test)."""
    import errno
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=out):
            return True
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return False
        raise


def _check_scheduler(address: str) -> None:
    """Refuse an unreachable scheduler in a few seconds (Dask itself waits 30 s, then a traceback)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme not in ("tcp", "tls"):
        raise ValueError(f"--scheduler {address!r}: the address must be tcp://HOST:PORT or tls://HOST:PORT")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host or port is None:
        raise ValueError(f"--scheduler {address!r}: the address must be tcp://HOST:PORT or tls://HOST:PORT")
    try:
        socket.create_connection((host, port), timeout=SCHEDULER_TIMEOUT).close()
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ValueError(f"--scheduler {address!r}: cannot connect ({reason})") from None


#: Seconds to wait for a scheduler to accept a connection.
SCHEDULER_TIMEOUT = 5.0


def run_counts(out_dir) -> dict:
    """``key -> number of computations started`` from the run-counter files.

    Parameters
    ----------
    out_dir : str or os.PathLike
        A sweep's output directory.

    Returns
    -------
    dict of str to int
        One entry per cell ever started there (empty when nothing ran).
    """
    runs = Path(out_dir) / "runs"
    if not runs.is_dir():
        return {}
    return {p.stem: len(p.read_text().splitlines()) for p in sorted(runs.glob("*.log"))}


#: Environment of LocalCluster worker processes (single-threaded XLA; see _client).
WORKER_ENV = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}


def _client(scheduler, n_workers):
    import logging

    from distributed import Client, LocalCluster

    if scheduler:
        _check_scheduler(scheduler)
        return Client(scheduler, timeout=SCHEDULER_TIMEOUT), None
    # One thread per worker: XLA (the neural training cells) would otherwise start a thread pool per
    # worker as large as the machine, and two such pools on 2 cores ran the small training steps 2-3x
    # slower than one thread each.  Set only in the worker processes, never in the caller's.
    # Ctrl-C reaches the whole process group: worker processes started with SIGINT ignored leave the
    # interrupt to this process, which shuts them down (each used to print a KeyboardInterrupt
    # traceback); silence_logs drops the nanny's shutdown warnings ("Worker process still alive ...").
    # An interrupted sweep thus ends with one line.  Errors still show.
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
    try:
        cluster = LocalCluster(n_workers=int(n_workers), threads_per_worker=1, processes=True,
                               dashboard_address=None, env=dict(WORKER_ENV), silence_logs=logging.ERROR)
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous)
    return Client(cluster), cluster


def run_sweep(spec: SweepSpec, out_dir, *, scheduler: str | None = None, n_workers: int = 2,
              stop_after: int | None = None, progress: bool = False, client=None, plot=None,
              shared_dir=None) -> SweepResult:
    """Run every missing cell of ``spec`` on Dask; write the summary when all cells are done.

    Parameters
    ----------
    spec : SweepSpec
        The sweep.
    out_dir : str or os.PathLike
        Output directory (created); cached cells found there are not recomputed.
    scheduler : str, optional
        Address of an existing scheduler (``tcp://host:8786``); default: a new LocalCluster.
    n_workers : int
        Worker processes of the LocalCluster.
    stop_after : int, optional
        Stop (cancel the remaining cells and shut the cluster down) after this many cells have
        been computed in this call: a controlled interruption, used by the tests.
    client : distributed.Client, optional
        Use this client (the caller owns it).
    progress : bool
        Show a progress bar (tqdm).
    plot : callable, optional
        ``plot(spec, records, path) -> Path | None`` drawing ``OUT/summary.png`` once every cell is
        done (e.g. :func:`noisealloc.figures.sweep_summary.plot_summary`); ``None`` draws nothing.
        An exception it raises is written to ``OUT/summary.plot-error.txt``, never lost with the table.
    shared_dir : str or os.PathLike, optional
        Folder where the cells keep the artifacts they share (:func:`shared_artifact`; several sweeps
        may use one); default: none, every cell computes its own.

    Returns
    -------
    SweepResult

    Raises
    ------
    ValueError
        ``out_dir`` holds another sweep, is in use by another run (:class:`SweepLock`), or is
        read-only while cells are missing; the scheduler cannot be reached.
    """

    out = Path(out_dir)
    if scheduler and client is None:  # before anything is created in out_dir
        _check_scheduler(scheduler)
    _check_identity(spec, out) if out.is_dir() else None
    version = code_version(spec.kind)
    cells = expand_grid(spec)
    keys = [cell_key(spec.kind, c, version) for c in cells]
    if out.is_dir() and not _writable(out):
        return _summarise_read_only(spec, out, cells, keys)
    out.mkdir(parents=True, exist_ok=True)
    with SweepLock(out):
        _check_identity(spec, out)  # again under the lock: another run may have claimed the folder
        return _run_locked(spec, out, cells, keys, version, scheduler=scheduler, n_workers=n_workers,
                           stop_after=stop_after, progress=progress, client=client, plot=plot,
                           shared_dir=None if shared_dir is None else str(Path(shared_dir).resolve()))


def _summarise_read_only(spec, out, cells, keys) -> SweepResult:
    """A complete cache in a read-only folder: the summary, printed by the caller when it cannot be written."""
    records = [read_cell(out / "cells" / f"{k}.json", k) for k in keys]
    missing = sum(r is None for r in records)
    if missing:
        raise ValueError(f"{out} is read-only and {missing} of {len(cells)} cells have no valid result there; "
                         "give a writable --out")
    text = _summary_text(spec, records)
    csv_path = out / "summary.csv"
    current = csv_path.read_bytes() if csv_path.is_file() else None
    up_to_date = current == text.encode()
    return SweepResult(spec.name, out, keys, records, len(cells), len(cells), 0, True,
                       csv_path if up_to_date else None, None, summary_text=None if up_to_date else text)


def _run_locked(spec, out, cells, keys, version, *, scheduler, n_workers, stop_after, progress, client, plot,
                shared_dir=None):
    (out / "cells").mkdir(parents=True, exist_ok=True)
    records: list = [None] * len(cells)
    todo = []
    recomputed = []
    for i, k in enumerate(keys):
        p = out / "cells" / f"{k}.json"
        records[i] = read_cell(p, k)
        if records[i] is None:
            todo.append(i)
            if p.exists():
                recomputed.append(p)
    n_cached = len(cells) - len(todo)
    n_computed = 0
    failed = []
    _atomic_bytes(out / "sweep.json", (json.dumps({"name": spec.name, "kind": spec.kind, "fixed": spec.fixed,
                                                   "grid": spec.grid, "summary": spec.summary,
                                                   "code_version": version, "keys": keys}, indent=1,
                                                  sort_keys=True, default=str) + "\n").encode())
    if todo:
        own = client is None
        cluster = None
        if own:
            client, cluster = _client(scheduler, n_workers)
        try:
            from distributed import as_completed

            # The task key names the output directory too: the same cell swept into two directories on
            # one client must run (and write its file) in each, not share the first result in memory.
            where = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:8]
            futures = {client.submit(run_cell, spec.kind, cells[i], str(out), keys[i], shared_dir,
                                     key=f"cell-{keys[i]}-{where}", pure=False): i for i in todo}
            bar = None
            if progress:
                from tqdm.auto import tqdm

                bar = tqdm(total=len(cells), initial=n_cached, desc=f"sweep {spec.name}", unit="cell")
            ac = as_completed(list(futures))
            try:
                for fut in ac:
                    i = futures[fut]
                    rec = fut.result()
                    n_computed += 1
                    if "error" in rec:
                        failed.append(rec)
                    else:
                        records[i] = rec
                    if bar is not None:
                        bar.update(1)
                    if stop_after is not None and n_computed >= int(stop_after):
                        for f in futures:
                            if not f.done():
                                f.cancel()
                        break
            finally:
                # closed on every exit (an interrupt too), so the bar ends its line before any message
                if bar is not None:
                    bar.close()
        finally:
            if own:
                client.close()
                if cluster is not None:
                    cluster.close()
    complete = all(r is not None for r in records)
    csv_path = png_path = None
    if complete:
        csv_path = write_summary_csv(spec, records, out / "summary.csv")
        if plot is not None:
            try:
                png_path = plot(spec, records, out / "summary.png")
            except Exception as exc:  # a plot must never lose the computed table
                _atomic_bytes(out / "summary.plot-error.txt", f"{type(exc).__name__}: {exc}\n".encode())
    return SweepResult(spec.name, out, keys, records, len(cells), n_cached, n_computed, complete, csv_path, png_path,
                       failed=failed, recomputed=recomputed)


# ----------------------------------------------------------------------------- summary
def _flat(prefix, obj, out):
    """Flatten nested dicts into ``a.b`` keys."""
    if isinstance(obj, dict):
        for k in sorted(obj):
            _flat(f"{prefix}{k}.", obj[k], out)
    else:
        out[prefix[:-1]] = obj


def summary_rows(spec: SweepSpec, records) -> list[dict]:
    """One flat dict per cell: the grid and fixed options, then scalar results.

    Parameters
    ----------
    spec : SweepSpec
    records : list of dict
        Cell records (:func:`run_cell`), in grid order.

    Returns
    -------
    list of dict
        Nested results flattened to ``a.b`` keys; non-scalar values (lists, arrays) left out.
    """
    rows = []
    for rec in records:
        row = {k: rec["config"].get(k) for k in list(spec.grid) + list(spec.fixed)}
        res = {}
        _flat("", rec["result"], res)
        for k, v in res.items():
            if isinstance(v, (int, float, str, bool)) or v is None:
                row[k] = v
        rows.append(row)
    return rows


def write_summary_csv(spec: SweepSpec, records, path) -> Path:
    """The summary table (CSV, atomic; floats by ``repr``, so identical results give identical bytes).

    Parameters
    ----------
    spec : SweepSpec
    records : list of dict
        Cell records in grid order.
    path : str or os.PathLike
        The CSV file to write.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    text = _summary_text(spec, records)
    path = Path(path)
    _atomic_bytes(path, text.encode())
    return path


def _summary_text(spec: SweepSpec, records) -> str:
    rows = summary_rows(spec, records)
    cols = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    return buf.getvalue()


# ----------------------------------------------------------------------------- cell functions
def cell_coupling(*, data: str, J: int, criterion: str = "L", seed: int = 0, lam_min: float = -8.0,
                  lam_max: float = 8.0, levels: int = 97, family: str | None = None) -> dict:
    """One row of the coupling sweep (:func:`noisealloc.verify.coupling.coupling_sweep` at a single ``J``).

    Parameters
    ----------
    data : str
        Data SPEC (:func:`noisealloc.theory.datasets.load_data`).
    J : int
        Number of B-spline basis functions in log-SNR (THEORY.md §4 (c)).
    criterion : str
        ``"L"`` or ``"sandwich"``.
    seed : int
        Randomness of the allocation problem.
    lam_min, lam_max : float
        Log-SNR interval.
    levels : int
        Levels of the grid.
    family : str, optional
        Denoiser family (default the model's natural one).

    Returns
    -------
    dict
        The sweep row (atoms, W1 distance to the entropic density, efficiency, ...), without timings.

    References
    ----------
    THEORY.md §4 (c), §6.3.
    """
    from noisealloc.theory.datasets import load_data
    from noisealloc.verify.coupling import coupling_sweep

    if int(levels) < 3:  # as `noisealloc optimize`: fewer levels cannot carry an allocation
        raise ValueError(f"levels must be >= 3; got {levels}")
    model = load_data(data)
    rep = coupling_sweep(model, (int(J),), lam=np.linspace(lam_min, lam_max, int(levels)), criterion=criterion,
                         family=family, rng=int(seed))
    row = dict(rep.rows[0])
    row.pop("seconds", None)  # timings are not results: keep the table reproducible
    return row


def cell_training(*, data: str, schedule: str, N: int, seed: int = 0, q: int = 256, ridge: float = 1e-3,
                  lam_min: float = -8.0, lam_max: float = 8.0, eval_levels: int = 33, eval_n: int = 96,
                  h_levels: int = 65, h_samples: int = 512) -> dict:
    """Held-out ELBO gap of one random-feature denoiser trained on ``N`` samples (figure 6's cell).

    Parameters
    ----------
    data : str
        Data SPEC, or ``"digits-binarised"`` (the 8x8 digits thresholded to +-1).
    schedule : str
        ``"sqrt-entropic"``, ``"entropic"`` or a built-in schedule name
        (:func:`noisealloc.verify.training.training_schedule`).
    N : int
        Training samples.
    seed : int
        Seed of the first layer, the training draws, the held-out set and a Monte-Carlo ``h``.
    q, ridge : int, float
        Random features and ridge of the readout.
    lam_min, lam_max : float
        Training and evaluation interval in log-SNR.
    eval_levels, eval_n : int
        Held-out grid levels and pairs per level.
    h_levels, h_samples : int
        Levels of the entropy-rate profile and Monte-Carlo samples per level.

    Returns
    -------
    dict
        ``{"elbo_gap": float}`` in nats.

    References
    ----------
    THEORY.md §6.6 (i).
    """
    from noisealloc.theory.datasets import load_data, load_digits
    from noisealloc.theory.dirac import DiracMixture
    from noisealloc.verify.training import make_eval_set, training_curve, training_schedule

    if data == "digits-binarised":
        model = DiracMixture(np.where(load_digits()[0] > 0.0, 1.0, -1.0))
    else:
        model = load_data(data)
    sch = training_schedule(model, schedule, lam_min, lam_max, h_levels=int(h_levels), h_samples=int(h_samples),
                            rng=int(seed))
    ev = make_eval_set(model, lam_min, lam_max, levels=int(eval_levels), n=int(eval_n),
                       rng=np.random.default_rng([int(seed), 66]))
    c = training_curve(model, sch, [int(N)], [int(seed)], ev, q=int(q), ridge=float(ridge))
    return {"elbo_gap": float(c.gaps[0, 0])}


def cell_demo(*, a: float, b: float = 1.0, seed: int = 0, sleep: float = 0.0) -> dict:
    """A cheap deterministic cell for tests and smoke runs: a seeded Monte-Carlo mean of ``a x + b``.

    Parameters
    ----------
    a, b : float
        Slope and offset.
    seed : int
        Seed of the 1000 standard normal draws ``x``.
    sleep : float
        Seconds to wait first (to test interruptions).

    Returns
    -------
    dict
        ``{"mean": mean(a x + b), "a_times_b": a b}``.

    Examples
    --------
    >>> cell_demo(a=0.0, b=1.5)
    {'mean': 1.5, 'a_times_b': 0.0}
    """
    if sleep:
        time.sleep(float(sleep))
    x = np.random.default_rng(int(seed)).standard_normal(1000)
    return {"mean": float(np.mean(a * x + b)), "a_times_b": float(a) * float(b)}
