"""``noisealloc bench NAME``: benchmarks that print a figure and a ratio against an in-run baseline.

Each benchmark lives in ``noisealloc.verify.bench_<name>`` with
``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import importlib
import importlib.util

BENCHMARKS = {
    "posterior": ("noisealloc.verify.bench_posterior", "MNIST posterior profile against bare GEMMs of the same shapes"),
    "solver": ("noisealloc.verify.bench_solver", "A-optimal design solvers against CVXPY + Clarabel"),
}


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="bench", metavar="NAME", required=True)
    for name, (module, help_text) in BENCHMARKS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_bench_module=module)
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module).add_arguments(p)


def run(args) -> int:
    module = importlib.import_module(args._bench_module)
    return int(module.run(args) or 0)
