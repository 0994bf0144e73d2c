"""c-optimal allocations from Elfving's dual barrier (solvers.algorithms.elfving) and the start it gives the polish.

Independent references: Hoel and Levine's closed form for polynomial extrapolation (the c-optimal design for
predicting a degree-d polynomial at x0 outside [-1, 1] sits on the Chebyshev extrema with weights proportional
to |L_j(x0)|, and its value is T_d(x0)^2; numpy's Chebyshev evaluation, not the solver's code), and weak
duality written out from Cauchy-Schwarz.
"""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from noisealloc.solvers import solve
from noisealloc.solvers.algorithms import elfving
from noisealloc.solvers.problem import as_problem
from noisealloc.theory.tolerances import ELFVING_RTOL, FW_GAP_RTOL


def _solve(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return solve(*args, **kw)


def _extrapolation_problem(d, x0, extra, basis):
    """Degree-``d`` regression on the Chebyshev extrema of degree ``d`` plus ``extra`` points of [-1, 1]."""
    nodes = np.cos(np.pi * np.arange(d + 1) / d)
    x = np.unique(np.concatenate([nodes, extra]))
    if basis == "monomial":
        F, c = np.vander(x, d + 1, increasing=True), x0 ** np.arange(d + 1)
    else:
        F = np.polynomial.chebyshev.chebvander(x, d)
        c = np.polynomial.chebyshev.chebvander(np.array([x0]), d)[0]
    return x, nodes, F[:, :, None] * F[:, None, :], c


@settings(max_examples=25, deadline=None)
@given(d=st.integers(1, 6), x0=st.floats(1.05, 4.0), sign=st.sampled_from([-1.0, 1.0]),
       basis=st.sampled_from(["monomial", "chebyshev"]), seed=st.integers(0, 2**31 - 1), k=st.integers(0, 60))
def test_hoel_levine_extrapolation(d, x0, sign, basis, seed, k):
    """c = f(x0), |x0| > 1: the optimum is T_d(x0)^2 on the Chebyshev extrema, weights |L_j(x0)| / sum."""
    x0 = sign * x0
    extra = np.random.default_rng(seed).uniform(-1.0, 1.0, k)
    x, nodes, A, c = _extrapolation_problem(d, x0, extra, basis)
    phi_star = float(np.polynomial.chebyshev.chebval(x0, [0.0] * d + [1.0])) ** 2
    res = _solve(A, "c", c=c, grid=x)
    assert res.success, res.message
    assert res.method == "elfving+polish"
    assert abs(res.value - phi_star) <= 2 * FW_GAP_RTOL * phi_star, (res.value, phi_star)
    # Lagrange weights on the extrema
    L = np.array([np.prod([(x0 - nodes[i]) / (nodes[j] - nodes[i]) for i in range(d + 1) if i != j])
                  for j in range(d + 1)])
    w_ref = np.abs(L) / np.abs(L).sum()
    w = np.array([res.weights[np.argmin(np.abs(x - t))] for t in nodes])
    assert np.max(np.abs(w - w_ref)) <= 1e-4, (w, w_ref)
    # the dual point alone: feasible, below the optimum (weak duality), and within its claimed gap of it
    prob = as_problem(A, "c", c=c)
    y, _mu, gap, ok = elfving.dual_barrier(prob)
    assert ok and gap <= ELFVING_RTOL
    assert float(np.max(np.einsum("j,ijk,k->i", y, prob.A, y))) < 1.0
    # (c^T y)^2 is basis-invariant (y moves contragrediently), so it compares with T_d(x0)^2 directly
    cy2 = float(prob.c @ y) ** 2
    assert cy2 <= phi_star * (1 + 1e-12)
    assert cy2 >= phi_star * (1 - 2 * ELFVING_RTOL)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(3, 40), m=st.integers(1, 5), r=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_dual_point_bounds_every_allocation(n, m, r, seed):
    """Weak duality from Cauchy-Schwarz: (c^T y)^2 <= c^T M(p)^-1 c for the dual point and any allocation."""
    assume(n * min(r, m) >= m)  # else M(p) is singular for every p (the problem is refused)
    rng = np.random.default_rng(seed)
    G = rng.standard_normal((n, m, min(r, m)))
    A = G @ np.swapaxes(G, 1, 2)
    c = rng.standard_normal(m)
    prob = as_problem(A, "c", c=c)
    y, _mu, _gap, _ok = elfving.dual_barrier(prob)
    assert np.all(np.isfinite(y))
    assert float(np.max(np.einsum("j,ijk,k->i", y, prob.A, y))) <= 1.0
    cy2 = float(prob.c @ y) ** 2
    for p in rng.dirichlet(np.full(n, 0.5), size=5):
        M = np.einsum("i,ijk->jk", p, A)
        if np.linalg.cond(M) > 1e10:
            continue
        assert cy2 <= float(c @ np.linalg.solve(M, c)) * (1 + 1e-9)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(8, 60), m=st.integers(2, 6), seed=st.integers(0, 2**31 - 1))
def test_auto_start_never_loses_to_the_multiplicative_one(n, m, seed):
    """'auto' tries the multiplicative start when the dual's is not certified: it is never worse."""
    rng = np.random.default_rng(seed)
    G = rng.standard_normal((n, m, int(rng.integers(1, m + 1))))
    A = G @ np.swapaxes(G, 1, 2)
    c = rng.standard_normal(m)
    auto = _solve(A, "c", c=c)
    mult = _solve(A, "c", c=c, method="multiplicative")
    assert auto.success or not mult.success, (auto.message, mult.message)
    if auto.success and mult.success:
        assert auto.value <= mult.value * (1 + 2 * FW_GAP_RTOL)


def test_singular_optimum_falls_back_to_the_multiplicative_start():
    """Dropped assumption: prediction at an interior point, c = f(0) for a quadratic, has the one-point
    optimum (all weight at 0, M singular).  The dual's support then leaves M(p) singular: no start from it."""
    x = np.linspace(-1.0, 1.0, 41)
    F = np.vander(x, 3, increasing=True)
    A = F[:, :, None] * F[:, None, :]
    c = np.array([1.0, 0.0, 0.0])
    prob = as_problem(A, "c", c=c)
    assert elfving.run(prob) is None
    res = _solve(A, "c", c=c)
    assert res.method == "multiplicative+polish"
