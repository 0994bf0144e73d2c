"""``noisealloc entropy``: MMSE, conditional entropy and generative entropy rate of a data set.

Levels are an equally spaced grid in the log-SNR ``lam`` (VE scaling
``x = x0 + sigma eps``, ``sigma = exp(-lam/2)``).  Discrete data (Dirac
mixtures: ``dirac:...``, ``digits``, ``mnist``, ``npz`` with atoms) use the
model's automatic method: quadrature in low dimension, otherwise Monte Carlo
with common random numbers through the blocked engine
(:mod:`noisealloc.theory.empirical`).  For discrete data the JSON also holds the
budget check ``int h dlam = H(pi)``: the trapezoid rule over the grid plus the
left tail ``1/2 e^{lam_min} mmse(lam_min)``, its Monte-Carlo standard error
(from the per-sample integrals, so the correlation that common random numbers
induce between levels is accounted for), Simpson's rule on the same grid as a
discretisation-error estimate, and bounds on what lies outside the grid.
"""

from __future__ import annotations

import json
import os
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    parser.add_argument("--data", required=True, metavar="SPEC",
                        help="data SPEC: dirac:K=5,D=1,sep=2,seed=0 | gaussian:D=8,k=2 | circle:D=2,r=1 | digits | "
                             "mnist[:PATH] | npz:PATH")
    parser.add_argument("--lam-min", type=float, default=-12.0, metavar="A", help="smallest log-SNR (default -12)")
    parser.add_argument("--lam-max", type=float, default=12.0, metavar="B", help="largest log-SNR (default 12)")
    parser.add_argument("--levels", type=int, default=64, metavar="L", help="number of equally spaced levels (default 64)")
    parser.add_argument("--samples", type=int, default=512, metavar="S", help="Monte-Carlo samples (default 512)")
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="random seed (default 0)")
    parser.add_argument("--coordinate", default="lambda", metavar="C",
                        help="coordinate of the entropy rate: lambda, sigma, log-sigma, t-linear, t-cosine, t-edm, t-rf")
    parser.add_argument("--block-size", type=int, default=None, metavar="B", help="atoms per block (memory bound)")
    parser.add_argument("--float32", action="store_true", help="float32 distance GEMM (float64 accumulation)")
    parser.add_argument("--out", required=True, metavar="FILE.json", help="output JSON (written atomically)")
    parser.add_argument("--plot", default=None, metavar="FILE.png", help="plot h(lam) with a 2-SE band and H(lam)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _check_args(args) -> None:
    from noisealloc.theory.coordinates import get_coordinate
    from noisealloc.theory.errors import check_interval

    check_interval(args.lam_min, args.lam_max, "--lam-min/--lam-max")
    if args.levels < 3:
        raise ValueError(f"--levels must be >= 3 (the budget uses Simpson's rule); got {args.levels}")
    if args.samples < 2:
        raise ValueError(f"--samples must be >= 2 (a standard error needs two samples); got {args.samples}")
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0; got {args.seed}")
    if args.block_size is not None and args.block_size < 1:
        raise ValueError(f"--block-size must be a positive integer; got {args.block_size}")
    get_coordinate(args.coordinate)  # raises ValueError naming the allowed coordinates
    for opt, path, ext in (("--out", args.out, ".json"), ("--plot", args.plot, ".png")):
        if path is None:
            continue
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"{opt}: directory {directory} does not exist")


def _discrete_monte_carlo(model, lam, args):
    import numpy as np

    from noisealloc.theory.empirical import information_samples
    from noisealloc.theory.information import grid_quadrature_weights

    smp = information_samples(
        model.atoms, model.weights, lam, n_samples=args.samples, rng=args.seed, block_size=args.block_size,
        float32_distances=args.float32, progress=not args.quiet,
    )
    mmse, mmse_se = smp.mean_stderr(smp.mmse)
    H, H_se = smp.mean_stderr(smp.entropy)
    trap, simp = grid_quadrature_weights(lam)
    half_snr = 0.5 * np.exp(lam)[:, None]
    h_samples = half_snr * smp.mmse
    # Left tail: for lam < lam_min, mmse(lam) lies in [mmse(lam_min), total variance]; the lower end is
    # added (per sample, so its error is in the standard error), the gap is reported as a bound.
    tail = 0.5 * np.exp(lam[0]) * smp.mmse[0]
    b_trap, b_trap_se = smp.mean_stderr(trap @ h_samples + tail)
    b_simp, _ = smp.mean_stderr(simp @ h_samples + tail)
    drop, drop_se = smp.mean_stderr(smp.entropy[0] - smp.entropy[-1])
    info = dict(smp.info)
    return {
        "mmse": (mmse, mmse_se),
        "conditional_entropy": (H, H_se),
        "method": "monte-carlo",
        "budget": {"trapezoid": b_trap, "stderr": b_trap_se, "simpson": b_simp, "entropy_drop": drop,
                   "entropy_drop_stderr": drop_se, "left_tail_included": float(np.mean(tail))},
        "info": info,
    }


