"""Command-line program ``noisealloc``: a thin dispatcher over the library.

Each sub-command lives in its own module ``noisealloc.commands.<name>`` that
defines ``add_arguments(parser)`` and ``run(args) -> int``.  Modules are
imported only when their sub-command runs, so ``noisealloc --help`` stays fast
and a heavy dependency of one command never slows another.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

# name -> (module, one-line help).  Order is the order shown by --help.
COMMANDS: dict[str, tuple[str, str]] = {
    "schedules": ("noisealloc.commands.schedules", "tabulate and plot the built-in training noise schedules"),
    "entropy": ("noisealloc.commands.entropy", "MMSE, conditional entropy and generative entropy rate of a data set"),
    "optimize": ("noisealloc.commands.optimize", "certified optimal noise allocation in the fully coupled regime"),
    "schedule": ("noisealloc.commands.schedule", "entropic training schedule from data or from measured losses"),
    "verify": ("noisealloc.commands.verify", "numerical checks of every theorem (--quick or --full)"),
    "reproduce": ("noisealloc.commands.reproduce", "reproduce every figure and write REPORT.md"),
    "sweep": ("noisealloc.commands.sweep", "run an ablation sweep (TOML) on a Dask cluster"),
    "bench": ("noisealloc.commands.bench", "benchmarks with an in-run baseline"),
}


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with one sub-parser per available command."""
    from noisealloc import __version__

    parser = argparse.ArgumentParser(
        prog="noisealloc",
        description="Optimal noise allocation for diffusion training (log-SNR lambda is the canonical coordinate).",
    )
    parser.add_argument("--version", action="version", version=f"noisealloc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        if not _available(module):
            continue
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the program; return the process exit code.

    Errors from bad input (``ValueError``, ``TypeError``, ``FileNotFoundError``)
    are printed as one line on stderr with exit code 2, not as a traceback.
    """

    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_module", None) is None:
        parser.print_help()
        return 2
    module = importlib.import_module(args._module)
    try:
        return int(module.run(args) or 0)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"noisealloc {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
