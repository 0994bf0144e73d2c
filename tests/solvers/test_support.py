"""Caratheodory support reduction and merging of adjacent grid atoms."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from noisealloc.solvers import solve
from noisealloc.solvers.algorithms.support import (
    CARATHEODORY_RCOND,
    REDUCTION_RTOL,
    caratheodory,
    merge_atoms,
    moment_vectors,
    reduce_support,
)
from noisealloc.theory.tolerances import EPS

sys.path.insert(0, str(Path(__file__).parent))
from helpers.solver_strategies import psd_curves, simplex_weights  # noqa: E402
from helpers.strategies import examples  # noqa: E402


@given(data=st.data())
def test_caratheodory_keeps_moments_and_value(data):
    lam, A = data.draw(psd_curves())
    n, m = A.shape[0], A.shape[1]
    p = data.draw(simplex_weights(n, min_atoms=n // 2 + 1))
    red = reduce_support(A, p, "A")
    V = moment_vectors(A)
    assert np.max(np.abs(red.weights @ V - p @ V)) <= 1e-12 * np.abs(V).max()
    assert red.n_atoms_after <= m * (m + 1) // 2 + 1
    # moments are unchanged, so the value moves by rounding only (REDUCTION_RTOL)
    assert red.value_after <= red.value_before + REDUCTION_RTOL * abs(red.value_before)
    assert np.all(red.weights >= 0) and abs(red.weights.sum() - 1) < 1e-12


@settings(max_examples=examples(15))
@given(data=st.data())
def test_caratheodory_sandwich_bound(data):
    lam, A = data.draw(psd_curves(m_max=2, n_max=20))
    n, m = A.shape[0], A.shape[1]
    G = (1.0 + lam**2)[:, None, None] * A
    p = data.draw(simplex_weights(n, min_atoms=n))
    red = reduce_support(A, p, "sandwich", G=G, A_eval=np.eye(m))
    assert red.n_atoms_after <= m * (m + 1) + 1
    assert abs(red.value_after - red.value_before) <= 1e-10 * abs(red.value_before)


def test_merge_adjacent_grid_atoms_chebyshev():
    """A fine grid splits each of the m continuous atoms into neighbours; merging recovers m atoms.

    A-optimal designs for degree-d polynomial regression on [-1, 1] have d + 1 support
    points (de la Garza 1954; Pukelsheim 2006, sec. 9.5 and 9.11).
    """
    x = np.linspace(-1, 1, 4001)
    F = np.polynomial.chebyshev.chebvander(x, 5)
    A = F[:, :, None] * F[:, None, :]
    res = solve(A, "A", grid=x)
    # Collapsing a split atom onto one grid point costs O(h^2) (h = 5e-4 here, ~1e-7
    # relative per atom): the budget of the merge is stated and checked.
    mer = merge_atoms(A, res.weights, "A", rtol=1e-5)
    assert res.certificate.n_atoms > 6
    assert mer.n_atoms_after == 6
    assert 0 <= mer.value_after - mer.value_before <= 1e-5 * abs(mer.value_before)


def test_bad_input():
    x = np.linspace(-1, 1, 5)
    F = np.stack([np.ones(5), x], 1)
    A = F[:, :, None] * F[:, None, :]
    with pytest.raises(ValueError, match="weights must have shape"):
        reduce_support(A, np.ones(4) / 4, "A")
    with pytest.raises(ValueError, match="non-negative"):
        reduce_support(A, np.array([1, -1, 1, 0, 0.0]), "A")
    with pytest.raises(ValueError, match="max_gap"):
        merge_atoms(A, np.ones(5) / 5, "A", max_gap=0)


def test_refine_recovers_d_optimal_cubic_off_grid():
    """Refinement from a coarse grid moves the atoms to the roots of (1 - x^2) P_3'(x) = ±1, ±1/sqrt(5).

    (Guest 1958; Pukelsheim 2006 sec. 9.5; the roots are computed with sympy here.)
    """
    import sympy as sp

    from noisealloc.solvers.refine import refine

    xs = sp.symbols("x")
    roots = np.array(sorted(float(r) for r in sp.Poly((1 - xs**2) * sp.diff(sp.legendre(3, xs), xs), xs).all_roots()))
    x = np.linspace(-1, 1, 13)  # +-1/sqrt(5) are not grid points
    F = np.vander(x, 4, increasing=True)
    res = solve(F[:, :, None] * F[:, None, :], "D", grid=x)

    def A_fn(t):
        f = np.vander(np.array([t]), 4, increasing=True)[0]
        return np.outer(f, f)

    rr = refine(A_fn, res.lam, res.weights[res.support], "D", interval=(-1, 1))
    assert rr.success and rr.status == 0 and rr.value < rr.value_grid
    np.testing.assert_allclose(rr.lam, roots, atol=1e-6)
    np.testing.assert_allclose(rr.weights, 0.25, atol=1e-9)
    Fp = np.vander(roots, 4, increasing=True)
    np.testing.assert_allclose(rr.value, -np.linalg.slogdet(Fp.T @ Fp / 4)[1], rtol=1e-12)


# ------------------------------------------------------------------ Caratheodory against a brute-force reference


def _svd_elimination(V, p):
    """Brute-force reference: repeatedly remove a null vector of the support's rows (numpy SVD), O(n^4)."""
    Vs = V / np.maximum(np.abs(V).max(axis=0), np.finfo(float).tiny)
    p = p.copy()
    while True:
        S = np.flatnonzero(p > 0)
        _, sv, vt = np.linalg.svd(Vs[S].T, full_matrices=True)
        if S.size <= 1 or int(np.sum(sv > 1e-12 * sv[0])) >= S.size:
            return p
        z = vt[-1] if np.any(vt[-1] > 0) else -vt[-1]
        ratio = np.where(z > 0, p[S] / np.where(z > 0, z, 1.0), np.inf)
        k = int(np.argmin(ratio))
        p[S] = np.maximum(p[S] - ratio[k] * z, 0.0)
        p[S[k]] = 0.0