def _discrete_model_method(model, lam, args):
    import numpy as np

    from noisealloc.theory.information import grid_quadrature_weights

    res = model.information(lam, n_samples=args.samples, rng=args.seed)
    m, H = res.mmse, res.conditional_entropy
    trap, simp = grid_quadrature_weights(lam)
    h = 0.5 * np.exp(lam) * m.value
    tail = 0.5 * np.exp(lam[0]) * m.value[0]
    return {
        "mmse": (m.value, m.stderr),
        "conditional_entropy": (H.value, H.stderr),
        "method": m.method,
        "budget": {"trapezoid": float(trap @ h + tail), "stderr": float(np.sqrt(np.sum((trap * 0.5 * np.exp(lam) * m.stderr) ** 2))),
                   "simpson": float(simp @ h + tail), "entropy_drop": float(H.value[0] - H.value[-1]),
                   "entropy_drop_stderr": float(np.hypot(H.stderr[0], H.stderr[-1])), "left_tail_included": float(tail)},
        "info": {"error_check": m.error_check, **dict(m.info)},
    }


def compute(args) -> dict:
    """Run the computation for parsed ``args``; return the JSON-ready document."""
    import numpy as np

    from noisealloc import __version__
    from noisealloc.theory.coordinates import get_coordinate
    from noisealloc.theory.datasets import load_data
    from noisealloc.theory.estimates import Estimate
    from noisealloc.theory.information import entropy_rate_from_mmse

    _check_args(args)
    model = load_data(args.data)
    lam = np.linspace(args.lam_min, args.lam_max, args.levels)
    coord = get_coordinate(args.coordinate)
    doc = {"lam": lam.tolist(), "coordinate": coord.name}
    meta = {"data": args.data, "seed": args.seed, "version": __version__, "levels": args.levels,
            "lam_min": args.lam_min, "lam_max": args.lam_max, "samples": args.samples,
            "block_size": args.block_size, "float32": bool(args.float32), "model": repr(model),
            "convention": "x = x0 + sigma*eps, sigma = exp(-lam/2); entropies in nats"}
    if getattr(model, "discrete", False):
        method = model.choose_method() if hasattr(model, "choose_method") else "monte-carlo"
        out = _discrete_monte_carlo(model, lam, args) if method == "monte-carlo" else _discrete_model_method(model, lam, args)
        mmse, mmse_se = out["mmse"]
        H, H_se = out["conditional_entropy"]
        doc["conditional_entropy"] = np.asarray(H).tolist()
        doc["conditional_entropy_stderr"] = np.asarray(H_se).tolist()
        H_pi = float(model.entropy)
        b = out["budget"]
        total_var = float(model.weights @ ((model.atoms - model.weights @ model.atoms) ** 2).sum(axis=1))
        h_end = 0.5 * np.exp(lam[-1]) * mmse[-1]
        se = b["stderr"]
        b.update({
            "H_pi": H_pi,
            "rule": "trapezoid on the lam grid + left tail 1/2 e^lam_min mmse(lam_min)",
            "value": b["trapezoid"],
            "discretisation_error_estimate": abs(b["trapezoid"] - b["simpson"]),
            "abs_error": abs(b["trapezoid"] - H_pi),
            "left_tail_bound": 0.5 * np.exp(lam[0]) * max(total_var - mmse[0], 0.0),
            "rate_at_lam_max": float(h_end),
            "z": (b["trapezoid"] - H_pi) / se if se > 0 else None,
            "within_4_stderr": bool(abs(b["trapezoid"] - H_pi) <= 4 * se) if se > 0 else None,
        })
        meta["budget"] = {k: (float(v) if isinstance(v, (np.floating, float)) else v) for k, v in b.items()}
        meta["method"] = out["method"]
        # Timings are left out so that the same seed gives an identical file.
        meta["engine"] = {k: v for k, v in out["info"].items()
                          if isinstance(v, (int, float, str, bool, type(None))) and not k.startswith("seconds")}
        mmse_est = Estimate(mmse, mmse_se, out["method"])
    else:
        from noisealloc.theory.protocol import monte_carlo_options

        mc = monte_carlo_options(model, n_samples=args.samples, rng=args.seed)
        mmse_est = model.mmse(lam, **mc)
        mmse, mmse_se = mmse_est.value, mmse_est.stderr
        doc["conditional_entropy"] = None
        doc["conditional_entropy_stderr"] = None
        if hasattr(model, "mutual_information"):
            mi = model.mutual_information(lam, **mc)
            doc["mutual_information"] = np.asarray(mi.value).tolist()
            doc["mutual_information_stderr"] = np.asarray(mi.stderr).tolist()
        meta["method"] = mmse_est.method
    rate = entropy_rate_from_mmse(lam, mmse_est, coord)
    doc["u"] = (lam if coord.name == "lambda" else coord.from_lam(lam)).tolist()
    doc["mmse"] = np.asarray(mmse).tolist()
    doc["mmse_stderr"] = np.asarray(mmse_se).tolist()
    doc["entropy_rate"] = np.asarray(rate.value).tolist()
    doc["entropy_rate_stderr"] = np.asarray(rate.stderr).tolist()
    doc["entropy_rate_lambda"] = (0.5 * np.exp(lam) * np.asarray(mmse)).tolist()
    doc["entropy_rate_lambda_stderr"] = (0.5 * np.exp(lam) * np.asarray(mmse_se)).tolist()
    doc["meta"] = meta
    return doc


