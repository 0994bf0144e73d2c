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
@pytest.mark.parametrize("screen", [16, 4])  # 4 = n_neighbours: every atom takes the exhaustive fallback
def test_neighbour_pairs_equal_brute_force(kernel, screen):
    m = load_data("digits")
    for mu in (m.atoms - m.weights @ m.atoms, _near_duplicates()):
        pairs, d2 = imp.neighbour_pairs(mu, 4, screen=screen, kernel=kernel)
        ref_pairs, ref_d2 = _brute_pairs(mu, 4)
        np.testing.assert_array_equal(pairs, ref_pairs)
        np.testing.assert_allclose(d2, ref_d2, rtol=1e-13, atol=0)


def test_neighbour_pairs_tiny():
    assert imp.neighbour_pairs(np.zeros((1, 3)))[0].shape == (0, 2)
    pairs, d2 = imp.neighbour_pairs(np.array([[0.0], [1.0], [3.0]]), 4)
    np.testing.assert_array_equal(pairs, [[0, 1], [0, 2], [1, 2]])
    np.testing.assert_array_equal(d2, [1.0, 9.0, 4.0])
