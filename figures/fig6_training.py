r"""Figure 6: does it train faster?  Training efficiency in three regimes (docs/THEORY.md section 6.6).

* **(i) coupled control** -- random-feature two-layer denoisers with one trained ridge readout shared
  by every noise level (the lazy regime; :mod:`noisealloc.verify.experiments.random_features`), fitted on ``N`` samples:
  the fully coupled regime (a) of docs/THEORY.md section 4, where the theory expects the entropic proxy to
  lose.  Quality: held-out ELBO gap against the exact Bayes denoiser, mean +- s.e. over seeds; sample
  counts to the target gap (the worst schedule's gap at the largest N) by log-log interpolation.
* **(ii) independent learners** -- one OLS learner per lambda-cell on a Gaussian law
  (:mod:`noisealloc.verify.experiments.learners`): the simulated loss factor of each schedule against the
  square-root law (mean +- s.e. over runs) next to the exact finite-N prediction and Theorem 2's factor.
* **(iii) neural denoisers trained by Adam** -- EDM-preconditioned MLPs on JAX
  (:mod:`noisealloc.verify.experiments.neural`, :mod:`noisealloc.verify.experiments.neural_efficiency`) trained for a fixed
  number of steps at a fixed batch size under each schedule; held-out diffusion loss
  (:mod:`noisealloc.verify.experiments.heldout`) against steps, mean +- s.e. over seeds; steps to a common target
  as ratios with paired bootstrap intervals.  This regime judges claims C4 and C5.

Every regime's work goes through the sweep engine (:mod:`noisealloc.verify.experiments.sweep`) as cells: one per
data set in (i) (kind ``fig6-coupled``, cached in ``OUT/fig6_coupled_cells``), one per schedule in (ii)
(``fig6-independent``, ``OUT/fig6_independent_cells``), one per (data x schedule x seed) in (iii)
(``neural``, ``OUT/fig6_cells``), preceded by one per (schedule x data) for the costly part of the
entropic and pilot schedules (``fig6-schedule``, ``OUT/fig6_schedule_cells``: an entropy-rate profile
or a pilot run, kept in ``OUT/fig6_shared`` and read by every training cell), on a LocalCluster of
two worker processes or on the cluster of ``scheduler``.  A cell's cache key holds its sizes, seed
and code version, so an interrupted run resumes without recomputing a finished cell and a changed
configuration is never reused; the cells' counters (cached / computed) and timings are written to
``OUT/fig6_cells.json``.

Schedules: the square-root entropic schedule (exact h for the Dirac mixture; the *empirical* h of the
training split for binarised images, which are discrete; the *population* h of the training split's
manifold-smoothed law for grey-level images, :func:`noisealloc.theory.schedules.entropic.population_schedule`), the
entropic schedule p ~ h, EDM log-normal, cosine, SD3 logit-normal and uniform-lambda **shifted** to the
data scale (:math:`p(\lambda) = p_h(\lambda + 2\log(s/\sigma_{data}))`, docs/THEORY.md section 5), the
two-stage schedule from a pilot run's per-level validation losses (``sqrt-pilot``) and the online
estimator fed with the run's own losses (``online``).

Run alone: ``python -m noisealloc.figures.fig6_training --out DIR [--quick|--full] [--mnist PATH]``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from noisealloc.figures import _common as C
from noisealloc.figures import _training as T
from noisealloc.verify.experiments import training_harness as H

# The cells of regimes (i) and (ii) and their constants live in the verify layer (the sweep engine runs them).
from noisealloc.verify.experiments.regime_cells import IL_DIM, IL_INTERVAL, IL_SCHEDULES, IL_VARIANCES, LAM_MAX, LAM_MIN, SCHEDULES

NAME = "fig6_training"
#: Cell caches inside the output directory: one sweep-engine folder per regime (a folder holds one
#: sweep's identity, so the regimes cannot share one).  Regime (iii)'s keeps its historical name.
COUPLED_DIR = "fig6_coupled_cells"
INDEPENDENT_DIR = "fig6_independent_cells"
CELLS_DIR = "fig6_cells"
#: Regime (iii)'s schedule cells (entropy-rate profiles, pilot runs) and the artifacts they share with
#: the training cells (:func:`noisealloc.verify.experiments.sweep.cache.shared_artifact`).
SCHEDULE_CELLS_DIR = "fig6_schedule_cells"
SHARED_DIR = "fig6_shared"
#: The schedules with a costly shared part, and the schedule cell that builds it (the entropic pair
#: shares one entropy-rate profile).
PREPARED_BY = {"sqrt-entropic": "sqrt-entropic", "entropic": "sqrt-entropic", "sqrt-pilot": "sqrt-pilot"}
#: Counters and timings of the last run's cells (kept out of the numbers file: they vary with the cache state).
CELLS_FILE = "fig6_cells.json"


def _spec(name: str, kind: str, fixed: dict, grid: dict):
    return H.make_spec(name, kind, fixed, grid)


def _run_cells(spec, cells_dir, scheduler, shared_dir=None):
    """The cells through the sweep engine (cached in ``cells_dir``, resumable), on Dask."""
    from noisealloc.verify.experiments.sweep.engine import run_sweep

    return run_sweep(spec, cells_dir, scheduler=scheduler, n_workers=2, shared_dir=shared_dir)


def _sweep_records(spec, cells_dir, scheduler, progress, regime: str, shared_dir=None) -> tuple[list, dict]:
    """Every cell record of ``spec`` and the counters of this call (:func:`~noisealloc.verify.experiments.training_harness.sweep_records`)."""
    return H.sweep_records(spec, cells_dir, scheduler=scheduler, progress=progress, label=f"fig6 regime {regime}",
                           shared_dir=shared_dir, runner=_run_cells)


def _sizes(quick: bool) -> dict:
    if quick:
        return {"N_values": [128, 256, 512, 1024, 2048, 4096], "seeds": 3, "q": 256, "ridge": 1e-3,
                "eval_levels": 33, "eval_n": 64, "h_levels": 49, "h_samples": 256}
    # --full: figure 6 in about 25 min on 2 cores (CPU seconds under load).
    # Before: the MNIST cell 430 s (h from 4096 samples x 129 levels 72 s, held-out set 55 s, 3 curves of
    # 100 s: the held-out gap costs levels x eval_n x q x D per N and seed), Dirac 85 s, digits 110-120 s.
    # Now (33 levels x 128 pairs, 1024 samples): MNIST 312 s (h 23 s, held-out set 60 s, curves 76 s),
    # so the four cells take ~5 min on two workers.  The N grid, seeds and q are unchanged; the held-out
    # set is shared by every schedule, so the ratios stay paired.
    return {"N_values": [128, 256, 512, 1024, 2048, 4096, 8192, 16384], "seeds": 6, "q": 512, "ridge": 1e-3,
            "eval_levels": 33, "eval_n": 128, "h_levels": 129, "h_samples": 1024}


def coupled_data(mnist=None) -> list[str]:
    """Names of regime (i)'s data sets, in row order (MNIST only when a path is known; its name carries the path).

    Parameters
    ----------
    mnist : str or Path, optional
        MNIST directory (default ``$NOISEALLOC_MNIST_DIR`` when set, else no MNIST row).

    Returns
    -------
    list of str
        Names accepted by :func:`noisealloc.verify.experiments.regime_cells.coupled_model`.
    """
    names = ["dirac:K=16,D=8,sep=1,seed=0", "digits-binarised", "digits"]
    mnist_dir = C.resolve_mnist(mnist)
    if mnist_dir:
        names.append(f"mnist:{mnist_dir}")
    return names


def _compute_coupled(*, quick: bool, seed: int, out_dir, mnist=None, scheduler=None,
                     progress=None) -> tuple[dict, dict]:
    """Regime (i): the random-feature ridge readout shared by every level, one cell per data set cached in
    ``out_dir/COUPLED_DIR``.

    Returns the document (the former figure 6's keys) and the cell counters and timings.
    """
    sz = _sizes(quick)
    fixed = {k: v for k, v in sz.items() if k != "seeds"}
    fixed.update({"seeds": sz["seeds"], "seed": seed})
    spec = _spec("fig6-coupled", "fig6-coupled", fixed, {"data": coupled_data(mnist)})
    records, counts = _sweep_records(spec, Path(out_dir) / COUPLED_DIR, scheduler, progress, "(i)")
    rows = [rec["result"] for rec in records]
    counts["timings"] = [{"data": rec["config"]["data"], "seconds": rec["seconds"]} for rec in records]
    seeds = [seed * 1000 + j for j in range(sz["seeds"])]
    doc = {"figure": NAME, "N_values": sz["N_values"], "seeds": seeds, "rows": rows, "quick": quick, "seed": seed,
           "sizes": sz, "interval": [LAM_MIN, LAM_MAX],
           "data_scale": "data used as loaded; EDM and cosine densities shifted by 2 log(s / 0.5) in lambda "
                         "(s = per-coordinate data std); the sqrt-entropic schedule needs no such choice",
           "target_rule": "target = max over schedules of the mean gap at the largest N; "
                          "N_to_target by log-log interpolation; ratio = N_schedule / N_sqrt-entropic"}
    return doc, counts


# ----------------------------------------------------------------------------- regime (ii)
def _independent_sizes(quick: bool) -> dict:
    if quick:
        return {"N": 20000, "cells": 16, "seeds": 50}
    return {"N": 100000, "cells": 24, "seeds": 400}  # --full: 28 s CPU per schedule cell (measured), 6 cells


def _compute_independent(*, quick: bool, seed: int, out_dir, scheduler=None, progress=None) -> tuple[dict, dict]:
    """Regime (ii): independent OLS learners per lambda-cell, one sweep cell per schedule (against the square-root
    law) cached in ``out_dir/INDEPENDENT_DIR``.

    Returns the document and the cell counters and timings.
    """
    sz = _independent_sizes(quick)
    spec = _spec("fig6-independent", "fig6-independent", {**sz, "seed": seed}, {"schedule": list(IL_SCHEDULES)})
    records, counts = _sweep_records(spec, Path(out_dir) / INDEPENDENT_DIR, scheduler, progress, "(ii)")
    rows = [rec["result"] for rec in records]
    counts["timings"] = [{"schedule": rec["config"]["schedule"], "seconds": rec["seconds"]} for rec in records]
    doc = {"model": f"GaussianManifold(D={IL_DIM}, variances={list(IL_VARIANCES)})", "interval": list(IL_INTERVAL),
           **sz, "rows": rows,
           "finite_n": "exact OLS prediction sum_u a_u/(n_u-q-1) (Gaussian design); Theorem 2's factor is its "
                       "N -> infinity limit",
           "heuristics": "shifted to the law's exact data scale"}
    return doc, counts


# ----------------------------------------------------------------------------- regime (iii)
NEURAL_SCHEDULES = ("sqrt-entropic", "entropic", "edm_lognormal", "cosine", "logit_normal_sd3", "uniform_lambda",
                    "online", "sqrt-pilot")
#: Loss-weight ablation of regime (iii): the main runs use EDM's weight; these schedules of this data set
#: are also trained with the other weights, to see whether the EDM - sqrt(h) comparison depends on it.
ABLATION_DATA = "digits"
ABLATION_SCHEDULES = ("sqrt-entropic", "edm_lognormal")


def _neural_sizes(quick: bool) -> dict:
    """Regime (iii)'s options: one training recipe for every schedule; run lengths per data kind.

    Measured (2026-12-04, 2 cores, one XLA thread per worker): a step of the 128 x 3 MLP takes 1.1 ms alone
    and 2.2-2.5 ms with both workers busy (Dirac D = 8, digits D = 64; the two workers share the cores'
    execution units), about 5 ms on MNIST (D = 784); 20 evaluations of the frozen set 0.8-1.2 s per cell.
    Quick measured 239 s for figure 6 at 3000/2000 steps, then 152 s at 2000/1200 with one cluster for the
    figure (reproduce --quick with figure 7 306 s); the run lengths
    below leave room for figure 7's quick run within 5 minutes.  Full: 6000/4000/2000 steps with both MNIST
    rows took 38 minutes of a 69-minute `reproduce --full` (2026-12-04; the MNIST cells 20 of them: 9.7 ms
    a step with both workers busy and 10 s of evaluation per cell); 5000/3000/1200 steps with binarised
    digits and MNIST but not binarised MNIST still took 27 minutes (2026-12-05, cells 2443 worker-seconds:
    Dirac 652, binarised digits 390, digits 457 + 195 of ablation, MNIST 749).  The full run's rows are the
    quick run's plus MNIST (binarised images are trained under masking in figure 7), MNIST at 600 steps on
    128 test images.  The Dirac
    mixture trains longest because it has a known floor (the Bayes denoiser's held-out
    loss), which the figure shows with the best schedule's factor (measured: uniform-lambda 6.3 nats against
    a floor of 3.13 after 20,000 steps; the square-root schedule of the pilot 5.8 against 3.12 after 4000).
    """
    common = {"batch_size": 128, "learning_rate": 1e-3, "width": 128, "depth": 3, "checkpoints": 20,
              "eval_levels": 33, "h_levels": 49, "h_samples": 256, "online_refresh": 25, "loss_weight": "edm",
              "warmup_fraction": 0.05}
    if quick:
        return {**common, "seeds": 3, "eval_n": 256, "steps": {"dirac": 1600, "digits": 1000},
                "ablation_weights": ["none"]}
    # every data set on 300 test examples: all of digits' test split (1797 / 6), the same number elsewhere
    return {**common, "seeds": 5, "eval_n": {"dirac": 300, "digits": 300, "mnist": 128}, "h_levels": 65,
            "checkpoints": {"dirac": 16, "digits": 16, "mnist": 12},
            "steps": {"dirac": 4000, "digits": 3000, "mnist": 600}, "ablation_weights": ["none", "elbo"]}


def _neural_data(quick: bool, mnist) -> list[str]:
    names = ["dirac:K=16,D=8,sep=1,seed=0", "digits"]
    if not quick:
        mnist_dir = C.resolve_mnist(mnist)
        if mnist_dir:
            names.append(f"mnist:{mnist_dir}")
    return names


def _data_kind(name: str) -> str:
    """``dirac``, ``digits`` or ``mnist``: the key of a data set's run length."""
    return "dirac" if name.startswith("dirac") else ("mnist" if name.startswith("mnist") else "digits")


