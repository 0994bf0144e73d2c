"""``noisealloc sweep FILE.toml``: run an ablation sweep on a Dask cluster (cached, resumable).

The sweep file format is documented in :mod:`noisealloc.verify.sweep`; two examples ship in
``noisealloc/figures/sweeps/``.  Without ``--scheduler`` a LocalCluster of worker processes is
started; with it the cells run on that existing cluster.  Rerunning a sweep computes only the cells
whose cached result is missing (e.g. after an interruption) or whose code changed.  The summary plot
is drawn here, by :func:`noisealloc.figures.sweep_summary.plot_summary` (the engine never plots).
"""

from __future__ import annotations

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    parser.add_argument("file", metavar="FILE.toml", help="sweep file ([sweep], [fixed], [grid], [summary] tables)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="address of an existing Dask scheduler (default: start a LocalCluster)")
    parser.add_argument("--workers", type=int, default=2, metavar="N", help="LocalCluster worker processes (default 2)")
    parser.add_argument("--out", default=None, metavar="DIR", help="output directory (default: sweep-<name>)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    from pathlib import Path

    from noisealloc.figures.sweep_summary import plot_summary
    from noisealloc.verify.sweep import load_sweep, run_sweep

    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1; got {args.workers}")
    spec = load_sweep(args.file)
    out = Path(args.out) if args.out else Path(f"sweep-{spec.name}")
    res = run_sweep(spec, out, scheduler=args.scheduler, n_workers=args.workers, progress=not args.no_progress,
                    plot=plot_summary)
    print(f"sweep {spec.name}: {res.n_cells} cells, {res.n_cached} cached, {res.n_computed} computed")
    if res.summary_csv:
        print(f"summary table: {res.summary_csv}")
    if res.summary_png:
        print(f"summary plot:  {res.summary_png}")
    return 0 if res.complete else 1
