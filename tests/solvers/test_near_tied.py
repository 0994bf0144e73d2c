"""A and c on near-tied levels (issue 30, item 3): certified, as fast as D, and the optimum checked independently.

The levels are the ``model-like`` benchmark's (:func:`noisealloc.verify.bench.solver.near_tied_problem`):
on 1001 levels of [-8, 8] neighbouring matrices are ~1 % apart, an optimal atom is a cluster of near-ties,
and the multiplicative start spreads its heaviest weights over one cluster.  The polish used to keep those
20 neighbours as its heavy atoms, found the aggregate singular and ran Newton on all 1001 candidates: c took
65 s CPU and 1,040 iterations where D took 0.14 s and 50.

Independent references: the plain-numpy bound of linear criteria (below) and, where CVXPY is installed, the
optimal value of Sagnol's second-order-cone program (Elfving's for c) solved by Clarabel.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from noisealloc.solvers import solve
from noisealloc.theory.tolerances import FW_GAP_RTOL
from noisealloc.verify.bench.solver import _cvxpy_socp_general, near_tied_problem


def _linear_lower_bound(A, w, W):
    r"""Value and lower bound of :math:`\min_p \operatorname{tr}(W M_p^{-1})` from any ``w``, from the formula.

    Convexity at :math:`sM_w` for every :math:`s > 0` gives
    :math:`\Phi^* \ge 2\Phi(w)/s - G/s^2` with :math:`G = \max_i \operatorname{tr}(K W K A_i)`,
    :math:`K = M_w^{-1}`; the best ``s = G / \Phi(w)`` gives :math:`\Phi^* \ge \Phi(w)^2 / G`.
    :math:`M_w`, ``K`` and :math:`\Phi(w)` in mpmath at 40 digits (the c optimum's M has condition
    number ~4e8, where a float64 ``inv`` is off by ~4e-9); ``G`` in float64 from the rounded
    :math:`KWK` (a maximum over PSD terms, no cancellation that matters at this bound's accuracy).
    None of the solver's code.
    """
    mp.mp.dps = 40
    m = A.shape[1]
    M = mp.matrix(m, m)
    for i in np.flatnonzero(w):
        M += mp.mpf(float(w[i])) * mp.matrix(A[i].tolist())
    K = M**-1
    KWK = K * mp.matrix(W.tolist()) * K
    phi = float(sum((mp.matrix(W.tolist()) * K)[j, j] for j in range(m)))
    KWKf = np.array(KWK.tolist(), dtype=float)
    G = float(np.max(np.einsum("ijk,kj->i", A, KWKf)))
    return phi, phi * phi / G


def _small_near_tied():
    """21 levels of [-8, 8], each with two neighbours 1e-3 away (63 levels in near-tied triples), the
    ``model-like`` matrices (:func:`noisealloc.verify.bench.solver.problem`) written out again."""
    base = np.linspace(-8.0, 8.0, 21)
    lam = np.sort(np.concatenate([base - 1e-3, base, base + 1e-3]))
    c = np.linspace(-6.0, 6.0, 10)
    sig = 1.0 / (1.0 + np.exp(-(lam[:, None] - c[None, :])))
    f = sig * np.exp(-((lam[:, None] - c[None, :]) ** 2) / 8.0)
    g = (np.exp(lam / 2) / (1 + np.exp(lam)))[:, None] * np.linspace(0.5, 1.5, 10)[None, :]
    A = f[:, :, None] * f[:, None, :] + g[:, :, None] * g[:, None, :]
    return lam, A


def test_near_tied_a_and_c_certify_with_about_the_iterations_of_d():
    lam, A, c = near_tied_problem(1001)
    runs = {crit: solve(A, crit, grid=lam, **({"c": c} if crit == "c" else {})) for crit in ("D", "A", "c")}
    for crit, res in runs.items():
        assert res.success and res.rel_gap <= FW_GAP_RTOL and res.certificate.equivalence_ok, (crit, res.message)
    # iterations, not seconds (the machine is shared): c took 1,040 Newton steps against D's 50 before
    for crit in ("A", "c"):
        assert runs[crit].nit <= 5 * runs["D"].nit, (crit, runs[crit].nit, runs["D"].nit)
    # the plain-numpy bound certifies the same optimum, independently of the solver's certificate
    for crit, W in (("A", np.eye(10)), ("c", np.outer(c, c))):
        phi, lower = _linear_lower_bound(A, runs[crit].weights, W)
        assert abs(phi - runs[crit].value) <= 1e-11 * phi, (crit, phi, runs[crit].value)
        assert phi - lower <= 2 * FW_GAP_RTOL * phi, (crit, (phi - lower) / phi)


@pytest.mark.slow
def test_near_tied_triples_against_cvxpy():
    pytest.importorskip("cvxpy")
    pytest.importorskip("clarabel")
    lam, A = _small_near_tied()
    c = np.ones(10)
    for crit, W in (("A", np.eye(10)), ("c", np.outer(c, c))):
        kw = {"c": c} if crit == "c" else {}
        res = solve(A, crit, grid=lam, **kw)
        assert res.success, res.message
        w_cv, status, socp_value = _cvxpy_socp_general(A, crit, c)
        assert status == "optimal"
        phi_cv, _ = _linear_lower_bound(A, w_cv, W)  # the value of CVXPY's weights, plain numpy
        # ours is optimal: no feasible allocation is lower (beyond rounding), and the SOCP's optimal
        # value (Clarabel, ~1e-8) agrees
        assert res.value <= phi_cv * (1 + 1e-12)
        assert abs(res.value - socp_value) <= 1e-6 * socp_value, (crit, res.value, socp_value)


@pytest.mark.slow
def test_near_tied_1001_against_cvxpy():
    pytest.importorskip("cvxpy")
    pytest.importorskip("clarabel")
    lam, A, c = near_tied_problem(1001)
    for crit in ("A", "c"):
        kw = {"c": c} if crit == "c" else {}
        res = solve(A, crit, grid=lam, **kw)
        w_cv, status, socp_value = _cvxpy_socp_general(A, crit, c)
        assert res.success and status == "optimal"
        assert abs(res.value - socp_value) <= 1e-6 * socp_value, (crit, res.value, socp_value)
