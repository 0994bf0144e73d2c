"""Every level is finite and correct (issue 12 item 4): limits at |lam| large for every model,
atoms centred before integrating, duplicate atoms merged, complex input refused."""

from __future__ import annotations

import math
import warnings

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from helpers import mpmath_refs
from helpers.strategies import examples

from noisealloc.theory.posterior.asymptotics import LOW_SNR_LIMIT, dirac_underflow_snr, min_distance_lower_bound
from noisealloc.theory.models.dirac import DiracMixture, merge_duplicate_atoms
from noisealloc.theory.models.gaussian import GaussianManifold, GaussianManifoldMixture
from noisealloc.theory.models.manifolds import Circle
from noisealloc.theory.tolerances import EPS, QUAD_RTOL

# Levels over the whole tested range, with the far ends and the switch region weighted up.
_LAMS = st.one_of(st.floats(-1e4, 1e4), st.floats(-60.0, 60.0), st.sampled_from([-1e4, -800.0, -745.5, 709.9, 745.5,
                                                                                  1e3, 1e4]))
_MC = {"n_samples": 128, "rng": 0}


def _models():
    g2 = GaussianManifold(np.zeros(3), np.eye(3)[:, :2], [1.0, 2.0])
    return {
        "dirac-1d": (DiracMixture([-1.0, 0.5, 2.0], [0.2, 0.5, 0.3]), {}),
        "dirac-2d": (DiracMixture([[0.0, 0.0], [1.0, 0.0], [0.0, 1.5]]), {}),
        "dirac-3d-mc": (DiracMixture(np.eye(4)[:, :3] * [1.0, 2.0, 3.0]), _MC),
        "gaussian": (g2, {}),
        "gaussian-mixture": (GaussianManifoldMixture([g2, GaussianManifold(np.ones(3), np.eye(3)[:, :1], [0.5])]), _MC),
        "circle": (Circle(1.5, 3), {}),
    }


_MODELS = _models()


def _finite_information(model, lam, options):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no overflow/invalid on the way either
        info = model.information(np.asarray(lam), **options)
    for name in ("mmse", "entropy_rate", "conditional_entropy", "mutual_information"):
        est = getattr(info, name, None)
        if est is None:
            continue
        assert np.all(np.isfinite(est.value)), (name, lam, est.value)
        assert np.all(np.isfinite(est.stderr)), (name, lam, est.stderr)
        assert np.all(est.value >= 0), (name, lam, est.value)
    return info


@pytest.mark.parametrize("name", sorted(_MODELS))
@settings(max_examples=examples(6), deadline=None)
@given(lam=st.lists(_LAMS, min_size=1, max_size=3))
def test_no_nan_at_any_level(name, lam):
    model, options = _MODELS[name]
    info = _finite_information(model, lam, options)
    total = getattr(model, "total_variance", None)
    if total is not None:
        assert np.all(info.mmse.value <= total * (1 + 1e-9) + 4 * info.mmse.stderr)
    x = np.linspace(-2.0, 2.0, 3 * model.dim).reshape(3, model.dim)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for level in lam:
            assert np.all(np.isfinite(model.denoiser(x, level)))


