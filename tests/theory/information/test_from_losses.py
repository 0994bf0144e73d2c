"""Measured-loss profiles: CSV reading, parameterisation conversions, the monotone fit (issue 7)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from noisealloc.theory.information.from_losses import (
    DEFAULT_LOSS_BINS,
    LossTable,
    bin_losses,
    fit_mmse_profile,
    loss_profile_warnings,
    read_loss_csv,
    x0_loss_from,
)
from noisealloc.theory.coordinates import get_coordinate

from helpers.strategies import examples


def _write(tmp_path, text, name="losses.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _gaussian_mmse(lam, s):
    # docs/THEORY.md section 2 closed form, written out here independently of the library.
    return np.sum(s[None, :] / (1.0 + np.exp(lam)[:, None] * s[None, :]), axis=1)


# ---- CSV reading ------------------------------------------------------------------

def test_reads_lambda_x0_with_stderr(tmp_path):
    p = _write(tmp_path, "lam,loss_x0,loss_se\n-2,1.5,0.1\n0,1.0,0.05\n2,0.2,0.01\n")
    t = read_loss_csv(p)
    np.testing.assert_array_equal(t.lam, [-2, 0, 2])
    np.testing.assert_array_equal(t.loss, [1.5, 1.0, 0.2])
    np.testing.assert_array_equal(t.stderr, [0.1, 0.05, 0.01])
    assert t.source["parameterisation"] == "x0" and t.source["coordinate"] == "lambda"


def test_sigma_column_is_converted_and_reordered(tmp_path):
    # sigma increases down the file, so lambda = -2 log sigma decreases: the table is returned in lambda order.
    p = _write(tmp_path, "sigma,loss_x0\n0.1,0.01\n1.0,0.5\n10.0,0.9\n")
    t = read_loss_csv(p)
    np.testing.assert_allclose(t.lam, -2.0 * np.log([10.0, 1.0, 0.1]), rtol=1e-15)
    np.testing.assert_array_equal(t.loss, [0.9, 0.5, 0.01])


def test_eps_and_v_conversions_match_their_definitions():
    lam = np.array([-3.0, 0.0, 4.0])
    loss = np.array([2.0, 1.0, 0.5])
    # eps-prediction: x0 = (x - sigma eps)/alpha => |x0 - x0_hat|^2 = (sigma/alpha)^2 |eps - eps_hat|^2 = e^{-lam} ...
    np.testing.assert_allclose(x0_loss_from(loss, lam, "eps"), loss * np.exp(-lam), rtol=1e-15)
    # v-prediction (VP): x0 = alpha x - sigma v => |x0 - x0_hat|^2 = sigma^2 |v - v_hat|^2, sigma^2 = 1/(1+e^lam).
    np.testing.assert_allclose(x0_loss_from(loss, lam, "v"), loss / (1.0 + np.exp(lam)), rtol=1e-15)


def test_v_conversion_through_an_explicit_vp_simulation():
    # Independent route: simulate x0, eps, build x and v, perturb the v prediction, compare the x0 errors.
    rng = np.random.default_rng(3)
    lam = 1.3
    alpha, sigma = np.sqrt(1 / (1 + np.exp(-lam))), np.sqrt(1 / (1 + np.exp(lam)))
    x0, eps = rng.standard_normal((2, 1000, 4))
    x = alpha * x0 + sigma * eps
    v = alpha * eps - sigma * x0
    v_hat = v + 0.1 * rng.standard_normal(v.shape)
    x0_hat = alpha * x - sigma * v_hat
    lx0 = np.mean(np.sum((x0 - x0_hat) ** 2, axis=1))
    lv = np.mean(np.sum((v - v_hat) ** 2, axis=1))
    np.testing.assert_allclose(x0_loss_from(lv, lam, "v"), lx0, rtol=1e-12)


@pytest.mark.parametrize(
    "text, match",
    [
        ("lam,loss_x0\n0,1\n1,x\n2,0.5\n", r"row 3, column 'loss_x0': 'x' is not a number"),
        ("lam,loss_x0\n0,1\n1,-0.2\n2,0.5\n", r"row 3, column 'loss_x0': loss must be > 0"),
        # unsorted or repeated levels are per-sample losses, binned: three rows give fewer than 3 levels
        ("lam,loss_x0\n0,1\n2,0.7\n1,0.5\n", r"need at least 3 noise levels with 2 or more losses each"),
        ("lam,loss_x0\n0,1\n0,0.7\n1,0.5\n", r"need at least 3 noise levels with 2 or more losses each"),
        ("lam,loss_x0\n0,1\n0,-0.7\n1,0.5\n", r"row 3, column 'loss_x0': a per-sample loss must be >= 0"),
        ("lam,loss_x0\n0,1\n1,0.7,3\n2,0.5\n", r"row 3 has 3 fields"),
        ("# a comment\nlam,loss_x0\n0,1\n\n1,x\n2,0.5\n", r"row 5, column 'loss_x0': 'x' is not a number"),
        ("lam,loss_foo\n0,1\n1,0.7\n2,0.5\n", r"unknown parameterisation in column 'loss_foo'"),
        ("lam,value\n0,1\n1,0.7\n2,0.5\n", r"need exactly one loss column"),
        ("level,loss_x0\n0,1\n1,0.7\n2,0.5\n", r"need exactly one noise-level column"),
        ("lam,loss_x0\n0,1\n1\n2,0.5\n", r"row 3 has 1 fields"),
        ("lam,loss_x0,loss_se\n0,1,0.1\n1,0.7,0\n2,0.5,0.1\n", r"row 3, column 'loss_se': standard error must be > 0"),
        ("sigma,loss_x0\n-1,1\n1,0.7\n2,0.5\n", r"column 'sigma'.*open domain"),
        ("lam,loss_x0\n0,1\n1,inf\n2,0.5\n", r"row 3, column 'loss_x0'.*not finite"),
    ],
)
def test_bad_csv_names_row_or_column(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        read_loss_csv(_write(tmp_path, text))


def test_missing_file_and_unknown_parameterisation():
    with pytest.raises(FileNotFoundError, match="no-such.csv"):
        read_loss_csv("no-such.csv")
    with pytest.raises(ValueError, match="parameterisation must be one of"):
        x0_loss_from(1.0, 0.0, "score")


# ---- the monotone fit ---------------------------------------------------------------

@settings(max_examples=examples(40))
@given(
    s=st.lists(st.floats(0.01, 10.0), min_size=1, max_size=4).map(np.array),
)
def test_fit_of_exact_profile_is_monotone_and_accurate(s):
    """Noise-free Gaussian-manifold losses: the fit is non-increasing and within 2% of h where h matters."""
    lam = np.linspace(-8, 8, 41)
    mmse = _gaussian_mmse(lam, s)
    prof = fit_mmse_profile(lam, mmse, n_boot=0)
    fine = np.linspace(-8, 8, 1001)
    fitted = prof.mmse(fine)
    assert np.all(np.diff(fitted) <= 1e-12 * fitted[:-1]), "fitted MMSE must be non-increasing"
    h = 0.5 * np.exp(lam) * mmse
    mask = h > 1e-3 * h.max()
    err = np.max(np.abs(prof.entropy_rate(lam)[mask] / h[mask] - 1))
    assert err < 0.02, f"relative error of h {err:.3g}"


def test_fit_converges_as_the_heldout_set_grows():
    """Relative error of h decreases with the relative noise of the losses (the held-out size)."""
    s = np.array([1.0, 0.3, 0.05])
    lam = np.linspace(-8, 8, 33)
    mmse = _gaussian_mmse(lam, s)
    h = 0.5 * np.exp(lam) * mmse
    rng = np.random.default_rng(0)
    errs = []
    for n in (100, 10_000, 1_000_000):
        rel = np.sqrt(2.0 / n)  # relative SE of a mean of n squared errors of chi-square type
        loss = mmse * (1 + rel * rng.standard_normal(lam.size))
        prof = fit_mmse_profile(lam, loss, stderr=rel * mmse, n_boot=0)
        errs.append(np.max(np.abs(prof.entropy_rate(lam) / h - 1)))
    assert errs[0] > errs[1] > errs[2], errs
    assert errs[2] < 0.01


def test_bootstrap_band_covers_truth_and_same_seed_is_identical():
    s = np.array([1.0, 0.2])
    lam = np.linspace(-6, 6, 25)
    mmse = _gaussian_mmse(lam, s)
    rng = np.random.default_rng(1)
    rel = 0.05
    loss = mmse * (1 + rel * rng.standard_normal(lam.size))
    a = fit_mmse_profile(lam, loss, stderr=rel * loss, n_boot=200, rng=7)
    b = fit_mmse_profile(lam, loss, stderr=rel * loss, n_boot=200, rng=7)
    np.testing.assert_array_equal(a.boot_coef, b.boot_coef)
    lo, hi = a.band(lam, (0.005, 0.995))
    h = 0.5 * np.exp(lam) * mmse
    inside = np.mean((h >= lo) & (h <= hi))
    assert inside > 0.8, f"99% band covers the truth at only {inside:.0%} of levels"
    with pytest.raises(ValueError, match="measured range"):
        a.mmse(7.0)


def test_fit_rejects_bad_input():
    lam = np.linspace(0, 1, 5)
    with pytest.raises(ValueError, match="loss must be > 0"):
        fit_mmse_profile(lam, [1, 1, 0, 1, 1])
    with pytest.raises(ValueError, match="strictly increasing"):
        fit_mmse_profile(lam[::-1], np.ones(5))
    with pytest.raises(ValueError, match="at least 3"):
        fit_mmse_profile([0, 1], [1, 1])
    with pytest.raises(ValueError, match="stderr must be > 0"):
        fit_mmse_profile(lam, np.ones(5), stderr=np.zeros(5))


def test_coordinate_names_accepted_in_header(tmp_path):
    for name in ("t-linear", "t-edm", "log-sigma"):
        c = get_coordinate(name)
        lam = np.array([4.0, 0.0, -4.0]) if not c.increasing else np.array([-4.0, 0.0, 4.0])
        u = c.from_lam(lam)
        rows = "\n".join(f"{float(ui)!r},{1.0 + i}" for i, ui in enumerate(u))
        t = read_loss_csv(_write(tmp_path, f"{name},loss_x0\n{rows}\n", name=f"{name}.csv"))
        np.testing.assert_allclose(t.lam, np.sort(lam), rtol=1e-12, atol=1e-12)


# ---- per-sample losses as a training loop logs them (issue 13) ------------------------

def _per_sample_csv(path, lam, loss, *, header="lam,loss_x0", bom=False, crlf=False):
    eol = "\r\n" if crlf else "\n"
    body = eol.join(f"{a!r},{b!r}" for a, b in zip(lam.tolist(), loss.tolist()))
    path.write_bytes(((("\ufeff" if bom else "") + header + eol + body + eol)).encode("utf-8"))
    return path


def test_per_sample_losses_are_binned_to_the_per_level_means(tmp_path):
    """Unsorted, repeated levels: each level's mean and standard error, whatever the row order."""
    rng = np.random.default_rng(0)
    grid = np.linspace(-6.0, 6.0, 13)
    lam = np.repeat(grid, 50)
    loss = np.exp(-lam) * rng.exponential(1.0, lam.size)
    perm = rng.permutation(lam.size)
    t = read_loss_csv(_per_sample_csv(tmp_path / "log.csv", lam[perm], loss[perm]))
    assert t.source["form"] == "per-sample, binned" and t.source["rows"] == lam.size
    np.testing.assert_array_equal(t.lam, grid)
    want = np.array([loss[lam == g].mean() for g in grid])
    want_se = np.array([loss[lam == g].std(ddof=1) / np.sqrt(50) for g in grid])
    np.testing.assert_allclose(t.loss, want, rtol=1e-12)
    np.testing.assert_allclose(t.stderr, want_se, rtol=1e-10)
    np.testing.assert_array_equal(t.count, np.full(13, 50.0))


