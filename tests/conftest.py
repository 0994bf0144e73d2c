"""Shared test configuration.

Hypothesis profiles: ``ci`` (the default) is deterministic (derandomised, no
deadline because numba compiles on first call); ``fuzz`` searches longer with
random seeds.  Choose with ``NOISEALLOC_HYPOTHESIS_PROFILE=fuzz``.
"""

from __future__ import annotations

import os
from pathlib import Path

# The README's test command runs two pytest-xdist workers on the two cores.  Each keeps BLAS and
# OpenMP to one thread (set before numpy or numba load them): two processes with a two-thread BLAS
# each put four busy-polling BLAS threads on two cores, which ran the tier slower than one process.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("fuzz", max_examples=2000, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("NOISEALLOC_HYPOTHESIS_PROFILE", "ci"))
# Tests write @settings(max_examples=examples(n)) (tests/strategies.py), which scales n by
# settings.default.max_examples / 40: the fuzz profile really searches 50x longer.

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The MNIST test set beside the checkout (../shared/data/mnist), or NOISEALLOC_MNIST_DIR.
MNIST_DIR = Path(os.environ.get("NOISEALLOC_MNIST_DIR", REPO_ROOT.parent / "shared" / "data" / "mnist"))


@pytest.fixture(scope="session")
def mnist_dir() -> Path:
    """Directory holding the MNIST IDX files; skips the test when absent."""
    if not (MNIST_DIR / "t10k-images-idx3-ubyte.gz").exists():
        pytest.skip(f"MNIST not found at {MNIST_DIR} (set NOISEALLOC_MNIST_DIR)")
    return MNIST_DIR


#: The two implementations of every posterior kernel (theory._empirical_kernels): the numba jit
#: path and the vectorised numpy path.  Tests of a kernel take the ``kernel`` fixture, so each
#: runs on both and a path cannot drift from the other unseen.
KERNELS = ("numba", "numpy")


@pytest.fixture(params=KERNELS)
def kernel(request) -> str:
    """Name of the kernel implementation under test (``'numba'`` or ``'numpy'``)."""
    return request.param


@pytest.fixture(params=KERNELS)
def solver_kernel(request, monkeypatch):
    """Run a solver test on the numba path and again on the numpy path.

    The solvers ask the gateway (``noisealloc.theory._numba.HAVE_NUMBA``) at call time where a compiled
    kernel matters (today only whether the default two-parameter sandwich proof, whose kernels are in
    :mod:`noisealloc.solvers._sandwich_kernels`, runs on larger grids); the ``'numpy'`` run patches it off
    for the test.  Function scope, so the
    patch never outlives the test (a module-scoped patch would also hold for tests that did not ask
    for it); a hypothesis test that uses it needs
    ``suppress_health_check=[HealthCheck.function_scoped_fixture]`` (the patch is the same for every
    example).  Whole modules: ``pytestmark = pytest.mark.usefixtures("solver_kernel")``.
    """
    from noisealloc.theory import _numba

    if request.param == "numpy":
        monkeypatch.setattr(_numba, "HAVE_NUMBA", False)
    return request.param
