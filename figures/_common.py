"""Shared machinery of the figure scripts: plot style, atomic writers, run configuration, number text.

Every figure writes three files into its output directory:

* ``<name>.png`` -- the figure;
* ``<name>.json`` -- the numbers plotted (deterministic: same seed -> identical bytes; no timings,
  no paths, no versions in it);
* ``<name>.config.json`` -- the run configuration: options, seeds, elapsed time and package
  versions (not part of the bit-for-bit comparison, since it holds a clock).

Numbers are serialised by :func:`to_jsonable` with ``repr``-exact floats (``json`` writes
``float.__repr__``, which round-trips), sorted keys and a fixed indentation, so two runs from the
same seed produce byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

# one writer and one JSON convention for the library, the command line and the figures
from noisealloc.theory.output import from_json_float, to_jsonable, write_figure, write_json, write_text

__all__ = [
    "LAM_LABEL",
    "run_figure",
    "to_jsonable",
    "write_json",
    "write_png",
    "write_config",
    "package_versions",
    "figure_main",
    "setup_matplotlib",
    "Timer",
    "num",
]

#: Axis label of the canonical coordinate (every figure uses it).
LAM_LABEL = r"log-SNR $\lambda = \log(\alpha^2/\sigma^2)$"


def setup_matplotlib():
    """Select the non-interactive backend and a style readable at 100%; return ``pyplot``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({
        "figure.dpi": 100,
        "savefig.dpi": 110,
        "font.size": 10,
        "axes.titlesize": 10.5,
        "axes.labelsize": 10,
        "legend.fontsize": 8.5,
        "xtick.labelsize": 9,
        "ytick.labelsize": 9,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "lines.linewidth": 1.6,
        # Fixed metadata: PNG bytes do not depend on the clock or the matplotlib build.
        "svg.hashsalt": "noisealloc",
    })
    return plt


def num(x, fmt: str = ".3g", *, why: str = "not recorded in the numbers file", why_infinite: str | None = None) -> str:
    """A number for REPORT.md and the figures' notes: formatted with ``fmt``, or why there is no finite number.

    ``None`` and NaN become ``not computed (why)``; an infinite value becomes ``not finite (why_infinite)``
    (``why`` when that is not given).  The report never prints ``inf`` or ``nan``.

    Examples
    --------
    >>> num(0.12345), num(None, why="Monte-Carlo model"), num("inf", why_infinite="a level is starved")
    ('0.123', 'not computed (Monte-Carlo model)', 'not finite (a level is starved)')
    """
    if x is None:
        return f"not computed ({why})"
    v = from_json_float(x)
    if np.isnan(v):
        return f"not computed ({why})"
    if np.isinf(v):
        return f"not finite ({why_infinite or why})"
    return format(v, fmt)


def write_png(fig, path) -> Path:
    """Save a matplotlib figure atomically (PNG at the style's 110 dpi, tight box, no time stamp)."""
    return write_figure(fig, path, dpi=110, bbox_inches="tight")


def package_versions() -> dict:
    """Versions of Python and of the packages that shape the numbers."""
    out = {"python": platform.python_version()}
    for name in ("noisealloc", "numpy", "scipy", "matplotlib", "sklearn", "numba", "dask", "distributed", "mpmath"):
        try:
            mod = __import__(name)
            out[name] = getattr(mod, "__version__", "?")
        except Exception:  # pragma: no cover - optional packages
            out[name] = None
    return out


def write_config(out_dir, name: str, options: dict, *, seed: int, elapsed: float) -> Path:
    """Write ``<name>.config.json``: options, seed, elapsed seconds, command line and package versions."""
    doc = {
        "figure": name,
        "options": options,
        "seed": int(seed),
        "elapsed_seconds": round(float(elapsed), 3),
        "argv": list(sys.argv),
        "versions": package_versions(),
    }
    return write_json(Path(out_dir) / f"{name}.config.json", doc)


class Timer:
    """Wall-clock timer (``with Timer() as t: ...; t.seconds``)."""

    def __enter__(self):
        self._t0 = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self._t0
        return False


def resolve_mnist(mnist):
    """The MNIST directory to use: ``mnist`` if given, else ``$NOISEALLOC_MNIST_DIR`` if set, else None."""
    import os

    from noisealloc.theory.models.datasets import MNIST_ENV_VAR

    if mnist:
        return str(mnist)
    env = os.environ.get(MNIST_ENV_VAR)
    return env or None


def figure_main(run, description: str, argv=None) -> int:
    """Command-line entry of a figure module: ``--out DIR [--quick|--full] [--seed N] [--mnist PATH]``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (created if missing)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="quick", action="store_true", default=True, help="quick sizes (default)")
    mode.add_argument("--full", dest="quick", action="store_false", help="full sizes")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--mnist", default=None, metavar="PATH",
                        help="directory of the MNIST test-set IDX files (or set NOISEALLOC_MNIST_DIR)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if out.exists() and not out.is_dir():  # refused before any work: a file or device is never an output folder
        parser.exit(2, f"{parser.prog}: error: --out {args.out!r} exists and is not a directory; give a folder\n")
    if args.seed < 0:
        parser.exit(2, f"{parser.prog}: error: --seed must be >= 0; got {args.seed}\n")
    out.mkdir(parents=True, exist_ok=True)
    result = run(out, quick=args.quick, seed=args.seed, mnist=args.mnist)
    print(json.dumps({k: str(v) for k, v in result.items() if k in ("png", "numbers", "config")}, indent=1))
    return 0


def check_run_args(out_dir, seed) -> Path:
    """Validate the common arguments of every ``run``; return the output directory (created)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or int(seed) < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return out


def run_figure(name: str, compute, plot, out_dir, *, seed: int, options: dict, compute_kwargs: dict) -> dict:
    """The body every figure's ``run`` shares: compute, write ``NAME.json`` and ``NAME.png``, then the run config.

    Returns the paths of the PNG, the numbers and the config, and the seconds it took.
    """
    out = check_run_args(out_dir, seed)
    with Timer() as t:
        doc = compute(**compute_kwargs)
        numbers = write_json(out / f"{name}.json", doc)
        plot(to_jsonable(doc), out / f"{name}.png")
    config = write_config(out, name, options, seed=seed, elapsed=t.seconds)
    return {"png": out / f"{name}.png", "numbers": numbers, "config": config, "seconds": t.seconds}
