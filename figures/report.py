"""REPORT.md: each claim of docs/THEORY.md section 6 (last paragraph) against the measured numbers.

The report reads the numbers files the figures wrote (``figN_*.json``) and never recomputes.  Every
verdict is computed from those numbers by the rule printed next to it; nothing is hard-coded.  Verdicts:
``supported`` (every instance satisfies the rule), ``mixed`` (some do), ``not supported`` (none do), and
``not measured`` (the figure's numbers are missing).  Where a figure disagrees with a claim, the figure
is right: the verdict says so.

Run alone: ``python -m noisealloc.figures.report --out DIR`` (DIR holding the figures' numbers).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from noisealloc.figures import _common as C
from noisealloc.figures._common import num  # re-exported: the report's one number formatter
from noisealloc.figures.fig3_coupling import case_interval, interval_label, interval_note

__all__ = ["CLAIMS", "num", "verdict", "interval_verdict", "evaluate_claims", "fig3_notes", "fig6_controls",
           "write_report"]

#: Efficiency above which the entropic proxy "tracks" the optimum (V(p*)/V(p_ent)).
TRACK_EFFICIENCY = 0.9
#: Relative sample-count margin within which a schedule is "competitive" (N_sqrt / N_EDM <= 1 + margin).
COMPETITIVE_MARGIN = 0.25
#: Relative gap below which a convex certificate counts as converged.
CERT_RTOL = 1e-6

CLAIMS = (
    ("C1", "Optimised coupled schedules are finitely supported."),
    ("C2", "The entropic proxy tracks the optimum in neural-network-like (many-parameter, time-specialised) models."),
    ("C3", "The entropic proxy breaks down mainly in the fully coupled parametric case."),
    ("C4", "Square-root entropy scheduling helps most on discrete data."),
    ("C5", "Square-root entropy scheduling is competitive with EDM on continuous images."),
)


def verdict(flags) -> str:
    """``supported`` if all flags are true, ``not supported`` if none, ``mixed`` otherwise (``not measured`` if empty)."""
    flags = [bool(f) for f in flags]
    if not flags:
        return "not measured"
    if all(flags):
        return "supported"
    if not any(flags):
        return "not supported"
    return "mixed"


def interval_verdict(flags) -> str:
    """Verdict of flags that may be undecided (``None``: the interval contains the threshold).

    ``supported`` / ``not supported`` when every flag is decided and all true / all false; ``mixed`` when
    decided flags disagree; ``inconclusive`` when some flag is undecided and the decided ones do not
    disagree (overlapping intervals are not evidence against a claim); ``not measured`` if empty.
    """
    flags = list(flags)
    if not flags:
        return "not measured"
    decided = [bool(f) for f in flags if f is not None]
    if decided and any(decided) and not all(decided):
        return "mixed"
    if len(decided) < len(flags):
        return "inconclusive"
    return "supported" if all(decided) else "not supported"


def _load(out: Path, name: str):
    p = out / f"{name}.json"
    return json.loads(p.read_text()) if p.exists() else None


def _f(x) -> float:
    return C.from_json_float(x)


def _cell(text) -> str:
    """Escape a string for a markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _claim_c1(f2, f3):
    lines, flags = [], []
    if f2:
        for row in f2["rows"]:
            for key in ("L", "sandwich"):
                r = row[key]
                ok_conv = (r["status"] == 0) and (_f(r["rel_gap"]) <= CERT_RTOL if key == "L" else True)
                half = len(f2["lam"]) / 2
                ok = bool(r["n_atoms"] <= r["atom_bound"] and ok_conv and r["n_atoms"] < half)
                flags.append(ok)
                test = (f"{r['n_atoms']} <= {r['atom_bound']}; {r['n_atoms']} < {half:g} (half the grid); "
                        f"status {r['status']} == 0" + (f"; gap {num(r['rel_gap'], '.1e')} <= {CERT_RTOL:g}"
                                                         if key == "L" else ""))
                lines.append(f"| fig2 | {row['data']} [{row['family']}] | {key} | {r['n_atoms']} / {r['atom_bound']} | "
                             f"{num(r['rel_gap'], '.1e')} ({r['kind']}) | status {r['status']} | {test} | "
                             f"{'yes' if ok else 'no'} |")
    if f3:
        for case in f3["cases"]:
            for r in case["rows"]:
                ok = bool(r["n_atoms"] <= r["atom_bound"] and bool(r.get("converged", True)))
                flags.append(ok)
                test = f"{r['n_atoms']} <= {r['atom_bound']}; converged {r.get('converged', True)}"
                lines.append(f"| fig3 | {_fig3_label(case)} [{case['family']}] | J={r['J']} | {r['n_atoms']} / {r['atom_bound']} | "
                             f"{num(r['gap'], '.1e')} | converged {r.get('converged')} | {test} | "
                             f"{'yes' if ok else 'no'} |")
    head = ["| figure | data [family] | criterion | atoms / Theorem 1 bound | certified gap | solver | "
            "rule on these numbers | finite & certified |",
            "|---|---|---|---|---|---|---|---|"]
    rule = (f"Rule: an instance counts when its optimum has at most Theorem 1's number of atoms, fewer atoms than half "
            f"the grid (fig2), and a converged certificate (relative duality gap <= {CERT_RTOL:g} for L).  Fig3: every "
            f"J on every data set and lambda interval ({_fig3_instances(f3)}).")
    return verdict(flags), rule, head + lines


def _fig3_ends(f3):
    """``(case, fully coupled row, most specialised row)`` for every fig3 case with at least two J values."""
    for case in f3["cases"] if f3 else ():
        rows = case["rows"]
        if len(rows) >= 2:
            yield case, rows[0], rows[-1]


def _eff(x) -> str:
    """An efficiency in a claim table: three decimals, or three digits where that would print a nonzero as 0.000."""
    v = _f(x)
    return num(x, ".2e" if np.isfinite(v) and 0 < abs(v) < 5e-4 else ".3f")


def _fig3_label(case) -> str:
    """``'<data> on [lo, hi]'``: a figure-3 instance is a data set on one lambda interval."""
    return f"{case['data']} on {interval_label(case_interval(case))}"


