"""``noisealloc bench NAME``: benchmarks that print a figure and a ratio against an in-run baseline.

The measuring functions live in ``noisealloc.verify.bench_<name>`` and return typed results; this
module parses the arguments and prints.  ``posterior``: parse -> :func:`noisealloc.verify.bench_posterior.measure`
-> print.  ``solver``: its module still holds ``add_arguments(parser)`` and ``run(args) -> int``.
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
        if name in _BRANCHES:
            _BRANCHES[name][0](p)
        elif importlib.util.find_spec(module) is not None:
            importlib.import_module(module).add_arguments(p)


def run(args) -> int:
    if args.bench in _BRANCHES:
        return int(_BRANCHES[args.bench][1](args) or 0)
    module = importlib.import_module(args._bench_module)
    return int(module.run(args) or 0)


# ------------------------------------------------------------------------------------------ posterior


def _posterior_arguments(parser) -> None:
    parser.add_argument("--mnist", default=None, metavar="PATH",
                        help="directory of the MNIST IDX files (default: $NOISEALLOC_MNIST_DIR)")
    parser.add_argument("--levels", type=int, default=64, help="levels (default 64)")
    parser.add_argument("--samples", type=int, default=512, help="Monte-Carlo samples (default 512)")
    parser.add_argument("--repeat", type=int, default=5, help="best of this many interleaved runs (default 5)")
    parser.add_argument("--lam-min", type=float, default=-12.0)
    parser.add_argument("--lam-max", type=float, default=12.0)
    parser.add_argument("--float32", action="store_true", help="float32 distance GEMM (profile and baselines)")
    parser.add_argument("--atoms", type=int, default=None,
                        help="use only the first N images (a small profile for tests)")


def _posterior_run(args) -> int:
    from noisealloc.theory.datasets import load_mnist
    from noisealloc.verify.bench_posterior import measure, thread_counts

    if args.levels < 3 or args.samples < 2 or args.repeat < 1:
        raise ValueError("--levels must be >= 3, --samples >= 2 and --repeat >= 1")
    if args.atoms is not None and args.atoms < 2:
        raise ValueError(f"--atoms must be >= 2; got {args.atoms}")
    images, _ = load_mnist(args.mnist)
    if args.atoms is not None:
        images = images[: args.atoms]
    r = measure(images, levels=args.levels, samples=args.samples, repeat=args.repeat,
                lam_min=args.lam_min, lam_max=args.lam_max, float32=args.float32)
    S, D, K, L, dt = r.samples, r.D, r.K, r.levels, r.dtype
    print(f"bench posterior: MNIST K={K} D={D}, samples={S}, levels={L} (lam in [{args.lam_min:g}, {args.lam_max:g}]), "
          f"{dt} distances, best of {args.repeat} interleaved repeats")
    print(f"threads: {thread_counts()}")
    print(f"profile (noisealloc entropy without file I/O): {r.profile:.3f} s wall, {r.cpu_profile:.3f} s CPU "
          f"[engine split: block centring + GEMM {r.engine_gemm:.3f} s wall / {r.cpu_engine_gemm:.3f} s CPU, "
          f"distance assembly + level passes {r.engine_levels:.3f} s wall / {r.cpu_engine_levels:.3f} s CPU]")
    print(f"baseline 1, the GEMMs the profile performs: 1 x ({2 * S} x {D})({D} x {K}) = 2 x ({S} x {D})({D} x {K}) "
          f"{dt}: {r.gemm_profile:.3f} s wall, {r.cpu_gemm_profile:.3f} s CPU")
    print(f"baseline 2, the GEMMs a naive per-level implementation needs: {L} x ({S} x {D})({D} x {K}) {dt}: "
          f"{r.gemm_naive:.3f} s wall, {r.cpu_gemm_naive:.3f} s CPU "
          f"(= {L} x best single GEMM {r.gemm_single:.4f} s wall / {r.cpu_gemm_single:.4f} s CPU)")
    ratio1, cratio1 = r.ratio_gemm
    ratio2, cratio2 = r.ratio_naive

    def verdict(x):
        return "meets" if x <= 2.0 else "misses"

    print(f"ratio profile / baseline 1 = {ratio1:.2f} wall ({verdict(ratio1)} the target <= 2.0), "
          f"{cratio1:.2f} CPU ({verdict(cratio1)} it)")
    print(f"ratio profile / baseline 2 = {ratio2:.3f} wall, {cratio2:.3f} CPU ({verdict(max(ratio2, cratio2))} <= 2.0)")
    print(f"CPU seconds (all threads; less sensitive to other load on the machine): profile {r.cpu_profile:.3f} s, "
          f"baseline 1 {r.cpu_gemm_profile:.3f} s, ratio {cratio1:.2f}")
    return 0


# Benchmarks whose parsing and printing live here: name -> (add_arguments, run).
_BRANCHES = {"posterior": (_posterior_arguments, _posterior_run)}
