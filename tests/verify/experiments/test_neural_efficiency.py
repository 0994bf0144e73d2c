"""Tests of regime (iii)'s cell and comparison rules (verify/experiments/neural_efficiency.py; issue 14 item 3 (iii))."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers.strategies import examples

from noisealloc.theory.schedules.online import EntropyRateEstimator
from noisealloc.verify.experiments import neural_efficiency as E


@settings(max_examples=examples(30), deadline=None)
@given(alpha=st.floats(0.2, 2.0), C=st.floats(0.5, 50.0), t=st.floats(0.05, 0.95))
def test_steps_to_target_is_exact_on_power_laws(alpha, C, t):
    """Log-log interpolation is exact for c(s) = C s^-alpha between checkpoints."""
    steps = np.array([10.0, 100.0, 1000.0, 10000.0])
    curve = C * steps ** -alpha
    s_true = 10.0 ** (1 + 3 * t)
    got = E.steps_to_target(steps, curve, C * s_true ** -alpha)
    np.testing.assert_allclose(got, s_true, rtol=1e-9)


def test_steps_to_target_edges():
    assert E.steps_to_target([0, 10, 100], [9.0, 5.0, 2.0], 1.0) == float("inf")
    assert E.steps_to_target([0, 10, 100], [9.0, 5.0, 2.0], 6.0) == 10.0  # step 0 is dropped
    # A curve that dips below the target and comes back above it has not reached it then,
    # and one that ends above it never has.
    assert E.steps_to_target([10, 100, 1000], [1.0, 4.0, 1.0], 2.0) > 100
    assert E.steps_to_target([10, 100, 1000], [1.0, 1.0, 4.0], 2.0) == float("inf")


def test_steps_ratio_recovers_a_known_speed_up():
    """b reaches every loss k times later than a (with seed noise): the ratio is 1/k, inside its interval."""
    steps = np.geomspace(10, 10000, 13)
    gen = np.random.default_rng(0)
    k = 2.5
    base = 40.0 * steps ** -0.5
    a = base * np.exp(0.02 * gen.standard_normal((6, steps.size)))
    b = 40.0 * (steps / k) ** -0.5 * np.exp(0.02 * gen.standard_normal((6, steps.size)))
    r = E.steps_ratio(steps, a, b, 40.0 * 300.0 ** -0.5, n_boot=300, rng=1)
    assert r["lo"] <= 1 / k <= r["hi"]
    assert r["hi"] < 1.0  # a is faster, and the interval says so
    np.testing.assert_allclose(r["ratio"], 1 / k, rtol=0.1)


def test_steps_ratio_limits():
    steps = [10, 100]
    never = np.array([[5.0, 4.0], [5.0, 4.0]])
    fast = np.array([[2.0, 1.0], [2.0, 1.0]])
    assert E.steps_ratio(steps, fast, never, 1.5, n_boot=10, rng=0)["ratio"] == 0.0
    assert E.steps_ratio(steps, never, fast, 1.5, n_boot=10, rng=0)["ratio"] == float("inf")
    assert np.isnan(E.steps_ratio(steps, never, never, 1.5, n_boot=10, rng=0)["ratio"])


def test_prepare_digits_splits_and_binarises():
    d = E.prepare_data("digits")
    assert d.h_source == E.POPULATION_SOURCE and d.population and not d.discrete and d.bayes is None
    assert d.train.shape[0] + d.test.shape[0] == 1797 and d.dim == 64
    train_rows = {r.tobytes() for r in d.train}
    # The test split is never trained on (rows may repeat in the data set itself, so compare positions).
    assert d.test.shape[0] == round(1797 * E.TEST_FRACTION)
    b = E.prepare_data("digits-binarised")
    assert b.discrete and set(np.unique(b.train)) == {-1.0, 1.0}
    assert b.h_source == "empirical (training split)" and not b.population
    fresh = E._prepare_data.__wrapped__("digits", None)  # bypass the per-process cache
    assert fresh.test.tobytes() == d.test.tobytes()  # deterministic split
    assert len(train_rows) > 1000


def test_continuous_images_take_the_population_h():
    """Grey-level digits: the sqrt schedule follows the smoothed law's h, which plateaus at d/2 at high SNR;
    the empirical h of the same split collapses there (memorisation), so the schedules differ in the tail."""
    from noisealloc.verify.experiments.random_features import training_schedule

    d = E.prepare_data("digits")
    pop = E.make_levels(d, "sqrt-entropic", -8.0, 12.0, h_levels=9, h_samples=64)
    emp = training_schedule(d.h_model, "sqrt-entropic", -8.0, 12.0, h_levels=9, h_samples=64, rng=0)
    # Past lambda = 8 the empirical h of 1,498 digits is below 1e-3 of its peak; the population h is not.
    assert pop.pdf(11.0) > 10.0 * emp.pdf(11.0)


def test_prepare_dirac_uses_the_law():
    d = E.prepare_data("dirac:K=3,D=8,sep=1,seed=0")
    assert d.discrete and d.bayes is d.train and d.h_model is d.train and d.h_source == "exact (law)"
    assert d.test.shape == (E.LAW_TEST_EXAMPLES, 8)


def test_make_levels_names():
    d = E.prepare_data("dirac:K=3,D=1,sep=2,seed=0")  # 1-D: h by quadrature, fast
    assert isinstance(E.make_levels(d, "online", -6.0, 6.0), EntropyRateEstimator)
    assert "shifted" in E.make_levels(d, "edm_lognormal", -6.0, 6.0).name
    sq = E.make_levels(d, "sqrt-entropic", -6.0, 6.0, h_levels=17)
    assert sq.name == "sqrt-entropic"


def test_cell_returns_a_curve_per_checkpoint():
    r = E.cell_neural(data="dirac:K=3,D=8,sep=1,seed=0", schedule="uniform_lambda", seed=0, steps=20, batch_size=16,
                      width=16, depth=1, lam_min=-6.0, lam_max=6.0, checkpoints=2, eval_levels=9, eval_n=32)
    assert r["steps"] == [0, 10, 20]
    assert len(r["nats"]) == len(r["nats_se"]) == len(r["gap_nats"]) == 3
    assert len(r["final_per_level_mse"]) == len(r["lam"]) == 9
    assert r["h_source"] == "exact (law)" and r["network"] == "mlp-16x1"
    assert all(np.isfinite(r["nats"])) and r["step_time"] > 0


@pytest.mark.parametrize("call, needle", [
    (lambda: E.prepare_data("cifar"), "unknown kind"),
    (lambda: E.prepare_data("digits:foo"), "digits takes no options"),
    (lambda: E.steps_to_target([10, 5], [1.0, 2.0], 1.0), "increasing"),
    (lambda: E.steps_to_target([10, 20], [1.0, 2.0], 0.0), "target must be"),
    (lambda: E.steps_ratio([10, 20], [[1.0, 2.0]], [[1.0, 2.0]], 1.0), ">= 2 seeds"),
    (lambda: E.steps_ratio([10, 20], [[1.0, 2.0]] * 2, [[1.0, 2.0]] * 2, 1.0, level=1.0), "level must lie"),
])
def test_bad_input_raises_value_error(call, needle):
    with pytest.raises(ValueError, match=needle):
        call()


def test_pilot_schedule_is_built_from_validation_losses():
    d = E.prepare_data("dirac:K=3,D=8,sep=1,seed=0")
    p = E.pilot_schedule(d, -6.0, 6.0, steps=20, batch_size=16, width=16, depth=1, levels=9)
    assert p.schedule.name == "sqrt-pilot" and p.steps == 20
    assert p.lam.shape == p.loss.shape == p.loss_se.shape == (9,)
    assert np.all(p.loss_se > 0)
    np.testing.assert_allclose(float(p.schedule.cdf(6.0)), 1.0, rtol=1e-12)
    r = E.cell_neural(data="dirac:K=3,D=8,sep=1,seed=0", schedule="sqrt-pilot", steps=20, batch_size=16, width=16,
                      depth=1, lam_min=-6.0, lam_max=6.0, checkpoints=1, eval_levels=9, eval_n=32, pilot_steps=20)
    assert r["schedule_name"] == "sqrt-pilot" and r["steps"] == [0, 20]


def test_pilot_needs_enough_training_rows():
    d = E.NeuralData("tiny", np.zeros((100, 4)), np.zeros((10, 4)), None, None, 1.0, False, "empirical")
    with pytest.raises(ValueError, match="the pilot needs more than"):
        E.pilot_schedule(d, -1.0, 1.0)


def test_compare_schedules_targets_what_every_schedule_reaches():
    steps = np.geomspace(10, 10000, 10)
    gen = np.random.default_rng(2)
    curves = {"sqrt-entropic": 50 * steps ** -0.4 * np.exp(0.01 * gen.standard_normal((4, 10))),
              "slow": 50 * (steps / 3) ** -0.4 * np.exp(0.01 * gen.standard_normal((4, 10)))}
    out = E.compare_schedules(steps, curves, n_boot=200, rng=0)
    rows = {r["name"]: r for r in out["rows"]}
    l0 = np.mean([curves["slow"].mean(0)[0], curves["sqrt-entropic"].mean(0)[0]])
    assert out["target"] == pytest.approx(l0 - E.TARGET_FRACTION * (l0 - curves["slow"].mean(0)[-1]))
    assert np.isfinite(rows["slow"]["steps"]) and np.isfinite(rows["sqrt-entropic"]["steps"])
    assert rows["sqrt-entropic"]["ratio"] == 1.0
    assert rows["slow"]["lo"] <= 3.0 <= rows["slow"]["hi"] and rows["slow"]["lo"] > 1.0
    with pytest.raises(ValueError, match="reference must be one of"):
        E.compare_schedules(steps, curves, reference="edm")


@pytest.mark.slow
def test_entropic_rules_share_one_population_h_bitwise(tmp_path):
    """make_levels estimates the population h once for both rules (one shared artifact of the run); each
    schedule equals a fresh estimate's (digits)."""
    from noisealloc.theory.schedules.entropic import population_schedule
    from noisealloc.verify.experiments import neural_efficiency as NE
    from noisealloc.verify.experiments.sweep import cache as SC

    d = NE.prepare_data("digits")
    lo, hi = -8.0, 8.0
    u = np.linspace(lo, hi, 1001)
    for i, order in enumerate((("sqrt-entropic", "entropic"), ("entropic", "sqrt-entropic"))):
        NE._SCHEDULES.clear()
        token = SC._SHARED_DIR.set(str(tmp_path / str(i)))
        try:
            got = {s: NE.make_levels(d, s, lo, hi, h_levels=33, h_samples=64) for s in order}
        finally:
            SC._SHARED_DIR.reset(token)
        assert len(list((tmp_path / str(i)).glob("*.json"))) == 1
        for s, rule in (("sqrt-entropic", "sqrt-entropy"), ("entropic", "entropy")):
            ref = population_schedule(d.train, np.linspace(lo, hi, 33), rule=rule, n_samples=64,
                                      rng=np.random.default_rng([NE.DATA_SEED, 3]), name=s,
                                      law=NE._POPULATION_LAWS[d.name]).result.schedule
            np.testing.assert_array_equal(got[s].pdf(u), ref.pdf(u), err_msg=s)
            np.testing.assert_array_equal(got[s].sample(500, rng=1), ref.sample(500, rng=1), err_msg=s)
