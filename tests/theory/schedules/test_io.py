"""Export / import of schedules (JSON schema v1 and npz) and the numpy-only sampler."""

from __future__ import annotations

import builtins
import json
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from noisealloc.theory.schedules import io as IO
from noisealloc.theory import schedules as S
from noisealloc.theory import tolerances as tol


@st.composite
def tabulated(draw):
    k = draw(st.integers(2, 40))
    x0 = draw(st.floats(-20.0, 20.0))
    gaps = np.array(draw(st.lists(st.floats(1e-4, 3.0), min_size=k - 1, max_size=k - 1)))
    f = np.array(draw(st.lists(st.floats(1e-8, 1e4), min_size=k, max_size=k)))
    coordinate = draw(st.sampled_from(["lambda", "log-sigma"]))
    return S.TabulatedSchedule(x0 + np.concatenate([[0.0], np.cumsum(gaps)]), f, coordinate=coordinate,
                               name=draw(st.sampled_from(["a", "tab", "ünïcode name"])))


def assert_same_schedule(a, b):
    assert a.name == b.name and a.coordinate.name == b.coordinate.name
    np.testing.assert_array_equal(a.knots, b.knots)
    assert a.interval == b.interval
    np.testing.assert_allclose(b.pdf_values, a.pdf_values, rtol=tol.EXPORT_ROUNDTRIP_RTOL, atol=0)
    np.testing.assert_allclose(b.cdf_values, a.cdf_values, rtol=tol.EXPORT_ROUNDTRIP_RTOL, atol=1e-300)
    x = np.linspace(*a.interval, 257)
    np.testing.assert_allclose(b.pdf(x), a.pdf(x), rtol=tol.EXPORT_ROUNDTRIP_RTOL)


def test_assert_same_schedule_detects_a_difference():
    a = S.TabulatedSchedule([0.0, 1.0, 2.0], [1.0, 2.0, 1.0])
    b = S.TabulatedSchedule([0.0, 1.0, 2.0], [1.0, 2.0 * (1 + 1e-9), 1.0])
    with pytest.raises(AssertionError):
        assert_same_schedule(a, b)


@given(s=tabulated())
def test_json_roundtrip_tabulated(tmp_path_factory, s):
    path = tmp_path_factory.mktemp("io") / "s.json"
    IO.save_json(s, path)
    assert_same_schedule(s, IO.load_json(path))


@given(s=tabulated())
def test_npz_roundtrip_tabulated(tmp_path_factory, s):
    path = tmp_path_factory.mktemp("io") / "s.npz"
    IO.save_npz(s, path)
    with np.load(path, allow_pickle=False) as z:  # no object arrays anywhere
        assert all(z[k].dtype.kind in "fiU" for k in z.files)
    assert_same_schedule(s, IO.load_npz(path))


@pytest.mark.parametrize("coordinate", ["lambda", "sigma", "t-rf"])
def test_parametric_export_is_the_tabulation(tmp_path, coordinate):
    s = S.edm_lognormal(coordinate=coordinate)
    IO.save_json(s, tmp_path / "e.json", n=201, meta={"note": "x"})
    d = json.loads((tmp_path / "e.json").read_text())
    assert d["format"] == "noisealloc.schedule" and d["version"] == 1 and d["coordinate"] == coordinate
    assert d["meta"]["note"] == "x" and d["meta"]["lam_interval"] == pytest.approx([-12.0, 12.0], rel=1e-14)
    knots = np.array(d["knots"])
    ratio = np.array(d["pdf"]) / s.pdf(knots)  # exact density at the knots, renormalised as a whole
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-12)
    assert abs(ratio[0] - 1) < 1e-2  # trapezoid mass of 201 knots of the exact density
    # inverse-CDF table: exact quantiles of the tabulated density, ends pinned
    q, u = np.array(d["inverse_cdf"]["q"]), np.array(d["inverse_cdf"]["u"])
    tab = IO.load_json(tmp_path / "e.json")
    np.testing.assert_allclose(tab.cdf(u), q, rtol=0, atol=tol.QUANTILE_ROUNDTRIP_ATOL)
    assert u[0] == knots[0] and u[-1] == knots[-1] and np.all(np.diff(u) >= 0)


