"""``noisealloc bench posterior``: the MNIST posterior profile against bare GEMMs of the same shapes.

The profile is the computation of ``noisealloc entropy --data mnist:PATH --levels L --samples S``
(defaults: ``lam`` in [-12, 12], seed 0) without file I/O: the blocked engine
(:func:`noisealloc.theory.empirical.information_samples`) plus the per-level means,
standard errors and the budget integral.

Two baselines, timed in the same run: the repeats of the profile and of the
baselines are interleaved (profile, baseline 1, baseline 2, profile, ...) so that
load from other processes on a shared machine hits all of them alike, each one
starts after a short pause (so that no thread left polling by the previous one is
charged to it), and each reports its best of ``--repeat``, in wall-clock and in CPU seconds (all threads of
this process; less sensitive to other load).

Both baselines write into preallocated outputs (as the engine does), so they time the
GEMM alone.

1. **GEMMs the profile performs**: one ``(2S x D)(D x K)`` product (the sampled
   atoms and the noises against all atoms), i.e. two ``(S x D)(D x K)`` GEMMs.
   Common random numbers make this the only O(S D K) work for all L levels; a
   ratio near 1 means the per-level passes are cheap next to the unavoidable GEMMs.
2. **GEMMs a naive per-level implementation needs**: L products
   ``(S x D)(D x K)`` (distances from fresh noisy points to all atoms at each
   level), timed as L times the best single GEMM.

Target (issue 3): profile / GEMMs <= 2.0.  The thread counts are printed: the
GEMMs use the BLAS threads, the level passes numba's threads (both default to
the number of CPUs), so the comparison is like for like.
"""

from __future__ import annotations

import os
import time

__all__ = ["add_arguments", "run", "measure"]


# Pause before each timed call (see measure); longer than OpenBLAS's default polling time.
_QUIESCE_SECONDS = 0.3


def add_arguments(parser) -> None:
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


def _profile(images, lam, samples, float32):
    import numpy as np

    from noisealloc.theory.information import grid_quadrature_weights
    from noisealloc.theory.empirical import information_samples

    smp = information_samples(images, None, lam, n_samples=samples, rng=0, float32_distances=float32)
    smp.mean_stderr(smp.mmse)
    smp.mean_stderr(smp.entropy)
    trap, _ = grid_quadrature_weights(lam)
    smp.mean_stderr(trap @ (0.5 * np.exp(lam)[:, None] * smp.mmse))
    return smp


def measure(images, *, levels=64, samples=512, repeat=5, lam_min=-12.0, lam_max=12.0, float32=False):
    """Best-of-``repeat`` seconds of the profile and of the GEMM baselines (interleaved repeats).

    Returns
    -------
    dict
        Wall seconds ``profile``, ``gemm_profile`` (one (2S x D)(D x K)), ``gemm_single``
        (one (S x D)(D x K)), ``gemm_naive`` (= levels * gemm_single); the same with a
        ``cpu_`` prefix in CPU seconds (all threads); shapes; and the engine's own split of
        its best run (``engine_gemm``, ``engine_levels`` wall; ``cpu_engine_gemm``,
        ``cpu_engine_levels`` CPU).
    """
    import numpy as np

    K, D = images.shape
    lam = np.linspace(lam_min, lam_max, levels)
    dtype = np.float32 if float32 else np.float64
    rng = np.random.default_rng(0)
    left = rng.standard_normal((2 * samples, D)).astype(dtype)
    right = np.ascontiguousarray((images - images.mean(axis=0)).astype(dtype))
    # Preallocated outputs, as the engine uses: a fresh 80 MB result per GEMM would add page
    # faults to the baselines and flatter the ratio.
    out2 = np.empty((2 * samples, K), dtype=dtype)
    out1 = np.empty((samples, K), dtype=dtype)
    _profile(images[: min(K, 64)], lam[:3], 4, float32)  # compile the kernels outside the timing
    wall = {"profile": [], "gemm_profile": [], "gemm_single": []}
    cpu = {key: [] for key in wall}
    split = None

    def timed(key, fn):
        # Start from a quiet state: after a GEMM, OpenBLAS's worker threads keep polling for
        # a while (its thread timeout) before they sleep; without a pause that polling would
        # be charged to whichever measurement comes next.
        time.sleep(_QUIESCE_SECONDS)
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        wall[key].append(time.perf_counter() - t0)
        cpu[key].append(time.process_time() - c0)
        return out

    for _ in range(max(1, repeat)):
        smp = timed("profile", lambda: _profile(images, lam, samples, float32))
        if split is None or wall["profile"][-1] == min(wall["profile"]):
            nan = float("nan")
            split = (smp.info["seconds_gemm"], smp.info["seconds_levels"],
                     smp.info.get("seconds_cpu_gemm", nan), smp.info.get("seconds_cpu_levels", nan))
        timed("gemm_profile", lambda: np.matmul(left, right.T, out=out2))
        timed("gemm_single", lambda: np.matmul(left[:samples], right.T, out=out1))
    out = {key: min(v) for key, v in wall.items()}
    out.update({"cpu_" + key: min(v) for key, v in cpu.items()})
    out["gemm_naive"] = levels * out["gemm_single"]
    out["cpu_gemm_naive"] = levels * out["cpu_gemm_single"]
    out.update({"K": K, "D": D, "samples": samples, "levels": levels, "dtype": np.dtype(dtype).name,
                "engine_gemm": split[0], "engine_levels": split[1],
                "cpu_engine_gemm": split[2], "cpu_engine_levels": split[3]})
    return out


