"""Figure 6: training efficiency at small scale (THEORY.md section 6.6).

Random-feature two-layer denoisers with a trained ridge readout (the lazy regime;
:mod:`noisealloc.verify.training`) are fitted on ``N`` samples whose noise levels are drawn from

* the square-root entropic schedule :math:`p \\propto \\sqrt{h}` in :math:`\\lambda` (from the data's own
  entropy rate: no data-scale choice),
* the EDM log-normal and the cosine schedule, **shifted** to the data's scale: data are used as loaded
  (pixels in ``[-1, 1]``), and a heuristic density designed for :math:`\\sigma_{data} = 0.5` is moved to
  :math:`p(\\lambda) = p_h(\\lambda + 2\\log(s/\\sigma_{data}))` with ``s`` the per-coordinate data standard
  deviation (THEORY.md section 5, the "shift" convention),

on discrete data (a Dirac mixture; binarised digits) and continuous data (grey-level digits; MNIST's
10,000 test images when a path is given).  Quality: held-out ELBO gap
:math:`\\int \\tfrac12 e^\\lambda E\\|D - m\\|^2 d\\lambda` on ``[LAM_MIN, LAM_MAX]`` against the exact Bayes
denoiser ``m`` (posterior engine), mean +- standard error over seeds.  The sample-count ratio is read at the
target gap ``max_schedules mean_gap(N_max)`` (the worst schedule's final gap, so every schedule reaches it
inside the grid) by log-log interpolation; ``ratio = N_schedule / N_sqrt-entropic`` (> 1: the entropic
schedule needs fewer samples).

Run alone: ``python -m noisealloc.figures.fig6_training --out DIR [--quick|--full] [--mnist PATH]``.
"""

from __future__ import annotations

import numpy as np

from noisealloc.figures import _common as C

NAME = "fig6_training"
LAM_MIN, LAM_MAX = -8.0, 8.0
SCHEDULES = ("sqrt-entropic", "edm_lognormal", "cosine")


def _sizes(quick: bool) -> dict:
    if quick:
        return {"N_values": [128, 256, 512, 1024, 2048, 4096], "seeds": 3, "q": 256, "ridge": 1e-3,
                "eval_levels": 33, "eval_n": 64, "h_levels": 49, "h_samples": 256}
    return {"N_values": [128, 256, 512, 1024, 2048, 4096, 8192, 16384], "seeds": 6, "q": 512, "ridge": 1e-3,
            "eval_levels": 65, "eval_n": 256, "h_levels": 129, "h_samples": 4096}


def datasets(mnist=None) -> list[tuple[str, bool, object]]:
    """``(name, discrete, model)`` of every data set of the figure (MNIST only when a path is known)."""
    from noisealloc.theory.datasets import load_data, load_digits, load_mnist
    from noisealloc.theory.dirac import DiracMixture

    images, _ = load_digits()
    out = [
        ("dirac:K=16,D=8,sep=1,seed=0", True, load_data("dirac:K=16,D=8,sep=1,seed=0")),
        ("digits-binarised", True, DiracMixture(np.where(images > 0.0, 1.0, -1.0))),
        ("digits", False, DiracMixture(images)),
    ]
    mnist_dir = C.resolve_mnist(mnist)
    if mnist_dir:
        out.append(("mnist", False, DiracMixture(load_mnist(mnist_dir)[0])))
    return out


def _schedules(model, sizes, seed):
    from noisealloc.theory.data_scale import data_scale, heuristic_shift
    from noisealloc.verify.training import training_schedule

    scheds = {key: training_schedule(model, key, LAM_MIN, LAM_MAX, h_levels=sizes["h_levels"],
                                     h_samples=sizes["h_samples"], rng=seed) for key in SCHEDULES}
    s = data_scale(model)
    return scheds, s, heuristic_shift(s)


