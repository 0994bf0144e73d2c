r"""Step time of the JAX training stack per data set and network.

Each case trains a fresh network for ``steps`` Adam steps at a fixed batch size on one data set with
levels from the uniform-:math:`\lambda` schedule (the schedule does not change the cost of a step) and
reports, separately, the ahead-of-time compile time of the step (the cached compile is dropped first,
so it is measured fresh) and the mean wall-clock time per step after it (level and data sampling
on the host, transfer and the compiled step; no evaluation).  Cases:

* ``dirac``: a 64-atom Dirac mixture in D = 16 (``dirac:K=64,D=16,sep=1``), MLP;
* ``digits``: scikit-learn's 8 x 8 digits (D = 64), MLP;
* ``mnist``: MNIST test images (D = 784) from a path, with the small CNN (and the MLP); without a
  path, synthetic 28 x 28 images of the same scale stand in (the cost of a step does not depend on
  the pixel values), and the result says so.

Functions only; the command line lives in :mod:`noisealloc.commands`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import numpy as np

from noisealloc.theory.errors import check_choice, check_count

__all__ = ["TrainingBench", "CASES", "bench_case", "bench_training"]

#: (data, network) pairs of :func:`bench_training`, in order.
CASES = (("dirac", "mlp"), ("digits", "mlp"), ("mnist", "mlp"), ("mnist", "cnn"))


@dataclass(frozen=True)
class TrainingBench:
    """Timing of one (data set, network) case.

    Attributes
    ----------
    data : str
        Data set label (``"mnist (synthetic 28x28)"`` when no MNIST path was found).
    network : str
        Network label (e.g. ``"mlp-128x3"``, ``"cnn-16-32"``).
    dim, n_params, batch_size, steps : int
        Data dimension, trainable parameters, examples per step, timed steps.
    compile_time : float
        Seconds to trace and compile the optimizer initialisation and the step (fresh).
    step_time : float
        Mean seconds per step after compilation.
    compile_share : float
        ``compile_time / (compile_time + steps * step_time)``: the share of this run spent compiling.
    cpu_count : int
        ``os.cpu_count()`` of the machine that measured it.
    """

    data: str
    network: str
    dim: int
    n_params: int
    batch_size: int
    steps: int
    compile_time: float
    step_time: float
    compile_share: float
    cpu_count: int

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict.

        Returns
        -------
        dict
        """
        return asdict(self)


def _data(name: str, mnist, seed: int):
    from noisealloc.theory.schedules.data_scale import data_scale
    from noisealloc.theory.models.datasets import dirac_atoms, load_digits, load_mnist
    from noisealloc.theory.models.dirac import DiracMixture

    if name == "dirac":
        atoms, w = dirac_atoms(64, 16, 1.0, seed=seed)
        model = DiracMixture(atoms, w)
        return "dirac:K=64,D=16,sep=1", model, data_scale(model)
    if name == "digits":
        x, _ = load_digits()
        return "digits", x, float(x.std(axis=0).mean())
    try:
        x, _ = load_mnist(mnist)
        label = "mnist"
    except (FileNotFoundError, ValueError):
        # A step's cost does not depend on the pixel values: images of MNIST's scale stand in.
        x = np.clip(np.random.default_rng(seed).normal(-0.75, 0.6, (2048, 784)), -1.0, 1.0)
        label = "mnist (synthetic 28x28)"
    return label, x, float(x.std(axis=0).mean())


def bench_case(data: str, network: str, *, batch_size: int = 128, steps: int = 200, mnist=None,
               seed: int = 0) -> TrainingBench:
    """Time one (data set, network) case: fresh compile, then ``steps`` training steps.

    Parameters
    ----------
    data : {"dirac", "digits", "mnist"}
    network : {"mlp", "cnn"}
        ``"cnn"`` needs 28 x 28 images (``data="mnist"``).
    batch_size, steps : int
    mnist : str or Path, optional
        Directory of the MNIST IDX files (else ``NOISEALLOC_MNIST_DIR``; synthetic images if absent).
    seed : int

    Returns
    -------
    TrainingBench
    """
    from noisealloc.theory.schedules.builtin import uniform_lambda
    from noisealloc.verify.experiments import neural

    check_choice(data, "data", ("dirac", "digits", "mnist"))
    check_choice(network, "network", ("mlp", "cnn"))
    if network == "cnn" and data != "mnist":
        raise ValueError(f"network 'cnn' needs 28 x 28 images (data='mnist'); got data={data!r}")
    steps, batch_size = check_count(steps, "steps"), check_count(batch_size, "batch_size")
    label, train, s = _data(data, mnist, seed)
    dim = int(getattr(train, "dim", None) or np.shape(train)[1])
    net = neural.MLPDenoiser(dim, s) if network == "mlp" else neural.ConvDenoiser(28, s)
    neural.STEP_CACHE.pop((net, batch_size, 1e-3), None)  # time a fresh compile
    run = neural.train_denoiser(net, train, uniform_lambda(lam_min=-10.0, lam_max=10.0), steps=steps,
                                batch_size=batch_size, learning_rate=1e-3, seed=seed)
    n_params = int(sum(np.size(v) for v in _leaves(run.params)))
    return TrainingBench(label, net.name, dim, n_params, batch_size, steps, run.compile_time, run.step_time,
                         run.compile_share, int(os.cpu_count() or 0))


def _leaves(tree):
    if isinstance(tree, dict):
        for v in tree.values():
            yield from _leaves(v)
    elif isinstance(tree, (list, tuple)):
        for v in tree:
            yield from _leaves(v)
    else:
        yield tree


def bench_training(cases=CASES, *, batch_size: int = 128, steps: int = 200, mnist=None,
                   seed: int = 0) -> list[TrainingBench]:
    """Time every case of ``cases`` (default :data:`CASES`) with :func:`bench_case`.

    Parameters
    ----------
    cases : iterable of (str, str)
        ``(data, network)`` pairs.
    batch_size, steps : int
    mnist : str or Path, optional
    seed : int

    Returns
    -------
    list of TrainingBench
    """
    return [bench_case(d, n, batch_size=batch_size, steps=steps, mnist=mnist, seed=seed) for d, n in cases]