def _fig3_instances(f3) -> str:
    """The data sets of figure 3 and the lambda intervals each was run on, for the rules' text."""
    if not f3 or not f3.get("cases"):
        return "figure 3 not measured"
    by_data: dict = {}
    for case in f3["cases"]:
        by_data.setdefault(case["data"], []).append(interval_label(case_interval(case)))
    return "; ".join(f"{d} on {' and '.join(ivs)}" for d, ivs in by_data.items())


def _c2_holds(a, b) -> bool:
    """C2's rule on one fig3 instance: at the largest J the proxy's efficiency tracks and W1 fell from J = 1."""
    return bool(_f(b["efficiency"]) >= TRACK_EFFICIENCY and _f(b["w1"]) < _f(a["w1"]))


def _c3_holds(a, b) -> bool:
    """C3's rule on one fig3 instance: at J = 1 the proxy's efficiency is low and below the largest J's."""
    return bool(_f(a["efficiency"]) < TRACK_EFFICIENCY and _f(a["efficiency"]) < _f(b["efficiency"]))


def _claim_c2(f3, f4):
    lines, flags = [], []
    for case, a, b in _fig3_ends(f3):
        ok = _c2_holds(a, b)
        flags.append(ok)
        lines.append(f"| fig3 | {_fig3_label(case)} | J={a['J']} -> J={b['J']} | efficiency {_eff(a['efficiency'])} -> "
                     f"{_eff(b['efficiency'])}; W1 {num(a['w1'], '.3f')} -> {num(b['w1'], '.3f')} | "
                     f"efficiency {_eff(b['efficiency'])} >= {TRACK_EFFICIENCY:g}; W1 {num(b['w1'], '.3f')} < "
                     f"{num(a['w1'], '.3f')} | {'yes' if ok else 'no'} |")
    if f4:
        for key in ("ii", "iii"):
            c = f4["checks"].get(key)
            if c:
                flags.append(bool(c["holds"]))
                lines.append(f"| fig4 | independent learners ({key}) | {_cell(c['message'])} | "
                             f"{c['headline']} = {num(c['headline_value'])} | {_fig4_test(c)} | "
                             f"{'yes' if c['holds'] else 'no'} |")
    head = ["| figure | instance | setting | measured | rule on these numbers (tolerance) | tracks |",
            "|---|---|---|---|---|---|"]
    rule = (f"Rule: with the most time-specialised coupling (largest J) the entropic proxy's efficiency "
            f"V(p*)/V(p_ent) is >= {TRACK_EFFICIENCY} and its W1 distance to the optimum is below the fully coupled one, "
            f"on every data set and lambda interval of figure 3 ({_fig3_instances(f3)}; each interval counts as one "
            "instance, see 'Figure 3: the lambda interval' below); "
            "the random-matrix checks (ii) and (iii) of the independent-learner limit hold.")
    return verdict(flags), rule, head + lines


def _claim_c3(f3, f5, f4):
    lines, flags = [], []
    for case, a, b in _fig3_ends(f3):
        ok = _c3_holds(a, b)
        flags.append(ok)
        lines.append(f"| fig3 | {_fig3_label(case)} | efficiency at J=1: {_eff(a['efficiency'])}, at J={b['J']}: "
                     f"{_eff(b['efficiency'])} | {_eff(a['efficiency'])} < {TRACK_EFFICIENCY:g} and "
                     f"{_eff(a['efficiency'])} < {_eff(b['efficiency'])} | {'yes' if ok else 'no'} |")
    if f4 and "iv" in f4["checks"]:
        c = f4["checks"]["iv"]
        flags.append(bool(c["holds"]))
        lines.append(f"| fig4 (iv) | decoupling violated | asymptotic loss factor "
                     f"{num(c['measured']['factor_coupled'], '.3f')} vs decoupled "
                     f"{num(c['measured']['factor_decoupled'], '.3f')} | {_fig4_test(c)} | "
                     f"{'yes' if c['holds'] else 'no'} |")
    if f5:
        effs = [fig5_efficiency(r["table"]["sqrt-entropic"], "V_efficiency") for r in f5["rows"]]
        if effs:
            lines.append(f"| fig5 | fully coupled efficiency V(p*)/V(p_sqrt-entropic) over {len(effs)} data sets | "
                         f"median {num(np.median(effs))}, min {num(min(effs))}, max {num(max(effs))} | not counted | "
                         "(context) |")
    head = ["| figure | instance | measured | rule on these numbers | breaks down |", "|---|---|---|---|---|"]
    rule = (f"Rule: in the fully coupled case (J = 1) the entropic proxy's efficiency is below {TRACK_EFFICIENCY} and below "
            f"its efficiency with the largest J, on every data set and lambda interval of figure 3 "
            f"({_fig3_instances(f3)}); and the square-root law fails when feature-noise decoupling is violated "
            "(fig4 iv).  Fig5's fully coupled efficiencies are shown for context, not counted.")
    return verdict(flags), rule, head + lines


def _versus(x, y, below: str, above: str, fmt: str = ".3g") -> str:
    """``'x < y'`` or ``'x >= y'`` written with the report's numbers; ``'x vs y'`` when either is not finite."""
    fx, fy = _f(x), _f(y)
    op = (below if fx < fy else above) if np.isfinite(fx) and np.isfinite(fy) else "vs"
    return f"{num(x, fmt)} {op} {num(y, fmt)}"


