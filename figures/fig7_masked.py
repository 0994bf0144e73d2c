r"""Figure 7: does square-root entropy scheduling train masked diffusion faster?  (docs/THEORY.md §7)

Masked (absorbing) diffusion on token strings, the discrete diffusion practitioners run (MDLM, MD4,
MaskGIT): masked denoisers (:mod:`noisealloc.verify.experiments.masked_training`: an MLP over one-hot tokens
with a mask channel, and in the full run a small transformer) trained by Adam with the same recipe and compute
under each schedule, on binarised digits (L = 64), a Markov chain with known :math:`H(\pi)`, and binarised
MNIST (L = 784) when a path is given.  Quality: the held-out negative ELBO :math:`\int\alpha L\,d\lambda` on
:math:`\lambda \in [-10, 10]` in bits per token, on strings never trained on (the same masks for every
schedule and seed), and for the Markov chain its gap to the exact denoiser's value (the floor).  The
comparison with the square-root entropic schedule is the training harness's
(:mod:`noisealloc.verify.experiments.training_harness`): equal-compute differences and late-target step
ratios with paired t intervals over seeds.  This figure judges claim C4 ("helps most on discrete data")
for discrete diffusion; figure 6 judges it for Gaussian noise on discrete data.

Every cell goes through the sweep engine (``OUT/fig7_cells/<data>-<network>``; cached and resumable).

Run alone: ``python -m noisealloc.figures.fig7_masked --out DIR [--quick|--full] [--mnist PATH]``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from noisealloc.figures import _common as C
from noisealloc.figures import _training as T
from noisealloc.verify.experiments import training_harness as H

NAME = "fig7_masked"
CELLS_DIR = "fig7_cells"
#: Counters and timings of the last run's cells (kept out of the numbers file).
CELLS_FILE = "fig7_cells.json"
LAM_MIN, LAM_MAX = -10.0, 10.0
#: Schedules compared (the square-root entropic one first: the reference).
SCHEDULES = ("sqrt-entropic", "entropic", "sqrt-empirical", "sqrt-pilot", "online", "linear", "cosine",
             "uniform_lambda")
#: The Markov chain's (its law is exact: no empirical or pilot variant to add).
MARKOV_SCHEDULES = ("sqrt-entropic", "entropic", "online", "linear", "cosine", "uniform_lambda")


def _sizes(quick: bool) -> dict:
    """The recipe (one for every schedule of a row) and each row's own run length, evaluation set and schedules.

    Measured on 2 cores, one XLA thread per worker (2026-12-04/05): a step of the 256 x 3 MLP at batch 128
    takes 4.2 ms alone at L = 64 (7.3 ms with both workers busy) and 11.7 ms at L = 784 (33 ms busy); a step
    of the transformer (d_model 32, 2 heads, 2 layers) at batch 32 takes 16 ms alone (its step time grows
    faster than the batch beyond 32 on this CPU: :class:`~noisealloc.verify.experiments.masked_training.
    MaskedTransformer`) and 23-28 ms with both workers busy.  The full run's rows are sized so that
    ``reproduce --full`` with MNIST stays within 45 minutes: binarised MNIST and the transformer row compare
    the reference with the two heuristics practitioners use, on a smaller evaluation set (``eval_n_used`` is
    in every row).  At 1200/1200/1000/500 steps (digits, Markov, transformer, MNIST) and 33 evaluation
    levels figure 7 took 21 minutes of a run slowed by other jobs on the machine (2026-12-05; cells: MLP on
    digits 588 worker-seconds, Markov 460, transformer 844, MNIST 535).
    """
    common = {"batch_size": 128, "learning_rate": 1e-3, "width": 256, "depth": 3, "checkpoints": 16,
              "eval_levels": 33, "h_levels": 49, "online_refresh": 25, "loss_weight": "elbo",
              "warmup_fraction": 0.05, "lam_min": LAM_MIN, "lam_max": LAM_MAX, "d_model": 32, "heads": 2,
              "layers": 2}
    if quick:
        # reproduce --quick must stay within 5 minutes with figure 6: a short run, four schedules
        strings = ["sqrt-entropic", "online", "linear", "cosine"]
        return {**common, "seeds": 3, "eval_n": 128, "eval_levels": 17, "checkpoints": 10, "h_samples": 256,
                "h_levels": 25, "rows": {"strings": {"steps": 500, "schedules": strings},
                                         "markov": {"steps": 500, "schedules": strings}}}
    heuristics = ["sqrt-entropic", "linear", "cosine"]
    return {**common, "seeds": 5, "eval_n": 256, "eval_levels": 25, "h_samples": 512,
            "rows": {"strings": {"steps": 1000, "schedules": list(SCHEDULES)},
                     "markov": {"steps": 1000, "schedules": list(MARKOV_SCHEDULES)},
                     "transformer": {"steps": 600, "batch_size": 32, "eval_n": 128, "eval_levels": 17,
                                     "checkpoints": 12, "schedules": heuristics},
                     "mnist": {"steps": 400, "eval_n": 128, "checkpoints": 12, "schedules": heuristics}}}


def _data(quick: bool, mnist) -> list[tuple[str, str, str]]:
    """(data, network, size key) rows: the MLP on binarised digits and the Markov chain; in the full run also
    the transformer on binarised digits and (with a path) the MLP on binarised MNIST."""
    rows = [("digits-binarised", "mlp", "strings"), ("markov:V=2,L=64,stay=0.9", "mlp", "markov")]
    if quick:
        return rows
    rows.append(("digits-binarised", "transformer", "transformer"))
    mnist_dir = C.resolve_mnist(mnist)
    if mnist_dir:
        rows.append((f"mnist-binarised:{mnist_dir}", "mlp", "mnist"))
    return rows


def _run_cells(spec, cells_dir, scheduler, shared_dir=None):
    """The cells through the sweep engine (cached in ``cells_dir``, resumable), on Dask."""
    from noisealloc.verify.experiments.sweep.engine import run_sweep

    return run_sweep(spec, cells_dir, scheduler=scheduler, n_workers=2, shared_dir=shared_dir)


def compute(*, quick: bool = True, seed: int = 0, mnist=None, progress=None, out_dir=None, scheduler=None) -> dict:
    """Every (data, network) row: its cells, then the comparison with the square-root entropic schedule."""
    import tempfile

    sz = _sizes(quick)
    seeds = [seed * 1000 + j for j in range(sz["seeds"])]
    counts = {"total": 0, "cached": 0, "computed": 0, "timings": []}
    rows = []
    with tempfile.TemporaryDirectory() as tmp, T.one_cluster(scheduler) as address:
        cache = Path(tmp) if out_dir is None else Path(out_dir)
        for data, network, key in _data(quick, mnist):
            own = sz["rows"][key]
            fixed = {k: v for k, v in sz.items() if k not in ("seeds", "rows")}
            fixed.update({k: v for k, v in own.items() if k != "schedules"}, network=network)
            sch = list(own["schedules"])
            slug = T.slug(data) + f"-{network}"
            recs, c = H.train_cells("masked", data, sch, seeds, fixed, cache / CELLS_DIR / slug,
                                    label=f"fig7 {slug}", scheduler=address, progress=progress,
                                    runner=_run_cells)
            H.add_counts(counts, c)
            label = (data.split(":")[0] if data.startswith("mnist") else data) + f" ({network})"
            row = H.summarise_training(data, recs, sch, seeds, discrete=H.is_discrete(data), label=label)
            first = recs[(sch[0], seeds[0])]
            row["entropy_nats"] = first.get("entropy_nats")
            row["network"] = network
            row["batch_size"] = fixed["batch_size"]
            row["eval_levels"] = fixed["eval_levels"]
            rows.append(row)
    if out_dir is not None:
        C.write_json(Path(out_dir) / CELLS_FILE, {"cells": {k: counts[k] for k in ("total", "cached", "computed")},
                                                   "timings": counts["timings"]})
    return {
        "figure": NAME, "quick": quick, "seed": seed, "seeds": seeds,
        "schedules": list(dict.fromkeys(s for r in rows for s in r["mean"])),
        "reference": H.REFERENCE, "verdict_fraction": H.VERDICT_FRACTION, "sizes": sz, "interval": [LAM_MIN, LAM_MAX],
        "rows": rows, "cells_file": f"{CELLS_FILE} (cell counters and timings of the last run)",
        "target_rule": rows[0]["comparison"]["rule"] if rows else "",
        "metric": f"held-out negative ELBO int_{{{LAM_MIN:g}}}^{{{LAM_MAX:g}}} alpha L dlam (nats per string; bits per "
                  f"token = nats / (L ln 2)) on strings never trained on, a fixed grid of {_per_row(rows, 'eval_levels')} "
                  "levels and the same masks for every schedule and seed; the floor (Markov chain) is the exact denoiser's "
                  f"value H({LAM_MIN:g}) - H({LAM_MAX:g})",
        "training": (f"Adam, batch {_per_row(rows, 'batch_size')}, step size {sz['learning_rate']:g} after a linear warm-up over "
                     f"the first {100 * sz['warmup_fraction']:g}% of the run, the masked-diffusion ELBO as practice "
                     "trains it (per-example weight alpha / p(lam): an unbiased negative ELBO whatever the "
                     "schedule, MDLM and MD4's loss), evaluated on a weight average (half-life 2% of the run); "
                     "entropic and pilot schedules mixed with 1% of the uniform density; the online estimator "
                     f"re-reads its schedule every {sz['online_refresh']} steps"),
        "h_note": "square-root entropic: h of the Aitchison-Aitken smoothed law of the training split for binarised "
                  "images, of the chain itself for the Markov source; sqrt-empirical: h of the training split as "
                  "an empirical law (it memorises: h vanishes once a few tokens identify a string)",
    }


def _per_row(rows: list[dict], key: str) -> str:
    """``"33"`` when every row has the same value, else ``"33 (17 for <row>)"``."""
    values = [r[key] for r in rows]
    if not values:
        return "-"
    common = max(set(values), key=values.count)
    others = [f"{v} for {r['data']}" for r, v in zip(rows, values) if v != common]
    return f"{common}" + (f" ({'; '.join(others)})" if others else "")


_STYLES = {"sqrt-entropic": ("C0", "o", r"$\sqrt{h}$ (smoothed / exact law)"),
           "entropic": ("C9", "v", r"$\propto h$"),
           "sqrt-empirical": ("C8", "s", r"$\sqrt{h}$ (empirical law)"),
           "sqrt-pilot": ("C5", "*", r"$\sqrt{h}$ from pilot losses"),
           "online": ("C1", "P", "online (losses)"),
           "linear": ("C3", "D", r"linear $\alpha = 1 - t$"),
           "cosine": ("C2", "^", r"cosine $\alpha = \cos(\pi t/2)$"),
           "uniform_lambda": ("C7", "x", r"uniform $\lambda$")}


def plot(doc: dict, path) -> None:
    plt = C.setup_matplotlib()
    n = len(doc["rows"])
    fig = plt.figure(figsize=(5.6 * max(n, 2), 12.5))
    gs = fig.add_gridspec(1, max(n, 2))
    axes = [fig.add_subplot(gs[0, j]) for j in range(n)]
    T.plot_training_panels(axes, doc, _STYLES, unit="token", floor_label="exact denoiser",
                           title=lambda r: (f"{r['data']}: V = 2, L = {r['dim']}, batch {r['batch_size']}, "
                                            f"{T.used_examples(r, 'test strings')}"
                                            f"\n$\\sqrt{{h}}$ from the {r['h_source']} law"))
    axes[0].set_ylabel("held-out negative ELBO (nats per string)", fontsize=8)
    fig.suptitle(f"Figure 7: masked diffusion, mean $\\pm$ s.e. over {len(doc['seeds'])} seeds, "
                 f"$\\lambda = \\log(\\alpha/\\varepsilon) \\in [{doc['interval'][0]:g}, {doc['interval'][1]:g}]$, "
                 "trained on the negative ELBO as MDLM/MD4 do\ndoes the square-root entropic schedule train faster "
                 "(judges C4 for discrete diffusion)?", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    C.write_png(fig, path)
    plt.close(fig)


def run(out_dir, *, quick: bool = True, seed: int = 0, mnist=None, progress=None, scheduler=None) -> dict:
    """Compute, write ``fig7_masked.{json,png,config.json}``; return their paths."""
    return C.run_figure(NAME, compute, plot, out_dir, seed=seed,
                        options={"quick": quick, "mnist": bool(C.resolve_mnist(mnist)), **_sizes(quick)},
                        compute_kwargs={"quick": quick, "seed": seed, "mnist": mnist, "progress": progress,
                                        "out_dir": out_dir, "scheduler": scheduler})


def main(argv=None) -> int:
    return C.figure_main(run, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
