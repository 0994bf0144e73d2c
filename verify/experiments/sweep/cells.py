r"""Built-in sweep cells: the coupling sweep, the random-feature training cell and a demo cell.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ['cell_coupling', 'cell_training', 'cell_demo']


def cell_coupling(*, data: str, J: int, criterion: str = "L", seed: int = 0, lam_min: float = -8.0,
                  lam_max: float = 8.0, levels: int = 97, family: str | None = None) -> dict:
    """One row of the coupling sweep (:func:`noisealloc.verify.experiments.coupling.coupling_sweep` at a single ``J``).

    Parameters
    ----------
    data : str
        Data SPEC (:func:`noisealloc.theory.models.datasets.load_data`).
    J : int
        Number of B-spline basis functions in log-SNR (docs/THEORY.md §4 (c)).
    criterion : str
        ``"L"`` or ``"sandwich"``.
    seed : int
        Randomness of the allocation problem.
    lam_min, lam_max : float
        Log-SNR interval.
    levels : int
        Levels of the grid.
    family : str, optional
        Denoiser family (default the model's natural one).

    Returns
    -------
    dict
        The sweep row (atoms, W1 distance to the entropic density, efficiency, ...), without timings.

    References
    ----------
    docs/THEORY.md §4 (c), §6.3.
    """
    from noisealloc.theory.models.datasets import load_data
    from noisealloc.verify.experiments.coupling import coupling_sweep

    if int(levels) < 3:  # as `noisealloc optimize`: fewer levels cannot carry an allocation
        raise ValueError(f"levels must be >= 3; got {levels}")
    model = load_data(data)
    rep = coupling_sweep(model, (int(J),), lam=np.linspace(lam_min, lam_max, int(levels)), criterion=criterion,
                         family=family, rng=int(seed))
    row = dict(rep.rows[0])
    row.pop("seconds", None)  # timings are not results: keep the table reproducible
    return row


def cell_training(*, data: str, schedule: str, N: int, seed: int = 0, q: int = 256, ridge: float = 1e-3,
                  lam_min: float = -8.0, lam_max: float = 8.0, eval_levels: int = 33, eval_n: int = 96,
                  h_levels: int = 65, h_samples: int = 512) -> dict:
    """Held-out ELBO gap of one random-feature denoiser trained on ``N`` samples (figure 6's cell).

    Parameters
    ----------
    data : str
        Data SPEC, or ``"digits-binarised"`` (the 8x8 digits thresholded to +-1).
    schedule : str
        ``"sqrt-entropic"``, ``"entropic"`` or a built-in schedule name
        (:func:`noisealloc.verify.experiments.random_features.training_schedule`).
    N : int
        Training samples.
    seed : int
        Seed of the first layer, the training draws, the held-out set and a Monte-Carlo ``h``.
    q, ridge : int, float
        Random features and ridge of the readout.
    lam_min, lam_max : float
        Training and evaluation interval in log-SNR.
    eval_levels, eval_n : int
        Held-out grid levels and pairs per level.
    h_levels, h_samples : int
        Levels of the entropy-rate profile and Monte-Carlo samples per level.

    Returns
    -------
    dict
        ``{"elbo_gap": float}`` in nats.

    References
    ----------
    docs/THEORY.md §6.6 (i).
    """
    from noisealloc.theory.models.datasets import load_data, load_digits
    from noisealloc.theory.models.dirac import DiracMixture
    from noisealloc.verify.experiments.random_features import make_eval_set, training_curve, training_schedule

    if data == "digits-binarised":
        model = DiracMixture(np.where(load_digits()[0] > 0.0, 1.0, -1.0))
    else:
        model = load_data(data)
    sch = training_schedule(model, schedule, lam_min, lam_max, h_levels=int(h_levels), h_samples=int(h_samples),
                            rng=int(seed))
    ev = make_eval_set(model, lam_min, lam_max, levels=int(eval_levels), n=int(eval_n),
                       rng=np.random.default_rng([int(seed), 66]))
    c = training_curve(model, sch, [int(N)], [int(seed)], ev, q=int(q), ridge=float(ridge))
    return {"elbo_gap": float(c.gaps[0, 0])}


def cell_demo(*, a: float, b: float = 1.0, seed: int = 0, sleep: float = 0.0) -> dict:
    """A cheap deterministic cell for tests and smoke runs: a seeded Monte-Carlo mean of ``a x + b``.

    Parameters
    ----------
    a, b : float
        Slope and offset.
    seed : int
        Seed of the 1000 standard normal draws ``x``.
    sleep : float
        Seconds to wait first (to test interruptions).

    Returns
    -------
    dict
        ``{"mean": mean(a x + b), "a_times_b": a b}``.

    Examples
    --------
    >>> cell_demo(a=0.0, b=1.5)
    {'mean': 1.5, 'a_times_b': 0.0}
    """
    if sleep:
        time.sleep(float(sleep))
    x = np.random.default_rng(int(seed)).standard_normal(1000)
    return {"mean": float(np.mean(a * x + b)), "a_times_b": float(a) * float(b)}
