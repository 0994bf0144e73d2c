"""Tests of the figure scripts, the report and the reproduce command.

Default tier: the shared writers, the verdict rules (on synthetic numbers whose verdict is known), and
bit-for-bit reproducibility of every figure's numbers at reduced sizes (module-level size tables patched),
each run twice into two directories.  Slow tier: the same at the real ``--quick`` sizes.
"""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest
from helpers.extras import requires_extra

from noisealloc.figures import _common as C
from noisealloc.figures import report as R


# ------------------------------------------------------------------ shared writers
def test_write_json_is_deterministic_and_encodes_nonfinite(tmp_path):
    doc = {"b": np.array([1.0, np.inf, -np.inf, np.nan]), "a": (np.int64(3), np.float32(0.5)), "c": np.bool_(True)}
    p1 = C.write_json(tmp_path / "x.json", doc)
    p2 = C.write_json(tmp_path / "y.json", dict(reversed(list(doc.items()))))
    assert p1.read_bytes() == p2.read_bytes()
    back = json.loads(p1.read_text())
    assert back["b"][1:] == ["inf", "-inf", "nan"] and back["a"] == [3, 0.5] and back["c"] is True
    assert [C.from_json_float(v) for v in back["b"][:3]] == [1.0, np.inf, -np.inf]
    assert 0.1 + 0.2 == json.loads(C.write_json(tmp_path / "z.json", {"v": 0.1 + 0.2}).read_text())["v"]


def test_check_run_args_rejects_bad_seed(tmp_path):
    for bad in (-1, 1.5, "0", True):
        with pytest.raises(ValueError, match="seed must be a non-negative integer"):
            C.check_run_args(tmp_path, bad)


# ------------------------------------------------------------------ verdict rules
def test_verdict_rule():
    assert R.verdict([True, True]) == "supported"
    assert R.verdict([False, False]) == "not supported"
    assert R.verdict([True, False]) == "mixed"
    assert R.verdict([]) == "not measured"


def _fig6_doc(disc, cont):
    """Figure 6 numbers with a regime-(iii) row per kind; ``disc``/``cont`` are (ratio, lo, hi) of steps_EDM/steps_sqrt
    at the late target that decides the claims (compare_training's row layout, written by hand)."""
    def control(name, discrete):
        return {"data": name, "discrete": discrete, "target": 1.0,
                "N_to_target": {"sqrt-entropic": 100.0, "edm_lognormal": 50.0, "cosine": 100.0},
                "ratio_vs_sqrt_entropic": {"sqrt-entropic": 1.0, "edm_lognormal": 0.5, "cosine": 1.0}}

    def side(lo, hi, null):
        return "above" if lo > null else "below" if hi < null else "inconclusive"

    def crow(name, r):
        ratio, lo, hi = r
        diff = {"estimate": 0.0, "lo": 0.0, "hi": 0.0}
        late = {"fraction": 0.9, "ratio": {"estimate": ratio, "lo": lo, "hi": hi}, "side": side(lo, hi, 1.0),
                "censored": {name: 0, "sqrt-entropic": 0}, "status": ["reached"] * 2}
        return {"schedule": name, "equal_compute": [{"step": 10, "difference": diff, "side": "inconclusive"}],
                "late_targets": [late]}

    def neural(name, discrete, r):
        cmp = [crow("sqrt-entropic", (1.0, 1.0, 1.0)), crow("edm_lognormal", r), crow("entropic", (1.5, 1.2, 1.9))]
        stats = {c["schedule"]: {"mean": 1.0, "se": 0.1} for c in cmp}
        return {"data": name, "discrete": discrete, "run_steps": 10, "final_nats": stats, "final_bits_per_dim": stats,
                "eval_n": 8, "eval_n_used": 8, "floor": None, "online_first_refresh": None,
                "comparison": {"rows": cmp, "fractions": [0.9], "start_fraction": 0.1}}
    return {"rows": [control("d1", True), control("c1", False)], "seeds": [0], "interval": [-8, 8], "data_scale": "test",
            "neural": {"rows": [neural("d1", True, disc), neural("c1", False, cont)], "target_rule": "test rule",
                       "metric": "m", "sizes": {"batch_size": 4}, "seeds": [0, 1], "h_note": "h",
                       "reference": "sqrt-entropic", "verdict_fraction": 0.9, "training": "t", "ablation": None}}


def test_interval_verdict_rule():
    assert R.interval_verdict([True, True]) == "supported"
    assert R.interval_verdict([False, False]) == "not supported"
    assert R.interval_verdict([True, None]) == "inconclusive"
    assert R.interval_verdict([False, None]) == "inconclusive"
    assert R.interval_verdict([None]) == "inconclusive"
    assert R.interval_verdict([True, False, None]) == "mixed"
    assert R.interval_verdict([]) == "not measured"


@pytest.mark.parametrize("disc, cont, v4, v5", [
    ((3.0, 2.0, 4.0), (1.0, 0.9, 1.1), "supported", "supported"),      # helps on discrete, as fast as EDM on continuous
    ((0.5, 0.4, 0.6), (0.1, 0.05, 0.2), "not supported", "not supported"),  # EDM faster everywhere (less so on discrete)
    ((0.5, 0.4, 0.6), (2.0, 1.5, 3.0), "not supported", "supported"),  # hurts on discrete, helps on continuous
    ((3.0, 0.9, 4.0), (1.0, 0.9, 1.1), "inconclusive", "supported"),   # discrete interval contains 1
    ((3.0, 2.0, 4.0), (0.7, 0.5, 0.9), "supported", "inconclusive"),   # continuous interval contains 0.8
    ((3.0, 2.0, 4.0), (0.5, 0.4, 0.6), "supported", "not supported"),  # steps_sqrt = 2 steps_EDM > 1.25
])
def test_fig6_claims_follow_the_numbers(tmp_path, disc, cont, v4, v5):
    C.write_json(tmp_path / "fig6_training.json", _fig6_doc(disc, cont))
    claims = R.evaluate_claims(tmp_path)
    assert claims["C4"]["verdict"] == v4
    assert claims["C5"]["verdict"] == v5
    assert claims["C1"]["verdict"] == "not measured"
    text = R.write_report(tmp_path).read_text()
    assert f"| C5: {R.CLAIMS[4][1]} | **{v5}** |" in text
    assert "(i) Coupled control" in text  # the controls have their own rows
    compared = {ln.split("|")[4].strip() for ln in text.splitlines()
                if ln.startswith("| d1 | discrete |") and len(ln.split("|")) > 8}  # regime (iii)'s table
    # every schedule of the comparison has its row, the reference's included
    assert compared == {r["schedule"] for r in _fig6_doc(disc, cont)["neural"]["rows"][0]["comparison"]["rows"]}