def _cell_options(sz: dict, data: str) -> dict:
    fixed = {k: v for k, v in sz.items() if k not in ("seeds", "steps", "ablation_weights")}
    # run length and evaluation size may be set per data kind
    fixed.update({k: v[_data_kind(data)] for k, v in fixed.items() if isinstance(v, dict)})
    fixed.update({"lam_min": LAM_MIN, "lam_max": LAM_MAX, "steps": sz["steps"][_data_kind(data)]})
    return fixed



def _compute_neural(*, quick: bool, seed: int, out_dir, mnist=None, scheduler=None, progress=None) -> tuple[dict, dict]:
    """Regime (iii): per data set, the schedules' costly parts, then the (schedule x seed) training cells,
    through the sweep engine (cached in ``out_dir/CELLS_DIR/<data>``), then the comparison.

    Returns the document and the cell counters and timings.
    """
    from noisealloc.verify.experiments.sweep.spec import cell_parameters

    sz = _neural_sizes(quick)
    data = _neural_data(quick, mnist)
    seeds = [seed * 1000 + j for j in range(sz["seeds"])]
    shared = Path(out_dir) / SHARED_DIR
    counts = {"total": 0, "cached": 0, "computed": 0, "timings": []}
    prep_counts = {"total": 0, "cached": 0, "computed": 0, "timings": []}
    accepted = cell_parameters("fig6-schedule")
    prepared = sorted({PREPARED_BY[x] for x in NEURAL_SCHEDULES if x in PREPARED_BY})
    rows, ablation = [], {}
    train = {"scheduler": scheduler, "progress": progress, "shared_dir": shared, "runner": _run_cells}
    for d in data:
        fixed = _cell_options(sz, d)
        # First the schedules' costly parts, one cell each (MNIST's population h: about a minute of Monte
        # Carlo), so that no two workers compute one and the training cells only read them.
        prep = _spec(f"fig6-schedules-{T.slug(d)}", "fig6-schedule",
                     {**{k: v for k, v in fixed.items() if k in accepted}, "data": d}, {"schedule": prepared})
        prep_records, c = _sweep_records(prep, Path(out_dir) / SCHEDULE_CELLS_DIR / T.slug(d), scheduler, progress,
                                         "(iii) schedules", shared)
        c["timings"] = [{"data": d, "schedule": r["config"]["schedule"], "seconds": r["seconds"]} for r in prep_records]
        H.add_counts(prep_counts, c)
        recs, c = H.train_cells("neural", d, NEURAL_SCHEDULES, seeds, fixed, Path(out_dir) / CELLS_DIR / T.slug(d),
                                label=f"fig6 regime (iii) {T.slug(d)}", **train)
        H.add_counts(counts, c)
        label = d.split(":")[0] if d.startswith("mnist") else d  # an MNIST path is not a name
        rows.append(H.summarise_training(d, recs, NEURAL_SCHEDULES, seeds, discrete=H.is_discrete(d), label=label))
        if d == ABLATION_DATA:
            ablation["edm"] = recs
            for w in sz["ablation_weights"]:
                ablation[w], c = H.train_cells("neural", d, ABLATION_SCHEDULES, seeds, {**fixed, "loss_weight": w},
                                               Path(out_dir) / CELLS_DIR / f"{T.slug(d)}-{w}",
                                               label=f"fig6 regime (iii) {T.slug(d)}-{w}", **train)
                H.add_counts(counts, c)
    counts["schedules"] = prep_counts
    ablation = (H.weight_ablation(ablation, ABLATION_SCHEDULES, seeds, data=ABLATION_DATA) if ablation else None)
    first_rule = rows[0]["comparison"]["rule"] if rows else ""
    doc = {"schedules": list(NEURAL_SCHEDULES), "reference": H.REFERENCE, "seeds": seeds, "sizes": sz,
           "interval": [LAM_MIN, LAM_MAX], "rows": rows, "ablation": ablation,
           "verdict_fraction": H.VERDICT_FRACTION,
           "cells_file": f"{CELLS_FILE} (cell counters and timings of the last run)",
           "training": (f"Adam, batch {sz['batch_size']}, step size {sz['learning_rate']:g} after a linear warm-up over "
                        f"the first {100 * sz['warmup_fraction']:g}% of the run, EDM's loss weight "
                        "1/c_out^2 = e^lam + 1/sigma_data^2 on the preconditioned x0 denoiser (the same for every "
                        "schedule; " + " and ".join({"none": "the unweighted x0 loss", "elbo": "the ELBO weight"}[w]
                                                   for w in sz["ablation_weights"])
                        + f" as an ablation on {ABLATION_DATA}), evaluated on an exponential moving average of the weights (half-life "
                        "2% of the run); the online estimator re-reads its schedule every "
                        f"{sz['online_refresh']} steps, so it has acted many times before the judged window"),
           "target_rule": first_rule,
           "metric": "held-out diffusion loss 1/2 int e^lam E||D(x, lam) - x0||^2 dlam (nats per example) on a "
                     "frozen test set (never trained on; same noise for every schedule and seed); bits per "
                     "dimension = nats / (D ln 2)",
           "h_note": "square-root entropic: exact h for the Dirac mixture; empirical h of the training split for "
                     "binarised images (discrete data); population h (manifold-smoothed training split) for "
                     "grey-level images"}
    return doc, counts


