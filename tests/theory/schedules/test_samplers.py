"""Noise-level samplers of exported schedules (numpy, JAX, PyTorch), zero-density runs included (issue 13)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noisealloc.theory.schedules import samplers
from noisealloc.theory import tolerances as tol
from noisealloc.theory.schedules.io import sample_from_table, schedule_to_dict
from noisealloc.theory.schedules.base import TabulatedSchedule

from helpers.strategies import examples


@st.composite
def tables_with_zero_runs(draw):
    """Piecewise-linear densities on 2..30 knots (gaps in [0.01, 3], start in [-20, 20]) whose values are 0
    on random runs of knots and in [1e-3, 1e3] elsewhere, with at least one positive value; the CDF is the
    exact trapezoid sum, normalised."""
    k = draw(st.integers(2, 30))
    x0 = draw(st.floats(-20.0, 20.0))
    gaps = np.array(draw(st.lists(st.floats(0.01, 3.0), min_size=k - 1, max_size=k - 1)))
    f = np.array(draw(st.lists(st.floats(1e-3, 1e3), min_size=k, max_size=k)))
    zero = np.array(draw(st.lists(st.booleans(), min_size=k, max_size=k)))
    f[zero] = 0.0
    if not np.any(f > 0):
        f[draw(st.integers(0, k - 1))] = 1.0
    x = x0 + np.concatenate([[0.0], np.cumsum(gaps)])
    cell = 0.5 * (f[:-1] + f[1:]) * np.diff(x)
    total = cell.sum()
    return {"knots": x, "pdf": f / total, "cdf": np.concatenate([[0.0], np.cumsum(cell / total)])}


def _cdf_at(table, u):
    """The exact piecewise-quadratic CDF of the table at u (inside the knots)."""
    x, f, c = (np.asarray(table[k]) for k in ("knots", "pdf", "cdf"))
    i = np.clip(np.searchsorted(x, u, side="right") - 1, 0, x.size - 2)
    w = x[i + 1] - x[i]
    d = u - x[i]
    return c[i] + f[i] * d + 0.5 * (f[i + 1] - f[i]) * d * d / w


def _levels(seed, n, total):
    return np.clip(np.random.default_rng(seed).random(n), tol.U_CLAMP, 1 - tol.U_CLAMP) * total


SAMPLERS = {
    "schedule_io.sample_from_table": lambda t, n, seed: sample_from_table(t, n, rng=np.random.default_rng(seed)),
    "samplers.NumpySampler": lambda t, n, seed: samplers.NumpySampler(t)(n, np.random.default_rng(seed)),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
@settings(max_examples=examples(60))
@given(table=tables_with_zero_runs(), seed=st.integers(0, 2**32 - 1))
def test_samples_stay_in_the_support_and_invert_the_cdf_exactly(name, table, seed):
    u = SAMPLERS[name](table, 512, seed)
    x, f, c = table["knots"], table["pdf"], table["cdf"]
    assert np.all(np.isfinite(u)), "a draw is NaN (0/0 in a zero-density cell)"
    assert np.all((u >= x[0]) & (u <= x[-1]))
    # never strictly inside a run where the density is 0: the cell holding each draw has positive mass
    j = np.clip(np.searchsorted(x, u, side="right") - 1, 0, x.size - 2)
    inside_zero = (f[j] == 0) & (f[j + 1] == 0) & (u > x[j]) & (u < x[j + 1])
    assert not np.any(inside_zero), u[inside_zero]
    # the exact inverse: F(u) equals the level drawn, to the condition number of F at u
    q = _levels(seed, 512, c[-1])
    bound = tol.PPF_ROUNDTRIP_EPS_FACTOR * tol.EPS * (1.0 + np.abs(u) * f.max())
    np.testing.assert_array_less(np.abs(_cdf_at(table, u) - q), bound)


def test_zero_run_check_fails_on_a_sampler_that_ignores_zero_runs():
    """The support assertion above can fail: a uniform sampler over the knots lands inside the zero run."""
    table = {"knots": np.array([0.0, 1.0, 2.0, 3.0]), "pdf": np.array([1.0, 0.0, 0.0, 1.0]),
             "cdf": np.array([0.0, 0.5, 0.5, 1.0])}
    u = np.random.default_rng(0).uniform(0.0, 3.0, 512)
    j = np.clip(np.searchsorted(table["knots"], u, side="right") - 1, 0, 2)
    assert np.any((table["pdf"][j] == 0) & (table["pdf"][j + 1] == 0))
    v = samplers.NumpySampler(table)(512, 0)
    assert not np.any((v > 1.0) & (v < 2.0))


def test_numpy_sampler_matches_the_library_inverse_and_reads_files(tmp_path):
    from noisealloc.theory.schedules.io import save_json, save_npz

    tab = TabulatedSchedule([-3.0, 0.0, 1.0, 4.0], [1.0, 3.0, 2.0, 0.5], name="t")
    for path in (save_json(tab, tmp_path / "s.json"), save_npz(tab, tmp_path / "s.npz")):
        s = samplers.NumpySampler(path)
        np.testing.assert_allclose(s(1000, 3), tab.sample(1000, rng=3), rtol=1e-12, atol=1e-15)
        assert s.table.coordinate == "lambda" and s.table.name == "t"


def test_bad_tables_are_refused_with_the_reason():
    good = schedule_to_dict(TabulatedSchedule([0.0, 1.0], [1.0, 1.0]))
    with pytest.raises(ValueError, match="pdf must be >= 0"):
        samplers.load_table(dict(good, pdf=[1.0, -1.0]))
    with pytest.raises(ValueError, match="knots must be strictly increasing"):
        samplers.load_table(dict(good, knots=[1.0, 0.0]))
    with pytest.raises(ValueError, match="lacks the keys"):
        samplers.load_table({"knots": [0.0, 1.0]})
    with pytest.raises(ValueError, match="n must be a non-negative integer"):
        samplers.NumpySampler(good)(-1)


def test_module_imports_no_framework():
    code = ("import sys, noisealloc.theory.schedules.samplers; "
            "print(sorted(m for m in ('torch', 'jax', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_to_numpy_and_feed_estimator():
    from noisealloc.theory.schedules.online import EntropyRateEstimator

    est = EntropyRateEstimator(-4.0, 4.0, n_bins=8)
    lam = np.linspace(-4, 4, 64)
    samplers.feed_estimator(est, lam, np.exp(-np.clip(lam, -4, 4)))
    assert est.n_updates == 1
    with pytest.raises(ValueError, match="one value per example"):
        samplers.feed_estimator(est, lam, lam[:3])


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
@settings(max_examples=examples(3), deadline=None)  # each table shape compiles anew
@given(table=tables_with_zero_runs(), seed=st.integers(0, 2**31 - 1))
def test_jax_sampler_stays_in_the_support(table, seed):
    import jax

    with jax.enable_x64(True):  # scoped: the other JAX tests run in float32
        u = np.asarray(samplers.JaxSampler(table)(jax.random.PRNGKey(seed), 256))
    x, f = table["knots"], table["pdf"]
    assert u.dtype == np.float64 and np.all(np.isfinite(u)) and np.all((u >= x[0]) & (u <= x[-1]))
    j = np.clip(np.searchsorted(x, u, side="right") - 1, 0, x.size - 2)
    assert not np.any((f[j] == 0) & (f[j + 1] == 0) & (u > x[j]) & (u < x[j + 1]))


def test_docstring_examples_of_the_samplers_module():
    import doctest

    res = doctest.testmod(samplers, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.attempted >= 3 and res.failed == 0


def test_load_table_accepts_a_tabulated_schedule_and_a_collection(tmp_path):
    from noisealloc.theory.schedules.io import save_schedules_json

    a = TabulatedSchedule([0.0, 1.0, 2.0], [1.0, 2.0, 1.0], name="a")
    t = samplers.load_table(a)
    np.testing.assert_array_equal(t.cdf, a.cdf_values)
    path = save_schedules_json({"a": a, "b": TabulatedSchedule([0.0, 1.0], [1.0, 1.0], name="b")}, tmp_path / "c.json")
    assert samplers.load_table(path, name="b").name == "b"
    with pytest.raises(ValueError, match="holds several schedules"):
        samplers.load_table(path)


# ----------------------------------------------------------------------------- issue 28 item 4: bad tables refused
_GOOD = {"knots": [0.0, 1.0, 2.0], "pdf": [0.0, 1.0, 0.0], "cdf": [0.0, 0.5, 1.0]}
_BAD_TABLES = {
    "cdf of another pdf": ({"cdf": [0.0, 0.9, 1.0]}, "cumulative trapezoid integral"),
    "nan pdf": ({"pdf": [0.0, float("nan"), 0.0]}, "pdf must be finite"),
    "negative pdf": ({"pdf": [0.0, -1.0, 0.0], "cdf": [0.0, -0.5, -1.0]}, "pdf must be >= 0"),
    "decreasing cdf": ({"pdf": [1.0, 1.0, 1.0], "cdf": [0.0, 1.0, 0.5]}, "non-decreasing"),
    "complex knots": ({"knots": np.array([0.0, 1.0, 2.0]) + 0j}, "real numbers"),
}


def _samplers():
    from noisealloc.theory.schedules.io import sample_from_table
    from noisealloc.theory.schedules.samplers import NumpySampler, ScheduleTable

    return {
        "NumpySampler": lambda t: NumpySampler(t)(8, rng=0),
        "sample_from_table": lambda t: sample_from_table(t, 8, rng=0),
        "ScheduleTable": lambda t: ScheduleTable(np.asarray(t["knots"]), np.asarray(t["pdf"]), np.asarray(t["cdf"])),
    }


@pytest.mark.parametrize("case", sorted(_BAD_TABLES))
@pytest.mark.parametrize("sampler", ["NumpySampler", "sample_from_table", "ScheduleTable"])
def test_samplers_refuse_inconsistent_tables(case, sampler):
    change, needle = _BAD_TABLES[case]
    table = {**_GOOD, **change}
    with pytest.raises(ValueError, match=needle):
        _samplers()[sampler](table)


def test_samplers_take_a_consistent_table():
    for name, draw in _samplers().items():
        out = draw(dict(_GOOD))
        if name != "ScheduleTable":
            assert out.shape == (8,) and np.all((out >= 0.0) & (out <= 2.0))
