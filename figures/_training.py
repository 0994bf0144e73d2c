"""Plots and names shared by the training figures (6 and 7): learning curves with their comparison, the
loss-weight ablation, and folder names for a data set's cells.  The numbers come from
:mod:`noisealloc.verify.experiments.training_harness`; nothing here computes one."""

from __future__ import annotations

import contextlib
import re

import numpy as np

__all__ = ["one_cluster", "slug", "plain_log_ticks", "late_label", "plot_training_panels", "used_examples", "plot_weight_ablation"]


@contextlib.contextmanager
def one_cluster(scheduler=None):
    """The scheduler every sweep of a figure runs on: ``scheduler`` when given, else one LocalCluster for all
    of them (:func:`~noisealloc.verify.experiments.sweep.engine.local_scheduler`); yields its address."""
    if scheduler:
        yield scheduler
        return
    from noisealloc.verify.experiments.sweep.engine import local_scheduler

    with local_scheduler() as address:
        yield address


def slug(name: str) -> str:
    """A folder name for a data set's cells (an MNIST path is dropped: the cells' keys hold it)."""
    base = name.split(":")[0] if name.startswith("mnist") else name
    return re.sub(r"[^A-Za-z0-9._-]+", "_", base)


def plain_log_ticks(ax) -> None:
    """A log y axis labelled in plain numbers (240, 4800; not 2.4e+02): minor ticks labelled only when the
    axis spans less than a decade (over more, they crowd the major ones)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_yscale("log")
    fmt = FuncFormatter(lambda v, _pos: f"{v:.0f}" if v >= 100 else f"{v:.3g}")
    ax.yaxis.set_major_formatter(fmt)
    lo, hi = ax.get_ylim()
    ax.yaxis.set_minor_formatter(fmt if hi / lo < 10 else NullFormatter())


def late_label(late: dict) -> str:
    """Legend text of a late-target comparison: the ratio and its interval, or why there is none."""
    r = late["ratio"]
    if r is not None:
        return f"{r['estimate']:.2f} [{r['lo']:.2f}, {r['hi']:.2f}]"
    c, n = late["censored"], len(late["status"])
    if not any(c.values()):
        return "none (both reach the target before the judged window)"
    name, ref = list(c)
    return f"none (target missed on {c[name]}/{n} seeds, by $\\sqrt{{h}}$ on {c[ref]}/{n})"


def plot_training_panels(axes, doc: dict, styles: dict, *, unit: str = "dim", floor_label: str = "Bayes floor",
                         title=None) -> None:
    """One panel per row of a training comparison: seed-mean curves +- s.e., the unjudged start, the floor.

    Parameters
    ----------
    axes : list of Axes
    doc : dict
        ``rows`` (:func:`~noisealloc.verify.experiments.training_harness.summarise_training`), ``schedules``,
        ``reference``, ``verdict_fraction``, ``seeds``, ``sizes`` (``batch_size``).
    styles : dict
        ``schedule -> (colour, marker, label)``.
    unit : str
        What "bits per" is per: ``"dim"`` or ``"token"``.
    floor_label : str
        Legend name of the floor line.
    title : callable, optional
        ``title(row) -> str`` (default: the data set, its size and the test examples used).
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    rows = doc["rows"]
    f_idx = list(rows[0]["comparison"]["fractions"]).index(doc["verdict_fraction"]) if rows else 0
    for ax, row in zip(axes, rows):
        steps = np.asarray(row["steps"], float)
        keep = steps > 0
        cmp = {r["schedule"]: r for r in row["comparison"]["rows"]}
        for key in (s for s in doc["schedules"] if s in row["mean"]):
            col, mk, lab = styles[key]
            fin, bpd = row["final_nats"][key], row["final_bits_per_dim"][key]
            late = cmp[key]["late_targets"][f_idx]
            extra = (f": {fin['mean']:.3g} $\\pm$ {fin['se']:.2g} nats, {bpd['mean']:.3g} bits/{unit}"
                     + ("" if key == doc["reference"] else f";\n    T ratio {late_label(late)}"))
            ax.errorbar(steps[keep], np.asarray(row["mean"][key])[keep], yerr=np.asarray(row["stderr"][key])[keep],
                        color=col, marker=mk, ms=2.5, capsize=1.5, lw=1, label=lab + extra)
        start = row["run_steps"] * row["comparison"]["start_fraction"]
        ax.axvspan(0, start, color="0.92", zorder=0, label=f"start-up transient: not judged (first "
                                                             f"{100 * row['comparison']['start_fraction']:g}%)")
        if row["floor"]:
            fl = row["floor"]
            ax.axhline(fl["nats"], color="k", ls="--", lw=1,
                       label=f"{floor_label} {fl['nats']:.3g} nats (best ends at {fl['factor']:.2f}x)")
        ax.set_xlim(0, row["run_steps"] * 1.02)
        plain_log_ticks(ax)
        d = row["dim"]
        sec = ax.secondary_yaxis("right", functions=(lambda v, d=d: v / (d * np.log(2.0)),
                                                     lambda v, d=d: v * d * np.log(2.0)))
        sec.set_ylabel(f"bits / {unit}", fontsize=7)
        sec.tick_params(labelsize=6)
        # inside a decade the major ticks alone may be none: ticks at 1, 1.5, 2, 3, 5, 7 x 10^k
        sec.yaxis.set_major_locator(LogLocator(subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
        sec.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.3g}"))
        sec.yaxis.set_minor_formatter(NullFormatter())
        if title is not None:
            ax.set_title(title(row), fontsize=8)
        ax.set_xlabel(f"training steps (batch {row.get('batch_size', doc['sizes']['batch_size'])})", fontsize=8)
        whose = ("the better of the pair's" if row["comparison"].get("targets", "best") == "pair"
                 else "the best schedule's")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1, frameon=False,
                  title=(f"final loss (mean $\\pm$ s.e. over {len(doc['seeds'])} seeds);\nT ratio = steps to "
                         f"{100 * doc['verdict_fraction']:g}% of {whose} improvement\n/ $\\sqrt{{h}}$'s steps "
                         f"[95% paired t interval over seeds]"),
                  title_fontsize=8)


