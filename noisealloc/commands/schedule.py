"""``noisealloc schedule``: an entropic training schedule from data or from measured losses.

Examples::

    noisealloc schedule --from-data dirac:K=5,D=1,sep=2 --rule sqrt-entropy --out s.json --plot s.png
    noisealloc schedule --from-losses losses.csv --floor 0.05 --out s.json --plot s.png
    noisealloc schedule --from-data digits --compare s.json builtins.json

The schedule is the square-root entropic density p_u ∝ sqrt(h_u) (or the entropic
density p_u ∝ h_u) in the chosen coordinate u (docs/THEORY.md section 4 (b)),
exported in the schedule format of ``noisealloc.theory.schedules.io``.
"""

from __future__ import annotations

import numpy as np

COORDINATE_CHOICES = ("lambda", "sigma", "log-sigma", "t", "t-linear", "t-cosine", "t-edm", "t-rf")
#: Coordinates of the masked process (noisealloc.theory.masked.process.MASKED_COORDINATES) besides lambda.
MASKED_COORDINATE_CHOICES = ("eps", "t-masked", "t-masked-cosine", "t-maskgit")


def add_arguments(parser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-data", metavar="SPEC", help="data SPEC (see `noisealloc entropy --help`): dirac:..., "
                     "gaussian:..., circle:..., digits, mnist[:PATH], npz:PATH")
    src.add_argument("--from-losses", metavar="FILE.csv", help="per-level held-out losses of a trained model: one "
                     "noise-level column (lam, sigma, t, ...) and one of loss_x0, loss_eps, loss_v; optional loss_se")
    parser.add_argument("--process", choices=("gaussian", "masked"), default="gaussian",
                        help="forward process: Gaussian noise (log-SNR lambda, default) or masking (log-odds lambda = "
                             "log(alpha/eps), docs/THEORY.md section 7); masked SPECs: npz:PATH with integer atoms, "
                             "digits-binarised, mnist-binarised[:PATH], markov:V=2,L=12,stay=0.9; masked losses: a "
                             "CSV with lam, eps or t (alpha = 1 - t) and loss_ce (nats per string over masked tokens)")
    parser.add_argument("--rule", choices=("sqrt-entropy", "entropy"), default="sqrt-entropy")
    parser.add_argument("--coordinate", choices=COORDINATE_CHOICES + MASKED_COORDINATE_CHOICES, default="lambda",
                        help="coordinate of the learners (the square-root law depends on it); masked: lambda, eps, "
                             "t-masked (alpha = 1 - t), t-masked-cosine, t-maskgit, and the file is written in lambda")
    parser.add_argument("--lam-min", type=float, default=None, help="default -12 (data) or the measured range (losses)")
    parser.add_argument("--lam-max", type=float, default=None, help="default 12 (data) or the measured range (losses)")
    parser.add_argument("--levels", type=int, default=129,
                        help="log-SNR levels of the profile (default 129; 3 to 1000000 without --allow-large)")
    parser.add_argument("--allow-large", action="store_true",
                        help="lift the limits on --levels and --samples (the estimated memory is still checked "
                             "against the available memory)")
    parser.add_argument("--samples", type=int, default=None,
                        help="Monte-Carlo samples per level where needed (default 4096; 1024 for --law smoothed)")
    parser.add_argument("--law", choices=("auto", "empirical", "smoothed"), default=None,
                        help="law of --from-data: 'empirical' (the sample as a Dirac mixture: the h of a model that "
                             "memorises it), 'smoothed' (manifold-smoothed sample: a population h that plateaus at "
                             "d/2), or 'auto' (smoothed for images such as digits and mnist, empirical for data that "
                             "are discrete by construction); printed, stored in the JSON and shown in the plot")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--floor", type=float, default=0.0, metavar="EPS", help="uniform mixture weight in [0, 1)")
    parser.add_argument("--compare", nargs="+", metavar="FILE.json", default=None,
                        help="schedule files (one schedule or a collection) to rank by the independent-learner loss "
                             "factor against this profile")
    parser.add_argument("--out", metavar="FILE.json", help="write the schedule (noisealloc.schedule v1)")
    parser.add_argument("--plot", metavar="FILE.png")