def fig3_notes(f3) -> list[str]:
    """REPORT.md's paragraph on figure 3's lambda intervals: which conclusion holds on which interval.

    The comparison is recomputed from the rows by
    :func:`noisealloc.figures.fig3_coupling.interval_note` (so a note stored by an older run cannot
    disagree with the claim tables), and the rules of C2 and C3 are applied to each interval separately
    by the same predicates the claims use.

    Parameters
    ----------
    f3 : dict or None
        Figure 3's numbers file.

    Returns
    -------
    list of str
        Markdown lines (empty when figure 3 was not measured).
    """
    if not f3:
        return []
    note = interval_note(f3)
    lines = ["## Figure 3: the lambda interval", ""]
    if not note["comparisons"]:
        return lines + [note["text"], ""]
    for comp in note["comparisons"]:
        per_j, where = [], []
        for s in comp["intervals"]:
            lab = interval_label(s["interval"])
            case = next(c for c in f3["cases"] if c["data"] == comp["data"] and c.get("family") == comp["family"]
                        and list(case_interval(c)) == list(s["interval"]))
            grid = f"{len(case['lam'])} levels, " if case.get("lam") is not None else ""
            per_j.append(f"- Efficiency per J on {lab} ({grid}J = {', '.join(str(j) for j in s['J'])}): "
                         f"{', '.join(num(e, '.3g') for e in s['efficiency'])}.")
            a, b = case["rows"][0], case["rows"][-1]
            where.append(f"on {lab} C2's rule {'holds' if _c2_holds(a, b) else 'fails'} (efficiency at J = {b['J']} "
                         f"{_versus(b['efficiency'], TRACK_EFFICIENCY, '<', '>=')}; W1 "
                         f"{_versus(b['w1'], a['w1'], '<', '>=')} at J = {a['J']}) and C3's rule "
                         f"{'holds' if _c3_holds(a, b) else 'fails'} (efficiency at J = {a['J']} "
                         f"{_versus(a['efficiency'], TRACK_EFFICIENCY, '<', '>=')} and "
                         f"{_versus(a['efficiency'], b['efficiency'], '<', '>=')} at J = {b['J']})")
        lines += [comp["headline"], ""] + per_j + [""]
        lines += ["What the rows show about the difference:", ""] + [f"- {r}" for r in comp["reasons"]] + [""]
        lines += ["Which conclusion holds where: " + "; ".join(where) + ".", ""]
    return lines


def _fig4_test(c) -> str:
    """The rule of a figure-4 check applied to its numbers: headline value against its tolerance."""
    return (f"{c['headline']} = {num(c['headline_value'])}, tolerance {num(c['tolerance'], 'g')}: "
            f"{'holds' if c['holds'] else 'fails'}")


def fig5_efficiency(cell: dict, key: str) -> float:
    """Efficiency ``key`` (``V_efficiency``, ``L_efficiency``, ``il_efficiency``) of one figure-5 cell, in [0, 1].

    Numbers files written before the efficiencies were stored give it as the reciprocal of the matching
    ratio (an infinite ratio, a schedule missing a level the criterion needs, is efficiency 0).
    """
    if key in cell:
        return _f(cell[key])
    x = _f(cell[{"V_efficiency": "V_ratio", "L_efficiency": "L_ratio", "il_efficiency": "il_factor"}[key]])
    return 0.0 if np.isinf(x) else 1.0 / x


def _fig6_rows(f6):
    """Regime (i) rows (the coupled control): ``(row, N_EDM/N_sqrt, N_cos/N_sqrt)``."""
    out = []
    for r in f6["rows"]:
        edm = _f(r["ratio_vs_sqrt_entropic"]["edm_lognormal"])  # N_EDM / N_sqrt
        cos = _f(r["ratio_vs_sqrt_entropic"]["cosine"])
        out.append((r, edm, cos))
    return out


def _neural_rows(f6):
    """Regime (iii) rows: ``(row, {schedule: comparison row})`` (:func:`compare_training`'s rows)."""
    out = []
    for r in (f6.get("neural") or {}).get("rows", []):
        cmp = {c["schedule"]: c for c in r["comparison"]["rows"]}
        out.append((r, cmp))
    return out


def _late(doc, crow):
    """The late-target entry that decides the claims (fraction ``verdict_fraction``) of a comparison row.

    ``doc`` is figure 6's numbers (its regime-iii part holds the fraction) or a training figure's own."""
    f = (doc["neural"] if "neural" in doc else doc)["verdict_fraction"]
    return next(x for x in crow["late_targets"] if x["fraction"] == f)


def _flag(side: str, *, positive: str = "above"):
    """True / False / None (undecided) from an interval's side."""
    return None if side == "inconclusive" else side == positive


def _pm(mean, se, fmt=".4g") -> str:
    return f"{num(mean, fmt)} +- {num(se, '.2g')}"


def _ratio_text(late) -> str:
    r = late["ratio"]
    if r is not None:
        return f"{num(r['estimate'])} [{num(r['lo'])}, {num(r['hi'])}]"
    if not any(late["censored"].values()):  # not censored: both reached it before the judged window
        return "not computed: both reach the target before the judged window (ratio 1 by construction)"
    c = late["censored"]
    n = len(late["status"])
    name, ref = list(c)
    return f"not computed: target missed on {c[name]}/{n} seeds (sqrt: {c[ref]}/{n})"


def _comparison_cells(name: str, crow: dict, reference: str) -> tuple[str, list[str]]:
    """Table cells of one schedule against the reference: the paired final difference and the late-target ratios."""
    if name == reference:
        return "reference", ["reference"] * len(crow["late_targets"])
    end = crow["equal_compute"][-1]
    d = end["difference"]
    diff = f"{num(d['estimate'], '+.3g')} [{num(d['lo'], '+.3g')}, {num(d['hi'], '+.3g')}] ({end['side']})"
    return diff, [f"{_ratio_text(x)} ({x['side']})" for x in crow["late_targets"]]


def neural_table(f6) -> list[str]:
    """REPORT.md's regime-(iii) table: final losses (nats and bits/dim, +- s.e. over seeds), the paired
    final difference from the square-root schedule, and the late-target step ratios, all with intervals."""
    neu = f6["neural"]
    fr = neu["rows"][0]["comparison"]["fractions"] if neu["rows"] else []
    head = ["| data | kind | steps | schedule | final loss, nats (+- s.e.) | bits/dim (+- s.e.) | "
            "final - sqrt, nats [95% CI] | " + " | ".join(f"T{100 * f:g} / T{100 * f:g} sqrt [95% CI]" for f in fr)
            + " |", "|" + "---|" * (7 + len(fr))]
    lines = []
    for r, cmp in _neural_rows(f6):
        for name, c in cmp.items():
            fin, bpd = r["final_nats"][name], r["final_bits_per_dim"][name]
            diff, lates = _comparison_cells(name, c, neu["reference"])
            lines.append(f"| {r['data']} | {'discrete' if r['discrete'] else 'continuous'} | {r['run_steps']} | "
                         f"{name} | {_pm(fin['mean'], fin['se'])} | {_pm(bpd['mean'], bpd['se'], '.4g')} | {diff} | "
                         + " | ".join(lates) + " |")
    return head + lines


