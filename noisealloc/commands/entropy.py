"""``noisealloc entropy``: MMSE, conditional entropy and generative entropy rate of a data set.

Parse, call :func:`noisealloc.theory.information.profile.information_profile`, write.  Levels are an
equally spaced grid in the log-SNR ``lam`` (VE scaling ``x = x0 + sigma eps``,
``sigma = exp(-lam/2)``).  Discrete data (Dirac mixtures: ``dirac:...``, ``digits``,
``mnist``, ``npz`` with atoms) use the model's automatic method: quadrature in low
dimension, otherwise Monte Carlo with common random numbers through the blocked engine
(:mod:`noisealloc.theory.posterior.engine`).  For discrete data the JSON also holds the budget
check ``int_a^b h dlam = H(a) - H(b)`` on ``[a, b] = [lam_min, lam_max]`` (which tends to
``H(pi)``, also reported), with the library's one pass rule
(:data:`noisealloc.theory.information.budget.BUDGET_RULE`): adaptive quadrature for
deterministic models; for Monte Carlo the grid trapezoid with the standard error of the
difference from per-sample values (common random numbers make the levels' errors
correlated) and Simpson's rule on the same grid as a discretisation-error estimate.
"""

from __future__ import annotations

import os
import sys

from noisealloc.theory.request_limits import MAX_LEVELS, MAX_SAMPLES

__all__ = ["add_arguments", "run"]

#: Bytes per level squared of a request: the Simpson weights of the budget check are formed from an
#: L x L identity (theory.information.grid_quadrature_weights; peak about six such arrays, measured).
_BYTES_PER_LEVEL2 = 48
#: Bytes per (level, sample) pair: per-sample mmse and entropy arrays and their temporaries (measured).
_BYTES_PER_LEVEL_SAMPLE = 64


def add_arguments(parser) -> None:
    parser.add_argument("--data", required=True, metavar="SPEC",
                        help="data SPEC: dirac:K=5,D=1,sep=2,seed=0 | gaussian:D=8,k=2 | circle:D=2,r=1 | digits | "
                             "mnist[:PATH] | npz:PATH; with --process masked: npz:PATH (integer atoms K x L) | "
                             "digits-binarised | mnist-binarised[:PATH] | markov:V=2,L=12,stay=0.9")
    parser.add_argument("--process", choices=("gaussian", "masked"), default="gaussian",
                        help="forward process: Gaussian noise in log-SNR (default) or masking in log-odds "
                             "lam = log(alpha/eps) (docs/THEORY.md section 7)")
    parser.add_argument("--law", choices=("auto", "empirical", "smoothed"), default="auto",
                        help="--process masked: law of a sample of strings (auto: Aitchison-Aitken smoothed for "
                             "binarised images, the strings themselves for npz)")
    parser.add_argument("--lam-min", type=float, default=-12.0, metavar="A", help="smallest log-SNR (default -12)")
    parser.add_argument("--lam-max", type=float, default=12.0, metavar="B", help="largest log-SNR (default 12)")
    parser.add_argument("--levels", type=int, default=64, metavar="L",
                        help=f"number of equally spaced levels (default 64; 3 to {MAX_LEVELS} without --allow-large)")
    parser.add_argument("--samples", type=int, default=512, metavar="S",
                        help=f"Monte-Carlo samples (default 512; 2 to {MAX_SAMPLES} without --allow-large)")
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="random seed (default 0)")
    parser.add_argument("--coordinate", default="lambda", metavar="C",
                        help="coordinate of the entropy rate: lambda, sigma, log-sigma, t-linear, t-cosine, t-edm, t-rf")
    parser.add_argument("--block-size", type=int, default=None, metavar="B", help="atoms per block (memory bound)")
    parser.add_argument("--float32", action="store_true", help="float32 distance GEMM (float64 accumulation)")
    parser.add_argument("--no-importance", action="store_true",
                        help="Monte Carlo: plain draws from the data law (the GEMM engine; --block-size, --float32) "
                             "instead of the importance sampler that covers the high-SNR boundary layers")
    parser.add_argument("--out", required=True, metavar="FILE.json", help="output JSON (written atomically)")
    parser.add_argument("--plot", default=None, metavar="FILE.png", help="plot h(lam) with a 2-SE band and H(lam)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--allow-large", action="store_true",
                        help="lift the limits on --levels and --samples (the estimated memory is still checked "
                             "against the available memory)")