@pytest.mark.parametrize("sim, se, word", [
    (1.30, 0.05, "yes"),            # agrees with 1.3 and clears 1 by 6 s.e.
    (2.50, 0.58, "undecided"),      # agrees with 1.3, but 1 is within 4 s.e.
    (2.00, 0.05, "no (14.0 s.e."),  # 14 s.e. from the prediction
    (2.00, 0.0, "no (off the prediction, zero s.e.)"),  # degenerate: never a division by zero
])
def test_fig6_independent_control_words(sim, se, word):
    # Regime (ii)'s row says "undecided" when the factor cannot be told from 1, never "no" for a noisy agreement.
    f6 = {"rows": [], "independent": {"model": "m", "N": 10, "seeds": 5, "finite_n": "exact",
                                      "rows": [{"schedule": "cosine", "simulated_factor": sim, "simulated_se": se,
                                                "exact_factor": 1.3, "predicted_factor": 1.25}]}}
    row = [ln for ln in R.fig6_controls(f6) if ln.startswith("| cosine |")]
    assert len(row) == 1 and row[0].split("|")[6].strip().startswith(word), row
    assert f"{se:.2g}" in row[0] and "1.3" in row[0]  # the numbers and the tolerance the word was decided on


def test_coupling_claims_follow_the_numbers(tmp_path):
    def case(e1, e2, w1, w2):
        return {"data": "x", "family": "f", "lam": [0, 1], "entropic_weights": [0.5, 0.5], "errors": [],
                "rows": [{"J": 1, "n_atoms": 1, "atom_bound": 4, "gap": 0.0, "converged": True, "efficiency": e1, "w1": w1},
                         {"J": 16, "n_atoms": 9, "atom_bound": 99, "gap": 0.0, "converged": True, "efficiency": e2, "w1": w2}]}
    C.write_json(tmp_path / "fig3_coupling.json", {"cases": [case(0.3, 0.95, 2.0, 0.5)], "sizes": {}})
    c = R.evaluate_claims(tmp_path)
    assert (c["C2"]["verdict"], c["C3"]["verdict"], c["C1"]["verdict"]) == ("supported", "supported", "supported")
    C.write_json(tmp_path / "fig3_coupling.json", {"cases": [case(0.3, 0.95, 2.0, 0.5), case(0.95, 0.5, 0.5, 2.0)],
                                                   "sizes": {}})
    c = R.evaluate_claims(tmp_path)
    assert (c["C2"]["verdict"], c["C3"]["verdict"]) == ("mixed", "mixed")


# ------------------------------------------------------------------ figure 3 on two lambda intervals (issue 29)
def _fig3_interval_case(lo, hi, eff, w1, *, v_ent=None, converged=True):
    """A synthetic fig3 case on ``[lo, hi]`` (21 levels): rows J = 1, 4, 16 with the given efficiencies and W1.

    The J = 1 optimum is one atom at the top level; the J = 16 optimum puts weight 0.3 on the lowest level,
    0.1 on the highest and 0.6 at lambda = 0; the sqrt(h) weights are uniform (so h/max h = 1 at the ends
    of the trapezoid rule's half-weighted end levels).
    """
    lam = np.linspace(lo, hi, 21)
    w = np.full(21, 1.0)
    w[0] = w[-1] = 0.5
    v_ent = v_ent or [10.0, 20.0, 30.0]
    rows = []
    for J, e, d, ve, atoms, weights in zip((1, 4, 16), eff, w1, v_ent, ([hi], [lo, 0.0], [lo, 0.0, hi]),
                                           ([1.0], [0.5, 0.5], [0.3, 0.6, 0.1])):
        rows.append({"J": J, "n_atoms": len(atoms), "atom_bound": 4 * J, "gap": 0.0, "converged": converged,
                     "efficiency": e, "w1": d, "value": e * ve if np.isfinite(ve) else 1.0, "value_entropic": ve,
                     "atoms": atoms, "weights": weights})
    return {"data": "dirac:K=3,D=1,sep=2,seed=0", "family": "posterior-weights", "lam_min": lo, "lam_max": hi,
            "lam": lam.tolist(), "entropic_weights": (w / w.sum()).tolist(), "rows": rows, "errors": []}


def _fig3_two_intervals(narrow_eff, wide_eff, *, wide_v_ent=None, wide_converged=True):
    return {"figure": "fig3_coupling", "sizes": {"criterion": "sandwich", "J_values": [1, 4, 16], "levels": 21},
            "cases": [_fig3_interval_case(-6.0, 4.0, narrow_eff, (3.0, 1.0, 0.2)),
                      _fig3_interval_case(-8.0, 8.0, wide_eff, (7.0, 1.5, 0.3), v_ent=wide_v_ent,
                                          converged=wide_converged)]}


@pytest.mark.parametrize("eff, word", [([0.1, 0.5, 0.9], "rises"), ([0.5, 1e-6, 0.0], "falls"),
                                       ([0.2, 0.2], "stays constant"), ([1e-45, 2e-5, 0.0], "rises, then falls"),
                                       ([0.5, 0.1, 0.4], "falls, then rises"), ([0.3], "is not computed")])
def test_fig3_efficiency_direction(eff, word):
    from noisealloc.figures.fig3_coupling import efficiency_direction

    assert efficiency_direction(eff) == word


def test_fig3_cases_run_the_dirac_data_on_two_intervals():
    """Figure 3 runs the same Dirac data on its own interval and on the sweep file's [-8, 8]."""
    import tomllib
    from pathlib import Path

    from noisealloc.figures import fig3_coupling as F

    sweep = tomllib.loads((Path(F.__file__).parent / "sweeps" / "coupling_dirac.toml").read_text())["fixed"]
    ivs = {F.case_interval(c) for c in F.CASES if c["data"] == F.DIRAC}
    assert ivs == {(-6.0, 4.0), (sweep["lam_min"], sweep["lam_max"])} == {(-6.0, 4.0), (-8.0, 8.0)}


def test_fig3_document_carries_both_intervals(tmp_path, monkeypatch):
    """The numbers file holds the Dirac rows of both intervals (same J values and criterion) and the note."""
    from noisealloc.figures import fig3_coupling as F

    monkeypatch.setattr(F, "CASES", tuple(c for c in F.CASES if c["data"] == F.DIRAC))
    # grid sizes where these stalling [-8, 8] solves are fast (17 levels took a minute at J = 2)
    monkeypatch.setattr(F, "_sizes", lambda q: {"J_values": [1, 2], "levels": 25, "criterion": "sandwich",
                                                 "interval_comparison": True, "comparison_levels": 21})
    # compute and the JSON round trip only: the plot is drawn by the slow tier's run at the real sizes
    doc = json.loads(C.write_json(tmp_path / "fig3_coupling.json", F.compute(quick=True, seed=0)).read_text())
    assert [(c["data"], c["lam_min"], c["lam_max"]) for c in doc["cases"]] == [(F.DIRAC, -6.0, 4.0),
                                                                               (F.DIRAC, -8.0, 8.0)]
    for case in doc["cases"]:
        assert [r["J"] for r in case["rows"]] == [1, 2]
        assert case["lam"][0] == case["lam_min"] and case["lam"][-1] == case["lam_max"]
    assert [len(c["lam"]) for c in doc["cases"]] == [25, 21]  # the comparison case on its own grid size
    (comp,) = doc["interval_note"]["comparisons"]
    assert [s["interval"] for s in comp["intervals"]] == [[-6.0, 4.0], [-8.0, 8.0]]
    assert comp["common_interval"] == [-6.0, 4.0]
    assert "on [-6, 4] the efficiency" in comp["headline"] and "on [-8, 8] it" not in comp["headline"]
    assert "on [-8, 8] the efficiency" in comp["headline"]
    # the note is the numbers' own: recomputing it from the stored rows gives the same text
    assert F.interval_note(doc)["text"] == doc["interval_note"]["text"]


