r"""Regime (iii) of docs/THEORY.md §6.6: do neural denoisers trained by Adam reach a held-out loss sooner?

One *cell* is (data set, schedule, seed, loss weight): an EDM-preconditioned MLP (:mod:`noisealloc.verify.experiments.neural`)
trained for a fixed number of Adam steps at a fixed batch size (equal compute for every schedule),
with the held-out diffusion loss (:mod:`noisealloc.verify.experiments.heldout`) measured at fixed checkpoints on
one frozen evaluation set per data set (the same test examples and noise for every schedule and
seed).  :func:`cell_neural` is a sweep cell (``kind = "noisealloc.verify.experiments.neural_efficiency:cell_neural"``
in :mod:`noisealloc.verify.experiments.sweep`), so cells are cached and resumable and run on Dask.

Data sets (:func:`prepare_data`):

* ``dirac:...`` (the data SPEC of :mod:`noisealloc.theory.models.datasets`): a Dirac mixture; training draws
  and test examples are fresh draws of the law; its exact entropy rate builds the entropic schedules
  and its exact denoiser gives the gap to Bayes.
* ``digits`` / ``digits-binarised`` (pixels thresholded at 0 to :math:`\pm1`), ``mnist[:PATH]`` /
  ``mnist-binarised[:PATH]``: a fixed random test split never trained on; the entropic schedules come
  from the *empirical* entropy rate of the training split taken as a Dirac mixture.  Held-out images
  are not training atoms, so that :math:`h` describes a model that memorises its training set, even
  for binarised data (said in every output: ``h_source``).

Schedules (:func:`make_levels`): ``"sqrt-entropic"`` and ``"entropic"`` (:math:`p \propto \sqrt h`,
:math:`p \propto h` in :math:`\lambda`), the built-in heuristics shifted to the data scale
(``"edm_lognormal"``, ``"cosine"``, ``"logit_normal_sd3"``, ``"uniform_lambda"``, ...; through
:func:`noisealloc.verify.experiments.random_features.training_schedule`), ``"sqrt-pilot"`` (the two-stage route: the
per-level validation losses of a pilot run, fitted as ``noisealloc schedule --from-losses`` does;
:func:`pilot_schedule`), and ``"online"`` (the :class:`~noisealloc.theory.schedules.online.EntropyRateEstimator`
fed with the run's own losses).

Training (:func:`cell_neural`): the recipe of :func:`~noisealloc.verify.experiments.neural.train_denoiser`
(EDM's loss weight or an ablation weight, a linear learning-rate warm-up, the held-out loss of a weight
average), evaluated at step 0, at four early steps (plotted only) and at evenly spaced checkpoints
(:func:`checkpoint_steps`).  The comparison of schedules (paired per-seed t intervals, judged after the
start-up transient) is :mod:`noisealloc.verify.experiments.training_comparison`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from noisealloc.theory.errors import as_float_array, as_generator, check_count, check_finite, check_interval

__all__ = [
    "HEURISTICS",
    "NeuralData",
    "prepare_data",
    "make_levels",
    "cell_neural",
    "checkpoint_steps",
    "warmup_steps",
    "dependency_version",
    "cell_schedule",
    "entropy_rate_profile",
    "pilot_schedule",
    "PilotSchedule",
]

#: Heuristic schedules of the comparison (docs/THEORY.md §5), shifted to the data scale.
HEURISTICS = ("edm_lognormal", "cosine", "logit_normal_sd3", "uniform_lambda")
#: Test examples of the frozen evaluation set drawn from a data law (Dirac mixtures).
LAW_TEST_EXAMPLES = 512
#: Fraction of an image data set held out as its test split.
TEST_FRACTION = 1 / 6
#: Seed of every data split and evaluation set: one frozen set per data set, shared by all cells.
DATA_SEED = 20260611
#: Schedules already built in this process (keyed by data name and options); see make_levels.
_SCHEDULES: dict = {}
#: Manifold-smoothed laws of the image training splits built in this process (keyed by data name).
_POPULATION_LAWS: dict = {}
#: h_source of continuous image data: the population h of the training split's manifold-smoothed law.
POPULATION_SOURCE = "population (manifold-smoothed training split)"
#: Validation examples of the pilot run of the two-stage schedule (never the test split).
PILOT_VALIDATION = 256


@dataclass(frozen=True)
class NeuralData:
    r"""A data set prepared for regime (iii).

    Attributes
    ----------
    name : str
        The data name it was prepared from.
    train : ndarray (N, D) or data model
        Training split, or a law to draw fresh training examples from.
    test : ndarray, shape (n, D)
        Test examples (never trained on).
    h_model : DiracMixture
        Law whose entropy rate builds the entropic schedules (the law itself, or the training split
        as an empirical mixture).
    bayes : object or None
        Exact Bayes denoiser of the data law (Dirac mixtures), else None.
    sigma_data : float
        Per-coordinate standard deviation of the training data (preconditioning and heuristic shift).
    discrete : bool
        Discrete data (a Dirac mixture or binarised images).
    h_source : str
        Which entropy rate the entropic schedules use (``"exact (law)"``, ``"empirical (training split)"``
        or :data:`POPULATION_SOURCE`).
    """

    name: str
    train: object
    test: np.ndarray
    h_model: object
    bayes: object
    sigma_data: float
    discrete: bool
    h_source: str

    @property
    def population(self) -> bool:
        """The entropic schedules come from the population h of the training split (its manifold-smoothed
        law, :func:`~noisealloc.theory.schedules.entropic.population_schedule`) instead of ``h_model``."""
        return self.h_source == POPULATION_SOURCE

    @property
    def dim(self) -> int:
        """Data dimension D."""
        return int(self.test.shape[1])


def dependency_version() -> str:
    """Hash of every source a regime-(iii) cell depends on: the sweep engine's code version of
    :func:`cell_neural` (this module, the engine, the training stack, the metric, the schedules and
    the data models; :data:`noisealloc.verify.experiments.sweep.cache.CELL_DEPENDENCIES`).

    It keys the shared artifacts (:func:`entropy_rate_profile`, :func:`pilot_schedule`), so an edit of
    any of those sources invalidates them as it invalidates the cells' cache keys.

    Returns
    -------
    str
        16 hex digits.
    """
    from noisealloc.verify.experiments.sweep.cache import code_version

    return code_version("noisealloc.verify.experiments.neural_efficiency:cell_neural")


def prepare_data(name: str, *, mnist=None) -> NeuralData:
    """Load and split a data set of regime (iii) (module docstring), deterministically (cached per process).

    Parameters
    ----------
    name : str
        ``"dirac:..."``, ``"digits"``, ``"digits-binarised"``, ``"mnist[:PATH]"``, ``"mnist-binarised[:PATH]"``.
    mnist : str or Path, optional
        MNIST directory when the name carries no path.

    Returns
    -------
    NeuralData
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a data name (dirac:..., digits, digits-binarised, mnist[:PATH], "
                         f"mnist-binarised[:PATH]); got {name!r}")
    return _prepare_data(name, None if mnist is None else str(mnist))