def _check_args(args) -> None:
    from noisealloc.theory.coordinates import get_coordinate
    from noisealloc.theory.errors import check_interval

    check_interval(args.lam_min, args.lam_max, "--lam-min/--lam-max")
    from noisealloc.theory.request_limits import check_memory, check_size

    if args.levels < 3:
        raise ValueError(f"--levels must be >= 3 (the budget uses Simpson's rule); got {args.levels}")
    if args.samples < 2:
        raise ValueError(f"--samples must be >= 2 (a standard error needs two samples); got {args.samples}")
    allow = getattr(args, "allow_large", False)
    check_size("--levels", args.levels, MAX_LEVELS, minimum=3, allow_large=allow)
    check_size("--samples", args.samples, MAX_SAMPLES, minimum=2, allow_large=allow)
    check_memory(_BYTES_PER_LEVEL2 * float(args.levels) ** 2
                 + _BYTES_PER_LEVEL_SAMPLE * float(args.levels) * float(args.samples),
                 f"--levels {args.levels} --samples {args.samples}")
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0; got {args.seed}")
    if (args.block_size is not None or args.float32) and not args.no_importance:
        raise ValueError("--block-size and --float32 are options of the plain engine: add --no-importance")
    if args.block_size is not None and args.block_size < 1:
        raise ValueError(f"--block-size must be a positive integer; got {args.block_size}")
    get_coordinate(args.coordinate)  # raises ValueError naming the allowed coordinates
    if args.process == "masked" and args.coordinate != "lambda":
        raise ValueError("--coordinate applies to --process gaussian; the masked rate is per unit log-odds lambda")
    for opt, path, ext in (("--out", args.out, ".json"), ("--plot", args.plot, ".png")):
        if path is None:
            continue
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"{opt}: directory {directory} does not exist")


def _budget_doc(prof) -> dict:
    """The JSON form of the profile's budget check: every number and the verdict come from the library's
    :class:`~noisealloc.theory.information.budget.BudgetCheck` (its one rule, ``BUDGET_RULE``)."""
    import numpy as np

    b = prof.budget
    doc = {
        "trapezoid": b.grid_trapezoid,
        "stderr": b.stderr,
        "simpson": b.grid_simpson,
        "entropy_drop": b.target,
        "entropy_drop_stderr": b.target_stderr,
        # Nothing outside [lam_min, lam_max] is added: the target is H(lam_min) - H(lam_max) on the same interval.
        "left_tail_included": 0.0,
        "H_pi": b.entropy,
        "rule": b.description,
        "value": b.value,
        "target": b.target,
        "discretisation_error_estimate": b.abs_error,
        "abs_error": abs(b.error),
        "left_tail_bound": b.left_tail_bound,
        "rate_at_lam_max": float(prof.entropy_rate.value[-1]),
        "z": b.z,
        "holds": b.holds,
        "covers_budget": b.covers_budget,
        "tolerance": b.tolerance,
        "method": b.method,
    }
    return {k: (float(v) if isinstance(v, (np.floating, float)) else v) for k, v in doc.items()}


def compute_masked(args) -> dict:
    """The masked process: every number from :func:`noisealloc.theory.masked.data.masked_profile`."""
    import numpy as np

    from noisealloc import __version__
    from noisealloc.theory.masked.data import load_masked_data, masked_profile

    model, law, why = load_masked_data(args.data, law=args.law)
    lam = np.linspace(args.lam_min, args.lam_max, args.levels)
    prof = masked_profile(model, lam, n_samples=args.samples, rng=args.seed)
    info, b = prof.information, prof.budget
    ce = info.conditional_entropy
    budget = {"value": b.value, "stderr": b.stderr, "target": b.entropy, "target_stderr": b.entropy_stderr,
              "H_pi": b.entropy, "abs_error": b.abs_error, "tail_bound": b.tail_bound, "tolerance": b.tolerance,
              "z": b.z, "holds": b.holds, "rule": b.rule, "message": b.message,
              "discretisation_error_estimate": b.abs_error}
    return {"lam": lam.tolist(), "coordinate": "lambda (log-odds log(alpha/eps))", "u": lam.tolist(),
            "entropy_rate": info.entropy_rate.value.tolist(), "entropy_rate_stderr": info.entropy_rate.stderr.tolist(),
            "entropy_rate_lambda": info.entropy_rate.value.tolist(),
            "entropy_rate_lambda_stderr": info.entropy_rate.stderr.tolist(),
            "conditional_entropy": None if ce is None else ce.value.tolist(),
            "conditional_entropy_stderr": None if ce is None else ce.stderr.tolist(),
            "erasure_entropy": info.erasure_entropy.value.tolist(),
            "erasure_entropy_stderr": info.erasure_entropy.stderr.tolist(),
            "optimal_loss": info.loss.value.tolist(), "optimal_loss_stderr": info.loss.stderr.tolist(),
            "meta": {"data": args.data, "process": "masked", "law": law, "law_reason": why, "seed": args.seed,
                     "version": __version__, "levels": args.levels, "lam_min": args.lam_min, "lam_max": args.lam_max,
                     "samples": args.samples, "model": type(model).__name__, "method": "monte-carlo (exact per-sample "
                     "values over strings and nested masks)", "budget": budget,
                     "convention": "token kept with alpha = sigmoid(lam), masked with eps = 1 - alpha; nats"}}