def test_sample_from_table_matches_tabulated_law(tmp_path):
    s = S.laplace_lambda(coordinate="t-rf")
    IO.save_json(s, tmp_path / "l.json")
    d = json.loads((tmp_path / "l.json").read_text())
    tab = IO.schedule_from_dict(d)
    x = IO.sample_from_table(d, 10**5, rng=11)
    assert x.shape == (10**5,) and np.all((x >= tab.interval[0]) & (x <= tab.interval[1]))
    assert stats.kstest(x, tab.cdf).pvalue > tol.KS_ALPHA
    np.testing.assert_array_equal(x, IO.sample_from_table(d, 10**5, rng=11))  # same seed, same draws
    # the same levels give the same points as the library's exact inverse
    np.testing.assert_allclose(IO.sample_from_table(d, 1000, rng=3), tab.sample(1000, rng=3), rtol=1e-12, atol=1e-15)
    with np.load(IO.save_npz(s, tmp_path / "l.npz"), allow_pickle=False) as z:
        np.testing.assert_allclose(IO.sample_from_table(z, 50, rng=2), tab.sample(50, rng=2),
                                   rtol=1e-12, atol=1e-15)


def test_sample_from_table_uses_numpy_only():
    """sample_from_table and the one inverse-CDF kernel it shares with noisealloc.theory.schedules.samplers use numpy only."""
    from noisealloc.theory.schedules import _inverse_cdf

    allowed = set(dir(np)) | set(dir(np.random)) | set(dir(builtins)) | {
        "np", "random", "Generator", "default_rng", "asarray", "float64", "ndim", "shape", "size", "integer",
    }
    for fn, extra in ((IO.sample_from_table, {"draw_piecewise_linear", "check_table"}),
                      (_inverse_cdf.draw_piecewise_linear, {"invert_piecewise_linear_cdf"}),
                      (_inverse_cdf.invert_piecewise_linear_cdf, set()),
                      (_inverse_cdf.check_table, {"TABLE_CDF_RTOL", "kind", "append"})):
        names = set(fn.__code__.co_names)
        assert names <= allowed | extra, (fn.__name__, names - allowed - extra)
    assert set(vars(_inverse_cdf)) - {"np", "annotations"} <= {
        "invert_piecewise_linear_cdf", "draw_piecewise_linear", "check_table", "TABLE_CDF_RTOL", "__all__"} | {
        k for k in vars(_inverse_cdf) if k.startswith("__")}


def test_collection_roundtrip_and_order(tmp_path):
    sched = S.builtin_schedules(-10.0, 9.0, coordinate="log-sigma")
    IO.save_schedules_json(sched, tmp_path / "all.json", n=129, meta={"k": 1})
    back = IO.load_schedules_json(tmp_path / "all.json")
    assert list(back) == list(sched)
    for name, s in sched.items():
        assert_same_schedule(s.tabulate(129), back[name])
    doc = json.loads((tmp_path / "all.json").read_text())
    assert doc["format"] == "noisealloc.schedules" and doc["version"] == 1 and doc["meta"] == {"k": 1}


def test_bad_files(tmp_path):
    s = S.TabulatedSchedule([0.0, 1.0, 3.0], [1.0, 2.0, 0.5], name="t")
    d = IO.schedule_to_dict(s)
    with pytest.raises(ValueError, match="version must be 1 .*got 2"):
        IO.schedule_from_dict({**d, "version": 2})
    with pytest.raises(ValueError, match="format must be 'noisealloc.schedule'"):
        IO.schedule_from_dict({**d, "format": "other"})
    with pytest.raises(ValueError, match="does not match its knots and pdf"):
        IO.schedule_from_dict({**d, "cdf": [0.0, 0.5, 1.0]})
    with pytest.raises(ValueError, match="lacks the keys"):
        IO.schedule_from_dict({k: v for k, v in d.items() if k != "pdf"})
    with pytest.raises(ValueError, match="pdf_values must be > 0"):
        IO.schedule_from_dict({**d, "pdf": [1.0, 0.0, 1.0]})
    with pytest.raises(ValueError, match="coordinate must be one of"):
        IO.schedule_from_dict({**d, "coordinate": "time"})
    (tmp_path / "x.json").write_text(json.dumps({"format": "noisealloc.schedules", "version": 1, "schedules": [d, d]}))
    with pytest.raises(ValueError, match="duplicate schedule name 't'"):
        IO.load_schedules_json(tmp_path / "x.json")
    with pytest.raises(ValueError, match="names must be unique"):
        IO.save_schedules_json([s, s], tmp_path / "y.json")
    with pytest.raises(FileNotFoundError):
        IO.load_json(tmp_path / "missing.json")


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    target = tmp_path / "s.json"
    target.write_text("old")

    def boom(fh):
        fh.write(b"partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        IO.atomic_write(target, boom)
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["s.json"]  # no temporary file left behind
    IO.save_json(S.cosine(), target)
    assert os.listdir(tmp_path) == ["s.json"] and IO.load_json(target).name == "cosine"
