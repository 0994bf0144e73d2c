"""Tests of the schedule-comparison statistics of neural training runs (verify/experiments/training_comparison.py).

Reference values come from routes independent of the code under test: closed forms worked out by
hand in the test, ``scipy.stats.ttest_rel`` for the t interval, ``numpy.interp`` for a crossing, and
simulations with a known true ratio for coverage.  ``pytest -s`` prints the measured coverages.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers.strategies import examples
from scipy import stats

from noisealloc.verify.experiments.training_comparison import (
    compare_training,
    interval_side,
    judged,
    late_targets,
    paired_interval,
    smooth,
    steps_to_target,
)

#: Replicates of a coverage simulation: the standard error of a coverage near 0.95 is about 0.005.
COVERAGE_REPS = 2000
#: Coverage a nominal-95 % interval must reach in simulation (the acceptance rule of the comparison).
MIN_COVERAGE = 0.92

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
positive = st.floats(1e-3, 1e3, allow_nan=False, allow_infinity=False)


def _one_line_error(excinfo, *words):
    msg = str(excinfo.value)
    assert "\n" not in msg, msg
    for w in words:
        assert w in msg, (w, msg)


# ----------------------------------------------------------------------------- paired_interval


@settings(max_examples=examples(40))
@given(st.integers(2, 8).flatmap(lambda n: st.tuples(st.lists(finite, min_size=n, max_size=n),
                                                      st.lists(finite, min_size=n, max_size=n))),
       st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99]))
def test_t_interval_matches_scipy_ttest_rel(ab, level):
    a, b = (np.array(v) for v in ab)
    r = paired_interval(a, b, level=level)
    ci = stats.ttest_rel(a, b).confidence_interval(confidence_level=level)
    d = a - b
    scale = 1.0 + np.max(np.abs(d))
    assert r["lo"] == pytest.approx(ci.low, rel=1e-9, abs=1e-9 * scale)
    assert r["hi"] == pytest.approx(ci.high, rel=1e-9, abs=1e-9 * scale)
    assert r["estimate"] == pytest.approx(statistics.fmean(d), rel=1e-12, abs=1e-12 * scale)
    if np.ptp(d) > 0:
        assert r["se"] == pytest.approx(statistics.stdev(d) / math.sqrt(d.size), rel=1e-9, abs=1e-12 * scale)
    assert (r["n"], r["df"], r["level"], r["scale"]) == (d.size, d.size - 1, level, "difference")


@settings(max_examples=examples(30))
@given(st.integers(2, 8).flatmap(lambda n: st.tuples(st.lists(positive, min_size=n, max_size=n),
                                                      st.lists(positive, min_size=n, max_size=n))))
def test_log_interval_is_the_t_interval_of_log_ratios(ab):
    a, b = (np.array(v) for v in ab)
    r = paired_interval(a, b, log=True)
    ci = stats.ttest_rel(np.log(a), np.log(b)).confidence_interval(confidence_level=0.95)
    geo = math.exp(statistics.fmean([math.log(x / y) for x, y in zip(a, b)]))  # geometric mean of the ratios
    assert r["scale"] == "ratio"
    assert r["estimate"] == pytest.approx(geo, rel=1e-9)
    assert r["lo"] == pytest.approx(math.exp(ci.low), rel=1e-9)
    assert r["hi"] == pytest.approx(math.exp(ci.high), rel=1e-9)
    assert r["lo"] <= r["estimate"] <= r["hi"]


def test_t_interval_hand_example():
    # d = (1, 2, 1, 4): mean 2, sd^2 = (1 + 0 + 1 + 4)/3 = 2, se = sqrt(2)/2; t_{3, 0.975} = 3.182446305284263
    a, b = [2.0, 4.0, 3.0, 9.0], [1.0, 2.0, 2.0, 5.0]
    r = paired_interval(a, b)
    half = 3.182446305284263 * math.sqrt(2.0) / 2.0
    assert r["estimate"] == pytest.approx(2.0, rel=1e-15)
    assert r["se"] == pytest.approx(math.sqrt(2.0) / 2.0, rel=1e-14)
    assert (r["lo"], r["hi"]) == (pytest.approx(2.0 - half, rel=1e-12), pytest.approx(2.0 + half, rel=1e-12))


def test_zero_spread_gives_a_point_interval():
    r = paired_interval([1.5, 2.5, 3.5], [1.0, 2.0, 3.0])  # d = 0.5 exactly at every seed
    assert r["lo"] == r["hi"] == r["estimate"] == 0.5 and r["se"] == 0.0
    r = paired_interval([3.0, 5.0], [3.0, 5.0], log=True)
    assert r["lo"] == r["hi"] == r["estimate"] == 1.0 and r["se"] == 0.0


@pytest.mark.parametrize("args, kwargs, words", [
    (([1.0], [2.0]), {}, ["a and b", "n = 1"]),
    (([1.0, 2.0], [1.0, 2.0, 3.0]), {}, ["b", "(3,)"]),
    (([1.0, float("nan")], [1.0, 2.0]), {}, ["a", "nan"]),
    (([1.0, 2.0], [1.0, float("inf")]), {}, ["b", "inf"]),
    (([1.0, -2.0], [1.0, 2.0]), {"log": True}, ["a", "-2.0", "> 0"]),
    (([1.0, 2.0], [0.0, 2.0]), {"log": True}, ["b", "0.0", "> 0"]),
    (([1.0, 2.0], [1.0, 2.0]), {"level": 1.0}, ["level", "1.0", "(0, 1)"]),
    (([1.0, 2.0], [1.0, 2.0]), {"level": float("nan")}, ["level", "nan"]),
])
def test_paired_interval_bad_input(args, kwargs, words):
    with pytest.raises(ValueError) as exc:
        paired_interval(*args, **kwargs)
    _one_line_error(exc, *words)


# ----------------------------------------------------------------------------- coverage


def _lognormal_pairs(rng, reps: int, n: int, log_r: float, sigma: float = 0.4):
    """Per-seed steps of a reference and a schedule whose per-seed ratio is r times a log-normal (median 1)."""
    base = np.exp(6.0 + 0.5 * rng.standard_normal((reps, n)))  # seeds differ a lot; the pairing cancels it
    ratio = np.exp(log_r + sigma * rng.standard_normal((reps, n)))
    return base * ratio, base


@pytest.mark.parametrize("n", [3, 5])
def test_t_interval_covers_the_true_ratio(n):
    r_true = 1.3
    x, y = _lognormal_pairs(np.random.default_rng(20260612 + n), COVERAGE_REPS, n, math.log(r_true))
    hits = 0
    for a, b in zip(x, y):
        r = paired_interval(a, b, log=True)
        hits += r["lo"] <= r_true <= r["hi"]
    cov = hits / COVERAGE_REPS
    se = math.sqrt(cov * (1 - cov) / COVERAGE_REPS)
    print(f"\npaired_interval(log=True), n = {n}: coverage of the true ratio {cov:.3f} +- {se:.3f} "
          f"({COVERAGE_REPS} replicates, nominal 0.95)")
    assert cov >= MIN_COVERAGE
    assert cov <= 0.98  # exact for normal log ratios: neither too short nor needlessly wide


def test_percentile_bootstrap_over_three_seeds_undercovers():
    # The rule this module replaced: percentile bootstrap of the mean log ratio over the seeds.  With 3
    # seeds there are 27 equally likely resamples and at most C(5, 3) = 10 distinct means, so the "ideal"
    # (infinitely many resamples) bootstrap is enumerated exactly.  Its 2.5 % quantile is the smallest
    # mean (each extreme resample has mass 1/27 > 2.5 %): the interval is [min d, max d], which covers
    # the centre of a symmetric law unless all 3 draws fall on one side: 1 - 2 / 2**3 = 0.75.
    n, r_true = 3, 1.3
    x, y = _lognormal_pairs(np.random.default_rng(20260613), COVERAGE_REPS, n, math.log(r_true))
    d = np.log(x) - np.log(y)
    resamples = np.sort(np.array(list(itertools.product(range(n), repeat=n))), axis=1)
    means = d[:, resamples].sum(axis=2) / n
    assert max(np.unique(row).size for row in means) <= 10
    lo = np.quantile(means, 0.025, axis=1, method="inverted_cdf")
    hi = np.quantile(means, 0.975, axis=1, method="inverted_cdf")
    np.testing.assert_array_equal(lo, d.min(axis=1))
    boot = float(np.mean((lo <= math.log(r_true)) & (math.log(r_true) <= hi)))
    t_cov = float(np.mean([ci["lo"] <= r_true <= ci["hi"]
                           for ci in (paired_interval(a, b, log=True) for a, b in zip(x, y))]))
    se = math.sqrt(0.75 * 0.25 / COVERAGE_REPS)
    print(f"\n3 seeds, {COVERAGE_REPS} replicates: percentile bootstrap coverage {boot:.3f} (closed form 0.75), "
          f"t interval {t_cov:.3f} (nominal 0.95)")
    assert boot < 0.9
    assert abs(boot - 0.75) < 4 * se
    assert t_cov >= MIN_COVERAGE


# ----------------------------------------------------------------------------- interval_side, judged, smooth


def test_interval_side():
    assert interval_side(0.1, 0.2, 0.0) == "above"
    assert interval_side(-0.2, -0.1, 0.0) == "below"
    assert interval_side(-0.1, 0.1, 0.0) == "inconclusive"
    assert interval_side(1.0, 1.5, 1.0) == "inconclusive"  # touching the null is not excluding it
    assert interval_side(0.5, 1.0, 1.0) == "inconclusive"
    assert interval_side(1.0, 1.0, 1.0) == "inconclusive"
    assert interval_side(1.2, 1.2, 1.0) == "above"
    with pytest.raises(ValueError) as exc:
        interval_side(2.0, 1.0, 0.0)
    _one_line_error(exc, "lo", "2.0")
    with pytest.raises(ValueError) as exc:
        interval_side(float("nan"), 1.0, 0.0)
    _one_line_error(exc, "NaN")


def test_judged_window():
    assert judged([0, 5, 10, 50, 100]).tolist() == [False, False, True, True, True]
    assert judged([0, 5, 10, 50, 100], start_fraction=0.0).tolist() == [True] * 5
    # 0.07 * 100 rounds to 7.000000000000001: the checkpoint at exactly 7 % of the run is still judged
    assert 0.07 * 100 > 7
    assert judged([0, 5, 7, 100], start_fraction=0.07).tolist() == [False, False, True, True]
    assert judged([0, 10], start_fraction=0.99).tolist() == [False, True]


@pytest.mark.parametrize("steps, kwargs, words", [
    ([5, 10, 20], {}, ["steps", "steps[0]", "5.0"]),
    ([0, 10, 10, 20], {}, ["steps", "strictly increasing", "steps[2]"]),
    ([0], {}, ["steps", "2 checkpoints"]),
    ([0, float("nan"), 20], {}, ["steps", "nan"]),
    ([[0, 10]], {}, ["steps", "dimension"]),
    ([0, 10, 20], {"start_fraction": 1.0}, ["start_fraction", "1.0", "[0, 1)"]),
    ([0, 10, 20], {"start_fraction": -0.1}, ["start_fraction", "-0.1"]),
])
def test_judged_bad_input(steps, kwargs, words):
    with pytest.raises(ValueError) as exc:
        judged(steps, **kwargs)
    _one_line_error(exc, *words)


def test_smooth_hand_example():
    out = smooth([9.0, 5.0, 3.0, 2.0, 4.0], np.array([False, True, True, True, True]))
    assert np.isnan(out[0])
    np.testing.assert_allclose(out[1:], [(5 + 3) / 2, (5 + 3 + 2) / 3, (3 + 2 + 4) / 3, (2 + 4) / 2], rtol=1e-15)
    # a window of one checkpoint is that checkpoint; outside values are never read, even NaN
    out = smooth([float("nan"), float("inf"), 7.0], np.array([False, False, True]))
    assert np.isnan(out[:2]).all() and out[2] == 7.0
    # the full window: the ends are 2-point averages
    np.testing.assert_allclose(smooth([1.0, 2.0, 6.0], np.ones(3, bool)), [1.5, 3.0, 4.0], rtol=1e-15)


@settings(max_examples=examples(40))
@given(st.integers(3, 12).flatmap(lambda e: st.tuples(st.lists(positive, min_size=e, max_size=e),
                                                       st.lists(positive, min_size=e, max_size=e),
                                                       st.integers(0, e - 1))))
def test_smooth_never_reads_outside_the_window(args):
    c1, c2, start = args
    c1, c2 = np.array(c1), np.array(c2)
    mask = np.arange(c1.size) >= start
    c2[mask] = c1[mask]
    a, b = smooth(c1, mask), smooth(c2, mask)
    np.testing.assert_array_equal(a, b)  # bit for bit
    # independent route: an explicit loop over the window neighbours
    for e in np.flatnonzero(mask):
        nb = [k for k in (e - 1, e, e + 1) if 0 <= k < c1.size and mask[k]]
        assert a[e] == pytest.approx(sum(c1[k] for k in nb) / len(nb), rel=1e-14)


@pytest.mark.parametrize("curve, mask, words", [
    ([1.0, 2.0], [1, 1], ["mask", "bool"]),
    ([1.0, 2.0], [False, False], ["mask", "at least one True"]),
    ([1.0, 2.0, 3.0], [True, True], ["curve", "(2,)", "(3,)"]),
    ([1.0, float("nan")], [True, True], ["curve", "nan", "inside the window"]),
])
def test_smooth_bad_input(curve, mask, words):
    with pytest.raises(ValueError) as exc:
        smooth(curve, np.asarray(mask))
    _one_line_error(exc, *words)


# ----------------------------------------------------------------------------- steps_to_target

#: A hand example: window from step 20 (start_fraction 0.2 of 100); the curve dips below 2.0 at step 40,
#: rises above it, and only stays below from the last crossing on.
HAND_STEPS = [0, 10, 20, 30, 40, 50, 60, 80, 100]
HAND_CURVE = [9.0, 100.0, 3.0, 2.4, 1.2, 2.7, 2.1, 1.5, 1.2]
# smoothed by hand on the window (steps 20..100):
#   20: (3 + 2.4)/2 = 2.7      30: (3 + 2.4 + 1.2)/3 = 2.2     40: (2.4 + 1.2 + 2.7)/3 = 2.1
#   50: (1.2 + 2.7 + 2.1)/3 = 2.0      60: (2.7 + 2.1 + 1.5)/3 = 2.1      80: (2.1 + 1.5 + 1.2)/3 = 1.6
#   100: (1.5 + 1.2)/2 = 1.35
HAND_SMOOTHED = [2.7, 2.2, 2.1, 2.0, 2.1, 1.6, 1.35]


def test_steps_to_target_hand_example():
    mask = judged(HAND_STEPS, start_fraction=0.2)
    np.testing.assert_allclose(smooth(HAND_CURVE, mask)[2:], HAND_SMOOTHED, rtol=1e-14)
    # target 1.9: the smoothed curve is above it up to step 60 (2.1), below at 80 (1.6):
    # T = 60 + 20 (2.1 - 1.9) / (2.1 - 1.6) = 68
    t, status = steps_to_target(HAND_STEPS, HAND_CURVE, 1.9, start_fraction=0.2)
    assert status == "reached" and t == pytest.approx(68.0, rel=1e-12)
    # target 2.05: the dip to 2.0 at step 50 does not count; the last crossing is 60 -> 80:
    # T = 60 + 20 (2.1 - 2.05) / (2.1 - 1.6) = 62
    t, status = steps_to_target(HAND_STEPS, HAND_CURVE, 2.05, start_fraction=0.2)
    assert status == "reached" and t == pytest.approx(62.0, rel=1e-12)
    # target 2.45: first crossed between 20 (2.7) and 30 (2.2): 20 + 10 * 0.25 / 0.5 = 25
    t, status = steps_to_target(HAND_STEPS, HAND_CURVE, 2.45, start_fraction=0.2)
    assert status == "reached" and t == pytest.approx(25.0, rel=1e-12)
    # the spike of 100 at step 10 is before the window and changes nothing
    spiked = list(HAND_CURVE)
    spiked[1] = 0.01
    assert steps_to_target(HAND_STEPS, spiked, 2.45, start_fraction=0.2) == (t, status)


def test_steps_to_target_at_window_start_and_not_reached():
    assert steps_to_target(HAND_STEPS, HAND_CURVE, 2.7, start_fraction=0.2) == (20.0, "at window start")
    assert steps_to_target(HAND_STEPS, HAND_CURVE, 5.0, start_fraction=0.2) == (20.0, "at window start")
    t, status = steps_to_target(HAND_STEPS, HAND_CURVE, 1.3, start_fraction=0.2)
    assert status == "not reached" and t == math.inf
    # exactly at the target at the last checkpoint: reached there
    assert steps_to_target(HAND_STEPS, HAND_CURVE, 1.35, start_fraction=0.2) == (100.0, "reached")
    # with the default window (from step 10) the spike of 100 at step 10 is inside the window and is
    # smoothed in: 10: (100 + 3)/2, 20: (100 + 3 + 2.4)/3, then as above from 30 (2.2)
    s20 = (100 + 3 + 2.4) / 3
    t, status = steps_to_target(HAND_STEPS, HAND_CURVE, 2.45)
    assert status == "reached" and t == pytest.approx(20 + 10 * (s20 - 2.45) / (s20 - 2.2), rel=1e-12)


@settings(max_examples=examples(60))
@given(st.integers(3, 15).flatmap(lambda e: st.lists(positive, min_size=e, max_size=e)), positive,
       st.sampled_from([0.0, 0.1, 0.3]))
def test_steps_to_target_is_the_last_crossing(curve, target, start_fraction):
    steps = np.arange(len(curve)) * 7
    t, status = steps_to_target(steps, curve, target, start_fraction=start_fraction)
    mask = judged(steps, start_fraction=start_fraction)
    s_w = steps[mask]
    c_w = smooth(curve, mask)[mask]
    if status == "not reached":
        assert t == math.inf and c_w[-1] > target
    elif status == "at window start":
        assert t == s_w[0] and np.all(c_w <= target)
    else:
        assert status == "reached" and s_w[0] < t <= s_w[-1]
        assert np.all(c_w[s_w >= t] <= target)  # stays at or below from T on
        j = np.flatnonzero(s_w < t)[-1]
        assert c_w[j] > target
        # independent route: the linear interpolant of the two checkpoints around T equals the target at T
        assert np.interp(t, s_w[j:j + 2], c_w[j:j + 2]) == pytest.approx(target, rel=1e-9, abs=1e-9)


def test_steps_to_target_bad_input():
    with pytest.raises(ValueError) as exc:
        steps_to_target([0, 10, 20], [1.0, 2.0], 1.0)
    _one_line_error(exc, "curve", "(3,)")
    with pytest.raises(ValueError) as exc:
        steps_to_target([0, 10, 20], [1.0, 2.0, float("inf")], 1.0)
    _one_line_error(exc, "curve", "inf")
    with pytest.raises(ValueError) as exc:
        steps_to_target([0, 10, 20], [1.0, 2.0, 3.0], float("nan"))
    _one_line_error(exc, "target", "nan")


# ----------------------------------------------------------------------------- late_targets


def test_late_targets_hand_example():
    steps = [0, 25, 50, 75, 100]
    curves = {
        "b": np.array([[4.0, 3.0, 2.5, 2.2, 2.0], [5.0, 3.2, 2.9, 2.6, 2.4]]),
        "a": np.array([[4.0, 2.0, 1.5, 1.2, 1.0], [5.0, 3.0, 2.0, 1.6, 1.4]]),
    }
    out = late_targets(steps, curves, fractions=(0.5, 1.0))
    assert out["best"] == "a"  # smoothed ends: a (1.1, 1.5) vs b (2.1, 2.5)
    # m_i: the smoothed minima of "a", its 2-point end averages: (1.2 + 1.0)/2, (1.6 + 1.4)/2
    m = np.array([1.1, 1.5])
    l0 = np.array([4.0, 5.0])
    np.testing.assert_allclose(out["targets"], [l0 - 0.5 * (l0 - m), m], rtol=1e-15)
    # at f = 1 the target is the smoothed minimum bit for bit (L0 - (L0 - m) could round away from it)
    np.testing.assert_array_equal(out["targets"][1], [np.nanmin(smooth(c, judged(steps))) for c in curves["a"]])
    # f = 1: "a" reaches its own smoothed minimum at its last checkpoint on both seeds
    assert out["status"]["a"][1] == ["reached", "reached"]
    np.testing.assert_array_equal(out["steps"]["a"][1], [100.0, 100.0])
    assert out["status"]["b"][1] == ["not reached", "not reached"]
    # f = 0.5, seed 0: target 2.55; "a" smoothed from 25: 1.75, ... -> at window start;
    # "b" smoothed: 25: 2.75, 50: (3 + 2.5 + 2.2)/3 = 2.5667, 75: (2.5 + 2.2 + 2)/3 = 2.2333 -> crosses
    # between 50 and 75: 50 + 25 (2.5667 - 2.55) / (2.5667 - 2.2333) = 51.25
    assert out["status"]["a"][0][0] == "at window start" and out["steps"]["a"][0][0] == 25.0
    s50, s75 = (3.0 + 2.5 + 2.2) / 3, (2.5 + 2.2 + 2.0) / 3
    assert out["steps"]["b"][0][0] == pytest.approx(50 + 25 * (s50 - 2.55) / (s50 - s75), rel=1e-12)
    assert out["steps"]["b"][0][0] == pytest.approx(51.25, rel=1e-12)
    # consistent with the public steps_to_target on each seed's curve
    for name, c in curves.items():
        for k, tgt in enumerate(out["targets"]):
            for i in range(2):
                t, status = steps_to_target(steps, c[i], tgt[i])
                assert (t, status) == (out["steps"][name][k, i], out["status"][name][k][i])


def test_late_targets_ties_and_upturn():
    steps = [0, 50, 100, 150, 200]
    same = np.array([[3.0, 2.0, 1.5, 1.2, 1.0], [3.0, 2.2, 1.6, 1.3, 1.1]])
    assert late_targets(steps, {"x": same, "y": same.copy()})["best"] == "x"
    assert late_targets(steps, {"y": same.copy(), "x": same})["best"] == "y"
    # an upturn after the smoothed minimum: the best's own f = 1 target is not "stayed at" on that seed
    up = np.array([[3.0, 2.0, 1.0, 1.2, 1.6], [3.0, 2.0, 1.5, 1.2, 1.0]])
    out = late_targets(steps, {"up": up})
    assert out["status"]["up"][1] == ["not reached", "reached"]


@settings(max_examples=examples(30))
@given(st.integers(2, 4), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_best_reaches_its_own_minimum_on_decreasing_curves(n_seeds, n_names, seed):
    # Strictly decreasing curves: the smoothed minimum is the last checkpoint, where the best schedule
    # meets its f = 1 target exactly (the target is computed so that it equals that minimum bit for bit).
    rng = np.random.default_rng(seed)
    steps = np.arange(0, 201, 10)
    curves = {f"s{k}": 1.0 + np.cumsum(rng.uniform(0.01, 1.0, (n_seeds, steps.size))[:, ::-1], axis=1)[:, ::-1]
              for k in range(n_names)}
    out = late_targets(steps, curves, fractions=(1.0,))
    assert out["status"][out["best"]][0] == ["reached"] * n_seeds
    np.testing.assert_array_equal(out["steps"][out["best"]][0], np.full(n_seeds, 200.0))


# ----------------------------------------------------------------------------- compare_training


def _power_law(steps, tau, gamma, rho, a=1.0, b=2.0):
    """c(t) = a + b (1 + t / (tau rho))^-gamma per seed (rows)."""
    return a + b * (1.0 + steps[None, :] / (tau * rho)[:, None]) ** -gamma[:, None]


def _pipeline_curves(rng, n, r, steps, sigma_eta=0.2):
    # Time scales tau_i ~ 1/20 of the run put the 90 % target near 30 % of the run for the reference,
    # so a schedule r * eta times slower or faster still reaches it inside the window.
    run = steps[-1]
    tau = run / 20 * np.exp(0.25 * rng.standard_normal(n))
    gamma = rng.uniform(0.8, 1.2, n)
    eta = np.exp(sigma_eta * rng.standard_normal(n))
    return {"ref": _power_law(steps, tau, gamma, np.ones(n)), "X": _power_law(steps, tau, gamma, r * eta)}


def _pipeline_coverage(n, r, reps, seed):
    steps = np.arange(0, 2001, 100)  # 0 and every 5 % of the run: 21 checkpoints
    rng = np.random.default_rng(seed)
    hits = censored = 0
    logs = []
    for _ in range(reps):
        out = compare_training(steps, _pipeline_curves(rng, n, r, steps), reference="ref", fractions=(0.9,))
        late = out["rows"][1]["late_targets"][0]
        if late["ratio"] is None:  # counted as a miss: the interval must be there to cover
            censored += 1
            continue
        hits += late["ratio"]["lo"] <= r <= late["ratio"]["hi"]
        logs.append(math.log(late["ratio"]["estimate"]))
    cov = hits / reps
    print(f"\ncompare_training late target 0.9, n = {n}, true ratio {r}: coverage {cov:.3f} "
          f"+- {math.sqrt(cov * (1 - cov) / reps):.3f} ({reps} replicates, {censored} censored), "
          f"mean estimate {math.exp(statistics.fmean(logs)):.3f}")
    return cov


@pytest.mark.parametrize("n", [3, 5])
def test_pipeline_coverage_quick(n):
    assert _pipeline_coverage(n, 1.25, 300, 7 + n) >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("r", [1.25, 0.8])
@pytest.mark.parametrize("n", [3, 5])
def test_pipeline_coverage(n, r):
    # r < 1 makes X the best schedule, so the targets come from its curves, not the reference's
    assert _pipeline_coverage(n, r, COVERAGE_REPS, 1000 + n + int(100 * r)) >= MIN_COVERAGE


def test_pipeline_ratio_is_exact_on_a_fine_grid():
    # With the checkpoints dense enough that the interpolation and smoothing errors vanish, the per-seed
    # step ratios are r * eta_i exactly (same target, c_X(t) = c_ref(t / (r eta_i))).
    steps = np.arange(0, 20001, 1)
    n, r = 3, 1.25
    tau = np.full(n, 1000.0)
    gamma = np.ones(n)
    eta = np.array([0.9, 1.0, 1.2])
    curves = {"ref": _power_law(steps, tau, gamma, np.ones(n)), "X": _power_law(steps, tau, gamma, r * eta)}
    out = compare_training(steps, curves, reference="ref", fractions=(0.9,))
    late = out["rows"][1]["late_targets"][0]
    ratios = np.array(late["steps"]) / np.array(late["reference_steps"])
    np.testing.assert_allclose(ratios, r * eta, rtol=1e-4)
    assert late["ratio"]["estimate"] == pytest.approx(r * float(np.prod(eta)) ** (1 / 3), rel=1e-4)


def test_compare_training_equal_compute_by_hand():
    steps = np.arange(0, 101, 10)
    rng = np.random.default_rng(11)
    ref = 1.0 + np.exp(-steps / 30.0)[None, :] * rng.uniform(1.5, 2.5, (4, 1)) + 0.01 * rng.random((4, 11))
    x = ref + rng.normal(0.05, 0.03, (4, 11))
    out = compare_training(steps, {"ref": ref, "x": x}, reference="ref", at=(0.3, 0.54, 1.0), level=0.9)
    assert out["at"] == [30, 50, 100]  # 54 is nearer to 50 than to 60
    for e, k in zip(out["rows"][1]["equal_compute"], [3, 5, 10]):
        d = x[:, k] - ref[:, k]
        ci = stats.ttest_rel(x[:, k], ref[:, k]).confidence_interval(confidence_level=0.9)
        assert e["step"] == steps[k]
        assert e["difference"]["lo"] == pytest.approx(ci.low, rel=1e-9)
        assert e["difference"]["hi"] == pytest.approx(ci.high, rel=1e-9)
        assert e["difference"]["estimate"] == pytest.approx(statistics.fmean(d), rel=1e-12)
        assert e["mean"] == pytest.approx(statistics.fmean(x[:, k]), rel=1e-14)
        assert e["se"] == pytest.approx(statistics.stdev(x[:, k]) / 2.0, rel=1e-12)
        assert e["reference_mean"] == pytest.approx(statistics.fmean(ref[:, k]), rel=1e-14)
        low, high = ci.low, ci.high
        assert e["side"] == ("above" if low > 0 else "below" if high < 0 else "inconclusive")
    # the reference row: differences and log ratios exactly 0
    for e in out["rows"][0]["equal_compute"]:
        assert e["difference"]["estimate"] == e["difference"]["lo"] == e["difference"]["hi"] == 0.0
        assert e["side"] == "inconclusive"
    for late in out["rows"][0]["late_targets"]:
        if late["ratio"] is not None:
            assert late["ratio"]["estimate"] == late["ratio"]["lo"] == late["ratio"]["hi"] == 1.0
    json.dumps(out, allow_nan=False)
    assert [row["schedule"] for row in out["rows"]] == ["ref", "x"]
    assert "inconclusive" in out["rule"] and "3-point" in out["rule"]


def test_compare_training_censored_sides():
    steps = np.arange(0, 101, 10)
    t = steps / 100.0
    fast = np.array([3.0 - 2.0 * t ** 0.5, 3.1 - 2.0 * t ** 0.5, 2.9 - 2.0 * t ** 0.5])
    flat = np.array([np.full(11, 3.0), np.full(11, 3.1), np.full(11, 2.9)])
    # a curve that ends below the target on one seed only
    mixed = flat.copy()
    mixed[0] = fast[0]
    out = compare_training(steps, {"fast": fast, "flat": flat, "mixed": mixed}, reference="fast",
                           fractions=(0.9,))
    rows = {row["schedule"]: row["late_targets"][0] for row in out["rows"]}
    assert out["best"] == "fast"
    assert rows["flat"]["side"] == "above" and rows["flat"]["ratio"] is None
    assert rows["flat"]["censored"] == {"flat": 3, "fast": 0}
    assert "not computed" in rows["flat"]["why"] and "every seed" in rows["flat"]["why"]
    assert rows["flat"]["steps"] == [None, None, None]
    assert rows["mixed"]["side"] == "inconclusive" and rows["mixed"]["ratio"] is None
    assert rows["mixed"]["censored"] == {"mixed": 2, "fast": 0}
    assert rows["fast"]["why"] is None and rows["fast"]["censored"] == {"fast": 0}
    # the mirror: the reference misses the target on every seed, the schedule reaches it on every seed
    out = compare_training(steps, {"flat": flat, "fast": fast}, reference="flat", fractions=(0.9,))
    late = out["rows"][1]["late_targets"][0]
    assert late["side"] == "below" and late["ratio"] is None and late["censored"] == {"fast": 0, "flat": 3}
    text = json.dumps(out, allow_nan=False)
    assert "Infinity" not in text and "NaN" not in text


@pytest.mark.parametrize("kwargs, words", [
    ({"reference": "nope"}, ["reference", "'nope'"]),
    ({"curves": {"a": np.ones((1, 5)), "b": np.ones((1, 5))}}, ["curves", ">= 2 seeds", "1"]),
    ({"curves": {"a": np.ones((2, 5)), "b": np.ones((3, 5))}}, ["curves['b']", "(3, 5)"]),
    ({"curves": {"a": np.ones((2, 5)), "b": np.ones((2, 4))}}, ["curves['b']", "(2, 4)"]),
    ({"curves": {"a": np.ones((2, 5)), "b": -np.ones((2, 5))}}, ["curves['b']", "> 0", "-1.0"]),
    ({"curves": {"a": np.ones((2, 5)), "b": np.full((2, 5), np.nan)}}, ["curves['b']", "finite", "nan"]),
    ({"at": (0.05,)}, ["at", "0.05", "window"]),
    ({"at": (0.0,)}, ["at", "(0, 1]"]),
    ({"fractions": (1.5,)}, ["fractions", "1.5"]),
    ({"level": 0.0}, ["level", "0.0"]),
    ({"start_fraction": 2.0}, ["start_fraction", "2.0"]),
])
def test_compare_training_bad_input(kwargs, words):
    args = {"curves": {"a": np.ones((2, 5)) * [3, 2, 1.5, 1.2, 1.0], "b": np.ones((2, 5)) * [3, 2.2, 1.6, 1.3, 1.1]},
            "reference": "a"}
    args.update(kwargs)
    curves = args.pop("curves")
    with pytest.raises(ValueError) as exc:
        compare_training([0, 25, 50, 75, 100], curves, **args)
    _one_line_error(exc, *words)


# ----------------------------------------------------------------------------- the start-up transient


@st.composite
def _runs_with_early_checkpoints(draw):
    run = 20 * draw(st.integers(5, 200))
    early_max = -(-run * 5 // 100) - 1  # the last step < 5 % of the run
    early = draw(st.sets(st.integers(1, early_max), min_size=1, max_size=4))
    steps = np.array(sorted({0, *early, *range(run // 20, run + 1, run // 20)}), dtype=float)
    n_seeds = draw(st.integers(2, 3))
    n_names = draw(st.integers(2, 3))
    e = steps.size
    shape = (n_names, n_seeds, e)
    decreasing = draw(st.booleans())
    vals = np.array(draw(st.lists(st.floats(0.1, 10.0), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))))
    vals = vals.reshape(shape)
    if decreasing:  # training-like curves as well as arbitrary ones
        vals = 0.5 + np.cumsum(vals[..., ::-1], axis=-1)[..., ::-1] / e
    spikes = np.array(draw(st.lists(st.floats(1e-3, 1e3), min_size=n_names * n_seeds * len(early),
                                    max_size=n_names * n_seeds * len(early)))).reshape(n_names, n_seeds, len(early))
    return steps, vals, spikes, np.isin(steps, sorted(early))


@settings(max_examples=examples(40))
@given(_runs_with_early_checkpoints())
def test_the_rule_is_not_decided_by_the_first_five_percent(run):
    steps, vals, spikes, early = run
    names = [f"s{k}" for k in range(vals.shape[0])]
    assert np.all(steps[early] < steps[-1] / 20) and not early[0]
    curves = {name: vals[k] for k, name in enumerate(names)}
    perturbed = {}
    for k, name in enumerate(names):
        c = vals[k].copy()
        c[:, early] = spikes[k]
        perturbed[name] = c
    a = compare_training(steps, curves, reference=names[-1])
    b = compare_training(steps, perturbed, reference=names[-1])
    assert a == b  # every number, status and string, exactly
    json.dumps(a, allow_nan=False)


def test_pair_targets_decide_what_the_best_schedule_would_leave_undecided():
    # Three schedules: "best" far ahead; "ref" and "slow" both end far above 90 % of best's improvement,
    # and "slow" is clearly slower than "ref".  With targets from the best of all, neither reaches them
    # (censored on every seed: inconclusive); with targets from the pair, "ref" reaches its own 90 %
    # target on every seed and "slow" never does: decided ("above": it needs more steps).
    steps = np.arange(0, 101, 5, dtype=float)
    seeds = np.array([[1.0], [1.05], [0.95]])

    def curve(rate, floor):
        return floor + (10.0 - floor) * np.exp(-rate * steps / 100.0 * seeds)

    curves = {"ref": curve(3.0, 5.0), "slow": curve(0.8, 5.0), "best": curve(3.0, 1.0)}
    by_best = compare_training(steps, curves, reference="ref", fractions=(0.9,), targets="best")
    by_pair = compare_training(steps, curves, reference="ref", fractions=(0.9,))
    slow_best = next(r for r in by_best["rows"] if r["schedule"] == "slow")["late_targets"][0]
    slow_pair = next(r for r in by_pair["rows"] if r["schedule"] == "slow")["late_targets"][0]
    assert slow_best["side"] == "inconclusive" and slow_best["censored"] == {"slow": 3, "ref": 3}
    assert slow_pair["targets_from"] == "ref" and slow_pair["censored"] == {"slow": 3, "ref": 0}
    assert slow_pair["side"] == "above"
    assert by_pair["targets"] == "pair" and "two schedules compared" in by_pair["rule"]
    with pytest.raises(ValueError, match="targets must be one of pair, best"):
        compare_training(steps, curves, reference="ref", targets="all")


def test_both_reaching_the_target_before_the_window_is_not_a_ratio_of_one():
    # Curves that fall 90 % of the way within the first 10 % of the run: both step counts are the window's
    # first checkpoint on every seed, so their ratio would be exactly 1 by construction; it is not reported.
    steps = np.arange(0, 1001, 50, dtype=float)
    seeds = np.array([[1.0], [1.1], [0.9]])
    fast = 1.0 + 9.0 * np.exp(-steps / 10.0 * seeds)
    slower = 1.0 + 9.0 * np.exp(-steps / 12.0 * seeds)
    out = compare_training(steps, {"ref": fast, "other": slower}, reference="ref", fractions=(0.9,))
    late = out["rows"][1]["late_targets"][0]
    assert late["at_window_start"] == {"other": 3, "ref": 3}
    assert late["ratio"] is None and late["side"] == "inconclusive" and "before the judged window" in late["why"]