@settings(max_examples=examples(30))
@given(n=st.integers(100, 400), n_bins=st.integers(3, 80), seed=st.integers(0, 2**31 - 1))
def test_bin_losses_against_a_loop(n, n_bins, seed):
    """Continuous levels (n distinct > n_bins): equal-width bins, against a loop over np.linspace edges."""
    rng = np.random.default_rng(seed)
    lam = rng.uniform(-5, 5, n)
    loss = rng.exponential(1.0, n)
    lb, mean, se, count = bin_losses(lam, loss, n_bins=n_bins)
    edges = np.linspace(lam.min(), lam.max(), n_bins + 1)
    want = []
    for b in range(n_bins):
        inb = (lam >= edges[b]) & ((lam < edges[b + 1]) if b < n_bins - 1 else (lam <= edges[b + 1]))
        if inb.sum() >= 2:
            want.append((lam[inb].mean(), loss[inb].mean(), loss[inb].std(ddof=1) / np.sqrt(inb.sum()), inb.sum()))
    want = np.array(want).reshape(-1, 4)
    np.testing.assert_array_equal(count, want[:, 3])
    np.testing.assert_allclose(np.c_[lb, mean, se], want[:, :3], rtol=1e-9, atol=1e-12)
    assert np.all(np.diff(lb) > 0)


