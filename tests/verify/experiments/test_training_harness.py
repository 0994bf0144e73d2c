"""Tests of the training-comparison harness (verify/experiments/training_harness.py; issue 26 item 5).

The harness only assembles cells' results; the numbers it adds (seed means and standard errors, the
floor factor, the ablation's sign) are checked here against hand computations on synthetic results.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from noisealloc.verify.experiments import training_harness as H

STEPS = list(range(0, 101, 5))


def _results(schedules, seeds, speed: dict, *, floor=None, dim=4):
    """Synthetic cell results: c(t) = 1 + 9 / (1 + speed t / 10) per seed, with a small seed offset."""
    out = {}
    t = np.asarray(STEPS, float)
    for s in schedules:
        for j in seeds:
            nats = 1.0 + 0.01 * j + 9.0 / (1.0 + speed[s] * t / 10.0)
            out[(s, j)] = {"steps": STEPS, "nats": nats.tolist(), "nats_se": [0.1] * len(STEPS),
                           "bits_per_dim": (nats / (dim * np.log(2))).tolist(), "dim": dim, "eval_n": 10,
                           "eval_n_used": 10, "bayes_nats": floor, "bayes_nats_se": None if floor is None else 0.01,
                           "first_refresh": 25 if s == "online" else None, "online_refreshes": 4}
    return out


def test_summary_numbers_are_the_seed_statistics():
    seeds = [0, 1, 2]
    res = _results(["sqrt-entropic", "slow"], seeds, {"sqrt-entropic": 1.0, "slow": 0.5}, floor=0.5)
    row = H.summarise_training("dirac:K=2", res, ["sqrt-entropic", "slow"], seeds, discrete=True)
    final = np.array([res[("slow", j)]["nats"][-1] for j in seeds])
    assert row["final_nats"]["slow"]["mean"] == pytest.approx(final.mean(), rel=1e-15)
    assert row["final_nats"]["slow"]["se"] == pytest.approx(np.std(final, ddof=1) / np.sqrt(3), rel=1e-12)
    assert row["final_bits_per_dim"]["slow"]["mean"] == pytest.approx(final.mean() / (4 * np.log(2)), rel=1e-12)
    best = min(row["final_nats"], key=lambda s: row["final_nats"][s]["mean"])
    assert best == "sqrt-entropic" and row["floor"]["best"] == best
    assert row["floor"]["factor"] == pytest.approx(row["final_nats"][best]["mean"] / 0.5, rel=1e-15)
    assert row["run_steps"] == 100 and row["discrete"] is True
    slow = next(r for r in row["comparison"]["rows"] if r["schedule"] == "slow")
    assert slow["equal_compute"][-1]["side"] == "above"  # the slower schedule ends higher on every seed


def test_weight_ablation_reports_a_change_of_sign():
    seeds = [0, 1, 2]
    sch = ["sqrt-entropic", "edm_lognormal"]
    by_weight = {"edm": _results(sch, seeds, {"sqrt-entropic": 1.0, "edm_lognormal": 2.0}),
                 "none": _results(sch, seeds, {"sqrt-entropic": 2.0, "edm_lognormal": 1.0}),
                 "elbo": _results(sch, seeds, {"sqrt-entropic": 1.0, "edm_lognormal": 1.0})}
    ab = H.weight_ablation(by_weight, sch, seeds, data="digits")
    # EDM faster under "edm": it ends lower, a negative EDM - sqrt difference; the reverse under "none"
    assert ab["weights"]["edm"]["side"] == "below" and ab["weights"]["none"]["side"] == "above"
    assert ab["weights"]["elbo"]["difference"]["estimate"] == 0.0 and ab["weights"]["elbo"]["side"] == "inconclusive"
    assert ab["sign_changes"] is True and "the sign changes" in ab["summary"]
    same = H.weight_ablation({k: by_weight[k] for k in ("edm", "elbo")}, sch, seeds, data="digits")
    assert same["sign_changes"] is False


def test_sweep_records_names_what_is_missing():
    spec = SimpleNamespace(n_cells=3)
    partial = SimpleNamespace(complete=False, failed=[{"error": "boom"}], records=[{}, None, None], n_cells=3)
    with pytest.raises(RuntimeError, match=r"my sweep: 2 of 3 cells missing; first failure: boom"):
        H.sweep_records(spec, "DIR", label="my sweep", runner=lambda *a: partial)
    done = SimpleNamespace(complete=True, records=[{"a": 1}], n_cells=1, n_cached=1, n_computed=0)
    said = []
    recs, counts = H.sweep_records(spec, "DIR", label="x", runner=lambda *a: done, progress=said.append)
    assert recs == [{"a": 1}] and counts == {"total": 1, "cached": 1, "computed": 0}
    assert said == ["x 3 cells", "x 1 cached, 0 computed"]