def compute(*, quick: bool = True, seed: int = 0, mnist=None, progress=None, out_dir=None, scheduler=None) -> dict:
    """All three regimes; the coupled control keeps the former figure 6's keys at the top level.

    Every regime's cells go through the sweep engine, cached in ``out_dir`` (:data:`COUPLED_DIR`,
    :data:`INDEPENDENT_DIR`, :data:`CELLS_DIR`; a temporary folder when ``out_dir`` is None), so an
    interrupted run resumes without recomputing a finished cell.  The cells' counters and timings go to
    ``out_dir/CELLS_FILE``, never into the numbers: a cached cell gives the same numbers as a computed one.
    """
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, T.one_cluster(scheduler) as address:
        cache = Path(tmp) if out_dir is None else Path(out_dir)
        kw = {"quick": quick, "seed": seed, "out_dir": cache, "scheduler": address, "progress": progress}
        doc, c1 = _compute_coupled(mnist=mnist, **kw)
        doc["regime"] = "(i) coupled control: top-level rows; (ii) independent; (iii) neural"
        doc["independent"], c2 = _compute_independent(**kw)
        doc["neural"], c3 = _compute_neural(mnist=mnist, **kw)
    if out_dir is not None:
        # "cells" and "timings" are regime (iii)'s (the report's cell line reads them).
        C.write_json(Path(out_dir) / CELLS_FILE, {
            "cells": {k: c3[k] for k in ("total", "cached", "computed")}, "timings": c3["timings"],
            "schedules": c3["schedules"], "coupled": c1, "independent": c2})
    return doc


