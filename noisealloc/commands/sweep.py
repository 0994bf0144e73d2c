"""``noisealloc sweep FILE.toml``: run an ablation sweep on a Dask cluster (cached, resumable).

The sweep file format is documented in :mod:`noisealloc.verify.experiments.sweep`; two examples ship in
``noisealloc/figures/sweeps/``.  Without ``--scheduler`` a LocalCluster of worker processes is
started; with it the cells run on that existing cluster.  Rerunning a sweep computes only the cells
whose cached result is missing (e.g. after an interruption) or whose code changed.  The summary plot
is drawn here, by :func:`noisealloc.figures.sweep_summary.plot_summary` (the engine never plots).

Exit status: 0 when every cell has a result; 1 when cells failed (one line on stderr with the
count and the first error; each failure is in ``OUT/failed/<key>.json`` and a rerun retries it) or
the run was stopped early; 2 for a bad sweep file, a folder that holds another sweep or is in use,
or an unreachable scheduler.  A complete cache in a read-only folder is summarised: the table is
printed when ``summary.csv`` cannot be written.
"""

from __future__ import annotations

from noisealloc.theory.request_limits import MAX_SWEEP_CELLS

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    parser.add_argument("file", metavar="FILE.toml", help="sweep file ([sweep], [fixed], [grid], [summary] tables)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="address of an existing Dask scheduler (default: start a LocalCluster)")
    parser.add_argument("--workers", type=int, default=2, metavar="N", help="LocalCluster worker processes (default 2)")
    parser.add_argument("--out", default=None, metavar="DIR", help="output directory (default: sweep-<name>)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--allow-large", action="store_true",
                        help=f"lift the limit of {MAX_SWEEP_CELLS} cells per sweep")


def run(args) -> int:
    from pathlib import Path

    from noisealloc.figures.sweep_summary import plot_summary
    from noisealloc.verify.experiments.sweep.spec import load_sweep
    from noisealloc.verify.experiments.sweep.engine import run_sweep

    import sys

    from noisealloc.theory._optional import require

    require("distributed", "noisealloc sweep")  # the [sweep] extra, named before any work
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1; got {args.workers}")
    if args.workers > 256:
        raise ValueError(f"--workers must be <= 256; got {args.workers}")
    spec = load_sweep(args.file, allow_large=args.allow_large)
    out = Path(args.out) if args.out else Path(f"sweep-{spec.name}")
    if out.exists() and not out.is_dir():  # the default folder is checked like a given one
        raise ValueError(f"--out {str(out)!r} exists and is not a folder")
    res = run_sweep(spec, out, scheduler=args.scheduler, n_workers=args.workers, progress=not args.no_progress,
                    plot=plot_summary)
    for path in res.recomputed:
        print(f"cached cell file {path} was truncated or not a cell record: computed again")
    n_failed = len(res.failed)
    print(f"sweep {spec.name}: {res.n_cells} cells, {res.n_cached} cached, {res.n_computed - n_failed} computed"
          + (f", {n_failed} failed" if n_failed else ""))
    if res.summary_csv:
        print(f"summary table: {res.summary_csv}")
    if res.summary_text is not None:
        print(f"{out} is read-only: the summary table follows")
        sys.stdout.write(res.summary_text)
    if res.summary_png:
        print(f"summary plot:  {res.summary_png}")
    if n_failed:
        first = res.failed[0]
        print(f"noisealloc sweep: error: {n_failed} of {res.n_cells} cells failed (first: {first['error']}, "
              f"config {first['config']}); details in {out / 'failed'}, a rerun retries them", file=sys.stderr)
        return 1
    return 0 if res.complete else 1
