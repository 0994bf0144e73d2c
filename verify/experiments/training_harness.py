r"""The training-comparison harness: schedules compared by training networks, one pipeline for every figure.

A *training comparison* trains one network per (data set, schedule, seed) with the same recipe and
compute, evaluates a held-out loss at fixed checkpoints, and compares every schedule with a reference
by :func:`~noisealloc.verify.experiments.training_comparison.compare_training` (judged after the
start-up transient; paired Student-t intervals over seeds).  Figure 6's regime (iii) (Gaussian noise,
:func:`~noisealloc.verify.experiments.neural_efficiency.cell_neural`) runs on it, and so can any later
training figure: the cell kind, its options, the data sets and the schedules are arguments.

The pieces:

* :func:`sweep_records` -- the cells of one sweep through the Dask sweep engine
  (:mod:`noisealloc.verify.experiments.sweep`), cached and resumable, with one error naming what is missing;
* :func:`train_cells` -- the (schedule x seed) cells of one data set and option set;
* :func:`summarise_training` -- one data set's row: seed-mean curves, final losses (nats and bits per
  dimension, mean +- s.e. over seeds), the Bayes floor where the cells report one, and the comparison;
* :func:`weight_ablation` -- the loss-weight ablation: the final paired difference of two schedules
  under each training loss weight, and whether its sign changes.

The comparison's rules (which schedule is the reference, the late targets, the equal-compute checkpoints,
the target that decides the claims) are :data:`REFERENCE`, :data:`TARGET_FRACTIONS`,
:data:`EQUAL_COMPUTE_AT` and :data:`VERDICT_FRACTION`, here and nowhere else.

References
----------
docs/THEORY.md §6.6 (regime iii, training protocol, comparison).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = [
    "DATA_CLASSES",
    "is_discrete",
    "REFERENCE",
    "TARGET_FRACTIONS",
    "EQUAL_COMPUTE_AT",
    "VERDICT_FRACTION",
    "make_spec",
    "sweep_records",
    "train_cells",
    "add_counts",
    "final_stats",
    "summarise_training",
    "weight_ablation",
]

#: The schedule every other one is compared with (the claims are about it).
REFERENCE = "sqrt-entropic"
#: Late targets, as shares of the better of the compared pair's improvement (compare_training).
TARGET_FRACTIONS = (0.9, 1.0)
#: Equal-compute checkpoints, as shares of the run (compare_training).
EQUAL_COMPUTE_AT = (0.25, 0.5, 1.0)
#: The late target that decides claims (the other is reported beside it).
VERDICT_FRACTION = 0.9
#: How the training figures (6 and 7) and claims C4/C5 class a data set: by the values its samples take.
DATA_CLASSES = ("discrete: samples take values in a finite set (a Dirac mixture's atoms, binarised images, "
                "token strings); continuous: grey-level images (digits, MNIST: the smoothed law of their images) "
                "and manifolds")


def is_discrete(data: str) -> bool:
    """True for data whose samples take values in a finite set (:data:`DATA_CLASSES`).

    Parameters
    ----------
    data : str
        A data-set name of figures 6 and 7 (``dirac:...``, ``digits``, ``digits-binarised``,
        ``mnist[-binarised][:PATH]``, ``markov:...``, ``npz:...``).

    Returns
    -------
    bool
    """
    name = str(data)
    return name.startswith(("dirac", "markov", "npz")) or "binarised" in name.split(":")[0]


def make_spec(name: str, kind: str, fixed: dict, grid: dict):
    """A sweep specification from its parts (:func:`~noisealloc.verify.experiments.sweep.spec.parse_sweep`).

    Parameters
    ----------
    name, kind : str
        The sweep's name and cell kind.
    fixed, grid : dict
        Options shared by every cell, and the axes of the grid.

    Returns
    -------
    SweepSpec
    """
    from noisealloc.verify.experiments.sweep.spec import parse_sweep

    return parse_sweep({"sweep": {"name": name, "kind": kind}, "fixed": fixed, "grid": grid})


def _run_sweep(spec, cells_dir, scheduler, shared_dir=None):
    from noisealloc.verify.experiments.sweep.engine import run_sweep

    return run_sweep(spec, cells_dir, scheduler=scheduler, n_workers=2, shared_dir=shared_dir)


def sweep_records(spec, cells_dir, *, scheduler=None, progress=None, label: str = "", shared_dir=None,
                  runner=None) -> tuple[list, dict]:
    """Every cell record of ``spec`` (cached ones read, missing ones computed) and the counters of this call.

    Parameters
    ----------
    spec : SweepSpec
    cells_dir : path
        The sweep's folder (one sweep per folder).
    scheduler : str, optional
        Address of a Dask scheduler (default: a LocalCluster of 2 workers).
    progress : callable, optional
        ``progress(text)``, told the number of cells before and the counters after.
    label : str
        Names the sweep in messages.
    shared_dir : path, optional
        Artifacts shared by the cells (:func:`~noisealloc.verify.experiments.sweep.cache.shared_artifact`).
    runner : callable, optional
        ``runner(spec, cells_dir, scheduler, shared_dir) -> SweepResult`` (default: the sweep engine).

    Returns
    -------
    records : list of dict
    counts : dict
        ``total``, ``cached``, ``computed``.

    Raises
    ------
    RuntimeError
        Naming ``label`` when a cell is missing or failed (its error is in ``cells_dir/failed``; a rerun
        retries it and reuses every finished cell).
    """
    if progress is not None:
        progress(f"{label} {spec.n_cells} cells")
    res = (runner or _run_sweep)(spec, cells_dir, scheduler, shared_dir)
    if not res.complete:
        failed = list(getattr(res, "failed", []) or [])
        why = f"; first failure: {failed[0]['error']}" if failed else ""
        missing = sum(r is None for r in res.records)
        raise RuntimeError(f"{label}: {missing} of {res.n_cells} cells missing{why} "
                           f"(finished cells are kept in {cells_dir}; a rerun computes only the others)")
    counts = {"total": res.n_cells, "cached": res.n_cached, "computed": res.n_computed}
    if progress is not None:
        progress(f"{label} {res.n_cached} cached, {res.n_computed} computed")
    return list(res.records), counts


def train_cells(kind: str, data: str, schedules, seeds, fixed: dict, cells_dir, *, label: str, scheduler=None,
                progress=None, shared_dir=None, runner=None) -> tuple[dict, dict]:
    """The (schedule x seed) training cells of one data set and option set.

    Parameters
    ----------
    kind : str
        The cell kind (a key of :data:`~noisealloc.verify.experiments.sweep.spec.CELL_KINDS`, e.g. ``"neural"``).
    data : str
        The data set (the cells' ``data`` option).
    schedules, seeds : sequence
        The grid.
    fixed : dict
        Every other option of the cells (``loss_weight`` among them).
    cells_dir : path
        The sweep's folder.
    label : str
        Names the sweep's messages, and the sweep (``<kind>-<label>`` with every run of characters other than
        letters, digits, ``.``, ``_`` and ``-`` made one ``-``).
    scheduler, progress, shared_dir, runner
        As :func:`sweep_records`.

    Returns
    -------
    results : dict
        ``(schedule, seed) -> cell result``.
    counts : dict
        ``total``, ``cached``, ``computed`` and ``timings`` (per cell: data, schedule, seed, loss weight,
        seconds and the training timings the cell reports).

    Raises
    ------
    RuntimeError
        A cell is missing, or its result is an error.
    """
    import re

    name = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{kind}-{label}").strip("-")[:100]
    spec = make_spec(name, kind, {**fixed, "data": data},
                     {"schedule": list(schedules), "seed": list(seeds)})
    records, counts = sweep_records(spec, Path(cells_dir), scheduler=scheduler, progress=progress, label=label,
                                    shared_dir=shared_dir, runner=runner)
    out = {}
    for rec in records:
        c = rec["config"]
        if "error" in rec["result"]:
            raise RuntimeError(f"{label}: cell {c} failed: {rec['result']['error']}")
        out[(c["schedule"], c["seed"])] = rec["result"]
    counts["timings"] = [{"data": data, "schedule": r["config"]["schedule"], "seed": r["config"]["seed"],
                          "loss_weight": fixed.get("loss_weight"), "seconds": r["seconds"],
                          "compile_time": r["result"].get("compile_time"), "step_time": r["result"].get("step_time"),
                          "eval_time": r["result"].get("eval_time")} for r in records]
    return out, counts


def add_counts(total: dict, counts: dict) -> None:
    """Add the counters (and timings) of one sweep to a running total, in place.

    Parameters
    ----------
    total : dict
        The running total (``total``, ``cached``, ``computed``, ``timings``), updated.
    counts : dict
        One sweep's counters.

    Returns
    -------
    None
    """
    for k in ("total", "cached", "computed"):
        total[k] = total.get(k, 0) + counts[k]
    total.setdefault("timings", []).extend(counts.get("timings", []))


def final_stats(results: dict, schedules, seeds, key: str) -> dict:
    r"""Mean and standard error over seeds of a per-checkpoint quantity at the last checkpoint.

    .. math:: \bar y = \frac1S\sum_i y_i, \qquad \mathrm{se} = \mathrm{sd}(y)/\sqrt S \quad (\mathrm{ddof} = 1).

    Parameters
    ----------
    results : dict
        ``(schedule, seed) -> cell result`` holding a list under ``key``.
    schedules, seeds : sequence
    key : str
        E.g. ``"nats"`` or ``"bits_per_dim"``.

    Returns
    -------
    dict
        ``schedule -> {"mean", "se"}``.
    """
    out = {}
    for s in schedules:
        v = np.array([results[(s, j)][key][-1] for j in seeds], dtype=np.float64)
        out[s] = {"mean": float(v.mean()), "se": float(v.std(ddof=1) / np.sqrt(v.size))}
    return out


def summarise_training(data: str, results: dict, schedules, seeds, *, discrete: bool, reference: str = REFERENCE,
                       label: str | None = None) -> dict:
    """One data set's row of a training comparison.

    Parameters
    ----------
    data : str
        The data set.
    results : dict
        ``(schedule, seed) -> cell result`` with ``steps``, ``nats``, ``bits_per_dim`` (per checkpoint),
        ``nats_se`` (over test examples), ``dim``, ``eval_n``/``eval_n_used`` and optionally ``bayes_nats``/
        ``bayes_nats_se`` (the floor), ``first_refresh``/``online_refreshes`` (an ``"online"`` schedule).
    schedules, seeds : sequence
    discrete : bool
        The data set's kind, as the report classifies it.
    reference : str
        The schedule the others are compared with.
    label : str, optional
        Name shown for the data set (default ``data``).

    Returns
    -------
    dict
        ``data``, ``discrete``, ``steps``, ``run_steps``, ``mean``/``stderr`` (seed-mean curves and their
        standard errors), ``final_nats``/``final_bits_per_dim`` (:func:`final_stats`), ``final_test_se``,
        ``eval_n``/``eval_n_used``, ``floor`` (None without a floor), ``online_first_refresh``,
        ``online_refreshes``, ``comparison`` (:func:`compare_training`), and the cells' descriptive keys
        (``dim``, ``h_source``, ``sigma_data``, ``network``).
    """
    from noisealloc.verify.experiments.training_comparison import compare_training

    schedules, seeds = list(schedules), list(seeds)
    first = results[(schedules[0], seeds[0])]
    steps = first["steps"]
    curves = {s: np.array([results[(s, j)]["nats"] for j in seeds]) for s in schedules}
    cmp = compare_training(steps, curves, reference=reference, fractions=TARGET_FRACTIONS, at=EQUAL_COMPUTE_AT)
    final = final_stats(results, schedules, seeds, "nats")
    floor = None
    if first.get("bayes_nats") is not None:
        best = min(final, key=lambda s: final[s]["mean"])
        floor = {"nats": first["bayes_nats"], "se": first["bayes_nats_se"], "best": best,
                 "factor": final[best]["mean"] / first["bayes_nats"],
                 "rule": "the exact Bayes denoiser's held-out loss on the same frozen set (no denoiser beats it "
                         "in expectation); factor = best schedule's final mean loss / floor"}
    online = results.get(("online", seeds[0]))
    return {
        "data": label or data, "discrete": bool(discrete),
        **{k: first.get(k) for k in ("dim", "h_source", "sigma_data", "network")},
        "steps": steps, "run_steps": steps[-1],
        "mean": {s: curves[s].mean(axis=0).tolist() for s in schedules},
        "stderr": {s: (curves[s].std(axis=0, ddof=1) / np.sqrt(len(seeds))).tolist() for s in schedules},
        "final_nats": final, "final_bits_per_dim": final_stats(results, schedules, seeds, "bits_per_dim"),
        "final_test_se": {s: float(np.mean([results[(s, j)]["nats_se"][-1] for j in seeds])) for s in schedules},
        "eval_n": first["eval_n"], "eval_n_used": first["eval_n_used"], "floor": floor,
        "online_first_refresh": None if online is None else online.get("first_refresh"),
        "online_refreshes": None if online is None else online.get("online_refreshes"),
        "comparison": cmp,
    }


def weight_ablation(results_by_weight: dict, schedules, seeds, *, data: str, subject: str = "edm_lognormal",
                    reference: str = REFERENCE) -> dict:
    """The loss-weight ablation: per training loss weight, ``subject - reference`` at the end of the run.

    Parameters
    ----------
    results_by_weight : dict
        ``weight -> {(schedule, seed) -> cell result}``, every weight with the same schedules and seeds.
    schedules, seeds : sequence
        The ablation's grid (holding ``subject`` and ``reference``).
    data : str
        The data set (for the document).
    subject, reference : str
        The difference reported is ``subject - reference`` (nats; > 0: the reference ends lower).

    Returns
    -------
    dict
        ``data``, ``schedules``, ``subject``, ``reference``, ``weights`` (per weight: ``final_nats``,
        ``difference`` (paired t interval at the last checkpoint), ``side``, ``step``, ``comparison``),
        ``sign_changes`` (two weights give decided differences of opposite sign) and ``summary`` (one line).
    """
    from noisealloc.verify.experiments.training_comparison import compare_training

    schedules, seeds = list(schedules), list(seeds)
    out = {"data": data, "schedules": schedules, "subject": subject, "reference": reference, "weights": {}}
    for w, recs in results_by_weight.items():
        steps = recs[(schedules[0], seeds[0])]["steps"]
        curves = {s: np.array([recs[(s, j)]["nats"] for j in seeds]) for s in schedules}
        cmp = compare_training(steps, curves, reference=reference, fractions=TARGET_FRACTIONS, at=EQUAL_COMPUTE_AT)
        row = next(r for r in cmp["rows"] if r["schedule"] == subject)
        end = row["equal_compute"][-1]
        out["weights"][w] = {"final_nats": final_stats(recs, schedules, seeds, "nats"),
                             "difference": end["difference"], "side": end["side"], "step": end["step"],
                             "comparison": cmp}
    decided = {v["side"] for v in out["weights"].values() if v["side"] != "inconclusive"}
    out["sign_changes"] = len(decided) > 1
    out["summary"] = (f"{subject} - {reference} final held-out loss difference: " + "; ".join(
        f"{w}: {v['difference']['estimate']:+.3g} nats [{v['difference']['lo']:+.3g}, "
        f"{v['difference']['hi']:+.3g}] ({v['side']})" for w, v in out["weights"].items())
        + ("; the sign changes with the loss weight" if out["sign_changes"] else
           "; no decided change of sign between the loss weights"))
    return out