@functools.lru_cache(maxsize=8)
def _prepare_data(name: str, mnist) -> NeuralData:
    from noisealloc.theory.schedules.data_scale import data_scale
    from noisealloc.theory.models.datasets import IMAGE_KINDS, load_data, load_images, parse_spec
    from noisealloc.theory.schedules.entropic import resolve_law
    from noisealloc.theory.models.dirac import DiracMixture
    from noisealloc.verify.experiments.heldout import split_train_test

    parsed = parse_spec(name)  # the one SPEC grammar (noisealloc.theory.models.datasets)
    if parsed.kind == "dirac":
        law = load_data(name)
        test = law.sample_x0(LAW_TEST_EXAMPLES, rng=np.random.default_rng([DATA_SEED, 1]))
        return NeuralData(name, law, test, law, law, data_scale(law), True, "exact (law)")
    if parsed.kind not in IMAGE_KINDS:
        raise ValueError(f"regime (iii) trains on dirac:..., {', '.join(IMAGE_KINDS)} (mnist with [:PATH]); "
                         f"got {name!r}")
    x, continuous = load_images(parsed, mnist=mnist)
    n_test = max(2, int(round(TEST_FRACTION * x.shape[0])))
    train, test = split_train_test(x, n_test, rng=np.random.default_rng([DATA_SEED, 2]))
    emp = DiracMixture(train, sample_of_continuous_law=continuous)
    # The law rule of the entropic schedules (resolve_law, the command line's too): binarised images are
    # discrete data, whose training split's empirical h is the estimate (held-out images are not atoms of
    # it, said in h_source); grey-level images are a sample of a continuous law, whose empirical h describes
    # memorisation (it collapses at high SNR): the schedules take the population h (docs/THEORY.md §2, §6.6).
    if resolve_law(emp).law == "smoothed":
        return NeuralData(name, train, test, emp, None, data_scale(emp), False, POPULATION_SOURCE)
    return NeuralData(name, train, test, emp, None, data_scale(emp), True, "empirical (training split)")