@st.composite
def moment_rows(draw):
    """Moment vectors of ``n`` in [2, 60] PSD matrices of size ``m`` in [1, 4] (optionally with ``G``).

    ``kind``: 'poly' (rank-one ``f f^T`` with ``f`` a quadratic curve on [-1, 1]: only 5 independent
    rows whatever ``n``), 'random' (``f`` standard normal: rank ``min(n, d)``) or 'repeat' (rows of a
    random design repeated: exact dependencies).  Weights: Dirichlet with about a quarter of them 0.
    """
    m = draw(st.integers(1, 4))
    n = draw(st.integers(2, 60))
    kind = draw(st.sampled_from(["poly", "random", "repeat"]))
    with_g = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    if kind == "poly":
        x = np.linspace(-1.0, 1.0, n)
        B = rng.uniform(-1, 1, size=(3, m))
        f = B[0] + x[:, None] * B[1] + x[:, None] ** 2 * B[2]
    elif kind == "random":
        f = rng.standard_normal((n, m))
    else:
        f = rng.standard_normal((max(1, n // 3), m))[rng.integers(0, max(1, n // 3), n)]
    A = f[:, :, None] * f[:, None, :]
    G = None
    if with_g:
        h = rng.standard_normal((n, m))
        G = A + h[:, :, None] * h[:, None, :]
    p = rng.dirichlet(np.ones(n)) * (rng.uniform(size=n) > 0.25)
    if not p.any():
        p[0] = 1.0
    return moment_vectors(A, G), p / p.sum()


@settings(max_examples=examples(60))
@given(case=moment_rows())
def test_caratheodory_against_svd_elimination(case):
    """Moments kept to ~10 eps per column, p >= 0, independent rows, as many atoms as the SVD reference."""
    V, p = case
    q = caratheodory(V, p)
    ref = _svd_elimination(V, p)
    colmax = np.abs(V).max(axis=0)
    assert np.all(q >= 0) and set(np.flatnonzero(q)) <= set(np.flatnonzero(p))
    # sum_i p_i V_i is a sum of <= 60 terms of size <= colmax: its rounding is ~eps * colmax per step
    np.testing.assert_allclose(q @ V, p @ V, rtol=0, atol=64 * EPS * colmax.max(), err_msg="moments moved")
    S = np.flatnonzero(q > 0)
    assert S.size <= V.shape[1]
    Vs = V[S] / np.maximum(colmax, np.finfo(float).tiny)
    assert np.linalg.cond(Vs) < 1.0 / CARATHEODORY_RCOND, "rows on the reduced support are dependent"
    # generic weights: both reductions end with rank(V_S) atoms (a point of a rank-r cone in general
    # position needs r generators)
    assert S.size == np.count_nonzero(ref) == np.linalg.matrix_rank(V[p > 0] / np.maximum(colmax, 1e-300))


def test_caratheodory_chebyshev_n1000_m10():
    """Products T_j T_k (j, k < 10) span T_0..T_18: 19 atoms remain out of 1000, moments kept to ~eps."""
    x = np.linspace(-1.0, 1.0, 1000)
    F = np.polynomial.chebyshev.chebvander(x, 9)
    V = moment_vectors(F[:, :, None] * F[:, None, :])
    p = np.random.default_rng(3).dirichlet(np.ones(1000))
    q = caratheodory(V, p)
    assert np.count_nonzero(q) == 19
    np.testing.assert_allclose(q @ V, p @ V, rtol=0, atol=16 * EPS)


def test_caratheodory_bad_input():
    V = np.ones((3, 2))
    with pytest.raises(ValueError, match=r"p must have shape \(3,\)"):
        caratheodory(V, np.ones(4))
    with pytest.raises(ValueError, match="V must be a 2-D array"):
        caratheodory(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match=r"rcond must be a float in \(0, 1\); got 0.0"):
        caratheodory(V, np.ones(3), rcond=0.0)
    with pytest.raises(ValueError, match=r"p must be finite and non-negative; got an entry -0.5"):
        caratheodory(V, np.array([1.0, -0.5, 1.0]))
    with pytest.raises(ValueError, match=r"p must be finite and non-negative; got an entry nan"):
        caratheodory(V, np.array([1.0, np.nan, 1.0]))
    with pytest.raises(ValueError, match="V must be finite"):
        caratheodory(np.array([[1.0, np.inf], [1.0, 1.0], [0.0, 1.0]]), np.ones(3))


def test_caratheodory_final_check_removes_a_dependency_the_sweep_let_through():
    """The sweep judges residuals against the largest row norm, the final check singular values against
    the largest: a third row 2e-3 off the span of the other two passes the first (rcond = 1e-3) and
    fails the second (sigma_min / sigma_max = 4.4e-4), so the SVD elimination must leave 2 atoms."""
    V = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [0.5, 0.502, 1.0]])
    q = caratheodory(V, np.array([0.2, 0.2, 0.6]), rcond=1e-3)
    S = np.flatnonzero(q > 0)
    assert S.size == 2 and np.all(q >= 0)
    assert np.linalg.cond(V[S] / np.abs(V).max(axis=0)) < 1e3
