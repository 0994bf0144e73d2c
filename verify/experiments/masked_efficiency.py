r"""Masked diffusion trained by Adam: do square-root entropic schedules train faster on discrete data? (docs/THEORY.md §7)

One *cell* is (data set, schedule, seed, network): a masked denoiser
(:mod:`noisealloc.verify.experiments.masked_training`) trained for a fixed number of Adam steps at a fixed
batch size (equal compute for every schedule), with the held-out negative ELBO measured at fixed
checkpoints on one frozen evaluation set per data set (the same test strings and masks for every schedule
and seed).  :func:`cell_masked` is a sweep cell (kind ``"masked"`` of
:mod:`noisealloc.verify.experiments.sweep`), so cells are cached, resumable and run on Dask; its result
has the keys the training harness (:mod:`noisealloc.verify.experiments.training_harness`) reads, with
"dimension" the token: ``bits_per_dim`` is bits per token.

Data sets (:func:`prepare_masked`): ``digits-binarised`` (L = 64) and ``mnist-binarised[:PATH]``
(L = 784): a fixed test split never trained on; ``markov:V=..,L=..,stay=..``: a stationary Markov chain,
fresh training strings at every step, a fixed test sample, and a known floor: the negative ELBO of the
exact denoiser on :math:`[\lambda_{min}, \lambda_{max}]` is :math:`H(\lambda_{min}) - H(\lambda_{max})`
(within :math:`2\cdot10^{-4}` of :math:`H(\pi)` on :math:`[-10, 10]` for L = 64, by
:func:`~noisealloc.theory.masked.information.tail_bound`).

Schedules (:func:`make_masked_levels`), all in the log-odds :math:`\lambda`:

* ``"sqrt-entropic"`` / ``"entropic"``: :math:`p \propto \sqrt h` / :math:`p \propto h` of the law the
  library picks for the data (:func:`~noisealloc.theory.masked.data.resolve_masked_law`: the smoothed law of a
  sample, the chain itself);
* ``"sqrt-empirical"``: :math:`p \propto \sqrt h` of the training split as an empirical law (samples only);
* ``"sqrt-pilot"``: from a pilot run's per-level validation cross-entropies (:math:`h = \alpha L`);
* ``"online"``: the :class:`~noisealloc.theory.schedules.online.EntropyRateEstimator` of the masked process;
* ``"linear"`` (:math:`\alpha = 1 - t`), ``"cosine"`` (:math:`\alpha = \cos(\pi t/2)`), ``"uniform_lambda"``.

The entropic and pilot schedules are mixed with :data:`ENTROPIC_FLOOR` of the uniform density: the
training loss of practice (``loss_weight="elbo"``) divides by the schedule's density, which an unfloored
:math:`\sqrt h` of a memorising empirical law makes astronomically small at high :math:`\lambda`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from noisealloc.theory.errors import check_count, check_interval

__all__ = [
    "MASKED_SCHEDULES",
    "ENTROPIC_FLOOR",
    "MaskedData",
    "prepare_masked",
    "make_masked_levels",
    "cell_masked",
    "masked_network",
]

#: Every schedule name :func:`make_masked_levels` knows.
MASKED_SCHEDULES = ("sqrt-entropic", "entropic", "sqrt-empirical", "sqrt-pilot", "online", "linear", "cosine",
                    "uniform_lambda")
#: Uniform share mixed into the entropic and pilot schedules (module docstring).
ENTROPIC_FLOOR = 0.01
#: Seed of every split and evaluation set (one frozen set per data set, shared by all cells).
DATA_SEED = 20261204
#: Test strings drawn from a law (Markov chains), and the share of a sample held out.
LAW_TEST_STRINGS = 512
TEST_FRACTION = 1 / 6
#: Validation strings of the pilot run (from the training split, never the test split).
PILOT_VALIDATION = 256


@dataclass(frozen=True)
class MaskedData:
    """A data set of token strings prepared for the masked training comparison.

    Attributes
    ----------
    name : str
    train : ndarray (N, L) int or MaskedModel
        Training split, or a law to draw fresh strings from.
    test : ndarray (n, L) int
        Test strings, never trained on.
    V, L : int
    law : MaskedModel
        The law the entropic schedules use (``law_name`` says which).
    law_name : str
        ``"smoothed"``, ``"empirical"`` or ``"exact"``.
    empirical : MaskedModel or None
        The training split as an empirical law (samples only).
    exact : MaskedModel or None
        The data's exact law when known (a Markov chain): it gives the floor.
    """

    name: str
    train: object
    test: np.ndarray
    V: int
    L: int
    law: object
    law_name: str
    empirical: object
    exact: object


def prepare_masked(name: str, *, mnist=None) -> MaskedData:
    """Load and split a data set of token strings, deterministically (cached per process).

    Parameters
    ----------
    name : str
        ``"digits-binarised"``, ``"mnist-binarised[:PATH]"`` or ``"markov:V=..,L=..,stay=.."``.
    mnist : str or path, optional
        MNIST directory when the name carries none.

    Returns
    -------
    MaskedData
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a data name (digits-binarised, mnist-binarised[:PATH], markov:...); "
                         f"got {name!r}")
    return _prepare(name, None if mnist is None else str(mnist))


