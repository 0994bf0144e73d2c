"""The Newton polish's low-rank face Hessians (solvers/algorithms/polish.py) against second differences in
40-digit mpmath, and the dispatch that uses them (issue 30 item 3: figure 3 at J = 32, m = 96)."""

from __future__ import annotations

import numpy as np
import pytest

from noisealloc.solvers import make_problem
from noisealloc.solvers.algorithms import polish as P
from noisealloc.solvers.problem import evaluate, hessian

from helpers.mpmath_refs import second_differences


def _mp_hessian(crit, A, G, W, p, idx):
    """Centred second differences of the criterion written from its formula in 40-digit mpmath."""
    import mpmath as mp

    mp.mp.dps = 40
    m = A.shape[1]
    Wm = mp.matrix(W.tolist())

    def phi(q):
        Ap = sum(q_ * mp.matrix(A[i].tolist()) for i, q_ in enumerate(q))
        K = Ap ** -1
        if crit == "sandwich":
            Gp = sum(q_ * mp.matrix(G[i].tolist()) for i, q_ in enumerate(q))
            X = Wm * K * Gp * K / 2
        elif crit == "L":
            X = Wm * K
        else:  # D
            return -mp.log(mp.det(Ap))
        return sum(X[k, k] for k in range(m))

    return second_differences(phi, p, idx)


def _low_rank_stack(n, m, r, seed):
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(n, m, r))
    return F @ F.transpose(0, 2, 1), rng


@pytest.mark.parametrize("crit", ["sandwich", "L", "D"])
def test_low_rank_hessian_matches_mpmath_second_differences(crit):
    A, rng = _low_rank_stack(7, 3, 1, 11)
    A = A + 0.05 * np.eye(3)  # full rank: the factors then have r = 3 (the formula does not care)
    B = rng.normal(size=(7, 3, 1))
    G = 0.4 * A + B @ B.transpose(0, 2, 1)
    W = np.diag([2.0, 1.0, 0.5])
    kw = {"G": G, "A_eval": W} if crit == "sandwich" else ({"W": W} if crit == "L" else {})
    pr = make_problem(A, crit, **kw)
    p = rng.dirichlet(np.ones(7))
    idx = np.array([0, 2, 3, 6])
    ev = evaluate(pr, p)
    U = P._stack_factors(pr.A, 3)
    if crit == "sandwich":
        H = P.sandwich_hessian_lowrank(pr, idx, ev, (U, P._stack_factors(pr.G, 3)))
    else:
        H = P.trace_hessian_lowrank(pr, idx, ev, U)
    # the problem is solved in preconditioned coordinates: differentiate its own matrices
    ref = _mp_hessian(crit, pr.A, pr.G, pr.W, p, idx)
    np.testing.assert_allclose(H, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())


def test_dispatch_uses_the_factors_for_large_low_rank_problems_and_agrees_with_the_dense_form():
    A, rng = _low_rank_stack(40, 20, 3, 5)
    B = rng.normal(size=(40, 20, 2))
    G = 0.5 * A + B @ B.transpose(0, 2, 1)
    pr = make_problem(A, "sandwich", G=G, A_eval=np.eye(20))
    f = P.lowrank_factors(pr)
    assert f is not None and f[0].shape == (40, 20, 3) and f[1].shape == (40, 20, 5)
    assert P.lowrank_factors(pr) is f  # factored once per problem
    p = rng.dirichlet(np.ones(40))
    idx = np.sort(rng.choice(40, 12, replace=False))
    ev = evaluate(pr, p)
    Hd = hessian(pr, p, idx, ev)
    np.testing.assert_allclose(P._hessian(pr, p, idx, ev, 0.0), Hd, rtol=1e-11, atol=1e-11 * np.abs(Hd).max())
    # full-rank levels (rank 20 > 20 / 4) and small m keep the dense Hessian
    full = make_problem(A + np.eye(20), "sandwich", G=G, A_eval=np.eye(20))
    assert P.lowrank_factors(full) is None
    small = make_problem(A[:, :8, :8], "sandwich", G=G[:, :8, :8], A_eval=np.eye(8))
    assert P.lowrank_factors(small) is None