def make_levels(data: NeuralData, schedule: str, lam_min: float, lam_max: float, *, h_levels: int = 65,
                h_samples: int = 256, online_bins: int = 32, pilot: dict | None = None):
    """The level source of a schedule name: a schedule object, or a fresh online estimator.

    Parameters
    ----------
    data : NeuralData
    schedule : str
        ``"sqrt-entropic"``, ``"entropic"``, a heuristic of :data:`HEURISTICS` (or any built-in
        schedule name), ``"online"``, or ``"sqrt-pilot"`` (:func:`pilot_schedule`).
    lam_min, lam_max : float
        Training interval in log-SNR.
    h_levels, h_samples : int
        Levels of the entropy-rate profile and Monte-Carlo samples per level (entropic schedules).
    online_bins : int
        Bins of the online estimator.
    pilot : dict, optional
        Options of :func:`pilot_schedule` (``"sqrt-pilot"`` only).

    Returns
    -------
    schedule object or EntropyRateEstimator
    """
    from noisealloc.theory.schedules.online import EntropyRateEstimator
    from noisealloc.verify.experiments.random_features import ENTROPIC_SCHEDULES, training_schedule

    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
    if schedule == "online":
        return EntropyRateEstimator(lo, hi, n_bins=int(online_bins))  # stateful: never shared
    key = (data.name, schedule, lo, hi, int(h_levels), int(h_samples), tuple(sorted((pilot or {}).items())))
    if key not in _SCHEDULES:
        # Deterministic in its key.  The costly parts (an entropy-rate profile: MNIST's population h is
        # about a minute of Monte Carlo; a pilot run) are shared artifacts of the run
        # (verify.sweep.shared_artifact): computed once for all seeds, both entropic rules and every
        # worker, and read back on a rerun.
        if schedule == "sqrt-pilot":
            _SCHEDULES[key] = pilot_schedule(data, lo, hi, **(pilot or {})).schedule
        elif schedule in ENTROPIC_SCHEDULES:
            from noisealloc.theory.schedules.entropic import schedule_from_rate

            r = entropy_rate_profile(data, lo, hi, h_levels=int(h_levels), h_samples=int(h_samples))
            _SCHEDULES[key] = schedule_from_rate(np.asarray(r["lam"], float), np.asarray(r["h"], float),
                                                 h_stderr=np.asarray(r["h_stderr"], float),
                                                 rule=ENTROPIC_SCHEDULES[schedule], coordinate="lambda", floor=0.0,
                                                 method=r["method"], name=schedule).schedule
        else:
            _SCHEDULES[key] = training_schedule(data.h_model, schedule, lo, hi)
    return _SCHEDULES[key]