@functools.lru_cache(maxsize=8)
def _prepare(name: str, mnist) -> MaskedData:
    from noisealloc.theory.masked.data import load_masked_data, resolve_masked_law
    from noisealloc.theory.masked.finite import FiniteLaw
    from noisealloc.theory.masked.smoothed import SmoothedLaw
    from noisealloc.theory.models.datasets import load_images, parse_spec
    from noisealloc.verify.experiments.heldout import split_train_test

    parsed = parse_spec(name)
    if parsed.kind == "markov":
        chain, law_name, _ = load_masked_data(name)
        test = chain.sample_strings(LAW_TEST_STRINGS, rng=np.random.default_rng([DATA_SEED, 1]))
        return MaskedData(name, chain, test, chain.V, chain.L, chain, law_name, None, chain)
    if parsed.kind not in ("digits-binarised", "mnist-binarised"):
        raise ValueError(f"the masked training comparison takes digits-binarised, mnist-binarised[:PATH] or "
                         f"markov:V=..,L=..,stay=..; got {name!r}")
    images, _ = load_images(parsed, mnist=mnist)
    strings = (images > 0).astype(np.int64)
    n_test = max(2, int(round(TEST_FRACTION * strings.shape[0])))
    train, test = split_train_test(strings, n_test, rng=np.random.default_rng([DATA_SEED, 2]))
    train, test = train.astype(np.int64), test.astype(np.int64)
    law_name, _ = resolve_masked_law(parsed.kind)
    empirical = FiniteLaw(train, 2)
    law = SmoothedLaw(train, 2) if law_name == "smoothed" else empirical
    return MaskedData(name, train, test, 2, int(strings.shape[1]), law, law_name, empirical, None)


@functools.lru_cache(maxsize=32)
def _rate_profile(data_name: str, mnist, which: str, lo: float, hi: float, levels: int, samples: int):
    """:math:`h` of a law of ``data_name`` on ``levels`` uniform levels (Monte Carlo, fixed seed): (lam, h, se)."""
    from noisealloc.theory.masked.data import masked_profile

    d = _prepare(data_name, mnist)
    law = d.empirical if which == "empirical" else d.law
    lam = np.linspace(lo, hi, levels)
    prof = masked_profile(law, lam, n_samples=samples, rng=np.random.default_rng([DATA_SEED, 3]))
    h = prof.information.entropy_rate
    return lam, np.asarray(h.value, float), np.broadcast_to(np.asarray(h.stderr, float), lam.shape).copy()


def masked_network(kind: str, V: int, L: int, *, width: int = 256, depth: int = 3, d_model: int = 32,
                   layers: int = 2, heads: int = 2):
    """The denoiser of a cell: ``"mlp"`` (:class:`MaskedMLP`) or ``"transformer"`` (:class:`MaskedTransformer`).

    Parameters
    ----------
    kind : str
    V, L : int
    width, depth : int
        MLP size.
    d_model, layers, heads : int
        Transformer size.

    Returns
    -------
    MaskedMLP or MaskedTransformer
    """
    from noisealloc.verify.experiments.masked_training import MaskedMLP, MaskedTransformer

    if kind == "mlp":
        return MaskedMLP(V, L, width=int(width), depth=int(depth))
    if kind == "transformer":
        return MaskedTransformer(V, L, d_model=int(d_model), heads=int(heads), layers=int(layers))
    raise ValueError(f"network must be 'mlp' or 'transformer'; got {kind!r}")