@pytest.mark.parametrize("name", sorted(_MODELS))
def test_limits_at_both_ends(name):
    model, options = _MODELS[name]
    lam = np.array([-1e4, -800.0, 800.0, 1e4])
    info = _finite_information(model, lam, options)
    k_half = {"gaussian": 1.0, "circle": 0.5}
    if getattr(model, "discrete", False):
        np.testing.assert_allclose(info.mmse.value[:2], model.total_variance, rtol=EPS)
        np.testing.assert_allclose(info.conditional_entropy.value[:2], model.entropy, rtol=4 * EPS)
        assert np.all(info.mmse.value[2:] == 0) and np.all(info.conditional_entropy.value[2:] == 0)
        assert np.all(info.entropy_rate.value == 0)  # 1/2 e^lam Var underflows at -800; exactly 0 at high SNR
    elif name in k_half:
        np.testing.assert_allclose(info.mmse.value[:2], {"gaussian": 3.0, "circle": 1.5 ** 2}[name], rtol=EPS)
        np.testing.assert_allclose(info.entropy_rate.value[2:], k_half[name], rtol=EPS)
        assert np.all(info.mmse.value[2:] == 0)
        assert np.all(info.mutual_information.value[:2] == 0)
    else:  # the Gaussian-manifold mixture: h -> sum_j pi_j k_j / 2 = 3/4 (within its standard error)
        np.testing.assert_allclose(info.mmse.value[:2], model.total_variance, rtol=EPS)
        assert np.all(np.abs(info.entropy_rate.value[2:] - 0.75) <= 4 * info.entropy_rate.stderr[2:] + 1e-12)
        assert np.all(info.mmse.value[2:] == 0)


def test_dirac_switch_levels_against_mpmath():
    # The exact values (30 digits, no underflow in mpmath) at the switch levels: at the low-SNR level the
    # posterior is the prior to relative LOW_SNR_LIMIT, at the underflow level every quantity is below the
    # smallest float64 subnormal, just below it the quadrature still has its relative accuracy.
    atoms, weights = [-1.0, 0.5, 2.0], [0.2, 0.5, 0.3]
    m = DiracMixture(atoms, weights)
    lo, hi = m._low_snr_level, m.underflow_level()
    ref_lo = mpmath_refs.dirac_1d(atoms, weights, lo)
    assert abs(float(ref_lo[0]) / m.total_variance - 1) <= 2 * EPS
    assert abs(float(ref_lo[1]) / m.entropy - 1) <= 2 * EPS
    ref_hi = mpmath_refs.dirac_1d(atoms, weights, hi)
    tiny = mp.mpf(np.finfo(float).smallest_subnormal) / 2
    assert ref_hi[0] < tiny and ref_hi[1] < tiny
    assert mp.mpf(0.5) * mp.exp(hi) * ref_hi[0] < tiny
    below = hi - 0.5
    ref = mpmath_refs.dirac_1d(atoms, weights, below)
    got = m.information(below)
    # still normal floats half a unit below: the switch is not premature by much, and the rule in use
    # there returns a positive value, not an early 0 (relative accuracy is promised only where
    # h >= 1e-8 max h, docs/THEORY.md section 3.1; these are ~1e-202)
    assert float(ref[0]) > 1e-300 and float(ref[1]) > 1e-300
    assert got.mmse.value > 0 and got.conditional_entropy.value > 0


def test_underflow_bound_is_a_bound():
    # The Bhattacharyya bound used for the switch, checked against mpmath values of a pair far apart and
    # of one close pair: the true values at the switch level are below the float64 subnormals.
    for atoms in ([0.0, 1e-3], [0.0, 7.0, 7.5]):
        m = DiracMixture(atoms)
        hi = m.underflow_level()
        assert math.isfinite(hi)
        ref = mpmath_refs.dirac_1d(atoms, [1 / len(atoms)] * len(atoms), hi)
        assert ref[1] < mp.mpf("2.4e-324") and ref[0] < mp.mpf("2.4e-324")
    assert dirac_underflow_snr(3, 0.0) == math.inf
    pts = np.array([[0.0, 0.0], [3.0, 4.0], [3.0, 4.5]])
    d = min_distance_lower_bound(pts)
    assert d <= 0.5 and d > 0.5 * (1 - 1e-12)