def plot(doc: dict, path: str) -> None:
    """h(lam) with a +-2 SE band and H(lam) on a second axis; written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    lam = np.asarray(doc["lam"])
    h = np.asarray(doc["entropy_rate_lambda"])
    se = np.asarray(doc["entropy_rate_lambda_stderr"])
    fig, ax = plt.subplots(figsize=(7, 4.2), constrained_layout=True)
    ax.fill_between(lam, h - 2 * se, h + 2 * se, color="C0", alpha=0.25, lw=0, label="h(λ) ± 2 SE")
    ax.plot(lam, h, color="C0", lw=1.6, label="h(λ) = ½ e^λ mmse(λ)")
    ax.set_xlabel("λ = log-SNR")
    ax.set_ylabel("entropy rate h(λ)  [nats per unit λ]", color="C0")
    handles, labels = ax.get_legend_handles_labels()
    if doc.get("conditional_entropy") is not None:
        ax2 = ax.twinx()
        H = np.asarray(doc["conditional_entropy"])
        Hse = np.asarray(doc["conditional_entropy_stderr"])
        ax2.fill_between(lam, H - 2 * Hse, H + 2 * Hse, color="C3", alpha=0.2, lw=0)
        ax2.plot(lam, H, color="C3", lw=1.4, ls="--", label="H(λ) = H[x0 | x]")
        ax2.set_ylabel("conditional entropy H(λ)  [nats]", color="C3")
        ax2.set_ylim(bottom=0)
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    meta = doc["meta"]
    title = f"{meta['data']}: generative entropy rate ({meta['method']})"
    b = meta.get("budget")
    if b:
        title += f"\n∫h dλ = {b['value']:.4f} ± {b['stderr']:.4f}  vs  H(π) = {b['H_pi']:.4f}"
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.legend(handles, labels, loc="center right", fontsize=8)
    try:
        from noisealloc.commands._output import savefig_atomic

        savefig_atomic(fig, path)
    finally:
        plt.close(fig)


def run(args) -> int:
    doc = compute(args)
    from noisealloc.theory.schedule_io import atomic_write

    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    atomic_write(args.out, lambda fh: fh.write(text.encode()))
    if args.plot:
        plot(doc, args.plot)
    b = doc["meta"].get("budget")
    line = f"wrote {args.out}: {len(doc['lam'])} levels, method {doc['meta']['method']}"
    if b:
        line += (f"; budget int h dlam = {b['value']:.5f} +- {b['stderr']:.5f} (H(pi) = {b['H_pi']:.5f}, "
                 f"z = {b['z'] if b['z'] is None else round(b['z'], 2)}, discretisation {b['discretisation_error_estimate']:.1e})")
    print(line, file=sys.stdout)
    return 0
