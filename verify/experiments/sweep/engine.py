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

import contextlib

import csv
import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from noisealloc.theory._optional import require
from noisealloc.theory.output import write_json, write_text
from noisealloc.verify.experiments.sweep.cache import _canonical, cell_key, code_version, read_cell, run_cell
from noisealloc.verify.experiments.sweep.spec import SweepSpec, expand_grid


__all__ = ['SweepResult', 'SweepLock', 'run_sweep', 'local_scheduler', 'run_counts', 'summary_rows', 'write_summary_csv']


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
#: Variables of Dask's worker pre-spawn environment that the sweep's LocalCluster leaves out (see _client).
DROPPED_WORKER_ENV = ("MALLOC_TRIM_THRESHOLD_",)


def worker_spawn_env() -> dict:
    """Dask's worker pre-spawn environment (``distributed.nanny.pre-spawn-environ``) without
    :data:`DROPPED_WORKER_ENV`: the environment the sweep's LocalCluster workers start with, before
    :data:`WORKER_ENV`."""
    import dask

    require("distributed", "a sweep")  # its import registers the distributed.* config defaults
    return {k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ", {}).items()
            if k not in DROPPED_WORKER_ENV}


def _client(scheduler, n_workers):
    import logging

    distributed = require("distributed", "a sweep")
    Client, LocalCluster = distributed.Client, distributed.LocalCluster

    if scheduler:
        _check_scheduler(scheduler)
        return Client(scheduler, timeout=SCHEDULER_TIMEOUT), None
    # One thread per worker: XLA (the neural training cells) would otherwise start a thread pool per
    # worker as large as the machine, and two such pools on 2 cores ran the small training steps 2-3x
    # slower than one thread each.  Set only in the worker processes, never in the caller's.
    # Ctrl-C reaches the whole process group: worker processes started with SIGINT ignored leave the
    # interrupt to this process, which shuts them down (otherwise each prints a KeyboardInterrupt
    # traceback); silence_logs drops the nanny's shutdown warnings ("Worker process still alive ...").
    # An interrupted sweep thus ends with one line.  A cell's own error is caught and recorded by run_cell
    # (OUT/failed), so the workers' log lines add nothing but noise: at a cluster's shut-down a worker's
    # heartbeat can race the closing scheduler and log a "Stream is closed" traceback at ERROR level.
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
    try:
        import dask

        # Dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536 in its workers (distributed.nanny.pre-spawn-environ):
        # setting it turns off glibc's dynamic mmap threshold, so every array above 128 KiB is mapped and
        # unmapped again, page faults and all.  A coupling cell (5-atom Dirac mixture, J = 16) took 3.8 s of
        # system time against 0.4 s without it (wall 20.7 s against 15.5 s, the same peak memory): the
        # "system time as large as user time" of issue 29.  The workers keep the nanny's other settings.
        # An earlier nanny in this process (a LocalCluster made elsewhere) has also written them into
        # os.environ, which the workers would inherit: they are held out of it while ours spawn.
        held = {k: os.environ.pop(k) for k in DROPPED_WORKER_ENV if k in os.environ}
        # The scheduler's HTTP server (health and metrics routes; no dashboard without bokeh) listens on
        # 8787 unless told otherwise, and a second cluster on the machine (a figure's, another sweep's)
        # printed a 'Port 8787 is already in use' warning: any free port on the loopback instead.
        try:
            with dask.config.set({"distributed.nanny.pre-spawn-environ": worker_spawn_env()}):
                cluster = LocalCluster(n_workers=int(n_workers), threads_per_worker=1, processes=True,
                                       dashboard_address="127.0.0.1:0", env=dict(WORKER_ENV), silence_logs=logging.CRITICAL)
        finally:
            os.environ.update(held)
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous)
    return Client(cluster), cluster


@contextlib.contextmanager
def local_scheduler(n_workers: int = 2):
    """A LocalCluster for several sweeps in a row (a figure's): yields its scheduler address.

    Passing the address as ``scheduler=`` to each :func:`run_sweep` keeps one set of worker processes for
    all of them: no cluster start-up and shut-down per sweep (seconds each), and the workers' caches (a
    compiled training step, an entropy-rate profile) serve every sweep.

    Parameters
    ----------
    n_workers : int
        Worker processes.

    Yields
    ------
    str
        The scheduler's address.
    """
    client, cluster = _client(None, n_workers)
    try:
        yield cluster.scheduler_address
    finally:
        client.close()
        cluster.close()


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
    write_json(out / "sweep.json", {"name": spec.name, "kind": spec.kind, "fixed": spec.fixed, "grid": spec.grid,
                                    "summary": spec.summary, "code_version": version, "keys": keys})
    if todo:
        own = client is None
        cluster = None
        if own:
            client, cluster = _client(scheduler, n_workers)
        try:
            as_completed = require("distributed", "a sweep").as_completed

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
                write_text(out / "summary.plot-error.txt", f"{type(exc).__name__}: {exc}\n")
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
    write_text(path, text)
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
