"""Tests of regime (ii), independent learners per λ-cell (verify/experiments/learners.py; issue 14 item 3 (ii)).

Finite-N correction: the simulated factor is compared with the *exact* finite-N expected ratio of
ordinary least squares, sum_u a_u / (n_u - q - 1) (Gaussian design, docs/THEORY.md §4 (b) random-matrix
form); the asymptotic Theorem 2 factor is checked to be its N -> infinity limit.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers.strategies import examples

from noisealloc.theory.models.dirac import DiracMixture
from noisealloc.theory.schedules.entropic import independent_learner_factor
from noisealloc.theory.models.gaussian import GaussianManifold
from noisealloc.theory.schedules.builtin import cosine, edm_lognormal, uniform_lambda
from noisealloc.theory.tolerances import MC_NSIGMA
from noisealloc.verify.experiments.learners import cell_counts, cell_loss_factor, independent_learners

LAM = (-5.0, 5.0)


@pytest.fixture(scope="module")
def gauss():
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((3, 2)))
    return GaussianManifold(np.full(3, 0.2), q, [1.0, 0.2])


@pytest.mark.parametrize("make", [lambda: uniform_lambda(lam_min=LAM[0], lam_max=LAM[1]),
                                  lambda: cosine(lam_min=LAM[0], lam_max=LAM[1])])
def test_simulated_factor_matches_prediction_within_its_standard_error(gauss, make):
    r = independent_learners(gauss, make(), N=4000, lam_min=LAM[0], lam_max=LAM[1], cells=12, seeds=100, rng=1)
    assert r.simulated_se > 0
    assert abs(r.simulated_factor - r.exact_factor) <= MC_NSIGMA * r.simulated_se, r.to_dict()
    # The square-root law wins, by more than the simulation's uncertainty.
    assert r.simulated_factor > 1.0 + MC_NSIGMA * r.simulated_se
    assert r.counts.sum() == r.counts_ref.sum() == 4000


def test_finite_n_prediction_tends_to_theorem_2(gauss):
    sched = edm_lognormal(lam_min=LAM[0], lam_max=LAM[1])
    gaps = []
    for N in (5_000, 500_000):
        r = independent_learners(gauss, sched, N=N, lam_min=LAM[0], lam_max=LAM[1], cells=12, seeds=2, rng=0)
        gaps.append(abs(r.exact_factor - r.predicted_factor))
    # The correction is O(q / n_u): 100x the samples shrinks it by far more than 10x.
    assert gaps[1] < gaps[0] / 10, gaps


def test_cell_factor_is_the_continuous_factor_on_fine_cells(gauss):
    sched = cosine(lam_min=LAM[0], lam_max=LAM[1])
    edges = np.linspace(*LAM, 1001)
    lam = 0.5 * (edges[1:] + edges[:-1])
    grid = np.linspace(*LAM, 10001)
    # Midpoint sums over 1000 cells against the trapezoid integrals of entropic.independent_learner_factor
    # on a 10x finer grid: both are O(step^2) from the integral, ~1e-6 relative here.
    cells = cell_loss_factor(gauss.entropy_rate(lam).value * (edges[1] - edges[0]), sched.pdf(lam))
    np.testing.assert_allclose(cells, independent_learner_factor(grid, gauss.entropy_rate(grid).value, sched.pdf(grid)),
                               rtol=1e-4)


@settings(max_examples=examples(40), deadline=None)
@given(a=st.lists(st.floats(1e-6, 1e3), min_size=2, max_size=20), seed=st.integers(0, 2**31 - 1))
def test_factor_is_at_least_one_and_one_at_the_square_root_law(a, seed):
    a = np.asarray(a)
    np.testing.assert_allclose(cell_loss_factor(a, np.sqrt(a)), 1.0, rtol=1e-12)
    other = np.random.default_rng(seed).uniform(0.01, 1.0, a.size)
    assert cell_loss_factor(a, other) >= 1.0 - 1e-12
    np.testing.assert_allclose(cell_loss_factor(a, other), cell_loss_factor(a, 7.0 * other), rtol=1e-12)


@settings(max_examples=examples(40), deadline=None)
@given(mass=st.lists(st.floats(0.0, 10.0), min_size=0, max_size=30), N=st.integers(1, 10**6))
def test_cell_counts_sum_to_n_and_round_nearest(mass, N):
    m = np.asarray(mass + [1.0])  # zeros allowed, not all zero
    n = cell_counts(m, N)
    assert n.sum() == N and np.all(n >= 0)
    assert np.all(np.abs(n - N * m / m.sum()) < 1.0 + 1e-9)


def test_same_seed_same_result(gauss):
    sched = uniform_lambda(lam_min=LAM[0], lam_max=LAM[1])
    a = independent_learners(gauss, sched, N=3000, lam_min=LAM[0], lam_max=LAM[1], cells=8, seeds=5, rng=3)
    b = independent_learners(gauss, sched, N=3000, lam_min=LAM[0], lam_max=LAM[1], cells=8, seeds=5, rng=3)
    np.testing.assert_array_equal(a.loss, b.loss)
    np.testing.assert_array_equal(a.loss_ref, b.loss_ref)


@pytest.mark.parametrize("call, needle", [
    (lambda g: independent_learners(g, uniform_lambda(lam_min=-5.0, lam_max=5.0), N=40, lam_min=-5.0, lam_max=5.0,
                                    cells=12), "OLS with q = 3"),
    (lambda g: independent_learners(DiracMixture([[0.0], [1.0]]), uniform_lambda(), N=4000), "Gaussian manifold"),
    (lambda g: independent_learners(g, uniform_lambda(lam_min=-2.0, lam_max=2.0), N=4000), "puts no mass"),
    (lambda g: independent_learners(g, uniform_lambda(), N=4000, cells=1), "cells and seeds must be >= 2"),
    (lambda g: cell_loss_factor([1.0, 1.0], [1.0, 0.0]), "mass must be > 0"),
    (lambda g: cell_loss_factor([-1.0, 1.0], [1.0, 1.0]), "omega_c must be >= 0"),
    (lambda g: cell_counts([0.0, 0.0], 3), "not all zero"),
])
def test_bad_input_raises_value_error(gauss, call, needle):
    with pytest.raises(ValueError, match=needle):
        call(gauss)
