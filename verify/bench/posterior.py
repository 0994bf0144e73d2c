"""The MNIST posterior profile against bare GEMMs of the same shapes (measured here; parsed and printed by ``noisealloc bench posterior``).

The profile is the computation of ``noisealloc entropy --data mnist:PATH --levels L --samples S``
(defaults: ``lam`` in [-12, 12], seed 0) without file I/O:
:func:`noisealloc.theory.information.profile.information_profile` of the images as a Dirac mixture (the
blocked engine, the per-level means and standard errors, and the budget check).

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

Target: profile / GEMMs <= 2.0.  The thread counts are printed: the
baselines use the BLAS threads; the profile's engine runs numba's thread count of worker
threads, each with single-threaded GEMMs and level passes (both counts default to the number
of CPUs), so the comparison is like for like.

The profile above is the plain GEMM engine.  ``noisealloc entropy`` uses the importance sampler of
docs/THEORY.md section 3.1 by default; its profile is timed in the same interleaved loop and reported
against baseline 1 and as a cost factor over the plain profile, with the sampler's own
split (neighbour search; distance GEMMs and proposal terms; level passes).  Peak resident
memory: this process's (``getrusage``), and optionally (:func:`peak_memory`) that of
``noisealloc entropy --data mnist:PATH`` and ``noisealloc reproduce --quick`` run as children
(the target is at most 2 GB).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

__all__ = ["PosteriorBenchResult", "ThreadCounts", "MemoryRow", "measure", "thread_counts", "posterior_profile",
           "peak_memory", "peak_rss_self"]


# Pause before each timed call (see measure); longer than OpenBLAS's default polling time.
_QUIESCE_SECONDS = 0.3


def posterior_profile(images, lam, samples: int, float32: bool, importance: bool = False):
    """The computation of ``noisealloc entropy`` without file I/O: the information profile of ``images`` as a Dirac mixture.

    Parameters
    ----------
    images : ndarray, shape (K, D)
        The atoms (uniform weights).
    lam : ndarray, shape (L,)
        Increasing levels, ``L >= 3``.
    samples : int
        Monte-Carlo samples.
    float32 : bool
        float32 distance GEMM (plain engine only).
    importance : bool
        The importance sampler of docs/THEORY.md section 3.1 (the default of ``noisealloc entropy``)
        instead of the plain GEMM engine.

    Returns
    -------
    InformationProfile
        Of :func:`noisealloc.theory.information.profile.information_profile` (seed 0); ``info`` holds the
        engine's timings.
    """
    from noisealloc.theory.models.dirac import DiracMixture
    from noisealloc.theory.information.profile import information_profile

    model = DiracMixture(images)
    if importance:
        engine = {"importance": True} if model.monte_carlo else None
    else:
        engine = {"float32_distances": bool(float32), "importance": False} if model.monte_carlo else None
    return information_profile(model, lam, n_samples=samples, rng=0, engine_options=engine)


@dataclass(frozen=True)
class PosteriorBenchResult:
    """Best-of-``repeat`` timings of the posterior profile and of its GEMM baselines.

    Attributes
    ----------
    profile, gemm_profile, gemm_single, gemm_naive : float
        Wall seconds: the profile; one ``(2S x D)(D x K)`` GEMM (baseline 1); one ``(S x D)(D x K)``
        GEMM; ``levels * gemm_single`` (baseline 2).
    cpu_profile, cpu_gemm_profile, cpu_gemm_single, cpu_gemm_naive : float
        The same in CPU seconds of the process (all threads).
    K, D, samples, levels : int
        Shapes.
    dtype : str
        Distance precision (``float64`` or ``float32``).
    engine_gemm, engine_levels, cpu_engine_gemm, cpu_engine_levels : float
        The engine's own split of its best run (block centring + GEMM; distance assembly + level
        passes), wall and CPU seconds.
    profile_importance, cpu_profile_importance : float
        The same profile with the importance sampler (wall, CPU seconds; NaN when not measured).
    importance_split : tuple of float
        The sampler's own split of its best run, wall and CPU seconds of each stage: (neighbour search,
        CPU; distance GEMMs and proposal terms, CPU; level passes, CPU); empty when not measured.
    peak_rss : int
        Peak resident memory of this process after the measurement (bytes, ``ru_maxrss``).
    """

    profile: float
    gemm_profile: float
    gemm_single: float
    gemm_naive: float
    cpu_profile: float
    cpu_gemm_profile: float
    cpu_gemm_single: float
    cpu_gemm_naive: float
    K: int
    D: int
    samples: int
    levels: int
    dtype: str
    engine_gemm: float
    engine_levels: float
    cpu_engine_gemm: float
    cpu_engine_levels: float
    profile_importance: float = float("nan")
    cpu_profile_importance: float = float("nan")
    importance_split: tuple = ()
    peak_rss: int = 0

    @property
    def ratio_importance(self) -> tuple[float, float]:
        """(wall, CPU) importance-sampled profile / baseline 1."""
        return self.profile_importance / self.gemm_profile, self.cpu_profile_importance / self.cpu_gemm_profile

    @property
    def importance_cost(self) -> tuple[float, float]:
        """(wall, CPU) importance-sampled profile / plain profile: the sampler's added cost factor."""
        return self.profile_importance / self.profile, self.cpu_profile_importance / self.cpu_profile

    @property
    def ratio_gemm(self) -> tuple[float, float]:
        """(wall, CPU) profile / baseline 1 (target <= 2)."""
        return self.profile / self.gemm_profile, self.cpu_profile / self.cpu_gemm_profile

    @property
    def ratio_naive(self) -> tuple[float, float]:
        """(wall, CPU) profile / baseline 2."""
        return self.profile / self.gemm_naive, self.cpu_profile / self.cpu_gemm_naive


