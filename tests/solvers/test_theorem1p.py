"""Theorem 1' (docs/THEORY.md §4 (a)): at most m + 1 atoms keep the population optimum theta*(p)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given

from noisealloc.solvers.theorem1p import reduce_population
from noisealloc.theory.tolerances import THETA_STAR_ATOL

sys.path.insert(0, str(Path(__file__).parent))
from helpers.solver_strategies import pl_problems, quadratic_problems  # noqa: E402


def _newton_quadratic(H, b, w, theta0):
    """theta* of sum_i w_i 1/2 (theta - b_i)^T H_i (theta - b_i) by Newton from theta0."""
    theta = theta0.copy()
    for _ in range(5):
        grad = np.einsum("i,iab,ib->a", w, H, theta[None, :] - b)
        hess = np.einsum("i,iab->ab", w, H)
        theta = theta - np.linalg.solve(hess, grad)
    return theta


def _f1(x):
    return 2 * x + 3 * np.sin(2 * x)  # d/dx (x^2 + 3 sin^2 x)


def _f2(x):
    return 2 + 6 * np.cos(2 * x)


def _newton_pl(s, w, iters=60):
    """Per-coordinate theta* of sum_i w_i f(theta - s_i), f = x^2 + 3 sin^2 x, by Newton from 0."""
    theta = np.zeros(s.shape[1])
    for _ in range(iters):
        g = np.einsum("i,id->d", w, _f1(theta[None, :] - s))
        h = np.einsum("i,id->d", w, _f2(theta[None, :] - s))
        theta = theta - g / h
    return theta


def _global_pl(s, w):
    """Dense grid search on [-3, 3] per coordinate (the losses grow like x^2 beyond)."""
    x = np.linspace(-3, 3, 60001)
    out = []
    for d in range(s.shape[1]):
        loss = (w[:, None] * ((x[None, :] - s[:, d : d + 1]) ** 2 + 3 * np.sin(x[None, :] - s[:, d : d + 1]) ** 2)).sum(0)
        out.append(x[np.argmin(loss)])
    return np.array(out)


@given(problem=quadratic_problems())
def test_quadratic_theta_star_preserved(problem):
    H, b, p = problem
    n, m = b.shape
    theta_p = _newton_quadratic(H, b, p, np.zeros(m))
    grads = np.einsum("iab,ib->ia", H, theta_p[None, :] - b)
    res = reduce_population(grads, p)
    assert res.n_atoms <= m + 1 == res.atom_bound
    assert np.all(res.weights >= 0) and abs(res.weights.sum() - 1) < 1e-12
    assert set(res.support) <= set(np.flatnonzero(p > 0))
    theta_q = _newton_quadratic(H, b, res.weights, np.zeros(m))
    np.testing.assert_allclose(theta_q, theta_p, rtol=0, atol=THETA_STAR_ATOL)


@given(problem=pl_problems())
def test_pl_theta_star_preserved(problem):
    s, p = problem
    n, m = s.shape
    theta_p = _newton_pl(s, p)
    # Newton found the global minimiser (grid search to its spacing 1e-4)
    np.testing.assert_allclose(theta_p, _global_pl(s, p), atol=2e-4)
    grads = _f1(theta_p[None, :] - s)
    res = reduce_population(grads, p)
    assert res.n_atoms <= m + 1
    theta_q = _newton_pl(s, res.weights)
    np.testing.assert_allclose(_global_pl(s, res.weights), theta_q, atol=2e-4)
    np.testing.assert_allclose(theta_q, theta_p, rtol=0, atol=THETA_STAR_ATOL)


def test_reduction_actually_reduces():
    rng = np.random.default_rng(2)
    n, m = 50, 3
    s = rng.uniform(-0.4, 0.4, size=(n, m))
    p = np.full(n, 1.0 / n)
    theta = _newton_pl(s, p)
    res = reduce_population(_f1(theta[None, :] - s), p)
    assert res.n_atoms <= m + 1 < n
    assert res.residual < 1e-14


def test_bad_input():
    with pytest.raises(ValueError, match="grads"):
        reduce_population(np.zeros((0, 2)), np.zeros(0))
    with pytest.raises(ValueError, match="p must have shape"):
        reduce_population(np.ones((3, 2)), np.ones(2) / 2)
    with pytest.raises(ValueError, match="probability"):
        reduce_population(np.ones((3, 2)), np.array([0.5, 0.5, 0.5]))
    with pytest.raises(ValueError, match="finite"):
        reduce_population(np.array([[np.nan], [1.0]]), np.array([0.5, 0.5]))