def compute(args) -> dict:
    """Run the computation for parsed ``args``; return the JSON-ready document.

    Every number comes from :func:`noisealloc.theory.information.profile.information_profile`.
    """
    import numpy as np

    from noisealloc import __version__
    from noisealloc.theory.coordinates import get_coordinate
    from noisealloc.theory.models.datasets import load_data
    from noisealloc.theory.information.profile import information_profile

    _check_args(args)
    if args.process == "masked":
        return compute_masked(args)
    if args.law != "auto":
        raise ValueError("--law applies to --process masked (the Gaussian entropy of a data set has one law: use "
                         "noisealloc schedule --law to pick the law of a schedule)")
    model = load_data(args.data)
    lam = np.linspace(args.lam_min, args.lam_max, args.levels)
    coord = get_coordinate(args.coordinate)
    engine = None
    if model.monte_carlo:
        engine = {"importance": True, "progress": not args.quiet}
        if args.no_importance:
            engine.update(importance=False, block_size=args.block_size, float32_distances=bool(args.float32))
    prof = information_profile(model, lam, n_samples=args.samples, rng=args.seed, engine_options=engine)
    doc = {"lam": lam.tolist(), "coordinate": coord.name}
    meta = {"data": args.data, "seed": args.seed, "version": __version__, "levels": args.levels,
            "lam_min": args.lam_min, "lam_max": args.lam_max, "samples": args.samples,
            "block_size": args.block_size, "float32": bool(args.float32), "model": repr(model),
            "importance": not args.no_importance,
            "convention": "x = x0 + sigma*eps, sigma = exp(-lam/2); entropies in nats"}
    if getattr(model, "n_merged", 0):
        meta["merged_duplicate_atoms"] = int(model.n_merged)
    if prof.discrete:
        doc["conditional_entropy"] = prof.conditional_entropy.value.tolist()
        doc["conditional_entropy_stderr"] = prof.conditional_entropy.stderr.tolist()
        meta["budget"] = _budget_doc(prof)
        meta["method"] = prof.method
        # Timings are left out so that the same seed gives an identical file.
        meta["engine"] = {k: v for k, v in prof.info.items()
                          if isinstance(v, (int, float, str, bool, type(None))) and not k.startswith("seconds")}
    else:
        doc["conditional_entropy"] = None
        doc["conditional_entropy_stderr"] = None
        if prof.mutual_information is not None:
            doc["mutual_information"] = prof.mutual_information.value.tolist()
            doc["mutual_information_stderr"] = prof.mutual_information.stderr.tolist()
        meta["method"] = prof.method
    rate = prof.entropy_rate_in(coord)
    doc["u"] = (lam if coord.name == "lambda" else coord.from_lam(lam)).tolist()
    doc["mmse"] = prof.mmse.value.tolist()
    doc["mmse_stderr"] = prof.mmse.stderr.tolist()
    doc["entropy_rate"] = rate.value.tolist()
    doc["entropy_rate_stderr"] = rate.stderr.tolist()
    doc["entropy_rate_lambda"] = prof.entropy_rate.value.tolist()
    doc["entropy_rate_lambda_stderr"] = prof.entropy_rate.stderr.tolist()
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
        title += (f"\n∫h dλ = {b['value']:.4f} ± {b['stderr']:.4f}  vs  H(λmin) − H(λmax) = {b['target']:.4f}"
                  f"  (H(π) = {b['H_pi']:.4f}; {'holds' if b['holds'] else 'FAILS'})")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.legend(handles, labels, loc="center right", fontsize=8)
    try:
        from noisealloc.theory.output import write_figure

        write_figure(fig, path)
    finally:
        plt.close(fig)


def run(args) -> int:
    doc = compute(args)
    from noisealloc.theory.output import write_json

    write_json(args.out, doc, sort_keys=False)
    if args.plot:
        plot(doc, args.plot)
    b = doc["meta"].get("budget")
    line = f"wrote {args.out}: {len(doc['lam'])} levels, method {doc['meta']['method']}"
    if b and doc["meta"].get("process") == "masked":
        target = f"{b['H_pi']:.5f}" + (f" +- {b['target_stderr']:.5f}" if b["target_stderr"] else "")
        z = b["z"] if b["z"] is None else round(b["z"], 2)
        line += (f"; budget int h dlam = {b['value']:.5f} +- {b['stderr']:.5f} vs H(pi) = {target} (tails beyond "
                 f"the grid <= {b['tail_bound']:.1e}, z = {z}, {'holds' if b['holds'] else 'FAILS'})")
    elif b:
        line += (f"; budget int h dlam = {b['value']:.5f} +- {b['stderr']:.5f} vs H(lam_min) - H(lam_max) = "
                 f"{b['target']:.5f} (H(pi) = {b['H_pi']:.5f}, z = {b['z'] if b['z'] is None else round(b['z'], 2)}, "
                 f"discretisation {b['discretisation_error_estimate']:.1e}, {'holds' if b['holds'] else 'FAILS'})")
    merged = doc["meta"].get("merged_duplicate_atoms")
    if merged:
        line += f"; {merged} duplicate atom(s) merged into earlier ones (weights added)"
    print(line, file=sys.stdout)
    return 1 if b and not b["holds"] else 0  # a failed check exits 1 (README)