def used_examples(row: dict, what: str = "test examples") -> str:
    """``"256 test examples"``, or what was asked and what the split holds when they differ."""
    if row["eval_n_used"] == row["eval_n"]:
        return f"{row['eval_n_used']} {what}"
    return f"{row['eval_n_used']} {what} (asked {row['eval_n']}: the split has {row['eval_n_used']})"


def plot_weight_ablation(ax, ab: dict) -> None:
    """``subject - reference`` final held-out loss difference per training loss weight, with its paired t interval.

    Parameters
    ----------
    ax : Axes
    ab : dict
        :func:`~noisealloc.verify.experiments.training_harness.weight_ablation`'s document.
    """
    ws = list(ab["weights"])
    x = np.arange(len(ws))
    est = np.array([ab["weights"][w]["difference"]["estimate"] for w in ws])
    lo = np.array([ab["weights"][w]["difference"]["lo"] for w in ws])
    hi = np.array([ab["weights"][w]["difference"]["hi"] for w in ws])
    ax.errorbar(x, est, yerr=[est - lo, hi - est], fmt="o", color="C3", capsize=4)
    ax.axhline(0.0, color="k", lw=0.8)
    names = {"edm": "EDM weight\n(main runs)", "none": "unweighted\nx0 loss", "elbo": "ELBO weight",
             "alpha": "alpha weight"}
    ax.set_xticks(x, [names.get(w, w) for w in ws], fontsize=7)
    ax.set_xlim(-0.6, len(ws) - 0.4)
    ax.set_ylabel(f"{ab['subject']} - {ab['reference']} final loss (nats)", fontsize=8)
    verdict = "sign changes with the weight" if ab["sign_changes"] else "no decided change of sign"
    ax.set_title(f"loss-weight ablation on {ab['data']}, end of the run\n"
                 f"> 0: {ab['reference']} ends lower; 95% paired t intervals\n{verdict}", fontsize=8)
