"""``noisealloc bench NAME``: benchmarks that print a figure and a ratio against an in-run baseline.

The measuring functions live in ``noisealloc.verify.bench_<name>`` and return typed results; this
module parses the arguments and prints.  ``posterior``: parse -> :func:`noisealloc.verify.bench.posterior.measure`
-> print; ``solver``: parse -> :func:`noisealloc.verify.bench.solver.measure` -> print; ``training``:
parse -> :func:`noisealloc.verify.bench.training.bench_training` -> print.
"""

from __future__ import annotations

BENCHMARKS = {
    "posterior": ("noisealloc.verify.bench.posterior", "MNIST posterior profile against bare GEMMs of the same shapes"),
    "solver": ("noisealloc.verify.bench.solver", "A-optimal design solvers against CVXPY + Clarabel"),
    "training": ("noisealloc.verify.bench.training",
                 "step and compile time of the JAX denoisers of figure 6 per data set and network"),
}


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="bench", metavar="NAME", required=True)
    for name, (_module, help_text) in BENCHMARKS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        _BRANCHES[name][0](p)


def run(args) -> int:
    return int(_BRANCHES[args.bench][1](args) or 0)


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
    parser.add_argument("--no-importance", action="store_true",
                        help="do not time the importance-sampled profile (timed by default)")
    parser.add_argument("--memory", action="store_true",
                        help="also measure the peak resident memory of 'noisealloc entropy --data mnist:PATH' and "
                             "'noisealloc reproduce --quick' as child processes (adds about 3 minutes)")


def _posterior_run(args) -> int:
    from noisealloc.theory.models.datasets import load_mnist
    from noisealloc.verify.bench.posterior import measure, thread_counts

    if args.levels < 3 or args.samples < 2 or args.repeat < 1:
        raise ValueError("--levels must be >= 3, --samples >= 2 and --repeat >= 1")
    if args.atoms is not None and args.atoms < 2:
        raise ValueError(f"--atoms must be >= 2; got {args.atoms}")
    images, _ = load_mnist(args.mnist)
    if args.atoms is not None:
        images = images[: args.atoms]
    r = measure(images, levels=args.levels, samples=args.samples, repeat=args.repeat,
                lam_min=args.lam_min, lam_max=args.lam_max, float32=args.float32, importance=not args.no_importance)
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
    if not args.no_importance:
        ri, cri = r.ratio_importance
        ci, cci = r.importance_cost
        print(f"importance sampler (the default of noisealloc entropy): profile {r.profile_importance:.3f} s wall, "
              f"{r.cpu_profile_importance:.3f} s CPU; ratio to baseline 1 = {ri:.2f} wall ({verdict(ri)} the target "
              f"<= 2.0), {cri:.2f} CPU ({verdict(cri)} it); added cost x{ci:.2f} wall, x{cci:.2f} CPU of the plain "
              "profile")
        if r.importance_split:
            nb, nbc, gm, gmc, lv, lvc = r.importance_split
            print(f"  [importance split: neighbour search {nb:.3f} s wall / {nbc:.3f} s CPU, distance GEMMs and "
                  f"proposal terms {gm:.3f} s wall / {gmc:.3f} s CPU, level passes {lv:.3f} s wall / {lvc:.3f} s CPU]")
    print(f"peak resident memory of this benchmark process: {r.peak_rss / 2**20:.0f} MiB")
    if args.memory:
        _posterior_memory(args)
    return 0


def _posterior_memory(args) -> None:
    import sys
    import tempfile
    from pathlib import Path

    from noisealloc.verify.bench.posterior import peak_memory

    # The children resolve MNIST as the bench did: the path given, else $NOISEALLOC_MNIST_DIR (inherited).
    spec = f"mnist:{args.mnist}" if args.mnist else "mnist"
    exe = [sys.executable, "-m", "noisealloc"]
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("noisealloc entropy --data mnist:PATH", exe + ["entropy", "--data", spec, "--out",
                                                                str(Path(tmp) / "entropy.json")]),
                ("noisealloc reproduce --quick", exe + ["reproduce", "--quick", "--out", str(Path(tmp) / "quick")])]
        for label, argv in runs:
            row = peak_memory(argv)
            status = "ok" if row.returncode == 0 else f"exit {row.returncode}"
            print(f"peak resident memory of '{label}' (child process, like /usr/bin/time -v): "
                  f"{row.peak_rss / 2**30:.2f} GiB in {row.seconds:.0f} s ({status}; target <= 2 GB: "
                  f"{'meets' if row.peak_rss <= 2e9 else 'misses'})", flush=True)