def neural_notes(f6) -> list[str]:
    """The sentences beside the table: training recipe, evaluation sizes as used, the Bayes floor, the online
    estimator's refreshes, the loss-weight ablation, and whether the two measures agree."""
    neu = f6["neural"]
    out = [f"Training: {neu['training']}.", ""]
    for r, cmp in _neural_rows(f6):
        bits = [_used(r, "test examples")]
        if r.get("floor"):
            fl = r["floor"]
            bits.append(f"Bayes floor {num(fl['nats'], '.4g')} +- {num(fl['se'], '.2g')} nats ({fl['rule']}); the "
                        f"best schedule ({fl['best']}) ends at {num(fl['factor'], '.3g')}x the floor"
                        + ("" if fl["factor"] <= 1.5 else ": the networks are not trained to the floor, so the "
                           "comparison is one of partly trained networks"))
        if r.get("online_first_refresh") is not None:
            bits.append(_online_text(r))
        e = cmp.get("edm_lognormal")
        if e and e is not cmp.get(neu["reference"]):
            end, late = e["equal_compute"][-1], _late(f6, e)
            # the two measures of "faster": does the loss reached at equal compute agree with the steps ratio?
            agree = {("above", "above"), ("below", "below")}
            if end["side"] != "inconclusive" and late["side"] != "inconclusive":
                word = ("agree" if (end["side"], late["side"]) in agree else
                        "DISAGREE: the conclusion flips with the measure")
                bits.append(f"EDM vs sqrt: final-loss difference {end['side']} 0 and step ratio {late['side']} 1 "
                            f"({word})")
        out += [f"- {r['data']}: " + "; ".join(bits) + ".", ""]
    ab = neu.get("ablation")
    if ab:
        out += [f"Loss-weight ablation on {ab['data']} ({', '.join(ab['schedules'])}): {ab['summary']}.", ""]
    return out


#: The practitioners' default of masked diffusion (MDLM, MD4): the comparator of C4 on figure 7.
MASKED_BASELINE = "linear"


def masked_table(f7) -> list[str]:
    """REPORT.md's figure-7 table: negative ELBO in bits per token (+- s.e. over seeds), the gap to the floor where
    known, the paired final difference from the square-root schedule and the late-target step ratios."""
    fr = f7["rows"][0]["comparison"]["fractions"] if f7["rows"] else []
    head = ["| data (network) | steps | schedule | final NELBO, bits/token (+- s.e.) | nats/string | gap to floor, "
            "nats | final - sqrt, nats [95% CI] | " + " | ".join(f"T{100 * f:g} / T{100 * f:g} sqrt [95% CI]" for f in fr)
            + " |", "|" + "---|" * (7 + len(fr))]
    lines = []
    for r in f7["rows"]:
        cmp = {c["schedule"]: c for c in r["comparison"]["rows"]}
        for name, c in cmp.items():
            fin, bpt = r["final_nats"][name], r["final_bits_per_dim"][name]
            gap = (f"{num(fin['mean'] - r['floor']['nats'], '.3g')}" if r.get("floor") else
                   "not computed (no known floor)")
            diff, lates = _comparison_cells(name, c, f7["reference"])
            lines.append(f"| {r['data']} | {r['run_steps']} | {name} | {_pm(bpt['mean'], bpt['se'], '.4g')} | "
                         f"{_pm(fin['mean'], fin['se'])} | {gap} | {diff} | " + " | ".join(lates) + " |")
    return head + lines


#: A training row whose reference loss falls by less than this share over the second half of the run has plateaued.
PLATEAU_GAIN = 0.02


def late_half_gain(row, schedule):
    """Relative fall of a schedule's seed-mean held-out loss from the checkpoint nearest half the run to the end.

    ``(L(T/2) - L(T)) / L(T/2)``; None when the row has no such curve.
    """
    curve = row.get("mean", {}).get(schedule)
    if not curve or len(curve) < 2:
        return None
    steps = np.asarray(row["steps"], float)
    mid = int(np.argmin(np.abs(steps - 0.5 * steps[-1])))
    a, b = float(curve[mid]), float(curve[-1])
    return (a - b) / a if a > 0 else None


def masked_notes(f7, cells=None, *, reused: bool = False) -> list[str]:
    """REPORT.md's figure-7 paragraph: metric, recipe, the floor where known, evaluation sizes, the cells."""
    runs = ", ".join(f"{r['data']} {r['run_steps']} at batch {r.get('batch_size', f7['sizes']['batch_size'])}"
                     for r in f7["rows"])
    out = [f"Figure 7 (masked diffusion): {f7['metric']}; Adam steps: {runs}; "
           f"{len(f7['seeds'])} seeds; {f7['h_note']}.", "", f"Training: {f7['training']}.", ""]
    for r in f7["rows"]:
        bits = [_used(r, "test strings")]
        if r.get("floor"):
            fl = r["floor"]
            h = r.get("entropy_nats")
            bits.append(f"floor (the exact denoiser's negative ELBO on the interval) {num(fl['nats'], '.4g')} nats"
                        + (f", H(pi) = {num(h, '.4g')} nats" if h is not None else "")
                        + f"; the best schedule ({fl['best']}) ends at {num(fl['factor'], '.3g')}x the floor")
        if r.get("online_first_refresh") is not None:
            bits.append(_online_text(r))
        late = late_half_gain(r, f7["reference"])
        if late is not None:
            bits.append(f"the reference schedule's loss fell by {100 * late:.2g}% over the second half of the run"
                        + (f" (under {100 * PLATEAU_GAIN:g}%: the network had stopped improving, so this row's "
                           "comparison is one of networks at their plateau, not of training speed)"
                           if late < PLATEAU_GAIN else ""))
        out += [f"- {r['data']}: " + "; ".join(bits) + ".", ""]
    if cells:
        c = cells["cells"]
        st = [t["step_time"] for t in cells["timings"] if t.get("step_time")]
        when = "by the earlier run that made these numbers" if reused else "in this run"
        out += [f"Figure 7 cells: {c['total']} ({c['cached']} reused from the cell cache, {c['computed']} computed "
                f"{when}); median step time {1e3 * float(np.median(st)):.2f} ms." if st else
                f"Figure 7 cells: {c['total']}.", ""]
    return out