def measure(images, *, levels=64, samples=512, repeat=5, lam_min=-12.0, lam_max=12.0,
            float32=False, importance=True) -> PosteriorBenchResult:
    """Best-of-``repeat`` seconds of the profile and of the GEMM baselines (interleaved repeats).

    Parameters
    ----------
    images : ndarray, shape (K, D)
        Atoms of the profile (MNIST images).
    levels : int
        Levels, ``>= 3``.
    samples : int
        Monte-Carlo samples, ``>= 2``.
    repeat : int
        Interleaved repeats (best of), ``>= 1``.
    lam_min, lam_max : float
        The level interval.
    float32 : bool
        float32 distance GEMM (profile and baselines).
    importance : bool
        Also time the profile with the importance sampler (interleaved with the others).

    Returns
    -------
    PosteriorBenchResult

    Raises
    ------
    ValueError
        For ``levels < 3``, ``samples < 2`` or ``repeat < 1``.
    """
    import numpy as np

    from noisealloc.theory._threads import interruptible

    if levels < 3 or samples < 2 or repeat < 1:
        raise ValueError(f"levels must be >= 3, samples >= 2 and repeat >= 1; got levels={levels}, "
                         f"samples={samples}, repeat={repeat}")
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
    posterior_profile(images[: min(K, 64)], lam[:3], 4, float32)  # compile the kernels outside the timing
    if importance:
        posterior_profile(images[: min(K, 64)], lam[:3], 4, False, importance=True)
    wall = {"profile": [], "gemm_profile": [], "gemm_single": []}
    if importance:
        wall["profile_importance"] = []
    cpu = {key: [] for key in wall}
    split = None
    split_importance = ()

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
        prof = timed("profile", lambda: posterior_profile(images, lam, samples, float32))
        if split is None or wall["profile"][-1] == min(wall["profile"]):
            nan = float("nan")
            split = (prof.info["seconds_gemm"], prof.info["seconds_levels"],
                     prof.info.get("seconds_cpu_gemm", nan), prof.info.get("seconds_cpu_levels", nan))
        # seconds-long single GEMMs, on a helper thread so that an interrupt ends the run at once
        timed("gemm_profile", lambda: interruptible(np.matmul, left, right.T, out=out2))
        timed("gemm_single", lambda: interruptible(np.matmul, left[:samples], right.T, out=out1))
        if importance:
            prof = timed("profile_importance", lambda: posterior_profile(images, lam, samples, False, importance=True))
            if wall["profile_importance"][-1] == min(wall["profile_importance"]):
                split_importance = tuple(prof.info.get(f"seconds{c}_{stage}", float("nan"))
                                         for stage in ("neighbours", "gemm", "levels") for c in ("", "_cpu"))
    best = {key: min(v) for key, v in wall.items()}
    best_cpu = {key: min(v) for key, v in cpu.items()}
    nan = float("nan")
    return PosteriorBenchResult(
        profile=best["profile"], gemm_profile=best["gemm_profile"], gemm_single=best["gemm_single"],
        gemm_naive=levels * best["gemm_single"], cpu_profile=best_cpu["profile"],
        cpu_gemm_profile=best_cpu["gemm_profile"], cpu_gemm_single=best_cpu["gemm_single"],
        cpu_gemm_naive=levels * best_cpu["gemm_single"], K=int(K), D=int(D), samples=int(samples),
        levels=int(levels), dtype=np.dtype(dtype).name, engine_gemm=split[0], engine_levels=split[1],
        cpu_engine_gemm=split[2], cpu_engine_levels=split[3],
        profile_importance=best.get("profile_importance", nan),
        cpu_profile_importance=best_cpu.get("profile_importance", nan), importance_split=split_importance,
        peak_rss=peak_rss_self(),
    )