# ----------------------------------------------------------------------------- plot
_STYLES = {"sqrt-entropic": ("C0", "o", r"$\sqrt{h}$ entropic"), "entropic": ("C9", "v", r"entropic $\propto h$"),
           "edm_lognormal": ("C3", "s", "EDM log-normal"), "cosine": ("C2", "^", "cosine"),
           "logit_normal_sd3": ("C4", "D", "logit-normal"), "uniform_lambda": ("C7", "x", r"uniform $\lambda$"),
           "online": ("C1", "P", "online (losses)"), "sqrt-pilot": ("C5", "*", r"$\sqrt{h}$ from pilot losses")}


def _plot_coupled(axes, doc):
    N = np.asarray(doc["N_values"], float)
    for ax, row in zip(axes, doc["rows"]):
        for key in SCHEDULES:
            col, mk, lab = _STYLES[key]
            c = row["curves"][key]
            r = row["ratio_vs_sqrt_entropic"][key]
            extra = "" if key == "sqrt-entropic" else f" (N: {C.from_json_float(r):.2f}x)"
            ax.errorbar(N, np.asarray(c["mean"], float), yerr=np.asarray(c["stderr"], float), color=col, marker=mk,
                        ms=3, capsize=2, label=lab + extra)
        ax.axhline(row["target"], color="k", ls=":", lw=1)
        ax.set_xscale("log", base=2)
        T.plain_log_ticks(ax)
        ax.set_title(f"(i) coupled control: {row['data']}", fontsize=9)
        ax.set_xlabel("training samples N", fontsize=8)
        ax.legend(fontsize=8, loc="upper right")
    axes[0].set_ylabel("held-out ELBO gap (nats)", fontsize=8)