def _online_text(row) -> str:
    """When the online estimator first acted, against the start of the judged window."""
    first, start = row["online_first_refresh"], row["run_steps"] * row["comparison"]["start_fraction"]
    n = row.get("online_refreshes")
    text = (f"the online estimator first acted at step {first}" + (f" ({n} refreshes)" if n is not None else "")
            + f", {'before' if first < start else 'after the start of'} the judged window at step {num(start, '.0f')}")
    if first >= start:
        text += " (the window's first checkpoints saw its initial uniform schedule)"
    return text


def _used(row, what: str) -> str:
    if row["eval_n_used"] == row["eval_n"]:
        return f"evaluated on {row['eval_n_used']} {what}"
    return f"evaluated on {row['eval_n_used']} {what}: {row['eval_n']} were asked, the test split has {row['eval_n_used']}"


def _claim_c4(f6, f7=None):
    """C4 on figure 7 (masked diffusion) when it ran, with figure 6's Gaussian-noise rows beside it; else on
    figure 6 alone (the rule says which)."""
    if f7 and f7.get("rows"):
        return _claim_c4_masked(f6, f7)
    rows = _neural_rows(f6) if f6 else []
    if not rows:
        return "not measured", "", []
    ref = f6["neural"]["reference"]
    disc = [(r, _late(f6, c["edm_lognormal"])) for r, c in rows if r["discrete"]]
    cont = [(r, _late(f6, c["edm_lognormal"])) for r, c in rows if not r["discrete"]]
    flags = [_flag(x["side"]) for _, x in disc]  # helps on every discrete data set: EDM needs more steps
    if disc and cont and all(f is True for f in flags):
        ratios_d = [x["ratio"]["estimate"] for _, x in disc if x["ratio"]]
        ratios_c = [x["ratio"]["estimate"] for _, x in cont if x["ratio"]]
        if len(ratios_d) == len(disc) and len(ratios_c) == len(cont):
            flags.append(float(np.mean(np.log(ratios_d))) > float(np.mean(np.log(ratios_c))))
        else:  # a censored ratio has no value: "most" cannot be told
            flags.append(None)
    f = f6["neural"]["verdict_fraction"]
    rule = (f"Rule (figure 6 regime iii only: figure 7, masked diffusion, was not run): on every discrete data set "
            f"the square-root entropic schedule reaches the late target ({100 * f:g}% of the better of the pair's "
            f"improvement) in fewer steps than EDM, i.e. the 95% paired t interval of steps_EDM/steps_{ref} lies "
            "above 1 (below 1: it needs more; containing 1: undecided; a censored ratio decides only when one "
            "schedule misses the target on every seed and the other reaches it on every seed), and, where it helps "
            "on every discrete set, the geometric-mean ratio on discrete data exceeds that on continuous data.  "
            "Undecided intervals make the verdict inconclusive, never 'not supported'.  The comparison: "
            + f6["neural"]["target_rule"])
    return interval_verdict(flags), rule, neural_table(f6)


def _claim_c4_masked(f6, f7):
    base = MASKED_BASELINE
    rows = [(r, _late(f7, {c["schedule"]: c for c in r["comparison"]["rows"]}[base])) for r in f7["rows"]]
    flags = [_flag(x["side"]) for _, x in rows]  # helps on every masked data set and network
    cont = [(r, _late(f6, c["edm_lognormal"])) for r, c in (_neural_rows(f6) if f6 else []) if not r["discrete"]]
    if not cont:
        most = "no continuous rows of figure 6 to compare with"
    elif not (flags and all(f is True for f in flags)):
        most = "not compared: it does not help on every masked data set"
    if flags and all(f is True for f in flags) and cont:
        rd = [x["ratio"]["estimate"] for _, x in rows if x["ratio"]]
        rc = [x["ratio"]["estimate"] for _, x in cont if x["ratio"]]
        if len(rd) == len(rows) and len(rc) == len(cont):
            gd, gc = float(np.exp(np.mean(np.log(rd)))), float(np.exp(np.mean(np.log(rc))))
            flags.append(gd > gc)
            most = f"geometric-mean step ratio {gd:.3g} on masked data against {gc:.3g} on figure 6's continuous data"
        else:
            flags.append(None)
            most = "a censored ratio has no value: 'most' cannot be told"
    f = f7["verdict_fraction"]
    rule = (f"Rule (figure 7: masked diffusion, the discrete diffusion of practice): on every data set and network "
            f"the square-root entropic schedule reaches the late target ({100 * f:g}% of the better of the pair's "
            f"improvement) in fewer steps than the {base} schedule (MDLM and MD4's default), i.e. the 95% paired t "
            f"interval of steps_{base}/steps_sqrt lies above 1 (containing 1: undecided; a censored ratio decides "
            "only when one schedule misses the target on every seed and the other reaches it on every seed), and, "
            "where it helps everywhere, the geometric-mean ratio on masked data exceeds figure 6's EDM/sqrt ratio on "
            f"continuous data ({most}).  Undecided intervals make the verdict inconclusive, never 'not supported'.  "
            "Figure 6's Gaussian-noise rows (discrete data under Gaussian noise) are shown beside it and do not "
            "enter the verdict.  The comparison: " + f7["target_rule"])
    from noisealloc.verify.experiments.training_harness import DATA_CLASSES

    lines = masked_table(f7)
    if f6 and _neural_rows(f6):
        lines += ["", f"Beside it, figure 6 (Gaussian noise; {DATA_CLASSES}): steps_EDM/steps_sqrt at the same "
                  "late target:", "",
                  "| data | kind | steps_EDM/steps_sqrt [95% CI] |", "|---|---|---|"]
        for r, c in _neural_rows(f6):
            x = _late(f6, c["edm_lognormal"])
            lines.append(f"| {r['data']} | {'discrete' if r['discrete'] else 'continuous'} | {_ratio_text(x)} "
                         f"({x['side']}) |")
    return interval_verdict(flags), rule, lines