def test_fig3_run_without_the_comparison_says_so(monkeypatch):
    """Sizes without the interval comparison (--quick) skip the second interval and say why, in the note too."""
    from noisealloc.figures import fig3_coupling as F

    assert F._sizes(False)["interval_comparison"] and not F._sizes(True)["interval_comparison"]
    monkeypatch.setattr(F, "CASES", tuple(c for c in F.CASES if c["data"] == F.DIRAC))
    monkeypatch.setattr(F, "_sizes", lambda q: {"J_values": [1], "levels": 9, "criterion": "sandwich",
                                                 "interval_comparison": False})
    doc = F.compute(quick=True, seed=0)
    assert [F.case_interval(c) for c in doc["cases"]] == [(-6.0, 4.0)]
    assert doc["skipped"] == [{"data": F.DIRAC, "interval": [-8.0, 8.0], "reason": F.COMPARISON_SKIPPED}]
    assert doc["interval_note"]["comparisons"] == []
    assert f"Not computed: {F.DIRAC} on [-8, 8] (the second lambda interval is swept by --full only" \
        in doc["interval_note"]["text"]


def test_fig3_interval_note_states_each_direction_from_the_numbers():
    """The note's direction on each interval follows the numbers: swapping them swaps the words."""
    from noisealloc.figures.fig3_coupling import interval_note

    doc = _fig3_two_intervals((0.02, 0.3, 0.8), (0.5, 1e-6, 0.0), wide_v_ent=[10.0, 20.0, float("inf")])
    note = interval_note(doc)
    head = note["comparisons"][0]["headline"]
    assert "on [-6, 4] the efficiency V(p*)/V(p_ent) rises with J from 0.02 at J = 1 to 0.8 at J = 16" in head
    assert ("on [-8, 8] the efficiency V(p*)/V(p_ent) falls with J from 0.5 at J = 1 to 0 at J = 16 "
            "(V(p_ent) not finite)") in head
    swapped = interval_note(_fig3_two_intervals((0.8, 0.3, 0.02), (1e-6, 0.5, 1e-3)))["comparisons"][0]["headline"]
    assert "on [-6, 4] the efficiency V(p*)/V(p_ent) falls with J from 0.8 at J = 1 to 0.02 at J = 16" in swapped
    assert ("on [-8, 8] the efficiency V(p*)/V(p_ent) rises, then falls with J from 1e-06 at J = 1 to 0.001 at J = 16, "
            "largest 0.5 at J = 4") in swapped
    reasons = " ".join(note["comparisons"][0]["reasons"])
    # J = 1: one atom at the top level of each interval, with h/max h there and V(p*), V(p_ent) of each
    assert ("At J = 1 the optimum is one atom at the top level of each interval (lambda = 4 on [-6, 4], lambda = 8 "
            "on [-8, 8]), where h/max h = 1 and 1; V(p*) = 0.2 and 5 against V(p_ent) = 10 and 10.") in reasons
    # J = 16 on the wide interval: masses outside [-6, 4], read from the atoms and from the sqrt(h) weights
    # (uniform sqrt(h), 21 levels 0.8 apart: 2.5 of 20 trapezoid units below -6, 4.5 above 4)
    assert ("the optimum puts 0.3 of its mass below lambda = -6 and 0.1 above lambda = 4 (the levels outside [-6, 4]), "
            "the sqrt(h) density 0.125 and 0.225: sqrt(h) puts less than the optimum below lambda = -6 and more than "
            "the optimum above lambda = 4") in reasons
    assert "(J = 16) B_" in reasons and "V(p_ent) not finite (its moment matrix is numerically singular)" in reasons
    assert "did not converge" not in reasons
    late = interval_note(_fig3_two_intervals((0.02, 0.3, 0.8), (0.5, 0.1, 0.0), wide_converged=False))
    assert "On [-8, 8] the solver did not converge for J = 1, 4, 16" in late["text"]


def test_fig3_plot_draws_both_intervals(tmp_path):
    """The plot draws a numbers file with two intervals, and one written before the note was stored."""
    from noisealloc.figures import fig3_coupling as F

    doc = C.to_jsonable(_fig3_two_intervals((0.02, 0.3, 0.8), (0.5, 1e-6, 0.0), wide_v_ent=[10.0, 20.0, float("inf")]))
    F.plot(doc, tmp_path / "old.png")  # no "interval_note": recomputed from the rows
    F.plot({**doc, "interval_note": F.interval_note(doc)}, tmp_path / "new.png")
    assert (tmp_path / "old.png").read_bytes() == (tmp_path / "new.png").read_bytes()
    assert (tmp_path / "new.png").stat().st_size > 10_000


def test_fig3_least_covered_spline():
    """Two linear B-splines on [0, 1]: the optimum all on the right one, sqrt(h) mostly on the left."""
    from noisealloc.figures.fig3_coupling import least_covered_spline

    got = least_covered_spline([0.0, 0.5, 1.0], 2, [0.0, 0.0, 1.0], [0.5, 0.5, 0.0])
    # shares: optimum (0, 1), sqrt(h) (0.75, 0.25); the left spline is empty for the optimum, so not "under-covered"
    assert got == {"index": 2, "support": [0.5, 1.0], "optimum": 1.0, "entropic": 0.25}


def test_fig3_one_interval_per_data_has_nothing_to_compare():
    from noisealloc.figures.fig3_coupling import interval_note

    doc = _fig3_two_intervals((0.02, 0.3, 0.8), (0.5, 1e-6, 0.0))
    doc["cases"] = doc["cases"][:1]
    note = interval_note(doc)
    assert note["comparisons"] == [] and "nothing to compare" in note["text"] and "Not computed" not in note["text"]