def _check_process(args) -> None:
    """Options that belong to one process only, refused before any work."""
    if args.process == "masked":
        if args.coordinate not in ("lambda",) + MASKED_COORDINATE_CHOICES:
            raise ValueError(f"--coordinate {args.coordinate} is a coordinate of the Gaussian process; --process masked "
                             f"takes lambda, {', '.join(MASKED_COORDINATE_CHOICES)}")
        if args.compare and args.coordinate != "lambda":
            raise ValueError("--compare with --process masked ranks schedules in lambda: drop --coordinate")
    elif args.coordinate in MASKED_COORDINATE_CHOICES:
        raise ValueError(f"--coordinate {args.coordinate} is a coordinate of the masked process (add --process masked)")


def _masked_profile_from_data(args):
    import sys

    from noisealloc.theory.errors import check_interval
    from noisealloc.theory.masked.data import load_masked_data
    from noisealloc.theory.masked.process import get_masked_coordinate
    from noisealloc.theory.masked.schedules import masked_schedule_from_model

    lo = -12.0 if args.lam_min is None else args.lam_min
    hi = 12.0 if args.lam_max is None else args.lam_max
    lo, hi = check_interval(lo, hi, "[--lam-min, --lam-max]")
    model, law, why = load_masked_data(args.from_data, law=args.law or "auto")
    print(f"law: {law} ({why}); masked process, log-odds lambda", file=sys.stderr, flush=True)
    coord = args.coordinate if args.coordinate == "lambda" else get_masked_coordinate(args.coordinate)
    lam = np.linspace(lo, hi, args.levels)
    res = masked_schedule_from_model(model, lam, rule=args.rule, coordinate=coord, floor=args.floor,
                                     n_samples=512 if args.samples is None else args.samples, rng=args.seed)
    return {"lam": res.lam, "h": res.h, "h_stderr": res.h_stderr, "method": res.method, "law": law,
            "source": {"data": args.from_data, "law": law, "law_reason": why, "process": "masked"},
            "schedule": res.schedule, "plateau": None, "data_scale": None}


def _masked_profile_from_losses(args):
    from noisealloc.theory.masked.data import read_masked_losses
    from noisealloc.theory.masked.process import get_masked_coordinate
    from noisealloc.theory.masked.schedules import masked_schedule_from_losses

    table = read_masked_losses(args.from_losses)
    lo_m, hi_m = float(table.lam[0]), float(table.lam[-1])
    lo = lo_m if args.lam_min is None else args.lam_min
    hi = hi_m if args.lam_max is None else args.lam_max
    if lo < lo_m - 1e-9 or hi > hi_m + 1e-9 or not lo < hi:
        raise ValueError(f"[--lam-min, --lam-max] = [{lo:g}, {hi:g}] must be a non-empty part of the measured "
                         f"range [{lo_m:.6g}, {hi_m:.6g}] of {args.from_losses}")
    keep = (table.lam >= lo - 1e-9) & (table.lam <= hi + 1e-9)
    coord = args.coordinate if args.coordinate == "lambda" else get_masked_coordinate(args.coordinate)
    res = masked_schedule_from_losses(table.lam[keep], table.loss[keep],
                                      loss_stderr=None if table.stderr is None else table.stderr[keep],
                                      rule=args.rule, coordinate=coord, floor=args.floor)
    return {"lam": res.lam, "h": res.h, "h_stderr": res.h_stderr, "method": "measured masked losses (h = alpha L)",
            "law": "measured losses", "schedule": res.schedule, "plateau": None, "data_scale": None,
            "source": {"losses": args.from_losses, "law": "measured losses", "process": "masked", **table.source}}