def make_masked_levels(data: MaskedData, schedule: str, lam_min: float, lam_max: float, *, h_levels: int = 49,
                       h_samples: int = 1024, pilot: dict | None = None, mnist=None):
    """The level source of a schedule name (module docstring): a schedule, or a fresh online estimator.

    Parameters
    ----------
    data : MaskedData
    schedule : str
        One of :data:`MASKED_SCHEDULES`.
    lam_min, lam_max : float
        The training interval in log-odds.
    h_levels, h_samples : int
        Levels and Monte-Carlo draws of the entropy-rate profile.
    pilot : dict, optional
        Options of the pilot run (``"sqrt-pilot"``): ``steps``, ``batch_size``, ``learning_rate``,
        ``network`` and the network sizes, ``loss_weight``, ``warmup_fraction``.
    mnist : str, optional
        MNIST directory (the cache key of the profile).

    Returns
    -------
    schedule object or EntropyRateEstimator
    """
    from noisealloc.theory.masked import schedules as MS
    from noisealloc.theory.schedules.online import EntropyRateEstimator

    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
    if schedule not in MASKED_SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(MASKED_SCHEDULES)}; got {schedule!r}")
    if schedule == "online":
        return EntropyRateEstimator(lo, hi, n_bins=32, process="masked")
    if schedule == "linear":
        return MS.masked_linear(lam_min=lo, lam_max=hi)
    if schedule == "cosine":
        return MS.masked_cosine(lam_min=lo, lam_max=hi)
    if schedule == "uniform_lambda":
        return MS.masked_uniform_lambda(lam_min=lo, lam_max=hi)
    if schedule == "sqrt-pilot":
        lam, loss, se = _pilot_losses(data.name, mnist, lo, hi, tuple(sorted((pilot or {}).items())))
        return MS.masked_schedule_from_losses(lam, loss, loss_stderr=se, rule="sqrt-entropy", floor=ENTROPIC_FLOOR,
                                              name="sqrt-pilot").schedule
    if schedule == "sqrt-empirical" and data.empirical is None:
        raise ValueError(f"schedule 'sqrt-empirical' needs a sample of strings; {data.name!r} is a law")
    which = "empirical" if schedule == "sqrt-empirical" else "law"
    lam, h, se = _rate_profile(data.name, mnist, which, lo, hi, int(h_levels), int(h_samples))
    rule = "entropy" if schedule == "entropic" else "sqrt-entropy"
    return MS.masked_schedule_from_rate(lam, h, h_stderr=se, rule=rule, floor=ENTROPIC_FLOOR, name=schedule,
                                        method=f"{data.law_name if which == 'law' else 'empirical'} law, Monte Carlo"
                                        ).schedule


@functools.lru_cache(maxsize=8)
def _pilot_losses(data_name: str, mnist, lo: float, hi: float, options: tuple):
    """The pilot run: a uniform-lambda network's per-level cross-entropies on validation strings (never the test split)."""
    from noisealloc.theory.masked.schedules import masked_uniform_lambda
    from noisealloc.verify.experiments.masked_training import make_masked_heldout_set, train_masked

    d = _prepare(data_name, mnist)
    o = dict(options)
    if hasattr(d.train, "sample_strings"):
        train, val = d.train, d.train.sample_strings(PILOT_VALIDATION, rng=np.random.default_rng([DATA_SEED, 5]))
    else:
        if d.train.shape[0] <= 2 * PILOT_VALIDATION:
            raise ValueError(f"data {data_name!r}: the training split has {d.train.shape[0]} strings; the pilot "
                             f"needs more than {2 * PILOT_VALIDATION}")
        train, val = d.train[:-PILOT_VALIDATION], d.train[-PILOT_VALIDATION:]
    hs = make_masked_heldout_set(val, lo, hi, levels=33, rng=np.random.default_rng([DATA_SEED, 6]))
    net = masked_network(o.get("network", "mlp"), d.V, d.L, **{k: o[k] for k in ("width", "depth", "d_model",
                                                                                   "layers", "heads") if k in o})
    steps = int(o.get("steps", 500))
    run = train_masked(net, train, masked_uniform_lambda(lam_min=lo, lam_max=hi), steps=steps,
                       batch_size=int(o.get("batch_size", 128)), learning_rate=float(o.get("learning_rate", 1e-3)),
                       seed=0, heldout=hs, eval_steps=[steps], loss_weight=o.get("loss_weight", "elbo"),
                       warmup=max(1, int(round(float(o.get("warmup_fraction", 0.05)) * steps))))
    res = run.heldout[-1]
    # the fit needs positive losses; a level where no validation token was ever masked has CE = 0 exactly
    keep = res.per_level_ce > 0
    return res.lam[keep], res.per_level_ce[keep], np.maximum(res.per_level_ce_se[keep], 1e-12)


