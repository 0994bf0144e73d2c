"""``noisealloc verify``: numerical checks of every theorem (``--quick`` for CI, ``--full`` thorough).

Prints a table (check, PASS/FAIL, measured value, tolerance, seconds), optionally writes
every report as JSON (atomically), and exits 1 if any check failed.
"""

from __future__ import annotations

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    tier = parser.add_mutually_exclusive_group()
    tier.add_argument("--quick", dest="tier", action="store_const", const="quick",
                      help="the quick tier (default; about a minute on 2 cores)")
    tier.add_argument("--full", dest="tier", action="store_const", const="full",
                      help="the full tier (up to ~15 minutes): more replications, the coupling sweep to J = 32")
    parser.set_defaults(tier="quick")
    parser.add_argument("--out", default=None, metavar="FILE.json", help="write every report as JSON (atomic)")
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="random seed of the simulations (default 0)")
    parser.add_argument("--quiet", action="store_true", help="no per-check progress lines on stderr")


def run(args) -> int:
    import platform
    import time

    import numpy as np

    from noisealloc import __version__
    from noisealloc.theory.output import write_json
    from noisealloc.verify.suite import format_table
    from noisealloc.verify.suite import run as run_suite

    if args.out is not None:
        import os

        directory = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"--out: directory {directory!r} does not exist")
    t0 = time.perf_counter()
    reports = run_suite(args.tier, rng=args.seed, progress=not args.quiet)
    total = time.perf_counter() - t0
    print(format_table(reports))
    print(f"tier {args.tier}: wall time {total:.1f} s")
    if args.out is not None:
        doc = {"format": "noisealloc.verify", "version": 1, "tier": args.tier, "seed": args.seed,
               "noisealloc": __version__, "numpy": np.__version__, "python": platform.python_version(),
               "seconds": total, "passed": all(r.holds for r in reports),
               "reports": [r.to_dict() for r in reports]}
        write_json(args.out, doc, sort_keys=False)
        print(f"wrote {args.out}")
    return 0 if all(r.holds for r in reports) else 1
