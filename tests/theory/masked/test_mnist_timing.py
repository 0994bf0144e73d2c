"""Timing of the exact masked rates of binarised MNIST (K = 10,000 strings, L = 784, V = 2) at 64 levels
(acceptance item (g) of issue 27), against the cost of the distance GEMMs it is built on.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from noisealloc.theory import tolerances as tol
from noisealloc.theory.masked import FiniteLaw
from noisealloc.theory.masked.information import DEFAULT_N_SAMPLES, masked_budget_check

#: Wall-clock bound of the 64-level run on the shared 2-core machine (the issue asks for under a minute;
#: the bound leaves room for a loaded machine, the measured time is printed).
MNIST_SECONDS_MAX = 120.0


def time_binarised_mnist(mnist_dir, *, n_levels: int = 64, n_samples: int = DEFAULT_N_SAMPLES, rng=0) -> dict:
    """Time ``FiniteLaw(tokens, 2).information_samples`` on binarised MNIST and the GEMMs it is compared with.

    Returns a dict: ``seconds`` (the run), ``build_seconds`` (the law), ``gemm_samples_seconds`` (one
    float32 GEMM of the samples' +-1 codes with all K strings, (n, L) x (L, K)), ``gemm_KK_seconds`` (the
    K x K distance GEMM), their ratios, and the run's samples.
    """
    from noisealloc.theory.models.datasets import load_images

    images, _ = load_images("mnist-binarised", mnist=str(mnist_dir))
    tokens = (images > 0).astype(np.int64)
    t0 = time.perf_counter()
    law = FiniteLaw(tokens, 2)
    build = time.perf_counter() - t0
    lam = np.linspace(-12.0, 12.0, n_levels)
    t0 = time.perf_counter()
    samples = law.information_samples(lam, n_samples=n_samples, rng=rng)
    run = time.perf_counter() - t0
    codes = law._codes
    t0 = time.perf_counter()
    codes[:n_samples] @ codes.T
    g_samples = time.perf_counter() - t0
    t0 = time.perf_counter()
    codes @ codes.T
    g_kk = time.perf_counter() - t0
    return {"seconds": run, "build_seconds": build, "gemm_samples_seconds": g_samples, "gemm_KK_seconds": g_kk,
            "ratio_to_samples_gemm": run / g_samples, "ratio_to_KK_gemm": run / g_kk, "law": law,
            "samples": samples}


@pytest.mark.slow
def test_binarised_mnist_64_levels(mnist_dir):
    out = time_binarised_mnist(mnist_dir)
    print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items() if k not in ("law", "samples")})
    law, s = out["law"], out["samples"]
    assert out["seconds"] <= MNIST_SECONDS_MAX
    assert np.all(np.isfinite(s.erasure_entropy)) and np.all(np.isfinite(s.conditional_entropy))
    # memorisation: at lambda = 12 (6e-6 of the tokens masked) nothing is left to learn
    assert float(s.entropy_rate[:, -1].mean()) < 1e-3
    check = masked_budget_check(s, law.entropy, float(law.marginal_entropies.sum()))
    print(check.message)
    assert check.holds, check.message
    assert abs(check.value - law.entropy) <= tol.MC_NSIGMA * check.stderr + check.abs_error + check.tail_bound \
        + tol.BUDGET_ATOL_QUAD