def _claim_c5(f6):
    rows = _neural_rows(f6) if f6 else []
    if not rows:
        return "not measured", "", []
    bound = 1.0 / (1.0 + COMPETITIVE_MARGIN)  # steps_sqrt <= (1 + margin) steps_EDM
    flags, lines = [], []
    for r, c in rows:
        if r["discrete"]:
            continue
        x = _late(f6, c["edm_lognormal"])
        q = x["ratio"]
        # a censored ratio: EDM misses on every seed ("above") or sqrt does ("below"), else undecided
        side = x["side"] if q is None else ("above" if q["lo"] > bound else "below" if q["hi"] < bound
                                            else "inconclusive")
        flag = _flag(side)
        flags.append(flag)
        word = {True: "yes", False: "no", None: "undecided"}[flag]
        lines.append(f"| {r['data']} | steps_EDM/steps_sqrt = {_ratio_text(x)} | interval vs {bound:.3g} | {word} |")
    head = ["| continuous data | measured (95% paired t interval) | rule on these numbers | competitive |",
            "|---|---|---|---|"]
    f = f6["neural"]["verdict_fraction"]
    rule = (f"Rule (regime iii): on every continuous data set the square-root entropic schedule needs at most "
            f"{1 + COMPETITIVE_MARGIN:g} times the steps EDM needs to reach the late target ({100 * f:g}% of the "
            f"better of the pair's improvement), i.e. the interval of steps_EDM/steps_sqrt lies above {bound:.3g} "
            "(below: not competitive; containing it: undecided, and the verdict is inconclusive; a censored ratio "
            "decides only when one schedule misses the target on every seed and the other reaches it on every seed).")
    return interval_verdict(flags), rule, head + lines


def fig6_controls(f6) -> list[str]:
    """REPORT.md lines for figure 6's control regimes (i) and (ii), each with its own rows and rule.

    Parameters
    ----------
    f6 : dict or None
        Figure 6's numbers.

    Returns
    -------
    list of str
    """
    if not f6:
        return []
    lines = ["## Figure 6 controls (not the test of C4/C5)", "",
             "(i) Coupled control: one ridge readout shared by every level (regime (a) of docs/THEORY.md section 4), "
             "where the theory expects the entropic proxy to lose.  Rule: the proxy loses on a data set when "
             "N_EDM/N_sqrt < 1 (EDM reaches the target gap with fewer samples).", "",
             "| data | kind | N_EDM/N_sqrt | N_cos/N_sqrt | the proxy loses, as the theory predicts |",
             "|---|---|---|---|---|"]
    for r, e, c in _fig6_rows(f6):
        lines.append(f"| {r['data']} | {'discrete' if r['discrete'] else 'continuous'} | {num(e)} | {num(c)} | "
                     f"{num(e)} < 1: {'yes' if e < 1 else 'no'} |")
    ind = f6.get("independent")
    if ind:
        from noisealloc.theory.tolerances import MC_NSIGMA

        lines += ["", f"(ii) Independent learners: one OLS learner per lambda-cell on {ind['model']}, N = {ind['N']}, "
                  f"{ind['seeds']} runs per schedule.  Rule: the square-root law wins by the predicted factor when the "
                  f"simulated loss factor lies within {MC_NSIGMA:g} standard errors of the exact finite-N prediction "
                  "and above 1 by more than that; 'no' when it lies farther from the prediction; 'undecided' when "
                  "it agrees with the prediction but its standard error is too large to tell it from 1.  "
                  + ind["finite_n"] + ".", "",
                  "| schedule | simulated factor (mean +- s.e.) | predicted (finite N) | Theorem 2 | "
                  "rule on these numbers | as predicted |",
                  "|---|---|---|---|---|---|"]
        for r in ind["rows"]:
            if "error" in r:
                lines.append(f"| {r['schedule']} | not computed (starves a cell: {_cell(r['error'])}) | | | | |")
                continue
            sim, se, ex = _f(r["simulated_factor"]), _f(r["simulated_se"]), _f(r["exact_factor"])
            ok = abs(sim - ex) <= MC_NSIGMA * se
            wins = sim - 1.0 > MC_NSIGMA * se
            if r["schedule"] == "sqrt-entropic":
                word = "reference"
            elif not ok:
                word = (f"no ({abs(sim - ex) / se:.1f} s.e. from the prediction)" if se > 0
                        else "no (off the prediction, zero s.e.)")
            else:
                word = "yes" if wins else "undecided (s.e. too large to tell from 1)"
            test = (f"abs({num(sim)} - {num(ex)}) <= {MC_NSIGMA:g} x {num(se, '.2g')}; "
                    f"{num(sim)} - 1 > {MC_NSIGMA:g} x {num(se, '.2g')}")
            lines.append(f"| {r['schedule']} | {num(sim)} +- {num(se, '.2g')} | {num(ex)} | "
                         f"{num(r['predicted_factor'])} | {test} | {word} |")
    lines.append("")
    return lines


def evaluate_claims(out_dir) -> dict:
    """``claim id -> {"claim", "verdict", "rule", "table"}`` from the numbers files in ``out_dir``."""
    out = Path(out_dir)
    f2, f3, f4, f5, f6, f7 = (_load(out, n) for n in ("fig2_atoms", "fig3_coupling", "fig4_rmt", "fig5_efficiency",
                                                       "fig6_training", "fig7_masked"))
    results = {}
    for (cid, text), (v, rule, table) in zip(CLAIMS, (_claim_c1(f2, f3), _claim_c2(f3, f4), _claim_c3(f3, f5, f4),
                                                       _claim_c4(f6, f7), _claim_c5(f6))):
        results[cid] = {"claim": text, "verdict": v, "rule": rule, "table": table}
    return results


