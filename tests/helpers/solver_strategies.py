"""Hypothesis strategies for allocation problems (documented, bounded ranges).

* :func:`psd_curves`: smooth PSD matrix curves ``A(lam_i) = F(lam_i) F(lam_i)^T`` on a grid,
  ``F(lam) = B0 + lam B1 + lam^2 B2`` with ``m`` in [2, 4], rank ``r`` in [1, m], ``n`` in
  [m(m+1)/2 + 2, 40] grid points on [-1, 1], entries of ``B_k`` in [-1, 1]; problems whose
  uniform information matrix has reciprocal condition below 1e-6 are rejected (kept regular).
* :func:`quadratic_problems`: ``l_i(theta) = 1/2 (theta - b_i)^T H_i (theta - b_i)`` with
  ``H_i`` = C C^T + 0.1 I (entries of C in [-1, 1]), ``b_i`` in [-1, 1]^m.
* :func:`pl_problems`: per coordinate ``f(theta - s) = (theta - s)^2 + 3 sin^2(theta - s)``,
  shifts ``s_{i,d}`` in [-0.4, 0.4] (f is PL with one stationary point, non-convex where
  cos 2x < -1/3; within |theta - s| <= 0.8 every mixture is strictly convex, so theta* is unique).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

__all__ = ["psd_curves", "quadratic_problems", "pl_problems", "simplex_weights"]


@st.composite
def psd_curves(draw, m_max: int = 4, n_max: int = 40):
    m = draw(st.integers(2, m_max))
    r = draw(st.integers(1, m))
    n = draw(st.integers(m * (m + 1) // 2 + 2, n_max))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    lam = np.linspace(-1.0, 1.0, n)
    B = rng.uniform(-1, 1, size=(3, m, r))
    F = B[0] + lam[:, None, None] * B[1] + lam[:, None, None] ** 2 * B[2]
    A = F @ np.swapaxes(F, 1, 2)
    ev = np.linalg.eigvalsh(A.mean(axis=0))
    from hypothesis import assume

    assume(ev[0] > 1e-6 * ev[-1])
    return lam, A


@st.composite
def simplex_weights(draw, n: int, min_atoms: int = 1):
    k = draw(st.integers(min(min_atoms, n), n))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    p = np.zeros(n)
    idx = rng.choice(n, size=k, replace=False)
    p[idx] = rng.uniform(0.05, 1.0, size=k)
    return p / p.sum()


@st.composite
def quadratic_problems(draw):
    m = draw(st.integers(1, 4))
    n = draw(st.integers(m + 2, 25))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    C = rng.uniform(-1, 1, size=(n, m, m))
    H = C @ np.swapaxes(C, 1, 2) + 0.1 * np.eye(m)
    b = rng.uniform(-1, 1, size=(n, m))
    p = draw(simplex_weights(n, min_atoms=m + 2))
    return H, b, p


@st.composite
def pl_problems(draw):
    m = draw(st.integers(1, 4))
    n = draw(st.integers(m + 2, 25))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    s = rng.uniform(-0.4, 0.4, size=(n, m))
    p = draw(simplex_weights(n, min_atoms=m + 2))
    return s, p