def test_report_says_which_fig3_conclusion_holds_on_which_interval(tmp_path):
    """REPORT.md's figure-3 paragraph: the direction and the C2/C3 rules on each interval, from the numbers."""
    import re

    C.write_json(tmp_path / "fig3_coupling.json",
                 _fig3_two_intervals((0.02, 0.3, 0.95), (0.5, 1e-6, 0.0), wide_v_ent=[10.0, 20.0, float("inf")]))
    text = R.write_report(tmp_path).read_text()
    para = text.split("## Figure 3: the lambda interval")[1].split("\n## ")[0]
    assert "on [-6, 4] the efficiency V(p*)/V(p_ent) rises with J from 0.02 at J = 1 to 0.95 at J = 16" in para
    assert "on [-8, 8] the efficiency V(p*)/V(p_ent) falls with J from 0.5 at J = 1" in para
    assert "Efficiency per J on [-8, 8] (21 levels, J = 1, 4, 16): 0.5, 1e-06, 0." in para
    assert ("on [-6, 4] C2's rule holds (efficiency at J = 16 0.95 >= 0.9; W1 0.2 < 3 at J = 1) and C3's rule holds "
            "(efficiency at J = 1 0.02 < 0.9 and 0.02 < 0.95 at J = 16)") in para
    assert ("on [-8, 8] C2's rule fails (efficiency at J = 16 0 < 0.9; W1 0.3 < 7 at J = 1) and C3's rule fails "
            "(efficiency at J = 1 0.5 < 0.9 and 0.5 >= 0 at J = 16)") in para
    assert not re.search(_NONFINITE, para, re.I)
    # each interval is one instance of the claims, named in their tables and rules
    c = R.evaluate_claims(tmp_path)
    assert "dirac:K=3,D=1,sep=2,seed=0 on [-6, 4] and [-8, 8]" in c["C2"]["rule"]
    assert (c["C2"]["verdict"], c["C3"]["verdict"]) == ("mixed", "mixed")
    rows = [ln for ln in c["C2"]["table"] if ln.startswith("| fig3 |")]
    assert [ln.split("|")[2].strip() for ln in rows] == ["dirac:K=3,D=1,sep=2,seed=0 on [-6, 4]",
                                                          "dirac:K=3,D=1,sep=2,seed=0 on [-8, 8]"]
    # a tiny nonzero efficiency is not printed as 0.000 in the claim tables
    assert "efficiency at J=1: 1.00e-06, at J=16: 0.000" in "\n".join(
        R._claim_c3(_fig3_two_intervals((0.02, 0.3, 0.95), (1e-6, 0.5, 0.0)), None, None)[2])


# ------------------------------------------------------------------ reproducibility at reduced sizes
def _run_twice(mod, tmp_path, **kw):
    a, b = tmp_path / "a", tmp_path / "b"
    ra = mod.run(a, quick=True, seed=0, **kw)
    rb = mod.run(b, quick=True, seed=0, **kw)
    assert ra["numbers"].read_bytes() == rb["numbers"].read_bytes()
    assert ra["png"].stat().st_size > 10_000
    cfg = json.loads(ra["config"].read_text())
    assert cfg["seed"] == 0 and cfg["versions"]["numpy"] == np.__version__
    return json.loads(ra["numbers"].read_text())


@pytest.mark.slow  # moved out of the default tier: it ran 245-260 s against its 240 s budget
def test_fig1_reproducible_small(tmp_path, monkeypatch):
    from noisealloc.figures import fig1_entropy as F

    monkeypatch.setattr(F, "DISCRETE_SPECS", ("dirac:K=2,D=1,sep=2,seed=0",))
    monkeypatch.setattr(F, "CONTINUOUS_SPECS", ("gaussian:D=4,k=1,seed=0",))
    monkeypatch.setattr(F, "IMAGE_SPECS", ())
    monkeypatch.setattr(F, "_sizes", lambda q: {"lam_min": -8.0, "lam_max": 8.0, "levels": 17,
                                                 "mc_samples_digits": 16, "mc_samples_mnist": 16})
    doc = _run_twice(F, tmp_path)
    row = doc["rows"][0]
    assert row["budget"]["holds"] and abs(row["budget"]["integral"] - np.log(2)) < 1e-6
    assert doc["rows"][1]["spec"] == "gaussian:D=4,k=1,seed=0" and doc["rows"][1]["i_mmse"]["holds"]


def test_fig1_plateau_from_a_density_with_a_known_flat_top():
    # p = 0 below 0, rises linearly to 1 on [0, 1], flat on [1, 5]; normalised by 4.5.  Within 10% of the
    # maximum from lambda = 0.9, holding (0.5 (0.9 + 1) 0.1 + 4) / 4.5 of the mass (exact for the trapezoid).
    from noisealloc.figures import fig1_entropy as F

    lam = np.linspace(-2.0, 5.0, 71)
    p = np.clip(lam, 0.0, 1.0) / 4.5
    got = F.plateau(lam, p, spec="s")
    assert got["start"] == pytest.approx(0.9, abs=1e-12)
    assert got["mass"] == pytest.approx((0.5 * 1.9 * 0.1 + 4.0) / 4.5, rel=1e-12)
    assert F.plateau(lam, p[::-1], spec="s") == {"spec": "s", "start": None, "mass": 0.0}  # falls at the end


def test_fig2_coincident_atoms_are_drawn_apart_and_the_rest_stay():
    from noisealloc.figures import fig2_atoms as F

    got = F.coincident_offsets([1.0, 5.0, 12.0], [1.1, 9.0, 12.0])
    d = F.COINCIDENT_SHIFT
    np.testing.assert_array_equal(got["L"], [1.0 - d, 5.0, 12.0 - d])
    np.testing.assert_array_equal(got["sandwich"], [1.1 + d, 9.0, 12.0 + d])
    assert got["shared"] == [1.0, 12.0]
    assert F.coincident_offsets([0.0], [5.0])["shared"] == []


@pytest.mark.slow
def test_fig2_reproducible_small(tmp_path, monkeypatch):
    from noisealloc.figures import fig2_atoms as F

    monkeypatch.setattr(F, "_cases", lambda q: [{"data": "dirac:K=3,D=1,sep=2,seed=0", "family": "random-features",
                                                 "opts": {"q": 4, "n_mc": 256}}])
    monkeypatch.setattr(F, "_sizes", lambda q: {"lam_min": -6.0, "lam_max": 6.0, "levels": 25})
    doc = _run_twice(F, tmp_path)
    r = doc["rows"][0]["L"]
    assert r["n_atoms"] <= r["atom_bound"]
    # Kiefer-Wolfowitz, recomputed from the stored numbers: sensitivity <= value on the grid.
    assert max(r["sensitivity"]) <= r["bound"] * (1 + 1e-6)


@pytest.mark.slow
def test_fig3_reproducible_small(tmp_path, monkeypatch):
    from noisealloc.figures import fig3_coupling as F

    monkeypatch.setattr(F, "CASES", ({"data": "gaussian:D=4,k=1,seed=0", "family": None, "lam_min": -6.0,
                                       "lam_max": 6.0},))
    monkeypatch.setattr(F, "_sizes", lambda q: {"J_values": [1, 2], "levels": 25, "criterion": "sandwich"})
    doc = _run_twice(F, tmp_path)
    assert [r["J"] for r in doc["cases"][0]["rows"]] == [1, 2]


