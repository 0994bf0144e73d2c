"""Certificates: rigour of the gap, re-checkability, off-grid and exact (sympy) sensitivity checks."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from noisealloc.solvers import certify, make_problem, solve
from noisealloc.solvers.problem import criterion_value
from noisealloc.theory.errors import ConvergenceWarning

sys.path.insert(0, str(Path(__file__).parent))
from helpers.solver_strategies import psd_curves, simplex_weights  # noqa: E402
from helpers.strategies import examples  # noqa: E402


@pytest.mark.parametrize("crit", ["A", "D", "E", "c"])
@settings(max_examples=examples(15))
@given(data=st.data())
def test_gap_bounds_suboptimality(crit, data):
    """Phi(p) - Phi(q) <= gap(p) for every allocation q (convexity / weak duality)."""
    lam, A = data.draw(psd_curves())
    n, m = A.shape[0], A.shape[1]
    kw = {"c": np.linspace(1, 2, m)} if crit == "c" else {}
    p = data.draw(simplex_weights(n, min_atoms=n))
    cert = certify(A, p, crit, **kw)
    prob = make_problem(A, crit, **kw)
    rng = np.random.default_rng(n)
    for _ in range(20):
        q = rng.dirichlet(np.full(n, 0.3))
        vq = criterion_value(prob, q)
        assert cert.value - vq <= cert.gap + 1e-10 * max(abs(cert.value), 1.0)
    assert cert.gap >= 0


def test_certify_recomputes_solver_certificate():
    x = np.linspace(-1, 1, 301)
    F = np.polynomial.chebyshev.chebvander(x, 4)
    A = F[:, :, None] * F[:, None, :]
    res = solve(A, "D", grid=x)
    cert = certify(A, res.weights, "D", grid=x)
    assert cert.certified and res.certificate.certified
    np.testing.assert_allclose(cert.gap, res.gap, rtol=0, atol=1e-13)
    np.testing.assert_allclose(cert.value, res.value, rtol=1e-15)
    assert cert.n_atoms == res.support.size and cert.atom_bound == 5 * 6 // 2 + 1


def test_equivalence_check_rejects_non_optimal():
    x = np.linspace(-1, 1, 51)
    F = np.polynomial.chebyshev.chebvander(x, 3)
    A = F[:, :, None] * F[:, None, :]
    cert = certify(A, np.full(51, 1 / 51), "A")
    assert not cert.equivalence_ok and not cert.certified
    assert cert.equivalence_slack < 0 and cert.rel_gap > 1e-3


def test_certify_bad_weights():
    x = np.linspace(-1, 1, 5)
    F = np.stack([np.ones(5), x], 1)
    A = F[:, :, None] * F[:, None, :]
    with pytest.raises(ValueError, match="sum to 1"):
        certify(A, np.ones(5), "A")
    with pytest.raises(ValueError, match="shape"):
        certify(A, np.ones(4) / 4, "A")
    with pytest.raises(ValueError, match="non-negative"):
        certify(A, np.array([0.5, 0.6, -0.1, 0, 0]), "A")


def _cheb_fn(deg):
    def A_fn(t):
        f = np.polynomial.chebyshev.chebvander(np.array([t]), deg)[0]
        return np.outer(f, f)

    return A_fn


def test_offgrid_check_bounds_continuous_suboptimality():
    """On a coarse grid the off-grid violation bounds Phi(p_coarse) - Phi*_continuous (convexity)."""
    deg = 3
    xc = np.linspace(-1, 1, 8)  # does not contain the continuous optimal support
    Fc = np.polynomial.chebyshev.chebvander(xc, deg)
    Ac = Fc[:, :, None] * Fc[:, None, :]
    rc = solve(Ac, "A", grid=xc)
    cert = certify(Ac, rc.weights, "A", grid=xc, A_fn=_cheb_fn(deg))
    xf = np.linspace(-1, 1, 4001)
    Ff = np.polynomial.chebyshev.chebvander(xf, deg)
    rf = solve(Ff[:, :, None] * Ff[:, None, :], "A", grid=xf)
    true_loss = rc.value - rf.value  # >= Phi(p_coarse) - Phi*_continuous - (tiny fine-grid error)
    assert true_loss > 1e-4 * rc.value
    assert cert.offgrid.violation >= true_loss
    assert cert.offgrid.violation > 0
    # on the fine grid the continuous sensitivity barely exceeds the bound
    cf = certify(Ff[:, :, None] * Ff[:, None, :], rf.weights, "A", grid=xf, A_fn=_cheb_fn(deg))
    assert cf.offgrid.rel_violation < 1e-5


def _rational_problem():
    s = sp.symbols("snr", positive=True)
    f = sp.Matrix([1 / (1 + s), s / (1 + s), s / (1 + s) ** 2])
    A_sym = f * f.T
    lam = np.linspace(-4, 4, 401)
    fn = sp.lambdify(s, f, "numpy")
    F = np.stack([np.array(fn(np.exp(l)), dtype=float).ravel() for l in lam])
    return s, A_sym, lam, F[:, :, None] * F[:, None, :]


def test_exact_sympy_certificate():
    """A(lam) rational in snr = e^lam: exact real-root isolation proves the sensitivity bound."""
    s, A_sym, lam, A = _rational_problem()
    res = solve(A, "D", grid=lam)
    assert res.success
    cert = certify(A, res.weights, "D", grid=lam, A_sym=A_sym, snr=s, interval=(-4, 4))
    assert cert.exact.holds
    # the uniform allocation violates the inequality somewhere: the check must say so
    bad = certify(A, np.full(lam.size, 1 / lam.size), "D", grid=lam, A_sym=A_sym, snr=s, interval=(-4, 4), exact_slack=0.0)
    assert not bad.exact.holds and bad.exact.min_margin < 0


def test_exact_check_agrees_with_numeric_offgrid():
    s, A_sym, lam, A = _rational_problem()
    lamc = lam[::40]
    Ac = A[::40]
    res = solve(Ac, "D", grid=lamc)
    fn = sp.lambdify(s, A_sym, "numpy")
    cert = certify(Ac, res.weights, "D", grid=lamc, A_fn=lambda l: np.array(fn(np.exp(l)), dtype=float),
                   A_sym=A_sym, snr=s, interval=(-4, 4), exact_slack=0.0)
    # exact says "violated" iff the numeric local maximisation finds a violation
    assert cert.exact.holds == (cert.offgrid.violation <= 0)


@pytest.mark.slow
@settings(max_examples=examples(15))
@given(curve=psd_curves(), eps_exp=st.integers(2, 8), data=st.data())
def test_e_gap_rigorous_near_optimum(curve, eps_exp, data):
    """The E bound at a near-optimal allocation bounds its true suboptimality.

    p' = (1 - eps) p* + eps q mixes the certified optimum p* with a random allocation; the
    bound at p' must be >= Phi(p') - Phi(p*) (>= Phi(p') - Phi*, since Phi(p*) >= Phi*).
    Near the optimum the bound is small, so a non-rigorous dual matrix would show here;
    lambda_min is often repeated at p*.
    """
    lam, A = curve
    n = A.shape[0]
    res = solve(A, "E", grid=lam)
    q = data.draw(simplex_weights(n))
    eps = 10.0 ** (-eps_exp)
    pp = (1 - eps) * res.weights + eps * q
    pp /= pp.sum()
    cert = certify(A, pp, "E", grid=lam)
    prob = make_problem(A, "E")
    assert cert.value - res.value <= cert.gap + 1e-13 * abs(res.value)
    assert cert.gap >= 0
    E = cert.dual_matrix
    assert np.linalg.eigvalsh(E)[0] >= -1e-14 and abs(np.trace(E) - 1) < 1e-12
    # weak duality directly: every allocation (here random ones) has lambda_min <= max_i <E, A_i>
    rng = np.random.default_rng(n)
    top = float(np.max(np.einsum("ijk,jk->i", A, E)))
    for _ in range(10):
        w = rng.dirichlet(np.full(n, 0.3))
        assert -criterion_value(prob, w) <= top * (1 + 1e-13)


@pytest.mark.slow
def test_e_certificate_recomputed_from_weights_alone():
    """certify(A, weights, 'E') reproduces the solver's certificate from the allocation alone.

    The solver's certificate rescores its polish's double-double dual matrix; certify() solves for its own
    dual: the two bounds are different rounding-level numbers, equal to the polish target E_POLISH_RTOL."""
    from noisealloc.theory.tolerances import E_POLISH_RTOL

    x = np.linspace(-1, 1, 201)
    F = np.polynomial.chebyshev.chebvander(x, 3)
    A = F[:, :, None] * F[:, None, :]
    res = solve(A, "E", grid=x)
    cert = certify(A, res.weights, "E", grid=x)
    assert cert.certified and res.certificate.certified
    np.testing.assert_allclose(cert.value, res.value, rtol=1e-15)
    np.testing.assert_allclose(cert.gap, res.gap, rtol=0, atol=E_POLISH_RTOL * abs(res.value))
    assert cert.rel_gap <= 1e-8


def test_double_double_arithmetic_against_mpmath():
    """solvers._double_double: sums, products, quotients, square roots and an LU solve to ~1e-30 relative
    against 50-digit mpmath (float64 gives ~1e-16 on the same inputs)."""
    import mpmath as mp

    from noisealloc.solvers import _double_double as D

    mp.mp.dps = 50
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(6), rng.uniform(0.5, 2.0, 6)
    x = D.add(D.div(D.mul(D.dd(a), D.dd(b)), D.sqrt(D.dd(b))), D.dd(a))
    for i in range(6):
        ref = mp.mpf(a[i]) * mp.mpf(b[i]) / mp.sqrt(mp.mpf(b[i])) + mp.mpf(a[i])
        assert abs(mp.mpf(x[0][i]) + mp.mpf(x[1][i]) - ref) <= 1e-29 * abs(ref)
    K, rhs = rng.standard_normal((12, 12)), rng.standard_normal(12)
    sol = D.lu_solve(D.lu_factor(D.dd(K)), D.dd(rhs))
    ref = mp.lu_solve(mp.matrix(K.tolist()), mp.matrix(rhs.tolist()))
    scale = max(abs(v) for v in ref)
    assert max(abs(mp.mpf(sol[0][i]) + mp.mpf(sol[1][i]) - ref[i]) for i in range(12)) <= 1e-28 * scale
    L = D.chol(D.dd(K @ K.T + 12 * np.eye(12)))
    eye = D.matmul(D.trinv(L), L)
    assert np.max(np.abs(D.to_float(eye) - np.eye(12))) <= 1e3 * np.finfo(float).eps