def _profile_from_data(args):
    import sys

    from noisealloc.theory.errors import check_interval
    from noisealloc.theory.models.datasets import load_data
    from noisealloc.theory.schedules.data_scale import data_scale
    from noisealloc.theory.schedules.entropic import resolve_law, schedule_from_data

    lo = -12.0 if args.lam_min is None else args.lam_min
    hi = 12.0 if args.lam_max is None else args.lam_max
    lo, hi = check_interval(lo, hi, "[--lam-min, --lam-max]")
    model = load_data(args.from_data)
    choice = resolve_law(model, args.law or "auto")  # before the work: a refused --law costs nothing
    if choice.law == "smoothed":
        print(f"law: smoothed ({choice.reason}): {model.atoms.shape[0]} components; estimating the intrinsic "
              "dimension and h", file=sys.stderr, flush=True)
    else:
        print(f"law: {choice.law} ({choice.reason})", file=sys.stderr, flush=True)
    lam = np.linspace(lo, hi, args.levels)
    ds = schedule_from_data(model, lam, law=args.law or "auto", rule=args.rule, coordinate=args.coordinate, floor=args.floor,
                            n_samples=args.samples, rng=args.seed)
    res = ds.result
    extra = {}
    if ds.smoothed is not None:
        d_hat = ds.smoothed.intrinsic_dimension
        print(f"smoothed law: intrinsic dimension {d_hat.value:.3g} (Levina-Bickel, k = {d_hat.k}) -> rank "
              f"{ds.smoothed.rank}; h at {ds.n_levels} levels x {ds.n_samples} samples, interpolated to "
              f"{args.levels}", file=sys.stderr, flush=True)
        extra = {"intrinsic_dimension": d_hat.value, "rank": ds.smoothed.rank}
    source = {"data": args.from_data, "law": choice.law, "law_reason": choice.reason, **extra}
    return {"lam": res.lam, "h": res.h, "h_stderr": res.h_stderr, "method": res.method, "law": choice.law,
            "source": source, "schedule": res.schedule, "plateau": ds.plateau,
            "data_scale": data_scale(model, rng=args.seed)}


def _progress_printer(path):
    import sys
    import time

    state = {"last": time.monotonic()}

    def report(fraction, rows):
        # a line every few seconds on long reads only: a short file prints nothing
        now = time.monotonic()
        if now - state["last"] >= 2.0:
            state["last"] = now
            pct = "" if fraction is None else f" ({fraction:.0%} of the file)"
            print(f"reading {path}: {rows:,} rows{pct}", file=sys.stderr, flush=True)

    return report


def _profile_from_losses(args):
    import sys

    from noisealloc.theory.schedules.entropic import schedule_from_rate
    from noisealloc.theory.information.from_losses import fit_mmse_profile, loss_profile_warnings, read_loss_csv

    table = read_loss_csv(args.from_losses, progress=_progress_printer(args.from_losses))
    if table.source.get("form") != "per-level":
        print(f"{args.from_losses}: {table.source['rows']:,} per-sample losses binned into {table.lam.size} "
              "levels", file=sys.stderr)
    lo_m, hi_m = float(table.lam[0]), float(table.lam[-1])
    lo = lo_m if args.lam_min is None else args.lam_min
    hi = hi_m if args.lam_max is None else args.lam_max
    if lo < lo_m - 1e-9 or hi > hi_m + 1e-9 or not lo < hi:
        raise ValueError(f"[--lam-min, --lam-max] = [{lo:g}, {hi:g}] must be a non-empty part of the measured "
                         f"range [{lo_m:.6g}, {hi_m:.6g}] of {args.from_losses} (a fitted MMSE is not extrapolated)")
    prof = fit_mmse_profile(table.lam, table.loss, table.stderr, rng=args.seed)
    for msg in loss_profile_warnings(table, prof):
        print(f"warning: {msg}", file=sys.stderr)
    lam = np.linspace(lo, hi, args.levels)
    band = prof.band(lam, (0.025, 0.975))
    method = "monotone I-spline fit of log loss"
    res = schedule_from_rate(lam, prof.entropy_rate(lam), rule=args.rule, coordinate=args.coordinate,
                             floor=args.floor, method=method)
    return {"lam": lam, "h": res.h, "band": band, "method": method, "measured": table, "profile": prof,
            "law": "measured losses",
            "source": {"losses": args.from_losses, "law": "measured losses", **table.source, "fit": prof.info},
            "schedule": res.schedule}