def _fig5_cell(cell: dict, key: str) -> str:
    """One figure-5 efficiency for the report: two decimals, or why it is 0."""
    e = fig5_efficiency(cell, key)
    if e == 0.0:
        return "0 (misses a level the criterion needs)"
    return num(e, ".2g" if e < 0.01 else ".3f", why="the solver's optimum is not usable")


def _fig5_best(table: dict, key: str) -> str:
    """The schedule of highest efficiency ``key`` with its value, or none when every schedule scores 0."""
    effs = {n: fig5_efficiency(c, key) for n, c in table.items()}
    effs = {n: e for n, e in effs.items() if np.isfinite(e)}
    if not effs or max(effs.values()) == 0.0:
        return "none (every schedule misses a level the criterion needs)"
    best = max(effs, key=effs.get)
    return f"{best} ({_fig5_cell(table[best], key)})"


def _checks_section(out: Path) -> list[str]:
    lines = []
    f1 = _load(out, "fig1_entropy")
    if f1:
        lines += ["## Figure 1 checks (budget identity, I-MMSE)", "",
                  "Budget rule: |integral - target| <= tolerance = BUDGET_ATOL_QUAD + integration error + "
                  "MC_NSIGMA x standard error of the difference, and the interval covers the budget "
                  "(theory/information/budget.py, BUDGET_RULE).  I-MMSE rule: the largest relative error of the "
                  "finite difference -dH/dlam against h, over the tested levels, <= its tolerance "
                  "(theory/information/i_mmse.py, I_MMSE_RULE).", "",
                  "| data | method | budget integral | target | abs. difference vs tolerance (s.e. of difference) | "
                  "holds | I-MMSE max rel. error vs tolerance | holds |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in f1["rows"]:
            b = r.get("budget")
            i = r.get("i_mmse")
            if b:
                why_b = "tolerance not recorded in this numbers file (written before it was)"
                diff = abs(_f(b["integral"]) - _f(b["target"]))
                budget = (f"{num(b['integral'], '.6g')} | {num(b['target'], '.6g')} | "
                          f"{num(diff, '.3g')} vs {num(b.get('tolerance'), '.3g', why=why_b)} "
                          f"(s.e. {num(b.get('stderr'), '.2g')}) | {'yes' if b['holds'] else 'no'}")
            else:
                why = _cell(r.get("budget_not_computed", "continuous data: no finite entropy budget"))
                budget = f"not computed ({why}) | | | "
            if i:
                imm = (f"{num(i['max_rel_error'], '.2e')} vs "
                       f"{num(i.get('tolerance'), '.2g', why='tolerance not recorded in this numbers file')} | "
                       f"{'yes' if i['holds'] else 'no'}")
            else:
                why = _cell(r.get("i_mmse_not_computed", "Monte-Carlo model: a centred difference of Monte-Carlo "
                                                          "estimates has no usable accuracy"))
                imm = f"not computed ({why}) | "
            lines.append(f"| {r['spec']} | {r['method']} | {budget} | {imm} |")
        if f1.get("skipped"):
            lines.append("")
            lines.append("Skipped: " + ", ".join(s["spec"] for s in f1["skipped"]))
        lines.append("")
    f5 = _load(out, "fig5_efficiency")
    if f5:
        lines += ["## Figure 5: best schedule per data set", "",
                  "Efficiencies in [0, 1] (docs/THEORY.md section 6.5): 1 = optimal, 0 = the schedule puts no mass "
                  "on a level the criterion needs (its V, L or loss factor is infinite).  Fully coupled: "
                  "V(p*)/V(p); independent learners: 1/F(p).", "",
                  "| data [family] | best by V(p*)/V(p) | sqrt-entropic V(p*)/V(p) | EDM V(p*)/V(p) | "
                  "best by L(p*)/L(p) | sqrt-entropic L(p*)/L(p) | EDM L(p*)/L(p) | "
                  "best by 1/F (independent learners) | sqrt-entropic 1/F | EDM 1/F |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in f5["rows"]:
            t = r["table"]
            lines.append(f"| {r['data']} [{r['family']}] | {_fig5_best(t, 'V_efficiency')} | "
                         f"{_fig5_cell(t['sqrt-entropic'], 'V_efficiency')} | "
                         f"{_fig5_cell(t['edm_lognormal'], 'V_efficiency')} | {_fig5_best(t, 'L_efficiency')} | "
                         f"{_fig5_cell(t['sqrt-entropic'], 'L_efficiency')} | "
                         f"{_fig5_cell(t['edm_lognormal'], 'L_efficiency')} | {_fig5_best(t, 'il_efficiency')} | "
                         f"{_fig5_cell(t['sqrt-entropic'], 'il_efficiency')} | "
                         f"{_fig5_cell(t['edm_lognormal'], 'il_efficiency')} |")
        lines += ["", f"Data scale: {f5['data_scale']}.", ""]
    f4 = _load(out, "fig4_rmt")
    if f4:
        lines += ["## Figure 4: random-matrix checks", "", "| check | holds | headline | tolerance | what |",
                  "|---|---|---|---|---|"]
        for k, c in f4["checks"].items():
            lines.append(f"| {k} | {'yes' if c['holds'] else 'no'} | {c['headline']} = {num(c['headline_value'])} | "
                         f"{num(c['tolerance'], 'g')} | {_cell(c['message'])} |")
        lines.append("")
    return lines


def _earlier_seconds(out: Path, name: str):
    """Seconds the run that wrote ``name``'s numbers took, from its ``.config.json`` (None if unknown)."""
    p = out / f"{name}.config.json"
    try:
        return float(json.loads(p.read_text())["elapsed_seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_report(out_dir, *, timings: dict | None = None, mode: str = "", failed: dict | None = None,
                 provenance: dict | None = None, fresh=()) -> Path:
    """Write ``REPORT.md`` into ``out_dir`` from the numbers files there; return its path.

    Parameters
    ----------
    out_dir : path-like
        Folder holding the figures' numbers files.
    timings : dict, optional
        Seconds per figure (and ``'total'``).
    mode : str
        Sizes and data of the run, shown at the top.
    failed : dict, optional
        Figure -> error message of figures that failed in this run.
    provenance : dict, optional
        Figure -> provenance record (:mod:`noisealloc.figures.provenance`) of the numbers read, shown
        as a table (mode, seed, version, code and request hashes).
    fresh : iterable of str
        Figures computed by this run (the others' numbers were reused from an earlier run).

    Returns
    -------
    pathlib.Path
        The report's path.
    """
    out = Path(out_dir)
    fresh = set(fresh)
    # figures whose numbers this run read from an earlier run (only known when the caller gives provenance)
    reused = {n for n in (provenance or {}) if n not in fresh and n not in (failed or {})}
    claims = evaluate_claims(out)
    lines = ["# noisealloc: reproduction report", ""]
    if mode:
        lines += [f"Mode: {mode}.", ""]
    if failed:
        lines += ["**Figures that failed in this run** (their claims count as not measured):", ""]
        lines += [f"- {k}: {_cell(v)}" for k, v in failed.items()] + [""]
    lines += ["Claims of docs/THEORY.md section 6 (last paragraph), tested by the figures.  Verdicts are computed from the "
              "numbers files in this directory by the stated rules: supported (all instances satisfy the rule), mixed "
              "(some do), not supported (none do); for claims judged on intervals (C4, C5), inconclusive when an "
              "interval contains the threshold.", "",
              "| claim | verdict |", "|---|---|"]
    for cid, c in claims.items():
        lines.append(f"| {cid}: {c['claim']} | **{c['verdict']}** |")
    lines.append("")
    for cid, c in claims.items():
        lines += [f"## {cid}: {c['claim']}", "", f"Verdict: **{c['verdict']}**.", "", c["rule"], ""]
        lines += c["table"] + [""]
    lines += fig3_notes(_load(out, "fig3_coupling"))
    f6 = _load(out, "fig6_training")
    if f6:
        lines += [f"Figure 6 data scale: {f6['data_scale']}.  Interval: lambda in {f6['interval']}; "
                  f"{len(f6['seeds'])} seeds (coupled control).", ""]
        neu = f6.get("neural")
        if neu:
            cells = _load(out, "fig6_cells")
            counts = ""
            if cells:
                c = cells["cells"]
                st = [t["step_time"] for t in cells["timings"] if t.get("step_time")]
                ct = sum(t["compile_time"] or 0.0 for t in cells["timings"])
                tot = sum(t["seconds"] for t in cells["timings"])
                when = ("by the earlier run that made these numbers (this run reused them; see the provenance "
                        "table)" if "fig6_training" in reused else "in this run")
                step = f"median step time {1e3 * float(np.median(st)):.2f} ms" if st else "no step timed"
                counts = (f"  Cells: {c['total']} ({c['cached']} reused from the cell cache, {c['computed']} computed "
                          f"{when}); {step}; compiling "
                          f"{ct:.1f} s of {tot:.1f} s cell time ({100 * ct / max(tot, 1e-9):.1f}%).")
                sc = cells.get("schedules")
                if sc:  # absent in files written before the schedules had cells of their own
                    slow = max(sc["timings"], key=lambda t: t["seconds"], default=None)
                    counts += (f"  Schedules (entropy-rate profiles, pilot runs, built once and shared by the "
                               f"training cells): {sc['total']} cells ({sc['cached']} reused, {sc['computed']} "
                               f"computed; {sum(t['seconds'] for t in sc['timings']):.1f} s")
                    counts += (f", the longest {slow['schedule']} of {slow['data'].split(':')[0]} "
                               f"{slow['seconds']:.1f} s)." if slow else ").")
                for regime, key in (("(i)", "coupled"), ("(ii)", "independent")):
                    r = cells.get(key)
                    if r:  # absent in files written before regimes (i) and (ii) were cached
                        counts += (f"  Regime {regime}: {r['total']} cells ({r['cached']} reused, {r['computed']} "
                                   f"computed; {sum(t['seconds'] for t in r['timings']):.1f} s cell time).")
            runs = ", ".join(f"{r['data']} {r['run_steps']}" for r in neu["rows"])
            lines += [f"Figure 6 regime (iii): {neu['metric']}; Adam steps at batch {neu['sizes']['batch_size']}: "
                      f"{runs}; {len(neu['seeds'])} seeds; {neu['h_note']}.{counts}", ""]
            lines += neural_notes(f6)
        lines += fig6_controls(f6)
    f7 = _load(out, "fig7_masked")
    if f7:
        lines += masked_notes(f7, _load(out, "fig7_cells"), reused=("fig7_masked" in reused))
    lines += _checks_section(out)
    if provenance:
        lines += ["## Provenance of the numbers", "",
                  "| figure | mode | seed | MNIST | version | code hash | request hash | numbers SHA-256 | this run |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for name, prov in provenance.items():
            if prov is None:
                lines.append(f"| {name} | not measured | | | | | | | |")
                continue
            req = prov["request"]
            lines.append(f"| {name} | {req['mode']} | {req['seed']} | {'yes' if req.get('mnist') else 'no'} | "
                         f"{req['version']} | {req['code_hash'][:12]} | {prov['request_hash'][:12]} | "
                         f"{prov['numbers_sha256'][:12]} | {'computed' if name in set(fresh) else 'reused'} |")
        lines.append("")
    if timings:
        lines += ["## Run times", "", "| figure | seconds in this run |", "|---|---|"]
        for k, v in timings.items():
            if k in reused:
                earlier = _earlier_seconds(out, k)
                lines.append(f"| {k} | not run: numbers reused from an earlier run"
                             + (f" (which took {earlier:.1f} s)" if earlier is not None else "") + " |")
            else:
                lines.append(f"| {k} | {num(v, '.1f', why='no timing')} |")
        lines.append("")
    path = out / "REPORT.md"
    C.write_text(path, "\n".join(lines))
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="write REPORT.md from the figures' numbers files")
    p.add_argument("--out", required=True, metavar="DIR")
    args = p.parse_args(argv)
    print(write_report(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