def test_atoms_far_from_the_origin_are_centred():
    # Issue 12: [1000, 1000.001, 1003] lost accuracy to 6.8e-10; the same law shifted by 1000 (an exact
    # shift in float64) must give the same values to the quadrature's accuracy.
    far = np.array([1000.0, 1000.001, 1003.0])
    lam = np.array([0.0, 5.0, 12.0, 14.0])
    a, b = DiracMixture(far).information(lam), DiracMixture(far - 1000.0).information(lam)
    np.testing.assert_allclose(a.mmse.value, b.mmse.value, rtol=1e-12)
    np.testing.assert_allclose(a.conditional_entropy.value, b.conditional_entropy.value, rtol=1e-12)
    ref = mpmath_refs.dirac_1d(list(far - 1000.0), [1 / 3] * 3, 12.0)
    np.testing.assert_allclose(a.mmse.value[2], float(ref[0]), rtol=QUAD_RTOL)


@settings(max_examples=examples(20), deadline=None)
@given(n_copies=st.lists(st.integers(1, 4), min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_duplicate_atoms_are_merged(n_copies, seed):
    rng = np.random.default_rng(seed)
    distinct = rng.normal(size=(len(n_copies), 2))
    rows = np.repeat(distinct, n_copies, axis=0)
    perm = rng.permutation(rows.shape[0])
    w = rng.uniform(0.5, 1.5, size=rows.shape[0])
    m = DiracMixture(rows[perm], w[perm])
    assert m.n_atoms == len(n_copies) and m.n_merged == rows.shape[0] - len(n_copies)
    # the merged law: each distinct point with the sum of its copies' weights
    want = {tuple(p): 0.0 for p in distinct}
    for p, wi in zip(rows, w):
        want[tuple(p)] += wi / w.sum()
    got = {tuple(p): wi for p, wi in zip(m.atoms, m.weights)}
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-14)
    np.testing.assert_allclose(m.entropy, -sum(v * math.log(v) for v in want.values()), rtol=1e-14, atol=0)


def test_three_identical_atoms_are_one_point():
    m = DiracMixture(np.ones((3, 2)))
    assert (m.n_atoms, m.n_merged, m.entropy) == (1, 2, 0.0)
    a, w, n = merge_duplicate_atoms(np.array([[0.0], [-0.0]]), np.array([0.5, 0.5]))
    assert n == 1 and a.shape == (1, 1) and w.tolist() == [1.0]


@pytest.mark.parametrize("build", [
    lambda: DiracMixture(np.array([1 + 1j, 2.0])),
    lambda: DiracMixture([0.0, 1.0], np.array([0.5 + 0j, 0.5])),
    lambda: GaussianManifold(np.zeros(2, complex), np.eye(2)[:, :1], [1.0]),
    lambda: Circle(1.0, 2, center=np.zeros(2, complex)),
])
def test_complex_input_is_refused(build):
    with pytest.raises(ValueError, match="must be real"):
        build()


def test_complex_npz_is_refused(tmp_path):
    from noisealloc.theory.models.datasets import load_data

    path = tmp_path / "c.npz"
    np.savez(path, atoms=np.array([[1 + 1j], [2.0]]))
    with pytest.raises(ValueError, match="atoms .* must be real"):
        load_data(f"npz:{path}")


def test_low_snr_limit_is_below_epsilon():
    assert LOW_SNR_LIMIT < EPS ** 1.2


@pytest.mark.slow
def test_huge_atoms_are_refused_and_large_ones_follow_the_scale_shift():
    """Atoms of 1e200 used to fail with 'math domain error' (their squared distances overflow); they are
    refused with the rescaling rule.  Atoms c*mu at lam are atoms mu at lam + 2 log c (x = x0 + sigma eps
    scaled by c): checked at c = 1e149 against mpmath on the unit atoms."""
    with pytest.raises(ValueError, match=r"ATOM_ABS_MAX .* got 1e\+200"):
        DiracMixture([-1e200, 1e200])
    c = 1e149
    lam = np.array([-700.0, -690.0, -684.0])
    got = DiracMixture([-c, 0.5 * c, 2.0 * c], [0.2, 0.5, 0.3]).information(lam)
    for i, l in enumerate(lam):
        mmse, cond_h = mpmath_refs.dirac_1d([-1.0, 0.5, 2.0], [0.2, 0.5, 0.3], float(l + 2 * math.log(c)))
        assert got.mmse.value[i] == pytest.approx(float(mmse) * c * c, rel=1e-8)
        assert got.conditional_entropy.value[i] == pytest.approx(float(cond_h), rel=1e-8)


@settings(max_examples=examples(20), deadline=None)
@given(k=st.integers(2, 60), d=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_projection_distance_bound_is_a_valid_lower_bound(k, d, seed):
    """The cheap bound used for large K (projections on seeded unit vectors) never exceeds the true
    minimum distance, here computed pair by pair in plain numpy."""
    import noisealloc.theory.posterior.asymptotics as L

    pts = np.random.default_rng(seed).normal(size=(k, d)) * 10.0 ** np.random.default_rng(seed + 1).uniform(-3, 3)
    diff = pts[:, None, :] - pts[None, :, :]
    dist = np.sqrt(np.einsum("ijd,ijd->ij", diff, diff))
    dist[np.diag_indices(k)] = np.inf
    exact = float(dist.min())
    saved, L._EXACT_PAIR_WORK = L._EXACT_PAIR_WORK, 0.0  # force the projection path
    try:
        cheap = L.min_distance_lower_bound(pts)
        assert 0.0 <= cheap <= exact * (1 + 1e-12)
        pts[-1] = pts[0]
        assert L.min_distance_lower_bound(pts) == 0.0  # coincident points: no positive bound
    finally:
        L._EXACT_PAIR_WORK = saved


@settings(max_examples=examples(20), deadline=None)
@given(k=st.integers(1, 40), d=st.integers(1, 30), seed=st.integers(0, 2**16))
def test_merging_by_row_hash_equals_the_row_sort(k, d, seed):
    """Duplicates found by 64-bit row hashes (with full comparison of equal hashes) are exactly those of
    numpy's row sort, first occurrences and merged weights included."""
    from noisealloc.theory.models.dirac import merge_duplicate_atoms

    rng = np.random.default_rng(seed)
    base = rng.integers(-2, 3, size=(max(1, k // 2), d)).astype(float)  # few distinct rows: many repeats
    atoms = base[rng.integers(0, base.shape[0], size=k)]
    atoms[atoms == 0.0] = rng.choice([0.0, -0.0], size=int(np.sum(atoms == 0.0)))
    w = rng.dirichlet(np.ones(k))
    a, merged, n = merge_duplicate_atoms(atoms, w)
    _, first, inverse = np.unique(atoms + 0.0, axis=0, return_index=True, return_inverse=True)
    order = np.sort(first)
    np.testing.assert_array_equal(a, atoms[order] if order.size < k else atoms)
    assert n == k - first.size
    ref = np.array([w[np.ravel(inverse) == np.ravel(inverse)[i]].sum() for i in order])
    np.testing.assert_allclose(merged, ref if order.size < k else w, rtol=1e-15, atol=0)


def test_tiny_separations_take_the_low_snr_limits_without_error():
    # The cheap low-SNR test squares |mu_0 - mu_1| / 2, which underflows to 0 for separations below
    # ~1e-161: it must work in logs (a division by that 0 raised ZeroDivisionError).  Atoms 2.3e-162
    # apart: R = 2.3e-162, so e^lam R^2 <= 1e-20 up to lam = log(1e-20 / R^2) = 698.3.
    m = DiracMixture(np.array([[0.0], [2.3e-162], [4.6e-162]]))
    lam = np.array([-10.0, 0.0, 690.0, 700.0])
    low, high = m._limit_levels(lam)
    assert low.tolist() == [True, True, True, False] and not high.any()
    assert np.array_equal(low, lam <= m._low_snr_level)
    info = m.information(lam)
    assert np.all(np.isfinite(info.mmse.value)) and np.all(np.isfinite(info.conditional_entropy.value))
