"""Certificates state the problem they certify: the input as given (issue 30).

Each reference is recomputed in mpmath (40 digits) from the float matrices exactly as passed to the
solver, independently of its preconditioning, and the test asserts that the gap the solver reports
bounds the exact gap of that problem, or that the solver reports the failure honestly.
"""

import warnings

import mpmath as mp
import numpy as np
import pytest

from noisealloc.solvers import certify, make_problem, solve
from noisealloc.theory.tolerances import FW_GAP_RTOL

DPS = 40


def _mp(X):
    return mp.matrix([[mp.mpf(float(v)) for v in row] for row in np.asarray(X)])


def _moment(As, p):
    m = As[0].rows
    M = mp.zeros(m, m)
    for Ai, pi in zip(As, p):
        if pi:
            M += mp.mpf(float(pi)) * Ai
    return M


def _inner(X, Y):
    return mp.fsum(X[a, b] * Y[a, b] for a in range(X.rows) for b in range(X.cols))


def exact_L_gap(A, p, W):
    """Exact Frank-Wolfe gap and value of tr(W M(p)^-1) for the float matrices A as given."""
    with mp.workdps(DPS):
        As = [_mp(Ai) for Ai in A]
        K = _moment(As, p) ** -1
        Wm = _mp(W)
        D = K * Wm * K
        g = [-_inner(D, Ai) for Ai in As]
        gbar = mp.fsum(mp.mpf(float(pi)) * gi for pi, gi in zip(p, g))
        return float(gbar - min(g)), float(_inner(Wm, K))


def exact_E_gap(A, p, E):
    """Exact weak-duality gap max_i <E', A_i> - lambda_min(M(p)) with the solver's dual matrix E made
    exactly PSD and trace one (E' = (E + s I) / tr(E + s I), s = max(0, -lambda_min(E)))."""
    with mp.workdps(DPS):
        As = [_mp(Ai) for Ai in A]
        lmin = min(mp.eigsy(_moment(As, p))[0])
        Em = _mp(E)
        Em = (Em + Em.T) / 2
        s = max(mp.mpf(0), -min(mp.eigsy(Em)[0]))
        Em = Em + s * mp.eye(Em.rows)
        Em = Em / sum(Em[k, k] for k in range(Em.rows))
        ub = max(_inner(Em, Ai) for Ai in As)
        return float(ub - lmin), float(lmin)


def test_exact_helpers_fail_on_a_wrong_answer():
    # the uniform allocation is not A-optimal for a quadratic: the exact gap must see it
    x = np.linspace(-1, 1, 5)
    F = np.stack([np.ones(5), x, x * x], 1)
    A = F[:, :, None] * F[:, None, :]
    gap, val = exact_L_gap(A, np.full(5, 0.2), np.eye(3))
    assert gap > 1e-3 * val
    gap_opt, _ = exact_L_gap(A, np.array([0.25, 0, 0.5, 0, 0.25]), np.eye(3))
    assert gap_opt < 1e-25


def test_rank_one_monomial_degree_10_A_certificate_bounds_the_input_as_given():
    x = np.linspace(-1.0, 1.0, 41)
    F = np.vander(x, 11, increasing=True)
    A = F[:, :, None] * F[:, None, :]  # fl(f f^T): indefinite at the eps level
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = solve(A, "A", grid=x)
    cert = res.certificate
    exact_gap, exact_val = exact_L_gap(A, res.weights, np.eye(11))
    # the float input is indefinite (mpmath), and the certificate says that it projected it
    with mp.workdps(DPS):
        most_negative = min(min(mp.eigsy(_mp(Ai))[0]) for Ai in A)
    assert most_negative < 0
    assert cert.psd_projection > 0
    assert cert.input_perturbation > 0
    # the gap reported for the input as given is a valid bound on its exact gap
    assert cert.gap_as_given is not None
    assert exact_gap <= cert.gap_as_given, (exact_gap, cert.gap_as_given)
    # success is claimed only when the input as given is within tolerance
    if res.success:
        assert exact_gap <= cert.rtol * exact_val
    else:
        assert "input as given" in res.message
    # certify() recomputes the same statement from (A, weights) alone
    again = certify(A, res.weights, "A")
    assert again.gap_as_given == pytest.approx(cert.gap_as_given, rel=1e-6)
    assert again.certified == cert.certified


@pytest.mark.parametrize("scale", [1e-300, 1.0])
def test_E_on_tiny_data_claims_no_false_success(scale):
    x = np.linspace(-1.0, 1.0, 41)
    F = np.vander(x, 6, increasing=True)
    A = (F[:, :, None] * F[:, None, :]) * scale
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = solve(A, "E", grid=x)
    cert = res.certificate
    exact_gap, exact_lmin = exact_E_gap(A, res.weights, cert.dual_matrix)
    assert exact_lmin > 0
    if res.success:
        assert exact_gap <= FW_GAP_RTOL * exact_lmin, (exact_gap / exact_lmin, cert.rel_gap)
    # reported and exact relative gaps agree to within rounding of lambda_min
    assert abs(exact_gap / exact_lmin - cert.rel_gap) <= 1e-10


def test_E_near_collinear_is_refused_with_the_true_reason():
    x = np.linspace(-1.0, 1.0, 21)
    F = np.stack([np.ones(21), 1.0 + 3e-7 * x], 1)
    A = F[:, :, None] * F[:, None, :]
    with mp.workdps(DPS):
        lmin_u = min(mp.eigsy(_mp(A.mean(axis=0)))[0])
    assert 0 < lmin_u < 1e-13  # nonsingular, below float64's eigenvalue resolution
    make_problem(A, "D", grid=x)  # the basis-invariant criteria accept it: not singular
    with pytest.raises(ValueError, match="not computable in float64") as info:
        solve(A, "E", grid=x)
    assert "singular for every allocation" not in str(info.value)