def _plot_independent(ax, ind):
    rows = [r for r in ind["rows"] if "error" not in r]
    x = np.arange(len(rows))
    sim = np.array([r["simulated_factor"] for r in rows])
    se = np.array([r["simulated_se"] for r in rows])
    ax.bar(x - 0.2, [r["exact_factor"] for r in rows], 0.4, color="0.75", label="predicted (exact finite-N OLS)")
    ax.errorbar(x + 0.2, sim, yerr=se, fmt="o", color="C0", capsize=3, label="simulated (mean $\\pm$ s.e.)")
    ax.plot(x, [r["predicted_factor"] for r in rows], "k_", ms=14, label="Theorem 2 ($N\\to\\infty$)")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, [_STYLES[r["schedule"]][2] for r in rows], rotation=30, fontsize=7, ha="right")
    ax.set_ylabel("loss / loss of the square-root law", fontsize=8)
    starved = [r["schedule"] for r in ind["rows"] if "error" in r]
    extra = f"; starves a cell (infinite loss): {', '.join(starved)}" if starved else ""
    ax.set_title(f"(ii) independent OLS learners per $\\lambda$-cell, {ind['model']}, N = {ind['N']}, "
                 f"{ind['seeds']} runs{extra}", fontsize=9)
    ax.legend(fontsize=8)


