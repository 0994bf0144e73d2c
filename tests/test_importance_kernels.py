"""The importance sampler's fast paths (issue 12 item 6) against independent slow routes: the float32-screened
neighbour search equals a brute-force direct-distance search, and the compiled per-level kernel equals numpy."""

from __future__ import annotations

import numpy as np
import pytest

from noisealloc.theory import _importance as imp
from noisealloc.theory.datasets import load_data


def _brute_pairs(mu, nn):
    # All K^2 differences summed directly (no GEMM, no screen), ties broken by the smaller index.
    K = mu.shape[0]
    d = np.array([((mu - row) ** 2).sum(axis=1) for row in mu])
    np.fill_diagonal(d, np.inf)
    order = np.lexsort((np.broadcast_to(np.arange(K), (K, K)), d), axis=1)[:, :nn]
    pairs = np.unique(np.sort(np.stack([np.repeat(np.arange(K), nn), order.ravel()], axis=1), axis=1), axis=0)
    return pairs, d[pairs[:, 0], pairs[:, 1]]


def _near_duplicates():
    # Clusters of near-identical atoms at a large offset: float32 cannot tell their members apart
    # (the screen's error bound exceeds their spread), so the exact check must decide.
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(20, 12)) * 50.0 + 300.0
    return np.repeat(centres, 6, axis=0) + rng.normal(size=(120, 12)) * 1e-4


@pytest.mark.parametrize("kernel", ["numba", "numpy"])
@pytest.mark.parametrize("screen", [16, 4])  # 4 = n_neighbours: no atom's list can prove itself complete
@pytest.mark.parametrize("rank", [128, 6, 1])  # 128 >= D: no projection; 1: bounds too loose for most lists
def test_neighbour_pairs_equal_brute_force(kernel, screen, rank):
    m = load_data("digits")
    for mu in (m.atoms - m.weights @ m.atoms, _near_duplicates()):
        pairs, d2 = imp.neighbour_pairs(mu, 4, screen=screen, rank=rank, kernel=kernel)
        ref_pairs, ref_d2 = _brute_pairs(mu, 4)
        np.testing.assert_array_equal(pairs, ref_pairs)
        np.testing.assert_allclose(d2, ref_d2, rtol=1e-13, atol=0)


@pytest.mark.parametrize("rank", [128, 4])
@pytest.mark.parametrize("scale", [1e-42, 1e30, 1e140])
def test_neighbour_pairs_at_extreme_scales(scale, rank):
    # float32 alone would flush these atoms to 0 or overflow to inf; the screen rescales them exactly.
    mu = _near_duplicates()[:40] * scale
    pairs, d2 = imp.neighbour_pairs(mu, 3, rank=rank, kernel="numpy")
    ref_pairs, ref_d2 = _brute_pairs(mu, 3)
    np.testing.assert_array_equal(pairs, ref_pairs)
    np.testing.assert_allclose(d2, ref_d2, rtol=1e-13, atol=0)


def test_neighbour_pairs_tiny():
    assert imp.neighbour_pairs(np.zeros((1, 3)))[0].shape == (0, 2)
    pairs, d2 = imp.neighbour_pairs(np.array([[0.0], [1.0], [3.0]]), 4)
    np.testing.assert_array_equal(pairs, [[0, 1], [0, 2], [1, 2]])
    np.testing.assert_array_equal(d2, [1.0, 9.0, 4.0])


def test_level_values_compiled_equal_numpy():
    # Distances of a digits-like block at levels from flat (lam = -12) to one-hot (lam = 12) posteriors.
    m = load_data("digits")
    mu = m.atoms - m.weights @ m.atoms
    rng = np.random.default_rng(11)
    k = rng.choice(mu.shape[0], 40)
    eps = rng.standard_normal((40, mu.shape[1]))
    diff = mu[k][:, None, :] - mu[None, :, :]
    A = np.einsum("ikd,ikd->ik", diff, diff)
    B = np.einsum("id,ikd->ik", eps, diff)
    T = A + rng.random(A.shape)  # any weights: the sampler's T differs from A on midpoint draws
    lam = np.linspace(-12.0, 12.0, 25)
    out = {}
    for name, fn in (("numba", imp._level_values_numba), ("numpy", imp._level_values_numpy)):
        h, mm = np.empty((lam.size, 40)), np.empty((lam.size, 40))
        fn(A, B, T, np.log(m.weights), lam, h, mm)
        out[name] = h, mm
    # Entropy: absolute (it tends to 0 at high SNR, where ~1e-16 of log Z is all that is left); mmse relative.
    np.testing.assert_allclose(out["numba"][0], out["numpy"][0], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(out["numba"][1], out["numpy"][1], rtol=1e-12, atol=0)
    assert out["numpy"][0][0].min() > 7.0 and out["numpy"][0][-1].max() < 1e-6  # the range was spanned


def test_importance_samples_kernels_agree_and_seeded():
    m = load_data("digits")
    lam = np.linspace(-6.0, 8.0, 8)
    a = imp.importance_samples(m.atoms, m.weights, lam, n_samples=128, gen=np.random.default_rng(4), kernel="numba")
    b = imp.importance_samples(m.atoms, m.weights, lam, n_samples=128, gen=np.random.default_rng(4), kernel="numpy")
    np.testing.assert_array_equal(a[2], b[2])  # same draws
    np.testing.assert_array_equal(a[3], b[3])
    for x, y in zip(a[:2], b[:2]):
        np.testing.assert_allclose(x, y, rtol=1e-11, atol=1e-13 * np.abs(y).max())


def test_constant_coordinates_keep_the_sampler_unbiased():
    # The sampler skips coordinates where all atoms agree; with two such coordinates added to the issue's
    # 3-D mixture the estimates still match the independent reference (which uses every coordinate).
    from test_importance import _three_d_mixture, reference

    from noisealloc.theory.dirac import DiracMixture

    mu, w = _three_d_mixture()
    mu = np.hstack([mu[:, :1], np.full((5, 1), 2.5), mu[:, 1:], np.full((5, 1), -1.0)])
    lam = np.array([0.0, 3.5])
    ref = reference(mu, w, lam, 40000, seed=98)
    est = DiracMixture(mu, w).information(lam, method="monte-carlo", n_samples=2048, rng=1)
    for q, e in enumerate((est.mmse, est.conditional_entropy)):
        z = (e.value - ref[:, q, 0]) / np.hypot(e.stderr, ref[:, q, 1])
        assert np.all(np.abs(z) <= 4.0), z