@pytest.mark.slow  # moved out of the default tier: it ran 260 s against its 240 s budget
def test_fig5_reproducible_small(tmp_path, monkeypatch):
    from noisealloc.figures import fig5_efficiency as F

    monkeypatch.setattr(F, "_specs", lambda m: ["dirac:K=2,D=1,sep=2,seed=0"])
    monkeypatch.setattr(F, "_sizes", lambda q: {"lam_min": -8.0, "lam_max": 8.0, "levels": 33, "rf_q": 4,
                                                 "rf_n_mc": 128, "rf_n_mc_images": 64, "h_samples": 64})
    doc = _run_twice(F, tmp_path)
    t = doc["rows"][0]["table"]
    # Theorem 2: the sqrt-entropic schedule attains the independent-learner optimum (factor 1), all others >= 1.
    assert t["sqrt-entropic"]["il_factor"] == pytest.approx(1.0, abs=1e-9)
    assert all(C.from_json_float(v["il_factor"]) >= 1 - 1e-9 for v in t.values())
    assert all(C.from_json_float(v["V_ratio"]) >= 1 - 1e-6 for v in t.values())
    # the figure's orientation (docs/THEORY.md section 6.5): every efficiency in [0, 1], the reciprocal of its ratio
    for v in t.values():
        for eff, ratio in (("V_efficiency", "V_ratio"), ("L_efficiency", "L_ratio"), ("il_efficiency", "il_factor")):
            e, r = C.from_json_float(v[eff]), C.from_json_float(v[ratio])
            assert 0.0 <= e <= 1.0
            assert e == (0.0 if r == np.inf else pytest.approx(1.0 / r, rel=1e-5))
    assert t["sqrt-entropic"]["il_efficiency"] == pytest.approx(1.0, abs=1e-9)


class _LazyInlineClient:
    """A stand-in for a Dask client: each task runs in this process when its result is asked for, so a sweep
    stopped after k cells (``stop_after``) has computed exactly k, like a killed run."""

    def submit(self, fn, *args, key=None, pure=None):
        class Future:
            def __init__(self):
                self._done, self._value = False, None

            def result(self):
                if not self._done:
                    self._value, self._done = fn(*args), True
                return self._value

            def done(self):
                return self._done

            def cancel(self):
                pass

        return Future()


def _fig6_small(monkeypatch, *, stop=None):
    """Figure 6 at tiny sizes with the real sweep engine run in this process; ``stop = {kind: k}`` stops that
    regime's sweep after k computed cells (an interrupted run)."""
    import distributed

    from noisealloc.figures import fig6_training as F
    from noisealloc.verify.experiments import sweep as S

    monkeypatch.setattr(F, "coupled_data", lambda m=None: ["dirac:K=3,D=1,sep=1,seed=0", "dirac:K=2,D=2,sep=1,seed=0"])
    monkeypatch.setattr(F, "_sizes", lambda q: {"N_values": [32, 128], "seeds": 2, "q": 16, "ridge": 1e-3,
                                                 "eval_levels": 9, "eval_n": 16, "h_levels": 17, "h_samples": 64})
    monkeypatch.setattr(F, "IL_SCHEDULES", ("sqrt-entropic", "edm_lognormal", "cosine"))  # the grid; the cells index the full tuple
    monkeypatch.setattr(F, "_independent_sizes", lambda q: {"N": 4000, "cells": 8, "seeds": 5})
    monkeypatch.setattr(F, "_neural_sizes", lambda q: {
        "steps": {"dirac": 20}, "batch_size": 16, "learning_rate": 1e-3, "width": 16, "depth": 1, "seeds": 2,
        "checkpoints": 10, "eval_levels": 9, "eval_n": 32, "h_levels": 17, "h_samples": 64, "online_refresh": 4,
        "loss_weight": "edm", "warmup_fraction": 0.05, "ablation_weights": []})
    monkeypatch.setattr(F, "_neural_data", lambda q, m: ["dirac:K=3,D=8,sep=1,seed=0"])
    monkeypatch.setattr(F, "NEURAL_SCHEDULES", ("sqrt-entropic", "edm_lognormal"))
    monkeypatch.setattr(distributed, "as_completed", lambda futs: iter(futs))
    stop = stop or {}

    def inline(spec, cells_dir, scheduler, shared_dir=None):
        kind = next(k for k, v in S.CELL_KINDS.items() if v == spec.kind)
        return S.run_sweep(spec, cells_dir, client=_LazyInlineClient(), stop_after=stop.get(kind),
                           shared_dir=shared_dir)

    monkeypatch.setattr(F, "_run_cells", inline)
    monkeypatch.setattr(F.T, "one_cluster", lambda scheduler=None: contextlib.nullcontext(scheduler))
    return F


@requires_extra("train", "sweep")
def test_fig6_coupled_control_small(tmp_path, monkeypatch):
    F = _fig6_small(monkeypatch)
    a, counts = F._compute_coupled(quick=True, seed=0, out_dir=tmp_path / "a")
    b, _ = F._compute_coupled(quick=True, seed=0, out_dir=tmp_path / "b")
    assert counts["total"] == counts["computed"] == 2 and counts["cached"] == 0
    row = a["rows"][0]
    assert row["data"] == "dirac:K=3,D=1,sep=1,seed=0" and row["dim"] == 1
    assert row["ratio_vs_sqrt_entropic"]["sqrt-entropic"] == 1.0
    assert row["target"] == max(c["mean"][-1] for c in row["curves"].values())
    np.testing.assert_array_equal(row["curves"]["edm_lognormal"]["gaps"], b["rows"][0]["curves"]["edm_lognormal"]["gaps"])


def test_fig6_cell_names_rejected():
    from noisealloc.verify.experiments import regime_cells as F

    with pytest.raises(ValueError, match="data must be dirac"):
        F.coupled_model("mnist:")
    with pytest.raises(ValueError, match="schedule must be one of"):
        F.cell_independent(schedule="karras", seed=0, N=100, cells=4, seeds=2)


