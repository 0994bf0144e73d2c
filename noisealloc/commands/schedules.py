"""``noisealloc schedules``: tabulate, export and plot the built-in training noise schedules.

Prints one row per built-in schedule (mean and standard deviation of log-SNR
lambda, the lambda interval and the interval in the chosen coordinate), writes
all schedules, tabulated in the chosen coordinate, to one JSON file
(``--out``; schema ``noisealloc.schedules`` v1, see
:mod:`noisealloc.theory.schedules.io`) and plots their densities (``--plot``).
"""

from __future__ import annotations

from noisealloc.theory.request_limits import MAX_POINTS

#: Peak bytes per tabulated point of ``--out``: every built-in schedule's columns as Python floats
#: and their JSON text (measured: 2.5 kB per point for 100 000 points).
_BYTES_PER_POINT = 3000

COORDINATE_CHOICES = ("lambda", "sigma", "log-sigma", "t", "t-linear", "t-cosine", "t-edm", "t-rf")


def add_arguments(parser) -> None:
    parser.add_argument("--coordinate", default="lambda", choices=COORDINATE_CHOICES,
                        help="coordinate of the tabulated densities and the plot ('t' = 't-cosine'; default lambda)")
    parser.add_argument("--lam-min", type=float, default=-12.0, help="lower end of the log-SNR interval (default -12)")
    parser.add_argument("--lam-max", type=float, default=12.0, help="upper end of the log-SNR interval (default 12)")
    parser.add_argument("--points", type=int, default=513,
                        help=f"knots per tabulated schedule (default 513; 2 to {MAX_POINTS} without --allow-large)")
    parser.add_argument("--plot", metavar="FILE.png", default=None, help="write a plot of all densities")
    parser.add_argument("--out", metavar="FILE.json", default=None, help="write all tabulated schedules as JSON")
    parser.add_argument("--allow-large", action="store_true",
                        help="lift the limit on --points (the estimated memory is still checked against the "
                             "available memory)")


def plot_schedules(schedules: dict, path, coordinate) -> None:
    """Plot the densities of ``schedules`` (all in ``coordinate``) to ``path`` (PNG).

    matplotlib is imported here, with the Agg backend, so the rest of the command
    (and the library) never loads it.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from noisealloc.theory.coordinates import get_coordinate

    coord = get_coordinate(coordinate)
    log_axis = coord.name == "sigma"
    fig, ax = plt.subplots(figsize=(7.5, 4.6), constrained_layout=True)
    for name, s in schedules.items():
        lo, hi = s.interval
        u = np.geomspace(lo, hi, 1200) if log_axis else np.linspace(lo, hi, 1200)
        ax.plot(u, s.pdf(u), label=name, lw=1.6)
    if log_axis:
        ax.set_xscale("log")
    if coord.name not in ("lambda", "log-sigma"):
        # Jacobians of the time and sigma maps span orders of magnitude near the ends.
        ax.set_yscale("log")
    ax.set_xlabel(coord.label)
    ax.set_ylabel(f"density per unit of {coord.name}")
    # the requested interval (linear_beta_uniform_t alone is shorter: t <= 1)
    lam_lo = min(s.lam_interval[0] for s in schedules.values())
    lam_hi = max(s.lam_interval[1] for s in schedules.values())
    ax.set_title(rf"Built-in training noise schedules in {coord.name}, truncated to $\lambda \in [{lam_lo:g}, {lam_hi:g}]$")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    import os

    from noisealloc.cli import FIGURE_FORMATS
    from noisealloc.theory.output import atomic_write

    fmt = os.path.splitext(path)[1].lstrip(".").lower()  # the suffix's format, as every other plot
    if fmt not in FIGURE_FORMATS:
        fmt = "png"  # no suffix, or a device or FIFO named without one
    atomic_write(path, lambda fh: fig.savefig(fh, format=fmt, dpi=130))
    plt.close(fig)


def run(args) -> int:
    from noisealloc import __version__
    from noisealloc.theory.coordinates import get_coordinate
    from noisealloc.theory.schedules.io import save_schedules_json
    from noisealloc.theory.schedules.builtin import builtin_schedules

    coord = get_coordinate(args.coordinate)
    from noisealloc.theory.request_limits import check_memory, check_size

    check_size("--points", args.points, MAX_POINTS, minimum=2, allow_large=getattr(args, "allow_large", False))
    if args.out:
        check_memory(_BYTES_PER_POINT * float(args.points), f"--points {args.points}")
    schedules = builtin_schedules(args.lam_min, args.lam_max, coordinate=coord)
    header = f"{'schedule':24s} {'mean(lam)':>10s} {'std(lam)':>9s}  {'lam interval':>22s}  interval in {coord.name}"
    print(header)
    print("-" * len(header))
    for name, s in schedules.items():
        mean, std = s.lam_moments()
        mean = round(mean, 10) + 0.0  # no "-0.0000" for symmetric schedules
        lam_lo, lam_hi = s.lam_interval
        lo, hi = s.interval
        print(f"{name:24s} {mean:10.4f} {std:9.4f}  [{lam_lo:9.4f}, {lam_hi:9.4f}]  [{lo:.6g}, {hi:.6g}]")
    if args.out:
        meta = {
            "tool": f"noisealloc {__version__}",
            "command": "schedules",
            "coordinate": coord.name,
            "lam_min": args.lam_min,
            "lam_max": args.lam_max,
            "points": args.points,
        }
        path = save_schedules_json(schedules, args.out, n=args.points, meta=meta)
        print(f"wrote {path}")
    if args.plot:
        plot_schedules(schedules, args.plot, coord)
        print(f"wrote {args.plot}")
    return 0