def compute(*, quick: bool = True, seed: int = 0, mnist=None, progress=None) -> dict:
    from noisealloc.verify.training import make_eval_set, samples_to_target, training_curve

    sz = _sizes(quick)
    seeds = [seed * 1000 + j for j in range(sz["seeds"])]
    rows = []
    data = datasets(mnist)
    for i, (name, discrete, model) in enumerate(data):
        stage = f"{i + 1}/{len(data)} {name}"
        if progress is not None:
            progress(f"{stage}: entropy rate and held-out set")
        scheds, s, shift = _schedules(model, sz, seed)
        ev = make_eval_set(model, LAM_MIN, LAM_MAX, levels=sz["eval_levels"], n=sz["eval_n"],
                           rng=np.random.default_rng([seed, 66]))
        curves = {}
        for key in SCHEDULES:
            if progress is not None:
                progress(f"{stage}: training under {key}")
            c = training_curve(model, scheds[key], sz["N_values"], seeds, ev, q=sz["q"], ridge=sz["ridge"], name=key)
            curves[key] = {"mean": c.mean, "stderr": c.stderr, "gaps": c.gaps}
        target = max(float(curves[k]["mean"][-1]) for k in SCHEDULES)
        n_to = {k: samples_to_target(sz["N_values"], curves[k]["mean"], target) for k in SCHEDULES}
        ratio = {k: n_to[k] / n_to["sqrt-entropic"] for k in SCHEDULES}
        rows.append({"data": name, "discrete": discrete, "dim": int(model.dim), "n_atoms": int(model.n_atoms),
                     "data_std": s, "heuristic_shift": shift, "curves": curves, "target": target,
                     "N_to_target": n_to, "ratio_vs_sqrt_entropic": ratio})
    return {"figure": NAME, "N_values": sz["N_values"], "seeds": seeds, "rows": rows, "quick": quick, "seed": seed,
            "sizes": sz, "interval": [LAM_MIN, LAM_MAX],
            "data_scale": "data used as loaded; EDM and cosine densities shifted by 2 log(s / 0.5) in lambda "
                          "(s = per-coordinate data std); the sqrt-entropic schedule needs no such choice",
            "target_rule": "target = max over schedules of the mean gap at the largest N; "
                           "N_to_target by log-log interpolation; ratio = N_schedule / N_sqrt-entropic"}


def plot(doc: dict, path) -> None:
    plt = C.setup_matplotlib()
    rows = doc["rows"]
    N = np.asarray(doc["N_values"], float)
    fig, axes = plt.subplots(1, len(rows), figsize=(4.6 * len(rows), 4.9), squeeze=False)
    styles = {"sqrt-entropic": ("C0", "o", r"$\sqrt{h}$ entropic"), "edm_lognormal": ("C3", "s", "EDM log-normal"),
              "cosine": ("C2", "^", "cosine")}
    for ax, row in zip(axes[0], rows):
        for key, (col, mk, lab) in styles.items():
            c = row["curves"][key]
            mean, se = np.asarray(c["mean"], float), np.asarray(c["stderr"], float)
            r = row["ratio_vs_sqrt_entropic"][key]
            extra = "" if key == "sqrt-entropic" else f" (N to target: {C.from_json_float(r):.2f}x)"
            ax.errorbar(N, mean, yerr=se, color=col, marker=mk, ms=4, capsize=3, label=lab + extra)
        ax.axhline(row["target"], color="k", ls=":", lw=1, label="target gap")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        from matplotlib.ticker import FormatStrFormatter

        ax.yaxis.set_major_formatter(FormatStrFormatter("%.4g"))
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%.4g"))
        kind = "discrete" if row["discrete"] else "continuous"
        ax.set_title(f"{row['data']} ({kind}, D = {row['dim']})\nheuristics shifted by "
                     f"{row['heuristic_shift']:+.2f} in $\\lambda$ (data std {row['data_std']:.2f})")
        ax.set_xlabel("training samples N (noise levels drawn from the schedule)")
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi * (hi / lo) ** 0.35)  # log axis: a band above the curves for the legend
        ax.legend(fontsize=8, loc="upper right")
    axes[0][0].set_ylabel(r"held-out ELBO gap $\int \frac{1}{2}e^\lambda E\|D-m\|^2 d\lambda$ (nats)")
    fig.suptitle(f"Figure 6: random-feature denoisers (q = {doc['sizes']['q']}, ridge readout), "
                 f"$\\lambda\\in[{doc['interval'][0]:g}, {doc['interval'][1]:g}]$; mean $\\pm$ s.e. over "
                 f"{len(doc['seeds'])} seeds\nN to target: samples a schedule needs to reach the target gap, "
                 "relative to the $\\sqrt{h}$ entropic schedule (< 1: fewer than $\\sqrt{h}$)", fontsize=11)
    fig.tight_layout()
    C.write_png(fig, path)
    plt.close(fig)


def run(out_dir, *, quick: bool = True, seed: int = 0, mnist=None, progress=None) -> dict:
    """Compute, write ``fig6_training.{json,png,config.json}``; return their paths."""
    return C.run_figure(NAME, compute, plot, out_dir, seed=seed,
                        options={"quick": quick, "mnist": bool(C.resolve_mnist(mnist)), **_sizes(quick),
                                 "interval": [LAM_MIN, LAM_MAX]},
                        compute_kwargs={"quick": quick, "seed": seed, "mnist": mnist, "progress": progress})


def main(argv=None) -> int:
    return C.figure_main(run, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