# Benchmarks whose parsing and printing live here: name -> (add_arguments, run).
# ------------------------------------------------------------------------------------------ solver


def _solver_arguments(parser) -> None:
    parser.add_argument("--sizes", default="500,2000,20000", help="comma-separated grid sizes n (default 500,2000,20000)")
    parser.add_argument("--no-cvxpy", action="store_true", help="skip the CVXPY + Clarabel baseline")
    parser.add_argument("--cvxpy-sizes", default="500,2000", help="sizes at which CVXPY runs (default 500,2000)")
    parser.add_argument("--problems", default="cheb19,rank3,model-like", help="comma-separated problem names")
    parser.add_argument("--kernels", action="store_true",
                        help="instead: time each compiled solver kernel against its numpy reference, and reduce_support")
    parser.add_argument("--sandwich", action="store_true",
                        help="instead: two-parameter sandwich instances (n = 41, 64), solve's value, label, proved "
                             "bound and time against an independent oracle over pairs and triples of levels")
    parser.add_argument("--sandwich-cases", default=None, metavar="LIST",
                        help="with --sandwich: comma-separated SEED:N (SEED an integer or 'issue'; default the 12 "
                             "cases of noisealloc.verify.bench.sandwich.SANDWICH_CASES)")
    _e_arguments(parser)
    parser.add_argument("--near-tied", default="1001",
                        help="grid size n of the near-tied D/A/c rows (model-like levels; default 1001; 'none' skips them)")


def _near_tied_option(args):
    """Grid size of the near-tied rows, or None for ``--near-tied none`` (one-line error naming the option)."""
    text = str(getattr(args, "near_tied", "1001")).strip()
    if text.lower() == "none":
        return None
    try:
        sizes = _sizes(text, "--near-tied")
    except ValueError:
        sizes = []
    if len(sizes) != 1:
        raise ValueError(f"--near-tied must be one integer >= 2 (within the grid size limit) or 'none'; got {text!r}")
    return sizes[0]


def _near_tied_run(args, n) -> None:
    """The near-tied rows of ``bench solver``: D, A and c on the same levels, CVXPY + Clarabel beside A and c."""
    from noisealloc.verify.bench.solver import measure_near_tied

    if n is None:
        return
    rows, _have = measure_near_tied(n, use_cvxpy=not args.no_cvxpy)  # a missing CVXPY is said above
    runs = rows[0].repeat if rows else 0
    print(f"near-tied levels (model-like on n={n} points of [-8, 8], neighbouring A_i ~1% apart; c = ones), "
          "ours = multiplicative (D, A) or Elfving's dual barrier (c) + Newton polish; D is the time A and c are "
          f"compared with; times are medians of {runs} runs after a first")
    t_d = next((r.seconds for r in rows if r.criterion == "D"), None)
    for row in rows:
        cert = row.certificate
        vs_d = "" if t_d is None or row.criterion == "D" else f"  time / D's = {row.seconds / t_d:.2f}"
        print(f"{'near-tied':10s} n={row.n:6d} m={row.m:2d}  ours ({row.criterion}): {row.seconds:8.3f} s "
              f"(CPU {row.cpu_seconds:.3f} s)  certified rel gap {cert.rel_gap:.2e}  status {row.status}  equivalence "
              f"{'ok' if cert.equivalence_ok else 'FAILED'}  value {cert.value:.12g}  atoms {cert.n_atoms}  "
              f"iterations {row.nit}, grads {row.njev}{vs_d}")
        if row.cvxpy is not None:
            cv = row.cvxpy
            print(f"{'':10s} n={row.n:6d}        CVXPY+Clarabel (SOCP, status {cv['status']}): {cv['seconds']:8.3f} s  "
                  f"certified rel gap {cv['certificate'].rel_gap:.2e}  value {cv['certificate'].value:.12g} (SOCP "
                  f"optimum {cv['value']:.12g})  atoms {cv['n_atoms']} (weights > 1e-9 max)  time ratio CVXPY/ours = "
                  f"{cv['ratio']:.2g}x")