def _neural_title(row) -> str:
    kind = "discrete" if row["discrete"] else "continuous"
    return (f"(iii) Adam, {row['network']}: {row['data']} ({kind}, D = {row['dim']}), {T.used_examples(row)}\n"
            f"$\\sqrt{{h}}$ from: {row['h_source']}")


def plot(doc: dict, path) -> None:
    plt = C.setup_matplotlib()
    neu = doc["neural"]
    n_i, n_iii = len(doc["rows"]), len(neu["rows"]) + (1 if neu.get("ablation") else 0)
    ncol = max(n_i, n_iii, 2)
    fig = plt.figure(figsize=(5.2 * ncol, 21.0))
    gs = fig.add_gridspec(3, ncol, height_ratios=[1, 0.8, 1.7])
    _plot_coupled([fig.add_subplot(gs[0, j]) for j in range(n_i)], doc)
    _plot_independent(fig.add_subplot(gs[1, :]), doc["independent"])
    axes = [fig.add_subplot(gs[2, j]) for j in range(len(neu["rows"]))]
    T.plot_training_panels(axes, neu, _STYLES, title=_neural_title)
    if axes:
        axes[0].set_ylabel("held-out diffusion loss (nats)", fontsize=8)
    if neu.get("ablation"):
        ax = fig.add_subplot(gs[2, len(neu["rows"])])
        T.plot_weight_ablation(ax, neu["ablation"])
        ax.set_title("(iii) " + ax.get_title(), fontsize=8)
    runs = ", ".join(f"{r['data']} {r['run_steps']}" for r in neu["rows"])
    fig.suptitle(f"Figure 6: does it train faster?  Three regimes, mean $\\pm$ s.e. over seeds; "
                 f"$\\lambda\\in[{doc['interval'][0]:g}, {doc['interval'][1]:g}]$; heuristics shifted to the data scale\n"
                 f"(i) one ridge readout for every level (control: theory expects the proxy to lose); "
                 f"(ii) one learner per level (theory: the square-root law wins)\n"
                 f"(iii) MLPs trained by Adam with EDM's loss weight, warm-up and a weight average; steps: {runs}; "
                 f"{len(neu['seeds'])} seeds (judges C4, C5)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    C.write_png(fig, path)
    plt.close(fig)


def run(out_dir, *, quick: bool = True, seed: int = 0, mnist=None, progress=None, scheduler=None) -> dict:
    """Compute, write ``fig6_training.{json,png,config.json}``; return their paths.

    The cells of all three regimes are cached in ``out_dir`` (``fig6_coupled_cells``, ``fig6_independent_cells``,
    ``fig6_cells``; a rerun computes only missing cells; counters in ``fig6_cells.json``); ``scheduler`` is the
    address of an existing Dask scheduler (default: a LocalCluster of 2 workers).
    """
    return C.run_figure(NAME, compute, plot, out_dir, seed=seed,
                        options={"quick": quick, "mnist": bool(C.resolve_mnist(mnist)), **_sizes(quick),
                                 "interval": [LAM_MIN, LAM_MAX], "independent": _independent_sizes(quick),
                                 "neural": _neural_sizes(quick)},
                        compute_kwargs={"quick": quick, "seed": seed, "mnist": mnist, "progress": progress,
                                        "out_dir": out_dir, "scheduler": scheduler})


def main(argv=None) -> int:
    return C.figure_main(run, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