@pytest.mark.slow  # moved out of the default tier: it ran 260 s against its 240 s budget
def test_fig6_interrupted_run_resumes_without_recomputing(tmp_path, monkeypatch):
    """Every regime is cached: a run stopped in regime (i), then one stopped in regime (iii), then a finishing
    run compute each cell exactly once, and give the numbers of an uninterrupted run byte for byte."""
    from noisealloc.verify.experiments.sweep.engine import run_counts

    out = tmp_path / "resumed"
    F = _fig6_small(monkeypatch, stop={"fig6-coupled": 1})
    with pytest.raises(RuntimeError, match=r"regime \(i\): 1 of 2 cells missing"):
        F.run(out, quick=True, seed=0)
    F = _fig6_small(monkeypatch, stop={"neural": 1})
    with pytest.raises(RuntimeError, match=r"regime \(iii\) dirac_K_3_D_8_sep_1_seed_0: 3 of 4 cells missing"):
        F.run(out, quick=True, seed=0)
    F = _fig6_small(monkeypatch)
    resumed = F.run(out, quick=True, seed=0)
    cells = json.loads((out / F.CELLS_FILE).read_text())
    assert cells["cells"] == {"total": 4, "cached": 1, "computed": 3}  # regime (iii)
    assert {k: cells["coupled"][k] for k in ("total", "cached", "computed")} == {"total": 2, "cached": 2, "computed": 0}
    assert {k: cells["independent"][k] for k in ("total", "cached", "computed")} == {"total": 3, "cached": 3,
                                                                                      "computed": 0}
    slug = "dirac_K_3_D_8_sep_1_seed_0"
    for sub, n in ((F.COUPLED_DIR, 2), (F.INDEPENDENT_DIR, 3), (f"{F.SCHEDULE_CELLS_DIR}/{slug}", 1),
                   (f"{F.CELLS_DIR}/{slug}", 4)):
        counts = run_counts(out / sub)
        assert len(counts) == n and set(counts.values()) == {1}, (sub, counts)  # each cell computed once
    # the entropy-rate profile was built by the schedule cell and only read by the training cells
    assert [json.loads(f.read_text())["name"] for f in (out / F.SHARED_DIR).glob("*.json")] == ["fig6 entropy rate"]
    assert cells["schedules"]["computed"] == 0 and cells["schedules"]["total"] == 1
    again = F.run(out, quick=True, seed=0)  # all cached: nothing computed, same bytes
    cells = json.loads((out / F.CELLS_FILE).read_text())
    assert [cells[k]["computed"] for k in ("cells", "coupled", "independent")] == [0, 0, 0]
    text = R.write_report(out).read_text()
    assert "Cells: 4 (4 reused from the cell cache, 0 computed" in text
    assert "Regime (i): 2 cells (2 reused, 0 computed" in text and "Regime (ii): 3 cells (3 reused, 0 computed" in text
    fresh = F.run(tmp_path / "fresh", quick=True, seed=0)
    assert resumed["numbers"].read_bytes() == fresh["numbers"].read_bytes() == again["numbers"].read_bytes()
    doc = json.loads(fresh["numbers"].read_text())
    assert [r["data"] for r in doc["rows"]] == ["dirac:K=3,D=1,sep=1,seed=0", "dirac:K=2,D=2,sep=1,seed=0"]
    assert [r["schedule"] for r in doc["independent"]["rows"]] == list(F.IL_SCHEDULES)


@requires_extra("train", "sweep")
def test_fig6_changed_size_is_not_reused(tmp_path, monkeypatch):
    """A cached regime-(i) cell of other sizes is never reused: the cell key holds every size."""
    F = _fig6_small(monkeypatch)
    _, first = F._compute_coupled(quick=True, seed=0, out_dir=tmp_path)
    assert first["computed"] == 2
    _, same = F._compute_coupled(quick=True, seed=0, out_dir=tmp_path)
    assert same["cached"] == 2 and same["computed"] == 0
    _, other_seed = F._compute_coupled(quick=True, seed=1, out_dir=tmp_path / "s")
    assert other_seed["computed"] == 2
    sizes = F._sizes(True)
    monkeypatch.setattr(F, "_sizes", lambda q: {**sizes, "q": 8})
    with pytest.raises(ValueError, match="holds another sweep"):  # refused, never silently mixed
        F._compute_coupled(quick=True, seed=0, out_dir=tmp_path)


@pytest.mark.slow
def test_fig6_reproducible_small(tmp_path, monkeypatch):
    """All three regimes at tiny sizes, twice, bit for bit."""
    F = _fig6_small(monkeypatch)
    monkeypatch.setattr(F, "NEURAL_SCHEDULES", ("sqrt-entropic", "edm_lognormal", "online"))
    doc = _run_twice(F, tmp_path)
    row = doc["rows"][0]
    assert row["ratio_vs_sqrt_entropic"]["sqrt-entropic"] == 1.0
    assert row["target"] == max(c["mean"][-1] for c in row["curves"].values())
    neu = doc["neural"]["rows"][0]
    assert neu["steps"] == [0, 1, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20]
    assert set(neu["mean"]) == {"sqrt-entropic", "edm_lognormal", "online"}
    assert neu["h_source"] == "exact (law)" and neu["floor"]["nats"] > 0
    assert {r["schedule"] for r in doc["independent"]["rows"]} == set(F.IL_SCHEDULES)
    assert (tmp_path / "a" / "fig6_cells.json").exists()


# ------------------------------------------------------------------ reproducibility at the real --quick sizes
@pytest.mark.slow
@pytest.mark.parametrize("name", ["fig1_entropy", "fig2_atoms", "fig3_coupling", "fig4_rmt", "fig5_efficiency",
                                  "fig6_training"])
def test_quick_figure_bit_for_bit(tmp_path, name):
    import importlib

    _run_twice(importlib.import_module(f"noisealloc.figures.{name}"), tmp_path)


# ------------------------------------------------------------------ command line
def test_reproduce_bad_input(tmp_path, capsys):
    from noisealloc.cli import main

    assert main(["reproduce", "--out", str(tmp_path), "--only", "fig9"]) == 2
    assert "unknown figures" in capsys.readouterr().err
    assert main(["reproduce", "--out", str(tmp_path), "--only", "fig2_atoms", "--mnist", str(tmp_path / "nope")]) == 2
    assert main(["reproduce", "--out", str(tmp_path), "--seed", "-1"]) == 2


def test_reproduce_continues_past_a_failing_figure(tmp_path, monkeypatch, capsys):
    from noisealloc.cli import main
    from noisealloc.figures import fig3_coupling

    def boom(*a, **k):
        raise RuntimeError("synthetic failure")

    monkeypatch.setattr(fig3_coupling, "run", boom)
    C.write_json(tmp_path / "fig3_coupling.json", {"cases": [], "sizes": {}})  # stale numbers from an earlier run
    assert main(["reproduce", "--out", str(tmp_path), "--only", "fig3_coupling"]) == 1
    assert "synthetic failure" in (tmp_path / "fig3_coupling.error.txt").read_text()
    assert not (tmp_path / "fig3_coupling.json").exists()
    text = (tmp_path / "REPORT.md").read_text()
    assert "Figures that failed" in text and "not measured" in text


@pytest.mark.slow  # moved out of the default tier: it ran 260 s against its 240 s budget
def test_figure5_takes_the_command_lines_law(tmp_path):
    """Figure 5's entropic schedule of digits is the CLI's (issue 25): the smoothed law, the same density."""
    from noisealloc.cli import main
    from noisealloc.figures import fig5_efficiency as F5
    from noisealloc.theory.models.datasets import load_data
    from noisealloc.theory.schedules.io import load_json

    sizes = {**F5._sizes(True), "levels": 17, "h_samples": 64, "h_samples_smoothed": 64}
    lam = np.linspace(sizes["lam_min"], sizes["lam_max"], sizes["levels"])
    fig = F5.entropic_schedule_of(load_data("digits"), lam, sizes, 3)
    assert fig.law.law == "smoothed"
    out = tmp_path / "s.json"
    assert main(["schedule", "--from-data", "digits", "--levels", "17", "--samples", "64", "--seed", "3",
                 "--out", str(out)]) == 0
    np.testing.assert_allclose(load_json(out).pdf_values, fig.result.schedule.pdf_values, rtol=1e-12, atol=0)


# ------------------------------------------------------------------ REPORT.md: numbers, rules, tolerances (issue 29)
_NONFINITE = r"\binf\b|\bnan\b"


