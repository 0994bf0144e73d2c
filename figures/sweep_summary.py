"""The summary plot of an ablation sweep (``OUT/summary.png``), drawn from the cell records.

The sweep engine (:mod:`noisealloc.verify.experiments.sweep`) computes and tabulates; it never plots, so that
importing it does not load matplotlib.  ``noisealloc sweep`` passes :func:`plot_summary` to
:func:`noisealloc.verify.experiments.sweep.engine.run_sweep`, which calls it once every cell is done.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["plot_summary"]


def plot_summary(spec, records, path) -> Path | None:
    """Draw ``summary.y`` against ``summary.x``, one line per value of the other grid axes that vary.

    Parameters
    ----------
    spec : noisealloc.verify.experiments.sweep.spec.SweepSpec
        The sweep; its ``summary`` table names ``x`` and ``y`` (and optionally ``logx``, ``logy``,
        ``xlabel``, ``ylabel``, ``title``).
    records : list of dict
        The cell records in grid order (as :func:`noisealloc.verify.experiments.sweep.engine.run_sweep` collects them).
    path : str or os.PathLike
        The PNG to write (atomically).

    Returns
    -------
    pathlib.Path or None
        ``path``, or ``None`` when the summary names no ``x`` and ``y`` (nothing drawn).
    """
    s = spec.summary
    if "x" not in s or "y" not in s:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from noisealloc.theory.output import write_figure
    from noisealloc.verify.experiments.sweep.engine import summary_rows

    rows = summary_rows(spec, records)
    x_key, y_key = s["x"], s["y"]
    others = [k for k in spec.grid if k != x_key and len(spec.grid[k]) > 1]
    groups: dict = {}
    for r in rows:
        label = ", ".join(f"{k}={r[k]}" for k in others) or spec.name
        groups.setdefault(label, []).append((r[x_key], r.get(y_key)))
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, pts in groups.items():
        pts = [(x, y) for x, y in pts if isinstance(y, (int, float))]
        if not pts:
            continue
        xs, ys = zip(*pts)
        ax.plot(xs, ys, "o-", label=label)
    if s.get("logx"):
        ax.set_xscale("log", base=2)
    if s.get("logy"):
        ax.set_yscale("log")
    ax.set_xlabel(s.get("xlabel", x_key))
    ax.set_ylabel(s.get("ylabel", y_key))
    ax.set_title(s.get("title", f"sweep {spec.name}: {y_key} against {x_key}"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        return write_figure(fig, path, dpi=110)
    finally:
        plt.close(fig)