def compare_rows(profile, schedules, coordinate: str):
    """Independent-learner loss factor of each schedule against the profile (Theorem 2).

    Returns a list of ``(name, LossFactor)``
    (:func:`noisealloc.theory.schedules.entropic.schedule_loss_factor`, the one rule).
    """
    from noisealloc.theory.schedules.entropic import schedule_loss_factor

    return [(name, schedule_loss_factor(profile["lam"], profile["h"], s, coordinate=coordinate))
            for name, s in schedules.items()]


def _load_any(path):
    import json

    from noisealloc.theory.schedules.io import load_json, load_schedules_json

    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except RecursionError:
        raise ValueError(f"--compare {path}: JSON nested too deeply to read") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"--compare {path}: not a JSON file ({exc})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"--compare {path}: expected a schedule JSON object (noisealloc.schedule or "
                         f"noisealloc.schedules); got a JSON {type(doc).__name__}")
    try:
        if doc.get("format") == "noisealloc.schedules":
            return load_schedules_json(path)
        s = load_json(path)
    except (ValueError, TypeError, KeyError) as exc:  # name the file: several may be compared
        raise ValueError(f"--compare {path}: {exc}") from None
    return {s.name: s}


#: Candidate places of the log inset in the h panel (axes fractions x0, y0, width, height), in order of
#: preference, and where the legend goes with each.
_INSET_BOXES = (([0.62, 0.52, 0.36, 0.42], "upper left"), ([0.60, 0.10, 0.36, 0.42], "upper left"),
                ([0.06, 0.52, 0.36, 0.42], "upper right"))


def _inset_box(lam, h, y_top: float):
    """The candidate inset box covering the fewest points of the curve ``h`` (ties: the first), and the legend's place."""
    x = (np.asarray(lam) - lam[0]) / max(float(lam[-1] - lam[0]), 1e-300)
    y = np.asarray(h) / y_top if y_top > 0 else np.zeros_like(x)
    margin = 0.03

    def covered(b):
        return int(np.count_nonzero((x >= b[0] - margin) & (x <= b[0] + b[2] + margin)
                                    & (y >= b[1] - margin) & (y <= b[1] + b[3] + margin)))

    return min(_INSET_BOXES, key=lambda c: covered(c[0]))


#: The log inset of the h panel spans this many decades below the maximum of h: below it h carries no
#: schedule mass worth seeing (the square-root density there is < 1e-4 of its peak).
PLOT_LOG_DECADES = 8.0
#: Heuristic schedules overlaid on the density panel, at the data's scale (docs/THEORY.md §5).
PLOT_HEURISTICS = ("edm_lognormal", "cosine")


