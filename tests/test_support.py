"""Caratheodory support reduction and merging of adjacent grid atoms."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from noisealloc.solvers import solve
from noisealloc.solvers.support import REDUCTION_RTOL, merge_atoms, moment_vectors, reduce_support

sys.path.insert(0, str(Path(__file__).parent))
from solver_strategies import psd_curves, simplex_weights  # noqa: E402
from strategies import examples  # noqa: E402


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