def entropy_rate_profile(data: NeuralData, lam_min: float, lam_max: float, *, h_levels: int = 65,
                         h_samples: int = 256) -> dict:
    r"""The entropy-rate profile :math:`h(\lambda)` the entropic schedules of ``data`` are built from.

    :math:`h(\lambda_i) = \tfrac12 e^{\lambda_i}\,\mathrm{mmse}(\lambda_i)` per unit :math:`\lambda` on
    ``h_levels`` uniform levels of ``[lam_min, lam_max]``: of the law itself (Dirac mixtures), of the
    training split as an empirical mixture (binarised images), or of the split's manifold-smoothed law
    (grey-level images, :func:`~noisealloc.theory.schedules.entropic.population_schedule`), as ``data.h_source``
    says.  Monte-Carlo randomness is fixed (``DATA_SEED``), so the profile is a deterministic function of
    its arguments; it is a shared artifact of the run (:func:`~noisealloc.verify.experiments.sweep.cache.shared_artifact`).

    Parameters
    ----------
    data : NeuralData
    lam_min, lam_max : float
        Interval in log-SNR.
    h_levels, h_samples : int
        Levels, and Monte-Carlo samples per level where h is estimated by Monte Carlo.

    Returns
    -------
    dict
        ``lam``, ``h``, ``h_stderr`` (lists, nats per unit log-SNR) and ``method``.
    """
    from noisealloc.verify.experiments.sweep.cache import shared_artifact

    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
    lam = np.linspace(lo, hi, int(h_levels))
    rng = np.random.default_rng([DATA_SEED, 3])

    def compute() -> dict:
        if data.population:
            from noisealloc.theory.schedules.entropic import population_schedule
            from noisealloc.theory.models.smoothed import smoothed_empirical_law

            if data.name not in _POPULATION_LAWS:  # neighbour search and local PCAs: once per data set
                _POPULATION_LAWS[data.name] = smoothed_empirical_law(data.train)
            r = population_schedule(data.train, lam, rule="sqrt-entropy", n_samples=int(h_samples), rng=rng,
                                    law=_POPULATION_LAWS[data.name]).result
            return {"lam": r.lam, "h": r.h, "h_stderr": r.h_stderr, "method": r.method}
        from noisealloc.theory.information.rates import model_entropy_rate

        est = model_entropy_rate(data.h_model, lam, coordinate="lambda", n_samples=int(h_samples), rng=rng)
        h = np.asarray(est.value, dtype=np.float64)
        return {"lam": lam, "h": h, "h_stderr": np.broadcast_to(np.asarray(est.stderr, dtype=np.float64), h.shape),
                "method": est.method}

    return shared_artifact("fig6 entropy rate", {"data": data.name, "h_source": data.h_source, "interval": [lo, hi],
                                                 "h_levels": int(h_levels), "h_samples": int(h_samples),
                                                 "code": dependency_version()}, compute)


@dataclass(frozen=True)
class PilotSchedule:
    """The two-stage schedule: a pilot run's per-level validation losses, fitted, made a schedule.

    Attributes
    ----------
    schedule : TabulatedSchedule
        Square-root entropic schedule of the fitted profile (named ``"sqrt-pilot"``).
    lam, loss, loss_se : ndarray
        The pilot's per-level validation x0 losses (the rows a ``--from-losses`` CSV would hold).
    steps : int
        Pilot training steps.
    """

    schedule: object
    lam: np.ndarray
    loss: np.ndarray
    loss_se: np.ndarray
    steps: int


def pilot_schedule(data: NeuralData, lam_min: float, lam_max: float, *, steps: int = 500, batch_size: int = 128,
                   learning_rate: float = 2e-3, width: int = 128, depth: int = 3, levels: int = 33,
                   seed: int = 0, loss_weight: str = "edm", warmup_fraction: float = 0.05) -> PilotSchedule:
    r"""Square-root entropic schedule from a pilot run's held-out losses: the practitioner's two-stage route.

    A pilot network is trained with the uniform-:math:`\lambda` schedule on the training data minus a
    validation part (:data:`PILOT_VALIDATION` rows of the training split, or fresh draws of a data
    law; never the test split); its per-level x0 losses on the validation part, with their standard
    errors, are fitted by the monotone profile of ``noisealloc schedule --from-losses``
    (:func:`~noisealloc.theory.information.from_losses.fit_mmse_profile`), turned into
    :math:`h = \tfrac12 e^\lambda \widehat{\mathrm{mmse}}` and into :math:`p \propto \sqrt h`
    (:func:`~noisealloc.theory.schedules.entropic.schedule_from_rate`).

    Parameters
    ----------
    data : NeuralData
    lam_min, lam_max : float
        Interval of the pilot, of its validation grid and of the schedule.
    steps, batch_size : int
        Pilot training.
    learning_rate : float
    width, depth : int
        Pilot MLP.
    levels : int
        Validation grid levels (>= 3 for the profile fit).
    seed : int
        Pilot training seed.
    loss_weight : str
        Training loss weight (:func:`~noisealloc.theory.weights.loss_weight`); the fitted losses are the
        unweighted per-level x0 losses whatever the weight.
    warmup_fraction : float
        Share of the pilot's steps spent warming the step size up.

    Returns
    -------
    PilotSchedule

    References
    ----------
    docs/THEORY.md §5 (tabulated density from measured per-level losses), §6.6 (iii); README ("An entropic
    schedule for your own training loop").
    """
    from noisealloc.theory.schedules.entropic import schedule_from_rate
    from noisealloc.theory.information.from_losses import fit_mmse_profile
    from noisealloc.verify.experiments.sweep.cache import shared_artifact

    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
    opts = {"steps": int(steps), "batch_size": int(batch_size), "learning_rate": float(learning_rate),
            "width": int(width), "depth": int(depth), "levels": int(levels), "seed": int(seed),
            "loss_weight": str(loss_weight), "warmup_fraction": float(warmup_fraction)}
    # The pilot run is a shared artifact of the run: trained once, not once per worker and seed.
    res = shared_artifact("fig6 pilot losses", {"data": data.name, "interval": [lo, hi], **opts,
                                                "code": dependency_version()},
                          lambda: _pilot_losses(data, lo, hi, **opts))
    lam, loss, loss_se = (np.asarray(res[k], dtype=np.float64) for k in ("lam", "loss", "loss_se"))
    prof = fit_mmse_profile(lam, loss, loss_se, rng=np.random.default_rng([DATA_SEED, 7]))
    sched = schedule_from_rate(lam, prof.entropy_rate(lam), rule="sqrt-entropy", name="sqrt-pilot",
                               method="pilot run: monotone I-spline fit of validation x0 losses").schedule
    return PilotSchedule(sched, lam, loss, loss_se, int(steps))