def _plot(path, profile, schedule, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from noisealloc.theory.output import write_figure
    from noisealloc.theory.coordinates import get_coordinate
    from noisealloc.theory.schedules.data_scale import SIGMA_DATA, shifted_heuristic_pdfs

    c = get_coordinate(args.coordinate)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.6))
    lam, h = profile["lam"], profile["h"]
    h_max = float(np.max(h))
    lines = []  # (x, y, style kwargs) drawn in both the linear panel and its log inset
    lines.append((lam, h, dict(color="C0", lw=1.8, label=r"$h(\lambda) = \frac{1}{2} e^\lambda\,"
                                                           r"\mathrm{mmse}(\lambda)$")))
    bands = []
    if "band" in profile:
        bands.append((lam, profile["band"][0], profile["band"][1], "95% bootstrap band"))
        t = profile["measured"]
        keep = (t.lam >= lam[0]) & (t.lam <= lam[-1])
        lines.append((t.lam[keep], 0.5 * np.exp(t.lam[keep]) * t.loss[keep],
                      dict(color="k", ls="none", marker=".", ms=4, label=r"measured $\frac{1}{2} e^\lambda \times$ loss")))
    elif np.any(profile.get("h_stderr", 0) > 0):
        se = profile["h_stderr"]
        bands.append((lam, np.maximum(h - 2 * se, 0.0), h + 2 * se, r"$\pm 2$ s.e. (Monte Carlo)"))
    for x, y, kw in lines:
        ax1.plot(x, y, **kw)
    for x, lo_b, hi_b, label in bands:
        ax1.fill_between(x, lo_b, hi_b, color="C0", alpha=0.25, label=label)
    if profile.get("plateau") is not None:
        ax1.axhline(profile["plateau"], color="C2", ls="--", lw=1,
                    label=f"$d/2$ = {profile['plateau']:g} (population plateau)")
    top = max(h_max, max((float(np.max(b[2])) for b in bands), default=0.0))
    ax1.set_ylim(0.0, 1.15 * min(top, 3.0 * h_max) if h_max > 0 else 1.0)
    ax1.set_xlabel(r"log-SNR $\lambda$")
    ax1.set_ylabel(r"entropy rate $h(\lambda)$ [nats per unit $\lambda$]")
    ax1.set_title("entropy-rate profile (" + profile["method"] + ")", fontsize=9)
    # the inset goes where the panel is empty (fewest points of the h curve under it: upper right above a
    # fall, lower right under the plateau of a rise, upper left beside a late peak); the legend goes to
    # the upper left, or the upper right when the inset takes the upper left
    box, legend_loc = _inset_box(lam, h, ax1.get_ylim()[1])
    ax1.legend(fontsize=7, loc=legend_loc)
    ax1.grid(alpha=0.3)
    if h_max > 0:
        # log inset, clipped to PLOT_LOG_DECADES below the peak: the far tail (down to 1e-315 for
        # well-separated atoms) says nothing about the schedule
        ins = ax1.inset_axes(box)
        floor_y = h_max * 10.0 ** (-PLOT_LOG_DECADES)
        for x, y, kw in lines:
            ins.semilogy(x, np.where(y > floor_y, y, np.nan), **{k: v for k, v in kw.items() if k != "label"})
        for x, lo_b, hi_b, _ in bands:
            ins.fill_between(x, np.maximum(lo_b, floor_y), np.maximum(hi_b, floor_y), color="C0", alpha=0.25)
        ins.set_ylim(floor_y, 3.0 * h_max)
        ins.set_title(f"log scale ({PLOT_LOG_DECADES:g} decades)", fontsize=7)
        ins.tick_params(labelsize=6)
        ins.grid(alpha=0.3)
    u = np.linspace(*schedule.interval, 1000)
    ax2.plot(u, schedule.pdf(u), color="C1", lw=2, label=f"{args.rule}" + (f", floor {args.floor:g}" if args.floor else ""))
    # heuristics at the data's scale: p(lam) = p_h(lam + 2 log(s / sigma_data)), moved to the coordinate
    s_data = profile.get("data_scale")
    lam_fine = np.linspace(lam[0], lam[-1], 1000)
    pdfs = shifted_heuristic_pdfs(lam_fine, SIGMA_DATA if s_data is None else s_data, names=PLOT_HEURISTICS)
    u_fine = c.from_lam(lam_fine)
    scale_note = (f"shifted to the data scale s = {s_data:.3g}" if s_data is not None
                  else f"at their design scale sigma_data = {SIGMA_DATA:g} (data scale unknown)")
    for k, (name, p_lam) in enumerate(pdfs.items()):
        # p_u(u) = p_lam(lam(u)) |dlam/du|
        ax2.plot(u_fine, p_lam * np.abs(c.dlam_du(u_fine)), color=f"C{k + 3}", ls="--", lw=1.2, label=name)
    ax2.set_xlabel(c.label)
    ax2.set_ylabel(f"density per unit of {c.name}")
    ax2.set_title(f"schedule; heuristics {scale_note}", fontsize=8)
    ax2.legend(fontsize=7)
    ax2.grid(alpha=0.3)
    law = profile.get("law")
    if law == "smoothed":
        law += f" (intrinsic dimension {profile['source']['intrinsic_dimension']:.3g}, rank {profile['source']['rank']})"
    fig.suptitle("noisealloc schedule: " + ", ".join(f"{k}={v}" for k, v in profile["source"].items()
                                                     if k in ("data", "losses"))
                 + (f"; law: {law}" if law else ""), fontsize=10)
    fig.tight_layout()
    write_figure(fig, path)
    plt.close(fig)