def thread_counts() -> str:
    """BLAS threads (threadpoolctl) and numba threads, as one line fragment."""
    import sys

    try:
        from threadpoolctl import threadpool_info

        blas = ", ".join(f"{p['prefix']} {p['num_threads']}" for p in threadpool_info()
                         if p.get("user_api") == "blas") or "none found"
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        blas = "unknown (threadpoolctl missing)"
    nb = sys.modules.get("numba")  # imported by the kernels when numba is enabled
    numba_threads = nb.get_num_threads() if nb is not None else "none (pure-Python kernels)"
    return f"BLAS {blas}, numba {numba_threads}, CPUs available {len(os.sched_getaffinity(0))}"


def run(args) -> int:
    from noisealloc.theory.datasets import load_mnist

    if args.levels < 3 or args.samples < 2 or args.repeat < 1:
        raise ValueError("--levels must be >= 3, --samples >= 2 and --repeat >= 1")
    images, _ = load_mnist(args.mnist)
    if args.atoms is not None:
        if args.atoms < 2:
            raise ValueError(f"--atoms must be >= 2; got {args.atoms}")
        images = images[: args.atoms]
    r = measure(images, levels=args.levels, samples=args.samples, repeat=args.repeat,
                lam_min=args.lam_min, lam_max=args.lam_max, float32=args.float32)
    S, D, K, L, dt = r["samples"], r["D"], r["K"], r["levels"], r["dtype"]
    print(f"bench posterior: MNIST K={K} D={D}, samples={S}, levels={L} (lam in [{args.lam_min:g}, {args.lam_max:g}]), "
          f"{dt} distances, best of {args.repeat} interleaved repeats")
    print(f"threads: {thread_counts()}")
    print(f"profile (noisealloc entropy without file I/O): {r['profile']:.3f} s wall, {r['cpu_profile']:.3f} s CPU "
          f"[engine split: block centring + GEMM {r['engine_gemm']:.3f} s wall / {r['cpu_engine_gemm']:.3f} s CPU, "
          f"distance assembly + level passes {r['engine_levels']:.3f} s wall / {r['cpu_engine_levels']:.3f} s CPU]")
    print(f"baseline 1, the GEMMs the profile performs: 1 x ({2 * S} x {D})({D} x {K}) = 2 x ({S} x {D})({D} x {K}) "
          f"{dt}: {r['gemm_profile']:.3f} s wall, {r['cpu_gemm_profile']:.3f} s CPU")
    print(f"baseline 2, the GEMMs a naive per-level implementation needs: {L} x ({S} x {D})({D} x {K}) {dt}: "
          f"{r['gemm_naive']:.3f} s wall, {r['cpu_gemm_naive']:.3f} s CPU "
          f"(= {L} x best single GEMM {r['gemm_single']:.4f} s wall / {r['cpu_gemm_single']:.4f} s CPU)")
    ratio1, cratio1 = r["profile"] / r["gemm_profile"], r["cpu_profile"] / r["cpu_gemm_profile"]
    ratio2, cratio2 = r["profile"] / r["gemm_naive"], r["cpu_profile"] / r["cpu_gemm_naive"]

    def verdict(x):
        return "meets" if x <= 2.0 else "misses"

    print(f"ratio profile / baseline 1 = {ratio1:.2f} wall ({verdict(ratio1)} the target <= 2.0), "
          f"{cratio1:.2f} CPU ({verdict(cratio1)} it)")
    print(f"ratio profile / baseline 2 = {ratio2:.3f} wall, {cratio2:.3f} CPU ({verdict(max(ratio2, cratio2))} <= 2.0)")
    print(f"CPU seconds (all threads; less sensitive to other load on the machine): profile {r['cpu_profile']:.3f} s, "
          f"baseline 1 {r['cpu_gemm_profile']:.3f} s, ratio {cratio1:.2f}")
    return 0