def _pilot_losses(data: NeuralData, lo: float, hi: float, *, steps: int, batch_size: int, learning_rate: float,
                  width: int, depth: int, levels: int, seed: int, loss_weight: str, warmup_fraction: float) -> dict:
    """The pilot run of :func:`pilot_schedule`: its per-level validation x0 losses (``lam``, ``loss``, ``loss_se``)."""
    from noisealloc.theory.schedules.builtin import uniform_lambda
    from noisealloc.verify.experiments.heldout import make_heldout_set
    from noisealloc.verify.experiments.neural import MLPDenoiser, train_denoiser

    if hasattr(data.train, "sample_x0"):
        train, val = data.train, data.train.sample_x0(PILOT_VALIDATION, rng=np.random.default_rng([DATA_SEED, 5]))
    else:
        if data.train.shape[0] <= 2 * PILOT_VALIDATION:
            raise ValueError(f"data {data.name!r}: the training split has {data.train.shape[0]} rows; the pilot "
                             f"needs more than {2 * PILOT_VALIDATION}")
        train, val = data.train[:-PILOT_VALIDATION], data.train[-PILOT_VALIDATION:]
    hs = make_heldout_set(val, lo, hi, levels=int(levels), rng=np.random.default_rng([DATA_SEED, 6]))
    net = MLPDenoiser(data.dim, data.sigma_data, width=int(width), depth=int(depth))
    run = train_denoiser(net, train, uniform_lambda(lam_min=lo, lam_max=hi), steps=int(steps),
                         batch_size=int(batch_size), learning_rate=float(learning_rate), seed=int(seed),
                         heldout=hs, eval_steps=[int(steps)], loss_weight=loss_weight,
                         warmup=warmup_steps(int(steps), warmup_fraction))
    res = run.heldout[-1]
    return {"lam": res.lam, "loss": res.per_level_mse, "loss_se": res.per_level_mse_se}


def checkpoint_steps(steps: int, checkpoints: int, *, early: int = 4) -> list[int]:
    """Evaluation steps of a training cell: step 0, ``checkpoints`` evenly spaced to ``steps`` (the judged
    ones), and ``early`` log-spaced ones in the first part of the run (plotted, never judged).

    Parameters
    ----------
    steps, checkpoints, early : int
        Run length, evenly spaced checkpoints (>= 1) and early ones (``steps / 2**(j + 5)``, j < early).

    Returns
    -------
    list of int
        Sorted, distinct, in ``[0, steps]``.

    Examples
    --------
    >>> checkpoint_steps(1000, 4, early=2)
    [0, 16, 31, 250, 500, 750, 1000]
    """
    steps, k = check_count(steps, "steps"), check_count(checkpoints, "checkpoints")
    if k < 1 or steps < 1:
        raise ValueError(f"steps and checkpoints must be >= 1; got steps={steps}, checkpoints={k}")
    even = {int(round(steps * j / k)) for j in range(1, k + 1)}
    first = {int(round(steps / 2.0 ** (j + 5))) for j in range(check_count(early, "early"))}
    return sorted({0, *even, *(s for s in first if s > 0)})