def _check_size(args) -> None:
    """Refuse sizes above the limits (noisealloc.theory.request_limits) or the available memory, before computing."""
    from noisealloc.theory.request_limits import MAX_LEVELS, MAX_SAMPLES, check_memory, check_size

    allow = getattr(args, "allow_large", False)
    check_size("--levels", args.levels, MAX_LEVELS, minimum=3, allow_large=allow)
    samples = getattr(args, "samples", None)
    if samples is not None:
        check_size("--samples", samples, MAX_SAMPLES, minimum=2, allow_large=allow)
    # per-sample arrays over levels (mmse, entropy and temporaries: 64 bytes per pair, as entropy)
    check_memory(64.0 * args.levels * (samples or 4096), f"--levels {args.levels} --samples {samples or 4096}")


def run(args) -> int:
    from noisealloc import __version__
    from noisealloc.theory.schedules.io import save_json

    import math

    if args.levels < 3:  # one rule for both sources: a profile needs 3 levels to have a shape
        raise ValueError(f"--levels must be >= 3; got {args.levels}")
    # every value is checked before the work (--floor nan used to be refused after 21 s of it)
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0; got {args.seed}")
    if not (math.isfinite(args.floor) and 0.0 <= args.floor < 1.0):
        raise ValueError(f"--floor must lie in [0, 1); got {args.floor!r}")
    if args.from_losses is not None and args.law is not None:
        raise ValueError(f"--law {args.law} applies to --from-data only (the law of --from-losses is the measured "
                         "losses); drop --law")
    _check_size(args)
    # read before computing, so that a bad file is refused before any work or output
    _check_process(args)
    compared = [_load_any(path) for path in args.compare or []]
    if args.process == "masked":
        profile = _masked_profile_from_data(args) if args.from_data else _masked_profile_from_losses(args)
    else:
        profile = _profile_from_data(args) if args.from_data else _profile_from_losses(args)
    schedule = profile["schedule"]
    sl = schedule.to("lambda") if args.process == "gaussian" else _masked_in_lambda(schedule, profile["lam"])
    lam_mean = float(np.trapezoid(profile["lam"] * sl.pdf(profile["lam"]), profile["lam"]))
    above4 = float(sl.sf(4.0)) if sl.interval[0] < 4.0 < sl.interval[1] else float(sl.interval[0] >= 4.0)
    print(f"{args.rule} schedule in {args.coordinate} from the {profile['law']} law: lam in "
          f"[{profile['lam'][0]:g}, {profile['lam'][-1]:g}], {len(profile['lam'])} levels, profile method: "
          f"{profile['method']}, mean lam {lam_mean:.3f}, mass above lam = 4: {above4:.3f}")
    if args.out:
        meta = {"rule": args.rule, "coordinate": args.coordinate, "floor": args.floor, "seed": args.seed,
                "levels": args.levels, "method": profile["method"], "version": __version__,
                **{k: v for k, v in profile["source"].items() if isinstance(v, (str, int, float, dict))}}
        if args.process == "masked":
            from noisealloc.theory.masked.schedules import save_masked_json

            save_masked_json(schedule, args.out, meta=meta)  # always in lambda, built_in_coordinate kept
        else:
            save_json(schedule, args.out, meta=meta)
        print(f"wrote {args.out}")
    if args.compare:
        schedules = {f"{args.rule} (this profile)": schedule}
        for loaded in compared:
            schedules.update(loaded)
        rows = compare_rows(profile, schedules, args.coordinate)
        print(f"\nindependent-learner loss factor in {args.coordinate} (1 = optimal sqrt law; ELBO weight, decoupled)")
        print("note: heuristic schedules assume their own data scale (EDM: sigma_data = 0.5); no lambda shift applied")
        print(f"{'schedule':<32} {'factor':>10} {'h mass covered':>15}")
        for name, lf in sorted(rows, key=lambda r: r[1].factor):
            factor = f"{lf.factor:>10.4f}" if np.isfinite(lf.factor) else f"{'unbounded':>10}"
            print(f"{name:<32} {factor} {lf.covered:>15.2%}")
        if any(not np.isfinite(lf.factor) for _, lf in rows):
            print("unbounded: the schedule puts no mass on levels where h > 0 (their learners never train)")
    if args.plot:
        (_plot_masked if args.process == "masked" else _plot)(args.plot, profile, schedule, args)
        print(f"wrote {args.plot}")
    return 0


