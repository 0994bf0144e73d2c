r"""The cells of figure 6's control regimes (docs/THEORY.md section 6.6 (i) and (ii)), as sweep-engine kinds.

* ``fig6-coupled`` (:func:`cell_coupled`) -- regime (i), one data set: random-feature denoisers with one
  ridge readout shared by every level (:mod:`noisealloc.verify.experiments.random_features`), trained under each of
  :data:`SCHEDULES` on the interval [:data:`LAM_MIN`, :data:`LAM_MAX`];
* ``fig6-independent`` (:func:`cell_independent`) -- regime (ii), one schedule: independent OLS learners per
  lambda-cell on a Gaussian law (:mod:`noisealloc.verify.experiments.learners`) against the square-root law.

They live here, below the figures, so that the sweep engine (:mod:`noisealloc.verify.experiments.sweep`) runs them
without importing the figure layer; :mod:`noisealloc.figures.fig6_training` builds the sweeps and plots.

References
----------
docs/THEORY.md section 6.6.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LAM_MIN", "LAM_MAX", "SCHEDULES", "IL_VARIANCES", "IL_DIM", "IL_INTERVAL", "IL_SCHEDULES",
           "coupled_model", "cell_coupled", "cell_independent"]

#: Interval of figure 6's regimes (i) and (iii), in log-SNR.
LAM_MIN, LAM_MAX = -8.0, 8.0
#: Schedules of regime (i).
SCHEDULES = ("sqrt-entropic", "edm_lognormal", "cosine")

#: Independent learners: a Gaussian law whose two directions have very different variances, so that h
#: varies over the interval and the schedules differ.
IL_VARIANCES = (1.0, 0.05)
IL_DIM = 4
IL_INTERVAL = (-6.0, 6.0)
IL_SCHEDULES = ("sqrt-entropic", "entropic", "edm_lognormal", "cosine", "logit_normal_sd3", "uniform_lambda")



def coupled_model(name: str) -> tuple[str, bool, object]:
    """``(label, discrete, model)`` of one regime-(i) data set, loaded from its name (a worker process does this).

    Parameters
    ----------
    name : str
        ``"dirac:..."`` (a :func:`noisealloc.theory.models.datasets.load_data` SPEC), ``"digits-binarised"``,
        ``"digits"`` or ``"mnist:PATH"``.

    Returns
    -------
    label : str
        The row's name in the figure (``"mnist"`` without its path).
    discrete : bool
    model : DiracMixture

    Raises
    ------
    ValueError
        An unknown name.
    """
    from noisealloc.theory.models.datasets import load_data, load_digits, load_mnist
    from noisealloc.theory.models.dirac import DiracMixture

    if not isinstance(name, str):
        raise ValueError(f"data must be dirac:..., digits-binarised, digits or mnist:PATH; got {name!r}")
    if name.startswith("dirac:"):
        return name, True, load_data(name)
    if name == "digits-binarised":
        return name, True, DiracMixture(np.where(load_digits()[0] > 0.0, 1.0, -1.0))
    if name == "digits":
        return name, False, DiracMixture(load_digits()[0])
    if name.startswith("mnist:") and len(name) > len("mnist:"):
        return "mnist", False, DiracMixture(load_mnist(name[len("mnist:"):])[0])
    raise ValueError(f"data must be dirac:..., digits-binarised, digits or mnist:PATH; got {name!r}")


def _schedules(model, sizes, seed):
    from noisealloc.theory.schedules.data_scale import data_scale, heuristic_shift
    from noisealloc.verify.experiments.random_features import training_schedule

    scheds = {key: training_schedule(model, key, LAM_MIN, LAM_MAX, h_levels=sizes["h_levels"],
                                     h_samples=sizes["h_samples"], rng=seed) for key in SCHEDULES}
    s = data_scale(model)
    return scheds, s, heuristic_shift(s)


def cell_coupled(*, data: str, seed: int, N_values: list, seeds: int, q: int, ridge: float, eval_levels: int,
                 eval_n: int, h_levels: int, h_samples: int) -> dict:
    """One row of regime (i): every schedule's training curve on one data set (a sweep-engine cell, kind ``fig6-coupled``).

    Parameters
    ----------
    data : str
        See :func:`coupled_model`.
    seed : int
        The figure's seed: training seeds ``1000 seed + j``, Monte-Carlo ``h`` and held-out set from it.
    N_values : list of int
        Training-set sizes.
    seeds : int
        Number of training seeds.
    q, ridge : int, float
        Random features and ridge of the readout.
    eval_levels, eval_n : int
        Held-out grid levels and pairs per level.
    h_levels, h_samples : int
        Entropy-rate profile of the sqrt-entropic schedule.

    Returns
    -------
    dict
        The row: ``data``, ``discrete``, ``dim``, ``n_atoms``, ``data_std``, ``heuristic_shift``, ``curves``
        (``mean``, ``stderr``, ``gaps`` per schedule), ``target``, ``N_to_target``, ``ratio_vs_sqrt_entropic``.

    References
    ----------
    docs/THEORY.md §6.6 (i).
    """
    from noisealloc.verify.experiments.random_features import make_eval_set, samples_to_target, training_curve

    sz = {"h_levels": int(h_levels), "h_samples": int(h_samples)}
    label, discrete, model = coupled_model(data)
    seed_list = [int(seed) * 1000 + j for j in range(int(seeds))]
    scheds, s, shift = _schedules(model, sz, int(seed))
    ev = make_eval_set(model, LAM_MIN, LAM_MAX, levels=int(eval_levels), n=int(eval_n),
                       rng=np.random.default_rng([int(seed), 66]))
    curves = {}
    for key in SCHEDULES:
        c = training_curve(model, scheds[key], list(N_values), seed_list, ev, q=int(q), ridge=float(ridge), name=key)
        curves[key] = {"mean": c.mean, "stderr": c.stderr, "gaps": c.gaps}
    target = max(float(curves[k]["mean"][-1]) for k in SCHEDULES)
    n_to = {k: samples_to_target(N_values, curves[k]["mean"], target) for k in SCHEDULES}
    ratio = {k: n_to[k] / n_to["sqrt-entropic"] for k in SCHEDULES}
    return {"data": label, "discrete": discrete, "dim": int(model.dim), "n_atoms": int(model.n_atoms),
            "data_std": s, "heuristic_shift": shift, "curves": curves, "target": target,
            "N_to_target": n_to, "ratio_vs_sqrt_entropic": ratio}


def _il_model():
    from noisealloc.theory.models.datasets import gaussian_parameters
    from noisealloc.theory.models.gaussian import GaussianManifold

    mean, basis, _ = gaussian_parameters(IL_DIM, len(IL_VARIANCES), seed=0)
    return GaussianManifold(mean, basis, np.asarray(IL_VARIANCES))


def _il_schedule(model, name, lo, hi):
    from noisealloc.theory.schedules.data_scale import shifted_heuristic
    from noisealloc.theory.schedules.entropic import schedule_from_model

    if name in ("sqrt-entropic", "entropic"):
        rule = "sqrt-entropy" if name == "sqrt-entropic" else "entropy"
        return schedule_from_model(model, np.linspace(lo, hi, 257), rule=rule, name=name).schedule
    # Exact data scale of the Gaussian law (no Monte Carlo): s^2 = sum of variances / D.
    s = float(np.sqrt(np.sum(model.variances) / model.dim))
    return shifted_heuristic(name, s, lo, hi)


def cell_independent(*, schedule: str, seed: int, N: int, cells: int, seeds: int) -> dict:
    """One row of regime (ii): ``schedule`` against the square-root law (a sweep-engine cell, kind ``fig6-independent``).

    Parameters
    ----------
    schedule : str
        One of :data:`IL_SCHEDULES`.
    seed : int
        The figure's seed (the runs draw from ``[seed, 80, index of schedule]``).
    N, cells, seeds : int
        Training samples per run, lambda-cells and simulated runs
        (:func:`noisealloc.verify.experiments.learners.independent_learners`).

    Returns
    -------
    dict
        :meth:`IndependentLearnersResult.to_dict` with ``schedule``, or ``{"schedule", "error"}`` when the
        schedule starves a cell (an infinite loss: a result, said in the table, not a failure).

    Raises
    ------
    ValueError
        ``schedule`` is not one of :data:`IL_SCHEDULES`.

    References
    ----------
    docs/THEORY.md §6.6 (ii).
    """
    from noisealloc.verify.experiments.learners import independent_learners

    if schedule not in IL_SCHEDULES:
        raise ValueError(f"schedule must be one of {IL_SCHEDULES}; got {schedule!r}")
    i = IL_SCHEDULES.index(schedule)
    model = _il_model()
    lo, hi = IL_INTERVAL
    sched = _il_schedule(model, schedule, lo, hi)
    try:
        r = independent_learners(model, sched, N=int(N), lam_min=lo, lam_max=hi, cells=int(cells),
                                 seeds=int(seeds), rng=np.random.default_rng([int(seed), 80, i]))
    except ValueError as exc:  # a schedule that starves a cell: infinite loss, said in the table
        return {"schedule": schedule, "error": str(exc)}
    d = r.to_dict()
    d["schedule"] = schedule
    return d