def warmup_steps(steps: int, fraction: float) -> int:
    """Warm-up steps of a run: ``max(1, round(fraction * steps))``, ``fraction`` in [0, 1].

    Parameters
    ----------
    steps : int
        Run length.
    fraction : float
        Share of the run spent warming up, in [0, 1].

    Returns
    -------
    int

    Examples
    --------
    >>> warmup_steps(1500, 0.05)
    75
    """
    f = float(fraction)
    if not 0.0 <= f <= 1.0:
        raise ValueError(f"warmup_fraction must lie in [0, 1]; got {fraction!r}")
    return max(1, int(round(f * int(steps))))


def cell_neural(*, data: str, schedule: str, seed: int = 0, steps: int = 2000, batch_size: int = 128,
                learning_rate: float = 2e-3, width: int = 128, depth: int = 3, lam_min: float = -10.0,
                lam_max: float = 10.0, checkpoints: int = 20, eval_levels: int = 33, eval_n: int = 256,
                h_levels: int = 65, h_samples: int = 256, pilot_steps: int | None = None, online_refresh: int = 25,
                loss_weight: str = "edm", warmup_fraction: float = 0.05, mnist: str | None = None,
                code: str | None = None) -> dict:
    """One cell of regime (iii): train, and return the held-out curve at the checkpoints.

    Parameters
    ----------
    data, schedule : str
        See :func:`prepare_data` and :func:`make_levels`.
    seed : int
        Training seed (network, examples, levels, noise).
    steps, batch_size : int
        Adam steps and examples per step.
    learning_rate : float
        Adam's step size after the warm-up.
    width, depth : int
        MLP size.
    lam_min, lam_max : float
        Interval of training and of the metric.
    checkpoints : int
        Evenly spaced evaluations (:func:`checkpoint_steps`; plus step 0 and four early ones).
    eval_levels, eval_n : int
        Grid levels and test examples of the frozen evaluation set (the first ``eval_n`` test rows; a
        test split with fewer rows uses all of them, and the result says how many: ``eval_n_used``).
    h_levels, h_samples : int
        Entropy-rate profile of the entropic schedules.
    pilot_steps : int, optional
        Steps of the pilot run of ``"sqrt-pilot"`` (default ``steps // 4``; same network and batch).
    online_refresh : int
        Steps between re-reads of the online estimator's schedule (``"online"``).
    loss_weight : str
        Training loss weight, the same for every schedule (:func:`~noisealloc.theory.weights.loss_weight`:
        ``"edm"``, ``"elbo"`` or ``"none"``).
    warmup_fraction : float
        Share of the run over which Adam's step size rises linearly from 0.
    mnist : str, optional
        MNIST directory.
    code : str, optional
        Version tag of the code the cell depends on (enters the sweep's cache key; unused here).

    Returns
    -------
    dict
        ``steps`` (checkpoint list), ``nats``, ``nats_se`` (over test examples), ``bits_per_dim``,
        ``bits_per_dim_se``, ``gap_nats``/``gap_se`` and ``bayes_nats``/``bayes_nats_se`` (the exact
        denoiser's loss on the same set; Dirac mixtures), ``final_per_level_mse``, ``lam``, timings
        (``compile_time``, ``step_time``, ``eval_time``), ``h_source``, ``sigma_data``, ``network``,
        ``eval_n``/``eval_n_used``, ``loss_weight``, ``warmup``, ``online_refreshes``,
        ``first_refresh`` (step of the online estimator's first schedule, None for a fixed schedule).
    """
    from noisealloc.verify.experiments.heldout import bayes_heldout_loss, make_heldout_set
    from noisealloc.verify.experiments.neural import MLPDenoiser, train_denoiser

    d = prepare_data(data, mnist=mnist)
    steps = check_count(steps, "steps")
    ev_steps = checkpoint_steps(steps, checkpoints)
    n_asked = check_count(eval_n, "eval_n")
    test = d.test[:n_asked]
    hs = make_heldout_set(test, lam_min, lam_max, levels=int(eval_levels), rng=np.random.default_rng([DATA_SEED, 4]),
                          bayes=d.bayes)
    pilot = _pilot_options(steps, pilot_steps, batch_size, learning_rate, width, depth, loss_weight, warmup_fraction)
    levels = make_levels(d, schedule, lam_min, lam_max, h_levels=h_levels, h_samples=h_samples, pilot=pilot)
    net = MLPDenoiser(d.dim, d.sigma_data, width=int(width), depth=int(depth))
    refresh = int(online_refresh)
    run = train_denoiser(net, d.train, levels, steps=steps, batch_size=int(batch_size),
                         learning_rate=float(learning_rate), seed=int(seed), heldout=hs, eval_steps=ev_steps,
                         online_refresh=refresh, loss_weight=loss_weight, warmup=warmup_steps(steps, warmup_fraction))
    last = run.heldout[-1]
    floor = bayes_heldout_loss(hs) if d.bayes is not None else None
    return {
        "steps": [int(s) for s in run.eval_steps], "nats": run.nats.tolist(), "nats_se": run.nats_se.tolist(),
        "bits_per_dim": [h.bits_per_dim for h in run.heldout],
        "bits_per_dim_se": [h.bits_per_dim_se for h in run.heldout],
        "gap_nats": None if last.gap_nats is None else [h.gap_nats for h in run.heldout],
        "gap_se": None if last.gap_se is None else [h.gap_se for h in run.heldout],
        "bayes_nats": None if floor is None else floor.nats, "bayes_nats_se": None if floor is None else floor.nats_se,
        "lam": last.lam.tolist(), "final_per_level_mse": last.per_level_mse.tolist(),
        "final_per_level_mse_se": last.per_level_mse_se.tolist(),
        "compile_time": run.compile_time, "step_time": run.step_time, "eval_time": run.eval_time,
        "h_source": d.h_source, "sigma_data": d.sigma_data, "network": run.network, "dim": d.dim,
        "schedule_name": run.schedule, "online_refreshes": run.online_refreshes,
        "first_refresh": refresh if schedule == "online" else None,
        "eval_n": n_asked, "eval_n_used": int(test.shape[0]), "loss_weight": run.loss_weight, "warmup": run.warmup,
    }