def cell_masked(*, data: str, schedule: str, seed: int = 0, network: str = "mlp", steps: int = 2000,
                batch_size: int = 128, learning_rate: float = 1e-3, width: int = 256, depth: int = 3,
                d_model: int = 32, layers: int = 2, heads: int = 2, lam_min: float = -10.0, lam_max: float = 10.0,
                checkpoints: int = 20, eval_levels: int = 33, eval_n: int = 256, h_levels: int = 49,
                h_samples: int = 1024, pilot_steps: int | None = None, online_refresh: int = 25,
                loss_weight: str = "elbo", warmup_fraction: float = 0.05, mnist: str | None = None,
                code: str | None = None) -> dict:
    """One cell of the masked training comparison: train, and return the held-out curve at the checkpoints.

    Parameters
    ----------
    data, schedule : str
        :func:`prepare_masked` and :func:`make_masked_levels`.
    seed : int
        Training seed (weights, strings, levels, masks).
    network : str
        ``"mlp"`` or ``"transformer"`` (:func:`masked_network`, with the sizes below).
    steps, batch_size, learning_rate, warmup_fraction, online_refresh, checkpoints
        Training recipe (as :func:`~noisealloc.verify.experiments.neural_efficiency.cell_neural`).
    width, depth, d_model, layers, heads : int
        Network sizes.
    lam_min, lam_max : float
        Interval of training and of the metric (log-odds).
    eval_levels, eval_n : int
        The frozen evaluation set: levels and test strings (a smaller split uses all its strings;
        ``eval_n_used`` says how many).
    h_levels, h_samples : int
        The entropy-rate profile of the entropic schedules.
    pilot_steps : int, optional
        Steps of the pilot run of ``"sqrt-pilot"`` (default ``steps // 4``).
    loss_weight : str
        ``"elbo"`` (alpha / p, the practice) or ``"alpha"``.
    mnist : str, optional
    code : str, optional
        Version tag (enters the sweep's cache key; unused here).

    Returns
    -------
    dict
        ``steps``, ``nats`` (negative ELBO, nats per string), ``nats_se``, ``bits_per_dim`` and
        ``bits_per_dim_se`` (bits per token), ``bayes_nats``/``bayes_nats_se`` (the exact law's floor, or
        None), ``entropy_nats`` (H(pi) when known), ``dim`` (L), ``network``, ``h_source``, ``eval_n``,
        ``eval_n_used``, ``loss_weight``, ``warmup``, ``online_refreshes``, ``first_refresh``, timings.
    """
    from noisealloc.verify.experiments.masked_training import make_masked_heldout_set, train_masked
    from noisealloc.verify.experiments.neural_efficiency import checkpoint_steps, warmup_steps

    d = prepare_masked(data, mnist=mnist)
    steps = check_count(steps, "steps")
    n_asked = check_count(eval_n, "eval_n")
    test = d.test[:n_asked]
    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
    hs = make_masked_heldout_set(test, lo, hi, levels=int(eval_levels), rng=np.random.default_rng([DATA_SEED, 4]))
    sizes = {"width": int(width), "depth": int(depth), "d_model": int(d_model), "layers": int(layers),
             "heads": int(heads)}
    pilot = {"steps": int(pilot_steps) if pilot_steps is not None else max(1, steps // 4),
             "batch_size": int(batch_size), "learning_rate": float(learning_rate), "network": network,
             "loss_weight": loss_weight, "warmup_fraction": float(warmup_fraction), **sizes}
    levels = make_masked_levels(d, schedule, lo, hi, h_levels=h_levels, h_samples=h_samples, pilot=pilot, mnist=mnist)
    net = masked_network(network, d.V, d.L, **sizes)
    run = train_masked(net, d.train, levels, steps=steps, batch_size=int(batch_size),
                       learning_rate=float(learning_rate), seed=int(seed), heldout=hs,
                       eval_steps=checkpoint_steps(steps, checkpoints), online_refresh=int(online_refresh),
                       loss_weight=loss_weight, warmup=warmup_steps(steps, warmup_fraction))
    floor = None
    if d.exact is not None:
        H = np.asarray(d.exact.exact_information(np.array([lo, hi])).conditional_entropy.value, float)
        floor = float(H[0] - H[1])
    return {
        "steps": [int(s) for s in run.eval_steps], "nats": [h.nats for h in run.heldout],
        "nats_se": [h.nats_se for h in run.heldout], "bits_per_dim": [h.bits_per_token for h in run.heldout],
        "bits_per_dim_se": [h.bits_per_token_se for h in run.heldout],
        "bayes_nats": floor, "bayes_nats_se": None if floor is None else 0.0,
        "entropy_nats": None if d.exact is None else float(d.exact.entropy),
        "lam": run.heldout[-1].lam.tolist(), "final_per_level_ce": run.heldout[-1].per_level_ce.tolist(),
        "compile_time": run.compile_time, "step_time": run.step_time, "eval_time": run.eval_time,
        "h_source": d.law_name, "dim": d.L, "network": run.network, "schedule_name": run.schedule,
        "online_refreshes": run.online_refreshes, "first_refresh": int(online_refresh) if schedule == "online" else None,
        "eval_n": n_asked, "eval_n_used": int(test.shape[0]), "loss_weight": run.loss_weight, "warmup": run.warmup,
    }