def test_bin_losses_groups_distinct_levels_and_drops_singletons():
    lb, mean, se, count = bin_losses([0.0, 0.0, 1.0, 2.0, 2.0, 2.0], [1.0, 3.0, 5.0, 1.0, 1.0, 4.0])
    assert lb.tolist() == [0.0, 2.0] and mean.tolist() == [2.0, 2.0] and count.tolist() == [2.0, 3.0]
    np.testing.assert_allclose(se, [1.0, np.sqrt(3.0 / 3.0)], rtol=1e-12)
    with pytest.raises(ValueError, match="n_bins must be an integer >= 3; got 2"):
        bin_losses([0.0, 1.0], [1.0, 1.0], n_bins=2)


def test_bom_crlf_and_continuous_levels(tmp_path):
    rng = np.random.default_rng(1)
    lam = rng.uniform(-4.0, 4.0, 5000)
    loss = np.exp(-lam) * rng.exponential(1.0, lam.size)
    plain = read_loss_csv(_per_sample_csv(tmp_path / "a.csv", lam, loss))
    odd = read_loss_csv(_per_sample_csv(tmp_path / "b.csv", lam, loss, bom=True, crlf=True))
    assert plain.lam.size == DEFAULT_LOSS_BINS
    np.testing.assert_array_equal(plain.lam, odd.lam)
    np.testing.assert_array_equal(plain.loss, odd.loss)


def test_a_long_sorted_table_is_binned_and_progress_is_reported(tmp_path):
    lam = np.linspace(-6.0, 6.0, 3000)
    calls = []
    t = read_loss_csv(_per_sample_csv(tmp_path / "long.csv", lam, np.exp(-lam)),
                      progress=lambda frac, rows: calls.append((frac, rows)))
    assert t.source["form"] == "per-sample, binned" and t.lam.size == DEFAULT_LOSS_BINS
    assert calls and calls[-1][1] == 3000 and calls[-1][0] == pytest.approx(1.0)


def test_warnings_for_increasing_losses_and_poor_fits():
    lam = np.linspace(-4.0, 4.0, 17)
    good = LossTable(lam=lam, loss=2.0 / (1.0 + 2.0 * np.exp(lam)))
    assert loss_profile_warnings(good, fit_mmse_profile(good.lam, good.loss, n_boot=0)) == []
    up = LossTable(lam=lam, loss=np.exp(lam), stderr=0.01 * np.exp(lam))
    msgs = loss_profile_warnings(up, fit_mmse_profile(up.lam, up.loss, up.stderr, n_boot=0))
    assert [m.split(":")[0] for m in msgs] == ["losses increase with lambda", "poor fit"]