def _sizes(text, option: str) -> list:
    """Comma-separated grid sizes, each an integer >= 2 (one-line error naming ``option``)."""
    try:
        sizes = [int(s) for s in str(text).split(",") if s.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 2:
        raise ValueError(f"{option} must be comma-separated integers >= 2; got {text!r}")
    from noisealloc.theory.request_limits import MAX_POINTS

    if max(sizes) > MAX_POINTS:
        raise ValueError(f"{option}: grid size {max(sizes)} is above the limit {MAX_POINTS}; ask for smaller sizes")
    return sizes


def _solver_run(args) -> int:
    from noisealloc.verify.bench.solver import measure

    # Every option is parsed before anything runs, whichever table is asked for: a bad value answers at
    # once, also where --kernels or --sandwich would not use it (it was silently ignored there).
    sizes = _sizes(args.sizes, "--sizes")
    cv_sizes = _sizes(args.cvxpy_sizes, "--cvxpy-sizes")
    e_sizes = _e_options(args)
    near_tied = _near_tied_option(args)
    if getattr(args, "sandwich_cases", None) is not None:
        _sandwich_cases(args.sandwich_cases)
    if getattr(args, "kernels", False):
        return _solver_kernels_run(args)
    if getattr(args, "sandwich", False):
        return _solver_sandwich_run(args)
    problems = [p.strip() for p in str(getattr(args, "problems", "cheb19,rank3,model-like")).split(",") if p.strip()]
    r = measure(problems, sizes, cvxpy_sizes=cv_sizes, use_cvxpy=not args.no_cvxpy)
    if not args.no_cvxpy and not r.cvxpy_available:
        print("CVXPY baseline: cvxpy and/or clarabel are missing (pip install cvxpy clarabel); skipped")
    print("A-optimal design (W = I); ours = multiplicative + Newton polish, certified by noisealloc.solvers.certify")
    for row in r.rows:
        cert = row.certificate
        print(
            f"{row.name:10s} n={row.n:6d} m={row.m:2d}  ours: {row.seconds:8.3f} s  certified rel gap {cert.rel_gap:.2e}  "
            f"equivalence {'ok' if cert.equivalence_ok else 'FAILED'}  atoms {cert.n_atoms} -> reduced {row.n_reduced} "
            f"-> merged {row.n_merged} (value +{row.merge_rel_increase:.1e} rel; bound {cert.atom_bound})  grads {row.njev}"
        )
        if row.cvxpy is not None:
            cv = row.cvxpy
            print(
                f"{'':10s} n={row.n:6d}        CVXPY+Clarabel (SOCP, status {cv['status']}): {cv['seconds']:8.3f} s  "
                f"certified rel gap {cv['certificate'].rel_gap:.2e}  atoms {cv['n_atoms']} (weights > 1e-9 max)  "
                f"time ratio CVXPY/ours = {cv['ratio']:.1f}x"
            )
    for name, (n0, n1, growth) in r.scaling.items():
        print(f"{name:10s} scaling: time(n={n1}) / time(n={n0}) = {growth:.2f} for n ratio {n1 / n0:.1f}")
    _near_tied_run(args, near_tied)
    _e_run(args, *e_sizes)
    _print_reduction()
    return 0


def _print_reduction() -> None:
    """The ``reduce_support`` row: dense weights at n = 1000, m = 10, and old vs new Caratheodory at n = 200."""
    from noisealloc.verify.bench.solver import measure_reduction

    r = measure_reduction()
    print(f"reduce_support (D, Chebyshev m={r.m}, dense weights) n={r.n}: {r.seconds:.3f} s, atoms {r.atoms_before} -> "
          f"{r.atoms_after}, moment residual {r.moment_residual:.1e}; at n={r.baseline_n}: updated QR "
          f"{r.new_seconds_at_baseline:.4f} s vs former SVD per atom {r.baseline_seconds:.3f} s, ratio {r.ratio:.0f}x")


def _solver_kernels_run(args) -> int:
    """``bench solver --kernels``: per kernel that solve runs, numba vs the same code uncompiled; then reduce_support."""
    from noisealloc.verify.bench.solver import measure_kernels

    r = measure_kernels()
    if not r.have_numba:
        print("solver kernels: numba is missing or disabled (NOISEALLOC_DISABLE_NUMBA); nothing to compare")
    else:
        print("solver kernels that solve runs (noisealloc.solvers._sandwich_kernels: the two-parameter sandwich's "
              "Bernstein proof; noisealloc.solvers._dd_kernels: E's double-double interior point, its LU, Cholesky, "
              "triangular inverse, m x m products and exact-GEMM accumulation), compiled against the path without "
              "numba (the same code uncompiled; numpy double-double for E's), serial, on the same inputs; the first "
              "call (numba compile or cache load) is excluded:")
        print("  " + ", ".join(f"{k} {v:.3f} s" for k, v in r.warmup_seconds.items()))
        for row in r.rows:
            verdict = "numba wins" if row.ratio > 1.0 else "numba LOSES"
            print(f"  {row.name:21s} {row.case:58s} numba {row.numba_seconds:8.4f} s  uncompiled "
                  f"{row.numpy_seconds:8.3f} s  uncompiled/numba = {row.ratio:6.3g} ({verdict})  "
                  f"max rel diff {row.max_rel_diff:.1e}")
        for case, seconds, pieces in r.sweeps:
            print(f"  bernstein_sweep (the whole proof) {case}: {seconds:.2f} s, {pieces} simplices")
        names = dict.fromkeys(row.name for row in r.rows)
        print("verdicts:")
        for name in names:
            row = next(x for x in r.rows if x.name == name)
            print(f"  {name:21s} {'wired' if row.wired else 'not wired'}: {row.verdict}")
        print("  (the per-candidate kernels of the convex solvers were removed: each lost to BLAS or was not worth "
              "numba's import)")
    _print_reduction()
    return 0


def _sandwich_cases(text):
    """``SEED:N`` pairs (``SEED`` an integer or ``issue``; ``N >= 4``), one-line error naming ``--sandwich-cases``."""
    out = []
    for item in str(text).split(","):
        if not item.strip():
            continue
        parts = item.strip().split(":")
        try:
            if len(parts) != 2:
                raise ValueError
            seed = None if parts[0].strip().lower() == "issue" else int(parts[0])
            n = int(parts[1])
            if n < 4 or (seed is not None and seed < 0):
                raise ValueError
        except ValueError:
            raise ValueError(f"--sandwich-cases must be comma-separated SEED:N pairs (SEED a non-negative integer or "
                             f"'issue', N an integer >= 4); got {text!r}") from None
        out.append((seed, n))
    if not out:
        raise ValueError(f"--sandwich-cases must name at least one SEED:N pair; got {text!r}")
    from noisealloc.theory.request_limits import MAX_POINTS

    if max(n for _s, n in out) > MAX_POINTS:
        raise ValueError(f"--sandwich-cases: grid size {max(n for _s, n in out)} is above the limit {MAX_POINTS}")
    return out


def _numba_threads() -> int:
    from noisealloc.theory import _numba

    return _numba.num_threads()


def _solver_sandwich_run(args) -> int:
    """``bench solver --sandwich``: the two-parameter sandwich table (:func:`noisealloc.verify.bench.sandwich.measure_sandwich`)."""
    import numpy as np

    from noisealloc.theory.tolerances import SANDWICH_GLOBAL_RTOL
    from noisealloc.verify.bench.sandwich import SANDWICH_CASES, measure_sandwich

    cases = SANDWICH_CASES if args.sandwich_cases is None else _sandwich_cases(args.sandwich_cases)
    rows = measure_sandwich(cases)
    print("two-parameter sandwich (A = f f^T, G = s^2(lam) A + r r^T on [-4, 4]): solve (defaults) against the oracle "
          "(every pair of levels, bounded scalar minimiser; every triple, barycentric grid + SLSQP)")
    print(f"{'instance':9s} {'n':>3s} {'value':>17s} {'label':12s} {'proved lower bound':>18s} {'time':>7s} {'CPU':>7s} "
          f"{'oracle':>17s} {'rel diff':>9s} {'oracle time':>11s} {'local optima up to':>18s}  atoms (lambda)")
    for r in rows:
        lb = "-" if not np.isfinite(r.lower_bound) else f"{r.lower_bound:.10g}"
        spread = "-" if not np.isfinite(r.local_spread) else f"+{100 * r.local_spread:.2f}%"
        print(f"{r.name:9s} {r.n:3d} {r.value:17.12g} {r.optimality:12s} {lb:>18s} {r.seconds:6.2f}s {r.cpu_seconds:6.2f}s "
              f"{r.oracle_value:17.12g} {r.rel_diff:+9.1e} {r.oracle_seconds:10.2f}s{'' if r.triples else '*'} "
              f"{spread:>18s}  {np.round(r.atoms, 4).tolist()}")
    n_glob = sum(r.optimality == "global" for r in rows)
    mean = float(np.mean([r.seconds for r in rows]))
    mean_cpu = float(np.mean([r.cpu_seconds for r in rows]))
    bad = [r.name + f" n={r.n}" for r in rows if not r.consistent]
    print(f"global on {n_glob} of {len(rows)}; mean solve time {mean:.2f} s (max {max(r.seconds for r in rows):.2f} s); "
          f"mean CPU {mean_cpu:.2f} s ({_numba_threads()} numba threads); max |rel diff| to the oracle {max(abs(r.rel_diff) for r in rows):.1e}; "
          + ("every value within SANDWICH_GLOBAL_RTOL = %g of the oracle or below it, no proved bound above it"
             % SANDWICH_GLOBAL_RTOL if not bad else f"INCONSISTENT with the oracle: {', '.join(bad)}"))
    if not all(r.triples for r in rows):
        print("* oracle over pairs only on this instance")
    return 0 if not bad else 1


def _e_arguments(parser) -> None:
    parser.add_argument("--e-sizes", default="20:500,20:2000",
                        help="E-optimal rows: comma-separated m:n pairs (Chebyshev degree m-1 on n points; "
                             "default 20:500,20:2000; 'none' skips them)")
    parser.add_argument("--e-cvxpy-sizes", default="500", help="grid sizes n at which CVXPY runs the E rows (default 500)")


def _e_pairs(text, option: str) -> list:
    """Comma-separated ``m:n`` pairs, each an integer >= 2 (one-line error naming ``option``)."""
    try:
        pairs = [tuple(int(v) for v in item.split(":")) for item in str(text).split(",") if item.strip()]
    except ValueError:
        pairs = []
    if not pairs or any(len(pr) != 2 or min(pr) < 2 for pr in pairs):
        raise ValueError(f"{option} must be comma-separated m:n pairs of integers >= 2; got {text!r}")
    return pairs


def _e_options(args):
    """``(pairs, cvxpy_sizes)`` of the E rows (``pairs`` empty for ``--e-sizes none``)."""
    cv_sizes = _sizes(getattr(args, "e_cvxpy_sizes", "500"), "--e-cvxpy-sizes")
    text = getattr(args, "e_sizes", "20:500,20:2000")
    if str(text).strip().lower() == "none":
        return [], cv_sizes
    return _e_pairs(text, "--e-sizes"), cv_sizes


def _e_run(args, pairs, cv_sizes) -> None:
    """The E-optimal rows of ``bench solver``: our solve against CVXPY + Clarabel (lambda_min SDP)."""
    from noisealloc.verify.bench.solver import measure_e

    if not pairs:
        return
    rows, _have_cvxpy = measure_e(pairs, cvxpy_sizes=cv_sizes, use_cvxpy=not args.no_cvxpy)  # missing: said above
    print("E-optimal design (max lambda_min), Chebyshev degree m-1 on n points; ours = multiplicative + "
          "interior point (+ polish), certified by noisealloc.solvers.certify (spectraplex dual)")
    for row in rows:
        cert = row.certificate
        print(f"{'cheb-E':10s} n={row.n:6d} m={row.m:2d}  ours (E): {row.seconds:8.3f} s (median of {row.repeat}; first run "
              f"{row.first_seconds:.3f} s)  certified rel gap "
              f"{cert.rel_gap:.2e}  status {row.status}  equivalence {'ok' if cert.equivalence_ok else 'FAILED'}  "
              f"lambda_min {row.lam_min:.15g}  atoms {cert.n_atoms}")
        if row.cvxpy is not None:
            cv = row.cvxpy
            print(f"{'':10s} n={row.n:6d}        CVXPY+Clarabel (SDP, status {cv['status']}): {cv['seconds']:8.3f} s "
                  f"(median of {row.repeat}; first run {cv['first_seconds']:.3f} s)  "
                  f"certified rel gap {cv['certificate'].rel_gap:.2e}  lambda_min {cv['lam_min']:.15g} "
                  f"(ours - CVXPY = {row.lam_min - cv['lam_min']:+.2e})  atoms {cv['n_atoms']} (weights > 1e-9 max)  "
                  f"time ratio CVXPY/ours = {cv['ratio']:.2g}x (first runs {cv['first_ratio']:.2g}x)")


# ------------------------------------------------------------------------------------------ training


def _training_arguments(parser) -> None:
    parser.add_argument("--mnist", default=None, metavar="PATH",
                        help="directory of the MNIST IDX files (default: $NOISEALLOC_MNIST_DIR; without one, "
                             "synthetic 28x28 images of the same scale, said in the output)")
    parser.add_argument("--steps", type=int, default=200, help="timed steps per case (default 200)")
    parser.add_argument("--batch-size", type=int, default=128, help="examples per step (default 128)")
    parser.add_argument("--only", default=None, metavar="LIST",
                        help="comma-separated subset of the cases DATA:NETWORK (default: all of "
                             "dirac:mlp,digits:mlp,mnist:mlp,mnist:cnn)")


def _training_run(args) -> int:
    from noisealloc.verify.bench.training import CASES, bench_training

    if args.steps < 1 or args.batch_size < 1:
        raise ValueError(f"--steps and --batch-size must be >= 1; got {args.steps} and {args.batch_size}")
    names = [f"{d}:{n}" for d, n in CASES]
    cases = list(CASES)
    if args.only is not None:
        want = [c.strip() for c in str(args.only).split(",") if c.strip()]
        bad = [c for c in want if c not in names]
        if not want or bad:
            raise ValueError(f"--only must be a comma-separated subset of {','.join(names)}; got {args.only!r}")
        cases = [CASES[names.index(c)] for c in want]
    if args.mnist is not None and any(d == "mnist" for d, _ in cases):
        from noisealloc.theory.models.datasets import load_mnist

        # A path given and wrong is an error, never the synthetic stand-in the benchmark uses without one.
        load_mnist(args.mnist)
    rows = bench_training(cases, batch_size=args.batch_size, steps=args.steps, mnist=args.mnist)
    base = rows[0]
    print(f"bench training: Adam steps at batch {args.batch_size}, {args.steps} timed steps per case after a fresh "
          f"compile (jax.jit, CPU, {rows[0].cpu_count} cores); baseline: the first case's step, measured in this run")
    print(f"{'data':<26} {'network':<11} {'D':>4} {'params':>8} {'compile s':>10} {'step ms':>8} "
          f"{'x baseline':>10} {'compile share':>13}")
    for r in rows:
        print(f"{r.data:<26} {r.network:<11} {r.dim:>4} {r.n_params:>8} {r.compile_time:>10.2f} "
              f"{1e3 * r.step_time:>8.2f} {r.step_time / base.step_time:>10.2f} {100 * r.compile_share:>12.1f}%")
    print("compile share: compile / (compile + steps x step) of these runs; in figure 6's cells the compile is "
          "shared by every cell of a worker with the same network (REPORT.md gives the share of the run)")
    return 0


_BRANCHES = {"posterior": (_posterior_arguments, _posterior_run), "solver": (_solver_arguments, _solver_run),
             "training": (_training_arguments, _training_run)}
