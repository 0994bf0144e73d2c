"""``noisealloc reproduce [--quick | --full] [--out DIR] [--mnist PATH]``: every figure, then REPORT.md.

Runs the seven figure scripts of :mod:`noisealloc.figures` in order with a progress bar, each writing its
PNG, its numbers (JSON) and its run configuration into DIR, then writes ``DIR/REPORT.md``: each claim of
docs/THEORY.md section 6 with the numbers behind it and a verdict computed from them.  Default data are
embedded (synthetic models and scikit-learn's 8x8 digits), so it runs on a fresh machine; MNIST rows are
added when ``--mnist PATH`` or ``NOISEALLOC_MNIST_DIR`` names the directory of the IDX files.
"""

from __future__ import annotations

__all__ = ["add_arguments", "run", "FIGURES"]

#: Figure modules in running order (figures 3 and 4 depend on verify/experiments/coupling.py and verify/checks/rmt.py).
FIGURES = ("fig1_entropy", "fig2_atoms", "fig3_coupling", "fig4_rmt", "fig5_efficiency", "fig6_training",
           "fig7_masked")
#: Figures whose cells train networks (the [train] and [sweep] extras) and take --scheduler.
TRAINING_FIGURES = ("fig6_training", "fig7_masked")


def add_arguments(parser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="quick", action="store_true", default=True,
                      help="quick sizes, a few minutes on 2 cores (default)")
    mode.add_argument("--full", dest="quick", action="store_false", help="full sizes (much longer)")
    parser.add_argument("--out", default="reproduce-out", metavar="DIR", help="output directory (default reproduce-out)")
    parser.add_argument("--mnist", default=None, metavar="PATH",
                        help="directory of the MNIST test-set IDX files (default: $NOISEALLOC_MNIST_DIR if set)")
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="random seed of every figure (default 0)")
    parser.add_argument("--only", default=None, metavar="LIST",
                        help=f"comma-separated subset of {','.join(FIGURES)} (default: all)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="address of an existing Dask scheduler for the cells of figures 6 and 7 (default: a "
                             "LocalCluster of 2 worker processes); the cells of its three regimes are cached in "
                             "DIR/fig6_coupled_cells, DIR/fig6_independent_cells, DIR/fig6_schedule_cells and "
                             "DIR/fig6_cells (with their shared artifacts in DIR/fig6_shared); figure 7's in "
                             "DIR/fig7_cells")
    parser.add_argument("--force", action="store_true",
                        help="recompute every figure (default: a figure whose numbers in DIR come from the same "
                             "request, i.e. mode, seed, MNIST, version and source code, is reused)")


def run(args) -> int:
    import importlib
    import os
    import sys
    import time
    from pathlib import Path

    from tqdm.auto import tqdm

    from noisealloc.figures import _common as C
    from noisealloc.figures import provenance as P
    from noisealloc.figures.report import write_report

    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0; got {args.seed}")
    names = FIGURES
    if args.only is not None:
        names = tuple(n.strip() for n in args.only.split(",") if n.strip())
        bad = [n for n in names if n not in FIGURES]
        if bad:
            raise ValueError(f"--only: unknown figures {bad}; allowed: {', '.join(FIGURES)}")
        if not names:
            raise ValueError(f"--only {args.only!r} names no figure; allowed: {', '.join(FIGURES)}")
    mnist = C.resolve_mnist(args.mnist)
    if mnist is not None:
        from noisealloc.theory.models.datasets import check_mnist_dir

        check_mnist_dir(mnist)  # a bad --mnist is refused before any figure, not "Skipped" in REPORT.md
    if set(TRAINING_FIGURES) & set(names):  # their cells need the [train] and [sweep] extras: say so before any work
        from noisealloc.theory._optional import require_all

        require_all(("distributed", "jax", "optax"), "noisealloc reproduce (the training cells of figures 6 and 7; "
                    "--only FIGURES skips them)")
    out = Path(args.out)
    code = P.code_hash()
    probe = P.make_request(names[0], quick=args.quick, seed=args.seed, mnist=mnist, code=code)
    mixed = P.mixed_runs(out, [n for n in FIGURES if n not in names], reference=probe)
    if mixed:  # checked before computing anything: a partial run must fit the numbers already there
        raise ValueError(f"REPORT.md in {out} would mix numbers of different runs: {'; '.join(mixed)}; rerun "
                         f"with the same options, add those figures to --only, or use a fresh --out")
    out.mkdir(exist_ok=True)
    timings = {}
    failed = {}
    reused = []
    t0 = time.perf_counter()
    bar = tqdm(names, desc="reproduce", unit="figure")
    for name in bar:
        bar.set_postfix_str(name)
        t1 = time.perf_counter()
        request = P.make_request(name, quick=args.quick, seed=args.seed, mnist=mnist, code=code)
        if not getattr(args, "force", False) and P.is_current(out, request):
            reused.append(name)
            timings[name] = 0.0
            tqdm.write(f"skip {name}: its numbers in {out} come from the same request (--force recomputes)")
            continue
        try:
            mod = importlib.import_module(f"noisealloc.figures.{name}")
            extra = ({"scheduler": args.scheduler} if name in TRAINING_FIGURES and getattr(args, "scheduler", None)
                     else {})
            res = mod.run(out, quick=args.quick, seed=args.seed, mnist=mnist,
                          progress=lambda what, _n=name: bar.set_postfix_str(f"{_n}: {what}"), **extra)
            timings[name] = float(res["seconds"])
            P.write_provenance(out, request)
        except Exception as exc:  # one broken figure must not cost the others; the report marks it
            import traceback

            failed[name] = f"{type(exc).__name__}: {exc}"
            timings[name] = time.perf_counter() - t1
            C.write_text(out / f"{name}.error.txt", traceback.format_exc())
            for stale in (out / f"{name}.json", out / f"{name}.provenance.json"):
                if stale.exists():  # never report numbers from an earlier run as this run's
                    stale.unlink()
    timings["total"] = time.perf_counter() - t0
    mixed = P.mixed_runs(out, FIGURES)
    if mixed:
        raise ValueError(f"REPORT.md in {out} would mix numbers of different runs: {'; '.join(mixed)}; rerun those "
                         f"figures with the same options (--only NAME) or use a fresh --out")
    mode = ("--quick" if args.quick else "--full") + (", with MNIST" if mnist else ", without MNIST")
    report = write_report(out, timings=timings, mode=mode, failed=failed,
                          provenance={n: P.read_provenance(out, n) for n in FIGURES},
                          fresh=[n for n in names if n not in reused and n not in failed])
    C.write_config(out, "reproduce", {"quick": args.quick, "figures": list(names), "mnist": bool(mnist),
                                      "cpu_count": os.cpu_count(), "failed": failed}, seed=args.seed,
                   elapsed=timings["total"])
    computed = len(names) - len(failed) - len(reused)
    extra = f" (reused {len(reused)}: {', '.join(reused)})" if reused else ""
    print(f"wrote {computed} figures{extra} and {report} in {timings['total']:.0f} s")
    for name, why in failed.items():
        print(f"FAILED {name}: {why} (traceback in {out / (name + '.error.txt')})", file=sys.stderr)
    return 1 if failed else 0