def _fig1_doc():
    """Figure 1 rows: a deterministic discrete row (with tolerances), an old-format Monte-Carlo row (no
    tolerance recorded, no I-MMSE), a continuous row (no budget)."""
    imm = {"lam": [0.0], "fd": [1.0], "rate": [1.0], "rel_error": [1e-9], "max_rel_error": 2e-9, "holds": True,
           "tolerance": 1e-6, "rule": "r"}
    return {"rows": [
        {"spec": "dirac:K=2", "method": "quadrature", "budget": {"integral": 0.6931, "target": 0.6931472,
         "abs_error": 1e-9, "stderr": 0.0, "holds": True, "tolerance": 1.5e-8}, "i_mmse": imm},
        {"spec": "digits", "method": "monte-carlo", "budget": {"integral": 7.785, "target": 7.494, "abs_error": 0.1,
         "stderr": 0.12, "holds": True}},
        {"spec": "gaussian:D=8", "method": "closed form", "i_mmse": imm,
         "budget_not_computed": "continuous data: H(pi) is not finite"}]}


def _fig4_doc(v_iv=0.4):
    def chk(holds, head, val, tol):
        return {"name": head, "holds": holds, "headline": head, "headline_value": val, "tolerance": tol,
                "message": f"{head} = {val} vs {tol}", "data": {}, "measured": {}}
    iv = chk(True, "factor_gap", v_iv, 0.05)
    iv["measured"] = {"factor_coupled": 1.4, "factor_decoupled": 1.0}
    return {"checks": {"ii": chk(True, "max_rel_diff", 1e-9, 1e-6), "iii": chk(False, "slope_l1", -0.5, 0.2),
                       "iv": iv}}


def _fig5_doc():
    """One new-format row (efficiencies stored) and one old-format row (ratios only, every V infinite)."""
    new = {n: {"V": 2.0, "V_ratio": 2.0, "L": 1.0, "L_ratio": 1.0, "il_factor": 1.25, "V_efficiency": 0.5,
               "L_efficiency": 1.0, "il_efficiency": 0.8} for n in ("sqrt-entropic", "edm_lognormal", "cosine")}
    old = {n: {"V": "inf", "V_ratio": "inf", "L": 3.0, "L_ratio": 3.0, "il_factor": f}
           for n, f in (("sqrt-entropic", 1.0), ("edm_lognormal", 1.54e65), ("cosine", "inf"))}
    return {"rows": [{"data": "a", "family": "f", "table": new}, {"data": "b", "family": "g", "table": old}],
            "schedules": ["sqrt-entropic", "edm_lognormal", "cosine"], "data_scale": "test"}


def _fig2_doc():
    r = {"status": 0, "rel_gap": 3e-8, "n_atoms": 3, "atom_bound": 5, "kind": "duality"}
    return {"lam": list(range(20)), "rows": [{"data": "x", "family": "f", "L": r, "sandwich": {**r, "rel_gap": "nan"}}]}


def _all_numbers(tmp_path):
    C.write_json(tmp_path / "fig1_entropy.json", _fig1_doc())
    C.write_json(tmp_path / "fig2_atoms.json", _fig2_doc())
    C.write_json(tmp_path / "fig4_rmt.json", _fig4_doc())
    C.write_json(tmp_path / "fig5_efficiency.json", _fig5_doc())
    C.write_json(tmp_path / "fig6_training.json", _fig6_doc((3.0, 2.0, 4.0), (1.0, 0.9, 1.1)))
    rows = [{"J": 1, "n_atoms": 1, "atom_bound": 4, "gap": 0.0, "converged": True, "efficiency": 0.3, "w1": 2.0},
            {"J": 16, "n_atoms": 9, "atom_bound": 99, "gap": 1e-9, "converged": True, "efficiency": 0.95, "w1": 0.5}]
    C.write_json(tmp_path / "fig3_coupling.json", {"cases": [{"data": "x", "family": "f", "rows": rows}], "sizes": {}})


def test_num_writes_reasons_never_nonfinite():
    import re

    assert R.num(0.5, ".2f") == "0.50"
    for x in (None, float("nan"), "nan"):
        assert R.num(x, why="w") == "not computed (w)"
    assert R.num("inf", why_infinite="starved") == "not finite (starved)"
    assert not re.search(_NONFINITE, " ".join(R.num(x) for x in (None, "nan", "inf", "-inf", float("inf"))), re.I)


def test_report_has_no_inf_or_nan(tmp_path):
    """Acceptance of issue 29: a report built from numbers holding inf and nan prints neither."""
    import re

    _all_numbers(tmp_path)
    text = R.write_report(tmp_path, timings={"fig1_entropy": 1.0, "total": float("nan")}).read_text()
    hits = [ln for ln in text.splitlines() if re.search(_NONFINITE, ln, re.I)]
    assert hits == []
    # missing numbers are reasons
    assert "not computed (continuous data: H(pi) is not finite)" in text
    assert "not computed (Monte-Carlo model" in text  # digits' I-MMSE
    assert "tolerance not recorded" in text  # an old numbers file's budget row
    # figure 5: efficiencies, and an all-zero row names no best schedule
    row_b = next(ln for ln in text.splitlines() if ln.startswith("| b [g] |"))
    assert "none (every schedule misses a level the criterion needs)" in row_b
    assert "sqrt-entropic (1.000)" in row_b  # its independent-learner efficiency 1/F = 1
    row_a = next(ln for ln in text.splitlines() if ln.startswith("| a [f] |"))
    assert "0.500" in row_a and "0.800" in row_a


def _rows_of(table):
    return [ln for ln in table if ln.startswith("|") and not ln.startswith("|---") and not ln.startswith("| figure")
            and not ln.startswith("| continuous data") and not ln.startswith("| data |")]


@pytest.mark.parametrize("cid, needles", [
    # claim -> what every counted row must print: the numbers the rule used and its tolerance
    ("C1", [["3 <= 5", "< 10", "gap 3.0e-08 <= 1e-06"], ["3 <= 5", "< 10", "status 0 == 0"],
            ["1 <= 4", "converged True"], ["9 <= 99", "converged True"]]),
    ("C2", [["0.950 >= 0.9", "W1 0.500 < 2.000"], ["max_rel_diff = 1e-09", "tolerance 1e-06"],
            ["slope_l1 = -0.5", "tolerance 0.2"]]),
    ("C3", [["0.300 < 0.9", "0.300 < 0.950"], ["factor_gap = 0.4", "tolerance 0.05", "1.400", "1.000"],
            ["not counted"]]),
    ("C4", [["reference"], ["[2, 4]"], ["[1.2, 1.9]"], ["reference"], ["[0.9, 1.1]"], ["[1.2, 1.9]"]]),
    ("C5", [["1 [0.9, 1.1]", "interval vs 0.8"]]),
])
def test_every_verdict_prints_rule_numbers_and_tolerance(tmp_path, cid, needles):
    _all_numbers(tmp_path)
    c = R.evaluate_claims(tmp_path)[cid]
    assert c["rule"].startswith("Rule") and any(ch.isdigit() for ch in c["rule"])  # the rule names its threshold
    rows = _rows_of(c["table"])
    assert len(rows) == len(needles), rows
    for row, want in zip(rows, needles):
        for w in want:
            assert w in row, (w, row)


