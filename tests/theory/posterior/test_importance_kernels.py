"""The importance sampler's fast paths (issue 12 item 6) against independent slow routes: the float32-screened
neighbour search equals a brute-force direct-distance search, and the compiled per-level kernel equals numpy."""

from __future__ import annotations

import numpy as np
import pytest

from noisealloc.theory.posterior import _engine_kernels as kern, importance as imp
from noisealloc.theory.models.datasets import load_data


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
@pytest.mark.parametrize("screen", [16, pytest.param(4, marks=pytest.mark.slow)])  # 4 = n_neighbours: no atom's list can prove itself complete
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


@pytest.mark.parametrize("case", ["digits", "near-duplicates", "far-offset"])
def test_compiled_rows_equal_numpy_over_the_level_range(case):
    # The fused engine (distances assembled per row from the GEMMs, the plain engine's level loop with its
    # shift bounds and pruning, midpoint rows shifted by their sampled atom's distances) against the numpy
    # reference (distance matrices, a max-shifted log-sum-exp per level), on plain and midpoint draws, from
    # flat (lam = -12) to one-hot (lam = 14) posteriors.
    if case == "digits":
        m = load_data("digits")
        mu, w = m.atoms, m.weights
    else:
        mu = _near_duplicates()
        if case == "far-offset":  # the GEMM form loses the small distances: the refinement must restore them
            mu = mu + 1e4
        w = np.random.default_rng(2).dirichlet(np.ones(mu.shape[0]))
    lam = np.linspace(-12.0, 14.0, 27)
    out = {}
    for kernel in ("numba", "numpy"):
        out[kernel] = imp.importance_samples(mu, w, lam, n_samples=96, gen=np.random.default_rng(8), kernel=kernel)
    assert 0 < out["numpy"][4]["pair_draws"] < 96  # both kinds of rows
    for x, y in zip(out["numba"][:2], out["numpy"][:2]):
        np.testing.assert_allclose(x, y, rtol=1e-11, atol=1e-13 * np.abs(y).max())
    ent = out["numpy"][0]
    assert ent[0].mean() > 0.5 * np.log(mu.shape[0])  # flat at the bottom
    # one-hot at the top (digits), or spread over the near-identical members of one cluster only
    assert ent[-1].max() < (1e-3 if case == "digits" else np.log(6.0) + 1e-6)


def _mp_row(c, eps, mu, log_w, k, lam):
    # Posterior entropy and half the trace-identity sum at x = c + sigma eps, from the definitions at 40 digits.
    import mpmath as mp

    with mp.workdps(40):
        s2 = mp.e ** (-mp.mpf(float(lam)))
        x = [mp.mpf(float(c[d])) + mp.sqrt(s2) * mp.mpf(float(eps[d])) for d in range(mu.shape[1])]
        logits = [mp.mpf(float(log_w[j])) - sum((x[d] - mp.mpf(float(mu[j, d]))) ** 2
                                                for d in range(mu.shape[1])) / (2 * s2) for j in range(mu.shape[0])]
        top = max(logits)
        ex = [mp.e ** (v - top) for v in logits]
        z = mp.fsum(ex)
        p = [v / z for v in ex]
        h = -mp.fsum(q * mp.log(q) for q in p if q > 0)
        t = mp.fsum(p[j] * mp.fsum((mp.mpf(float(mu[k, d])) - mp.mpf(float(mu[j, d]))) ** 2 for d in range(mu.shape[1]))
                    for j in range(mu.shape[0])) / 2
        return float(h), float(t)