def _pilot_options(steps, pilot_steps, batch_size, learning_rate, width, depth, loss_weight="edm",
                   warmup_fraction=0.05) -> dict:
    """The pilot run of a cell: ``pilot_steps`` (default a quarter of the cell's steps), same network, batch,
    loss weight and warm-up share."""
    return {"steps": int(pilot_steps) if pilot_steps is not None else max(1, int(steps) // 4),
            "batch_size": int(batch_size), "learning_rate": float(learning_rate), "width": int(width),
            "depth": int(depth), "loss_weight": str(loss_weight), "warmup_fraction": float(warmup_fraction)}


def cell_schedule(*, data: str, schedule: str, steps: int = 2000, batch_size: int = 128, learning_rate: float = 2e-3,
                  width: int = 128, depth: int = 3, lam_min: float = -10.0, lam_max: float = 10.0, h_levels: int = 65,
                  h_samples: int = 256, pilot_steps: int | None = None, loss_weight: str = "edm",
                  warmup_fraction: float = 0.05, mnist: str | None = None) -> dict:
    """Build the costly part of a schedule of regime (iii) once, before the training cells that use it.

    The entropy-rate profile (``"sqrt-entropic"``, ``"entropic"``) or the pilot run (``"sqrt-pilot"``)
    is kept as a shared artifact of the run (:func:`~noisealloc.verify.experiments.sweep.cache.shared_artifact`), which
    :func:`cell_neural` with the same options then reads instead of computing it on every worker.

    Parameters
    ----------
    data, schedule : str
        As :func:`cell_neural` (a schedule without a costly part is only built).
    steps, batch_size, learning_rate, width, depth, pilot_steps, loss_weight, warmup_fraction
        The training options of :func:`cell_neural`; they enter only the pilot run's.
    lam_min, lam_max : float
        Training interval in log-SNR.
    h_levels, h_samples : int
        Entropy-rate profile of the entropic schedules.
    mnist : str, optional
        MNIST directory.

    Returns
    -------
    dict
        ``schedule`` (its name), ``knots`` (tabulated knots), ``seconds`` (time to build it here).
    """
    import time

    t0 = time.perf_counter()
    d = prepare_data(data, mnist=mnist)
    pilot = _pilot_options(steps, pilot_steps, batch_size, learning_rate, width, depth, loss_weight, warmup_fraction)
    levels = make_levels(d, schedule, lam_min, lam_max, h_levels=h_levels, h_samples=h_samples, pilot=pilot)
    return {"schedule": schedule, "knots": int(np.size(getattr(levels, "knots", []))),
            "seconds": round(time.perf_counter() - t0, 3)}