def test_figure1_checks_print_tolerance_and_standard_error(tmp_path):
    _all_numbers(tmp_path)
    text = R.write_report(tmp_path).read_text()
    dirac = next(ln for ln in text.splitlines() if ln.startswith("| dirac:K=2 |"))
    assert "vs 1.5e-08" in dirac and "2.00e-09 vs 1e-06" in dirac and "| yes |" in dirac
    digits = next(ln for ln in text.splitlines() if ln.startswith("| digits |"))
    assert "0.291 vs not computed (tolerance not recorded" in digits and "(s.e. 0.12)" in digits
    assert "Budget rule:" in text and "I-MMSE rule:" in text


def test_resumed_report_agrees_with_its_provenance(tmp_path):
    """A report whose numbers were all reused says so in every place: no 'computed in this run', no 0.0 s."""
    from noisealloc.figures import provenance as P

    _all_numbers(tmp_path)
    C.write_json(tmp_path / "fig6_cells.json", {"cells": {"total": 48, "cached": 0, "computed": 48},
                                                "timings": [{"step_time": 0.001, "compile_time": 1.0,
                                                             "seconds": 10.0}]})
    C.write_json(tmp_path / "fig6_training.config.json", {"elapsed_seconds": 123.4})
    names = ("fig1_entropy", "fig6_training")
    prov = {}
    for n in names:
        req = P.make_request(n, quick=True, seed=0, mnist=None, code="abc")
        prov[n] = {"request": req, "request_hash": P.request_hash(req), "numbers_sha256": "0" * 64}
    timings = {"fig1_entropy": 0.0, "fig6_training": 0.0, "total": 0.2}
    text = R.write_report(tmp_path, timings=timings, provenance=prov, fresh=()).read_text()
    assert text.count("| reused |") == 2 and "| computed |" not in text
    assert "computed in this run" not in text and "48 computed by the earlier run" in text
    runs = text.split("## Run times")[1]
    assert "| fig6_training | not run: numbers reused from an earlier run (which took 123.4 s) |" in runs
    assert "| fig1_entropy | 0.0 |" not in runs and "| fig1_entropy | not run" in runs
    # a fresh run says "computed in this run"
    fresh = R.write_report(tmp_path, timings=timings, provenance=prov, fresh=names).read_text()
    assert "48 computed in this run" in fresh and "| fig6_training | 0.0 |" in fresh


def test_fig5_plot_reads_old_numbers_as_efficiencies(tmp_path):
    """A numbers file with only ratios (inf included) is drawn as efficiencies in [0, 1]."""
    from noisealloc.figures import fig5_efficiency as F5

    doc = json.loads(C.write_json(tmp_path / "x.json", _fig5_doc()).read_text())
    M = F5._efficiency_matrix(doc, "V_efficiency")
    assert M.tolist() == [[0.5, 0.5, 0.5], [0.0, 0.0, 0.0]]
    M = F5._efficiency_matrix(doc, "il_efficiency")
    assert M[1, 0] == 1.0 and 0.0 < M[1, 1] < 1e-64 and M[1, 2] == 0.0
    assert [F5.cell_text(e) for e in (1.0, 0.456, 0.001, 6.2e-20, 0.0, float("nan"))] == [
        "1.00", "0.46", "1e-3", "6e-20", "0", "n/c"]
    F5.plot(doc, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 10_000


def test_fig5_efficiency_orientation():
    from noisealloc.figures import fig5_efficiency as F5

    assert F5.efficiency(2.0, 4.0) == 0.5
    assert F5.efficiency(2.0, float("inf")) == 0.0
    assert F5.efficiency(1.0, 1.0 - 1e-7) == 1.0  # within the certified gap
    assert F5.efficiency(1.0, 0.5) == 2.0  # a schedule "beating" the optimum shows; it is not clipped away


def test_fig7_small_run_and_its_c4_verdict(tmp_path, monkeypatch):
    """Figure 7 at tiny sizes with the real sweep engine in this process: its rows, the Markov chain's floor,
    and REPORT.md judging C4 on it with figure 6's rows beside it when they exist."""
    pytest.importorskip("jax")
    import distributed

    from noisealloc.figures import fig7_masked as F
    from noisealloc.verify.experiments import sweep as S

    sz = F._sizes(True)
    monkeypatch.setattr(F, "_sizes", lambda q: {**sz, "seeds": 2, "eval_n": 16, "eval_levels": 5, "h_samples": 32,
                                                "h_levels": 9, "checkpoints": 10, "width": 16, "depth": 1,
                                                "rows": {k: {"steps": 20, "schedules": ["sqrt-entropic", "linear"]}
                                                         for k in ("strings", "markov")}})
    monkeypatch.setattr(distributed, "as_completed", lambda futs: iter(futs))
    monkeypatch.setattr(F, "_run_cells", lambda spec, cells_dir, scheduler, shared_dir=None: S.run_sweep(
        spec, cells_dir, client=_LazyInlineClient(), shared_dir=shared_dir))
    monkeypatch.setattr(F.T, "one_cluster", lambda scheduler=None: contextlib.nullcontext(scheduler))
    res = F.run(tmp_path, quick=True, seed=0)
    doc = json.loads(res["numbers"].read_text())
    assert [r["data"] for r in doc["rows"]] == ["digits-binarised (mlp)", "markov:V=2,L=64,stay=0.9 (mlp)"]
    markov = doc["rows"][1]
    assert markov["floor"] is not None and markov["floor"]["nats"] <= markov["entropy_nats"]
    assert doc["rows"][0]["floor"] is None and doc["rows"][0]["run_steps"] == 20
    claims = R.evaluate_claims(tmp_path)
    assert claims["C4"]["rule"].startswith("Rule (figure 7: masked diffusion")
    assert claims["C4"]["verdict"] in {"supported", "not supported", "mixed", "inconclusive"}
    text = R.write_report(tmp_path).read_text()
    assert "Figure 7 (masked diffusion)" in text and "| digits-binarised (mlp) | 20 | linear |" in text


def test_late_half_gain_flags_a_plateau_from_the_curve():
    # (L(T/2) - L(T)) / L(T/2) at the checkpoint nearest half the run: (8 - 6) / 8 and (5 - 4.95) / 5
    row = {"steps": [0, 40, 50, 100], "mean": {"ref": [10.0, 9.0, 8.0, 6.0], "flat": [10.0, 5.2, 5.0, 4.95]}}
    assert R.late_half_gain(row, "ref") == pytest.approx(0.25, rel=1e-12)
    assert R.late_half_gain(row, "flat") == pytest.approx(0.01, rel=1e-9) and 0.01 < R.PLATEAU_GAIN
    assert R.late_half_gain(row, "missing") is None