@pytest.mark.parametrize("kernel", ["numba", "numpy"])
def test_per_sample_values_match_a_high_precision_reference(kernel):
    # Clusters of near-identical atoms far from the origin at high SNR: the members' weights hang on
    # distances ~1e-8 next to squared norms ~1e5, which the GEMM form gets wrong by ~1e-10 and the level
    # multiplies by e^lam / 2 ~ 6e5 (the per-sample values were off by up to 3e-5 relative before the
    # near-atom direct sums).  Plain and midpoint draws, each against mpmath at 40 digits.
    mu = _near_duplicates()[:36]
    w = np.random.default_rng(4).dirichlet(np.ones(36))
    mu_c = mu - w @ mu
    rng = np.random.default_rng(9)
    kk = np.array([0, 7, 13, 20, 27, 33])
    mid = np.array([1, 3, 5])  # rows drawn at the midpoint of kk[i] and its cluster neighbour
    other = kk + np.where(kk % 6 == 5, -1, 1)
    cen = mu_c[kk].copy()
    cen[mid] = 0.5 * (mu_c[kk[mid]] + mu_c[other[mid]])
    eps = rng.standard_normal(cen.shape)
    lam = np.array([-4.0, 6.0, 11.0, 14.0])
    mu_sq = np.einsum("kd,kd->k", mu_c, mu_c)
    ck = cen - mu_c[kk]
    near = kern.near_thresholds(np.einsum("id,id->i", eps, eps), np.einsum("id,id->i", cen, cen),
                               np.einsum("id,id->i", ck, ck), np.exp(lam.max()) / 2, 12,
                               float(np.log(w.max() / w.min())))
    clock = {"gemm": [0.0, 0.0], "levels": [0.0, 0.0]}
    values = imp._values_numba if kernel == "numba" else imp._values_numpy
    h, m = values(cen, eps, kk, mid, mu_c, mu_sq, np.log(w), lam, imp._REFINE * 14, near, 4, clock)
    for t, lv in enumerate(lam):
        for i in range(kk.size):
            ref_h, ref_m = _mp_row(cen[i], eps[i], mu_c, np.log(w), kk[i], lv)
            assert h[t, i] == pytest.approx(ref_h, rel=1e-12, abs=1e-15), (lv, i)
            assert m[t, i] == pytest.approx(ref_m, rel=1e-11, abs=0), (lv, i)


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
    from helpers.importance_refs import _three_d_mixture, reference

    from noisealloc.theory.models.dirac import DiracMixture

    mu, w = _three_d_mixture()
    mu = np.hstack([mu[:, :1], np.full((5, 1), 2.5), mu[:, 1:], np.full((5, 1), -1.0)])
    lam = np.array([0.0, 3.5])
    ref = reference(mu, w, lam, 40000, seed=98)
    est = DiracMixture(mu, w).information(lam, method="monte-carlo", n_samples=2048, rng=1)
    for q, e in enumerate((est.mmse, est.conditional_entropy)):
        z = (e.value - ref[:, q, 0]) / np.hypot(e.stderr, ref[:, q, 1])
        assert np.all(np.abs(z) <= 4.0), z


def test_proposal_terms_compiled_equal_numpy(monkeypatch):
    # The compiled direct sums against the gathered numpy form, on digits' pairs; e1 is a difference of
    # two squared distances, so the tolerance is absolute, in units of their size.
    m = load_data("digits")
    mu = m.atoms - m.weights @ m.atoms
    pairs, _ = imp.neighbour_pairs(mu, 4)
    rng = np.random.default_rng(6)
    kk = rng.integers(0, mu.shape[0], 200)
    other = rng.integers(0, mu.shape[0], 200)
    cen = mu[kk].copy()
    cen[::3] = 0.5 * (mu[kk[::3]] + mu[other[::3]])
    eps = rng.standard_normal(cen.shape)
    slots = rng.integers(-1, pairs.shape[0], (200, 7))
    ck2 = np.einsum("id,id->i", cen - mu[kk], cen - mu[kk])
    got = imp.proposal_terms(cen, eps, mu, kk, slots, pairs, ck2)
    monkeypatch.setattr("noisealloc.theory._numba.HAVE_NUMBA", False)
    ref = imp.proposal_terms(cen, eps, mu, kk, slots, pairs, ck2)
    scale = 64 * np.finfo(float).eps * (np.abs(mu).max() ** 2 * mu.shape[1])
    np.testing.assert_allclose(got[0], ref[0], rtol=0, atol=scale)
    np.testing.assert_allclose(got[1], ref[1], rtol=0, atol=scale)
    assert np.all(got[0][slots < 0] == 0) and np.all(got[1][slots < 0] == 0)