def peak_rss_self() -> int:
    """Peak resident set size of this process so far, in bytes (``getrusage``; Linux reports KiB).

    Returns
    -------
    int
    """
    import resource
    import sys

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if sys.platform == "darwin" else 1024 * r)


@dataclass(frozen=True)
class MemoryRow:
    """Peak resident memory of one command run as a child process.

    Attributes
    ----------
    argv : list of str
        The command.
    seconds : float
        Its wall time.
    peak_rss : int
        Its peak resident set size in bytes (``wait4``'s ``ru_maxrss``, the child alone).
    returncode : int
        Its exit status.
    """

    argv: list
    seconds: float
    peak_rss: int
    returncode: int


#: A lean launcher: the peak RSS that wait4 reports for a child includes its parent's at fork time
#: (Linux carries the old address space's high-water mark across exec), so the command is started by
#: a fresh interpreter of ~10 MB, which reports its child's peak on stdout.
_LAUNCHER = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "_, status, usage = os.wait4(p.pid, 0)\n"
    "print(usage.ru_maxrss, os.waitstatus_to_exitcode(status))\n"
)


def peak_memory(argv) -> MemoryRow:
    """Run ``argv`` as a child (output discarded) and measure its peak resident memory, like ``/usr/bin/time -v``.

    Parameters
    ----------
    argv : list of str
        The command and its arguments.

    Returns
    -------
    MemoryRow
    """
    import subprocess
    import sys

    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _LAUNCHER, *argv], capture_output=True, text=True, check=True).stdout
    kib, code = (int(v) for v in out.split())
    return MemoryRow(argv=list(argv), seconds=time.perf_counter() - t0,
                     peak_rss=int(kib if sys.platform == "darwin" else 1024 * kib), returncode=code)


@dataclass(frozen=True)
class ThreadCounts:
    """Threads the benchmark's two kinds of work use.

    Attributes
    ----------
    blas : str
        BLAS libraries and their thread counts (threadpoolctl), e.g. ``'libopenblas 2'``.
    numba : str
        numba's thread count, or why there is none.
    cpus : int
        CPUs available to the process.
    """

    blas: str
    numba: str
    cpus: int

    def __str__(self) -> str:
        return f"BLAS {self.blas}, numba {self.numba}, CPUs available {self.cpus}"


def thread_counts() -> ThreadCounts:
    """BLAS threads (threadpoolctl) and numba threads.

    Returns
    -------
    ThreadCounts
    """
    import sys

    try:
        from threadpoolctl import threadpool_info

        blas = ", ".join(f"{p['prefix']} {p['num_threads']}" for p in threadpool_info()
                         if p.get("user_api") == "blas") or "none found"
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        blas = "unknown (threadpoolctl missing)"
    nb = sys.modules.get("numba")  # imported by the kernels when numba is enabled
    numba_threads = str(nb.get_num_threads()) if nb is not None else "none (pure-Python kernels)"
    return ThreadCounts(blas, numba_threads, len(os.sched_getaffinity(0)))