def _masked_in_lambda(schedule, lam):
    """The masked schedule as a density in its log-odds on the grid ``lam`` (exact transport, tabulated)."""
    from noisealloc.theory.masked.process import transport_pdf_to_lam
    from noisealloc.theory.schedules.base import TabulatedSchedule

    if schedule.coordinate.name == "lambda":
        return schedule
    grid = np.linspace(float(lam[0]), float(lam[-1]), 2001)
    pdf = np.maximum(transport_pdf_to_lam(schedule.pdf, grid, schedule.coordinate), 0.0)
    return TabulatedSchedule(grid, pdf, "lambda", name=schedule.name)


def _plot_masked(path, profile, schedule, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from noisealloc.theory.masked.schedules import masked_heuristics
    from noisealloc.theory.output import write_figure

    lam, h = profile["lam"], profile["h"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.6))
    ax1.plot(lam, h, color="C0", lw=1.8, label=r"$h(\lambda) = \alpha\varepsilon \sum_l H(X^l \mid Z^{\sim l})$")
    se = np.asarray(profile.get("h_stderr", 0.0) + 0.0 * h)
    if np.any(se > 0):
        ax1.fill_between(lam, np.maximum(h - 2 * se, 0.0), h + 2 * se, color="C0", alpha=0.25, label=r"$\pm 2$ s.e.")
    ax1.set_xlabel(r"log-odds $\lambda = \log(\alpha/\varepsilon)$ (mask rate $\varepsilon = $ sigmoid$(-\lambda)$)")
    ax1.set_ylabel(r"entropy rate $h(\lambda)$ [nats per unit $\lambda$]")
    ax1.set_title(f"masked process: entropy-rate profile ({profile['method']})", fontsize=9)
    ax1.set_ylim(bottom=0.0)
    ax1.legend(fontsize=7)
    ax1.grid(alpha=0.3)
    sl = _masked_in_lambda(schedule, lam)
    grid = np.linspace(lam[0], lam[-1], 1000)
    ax2.plot(grid, sl.pdf(grid), color="C1", lw=2, label=f"{args.rule} (built in {schedule.coordinate.name})")
    for k, (name, s) in enumerate(masked_heuristics(lam_min=float(lam[0]), lam_max=float(lam[-1])).items()):
        s_l = _masked_in_lambda(s, lam)
        ax2.plot(grid, s_l.pdf(grid), ls="--", lw=1.2, color=f"C{k + 3}", label=name)
    ax2.set_xlabel(r"log-odds $\lambda$")
    ax2.set_ylabel(r"density per unit $\lambda$")
    ax2.set_title("schedule and the heuristics practitioners use", fontsize=8)
    ax2.legend(fontsize=7)
    ax2.grid(alpha=0.3)
    fig.suptitle("noisealloc schedule --process masked: " + ", ".join(
        f"{k}={v}" for k, v in profile["source"].items() if k in ("data", "losses")) + f"; law: {profile['law']}",
        fontsize=10)
    fig.tight_layout()
    try:
        write_figure(fig, path)
    finally:
        plt.close(fig)
