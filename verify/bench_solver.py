"""``noisealloc bench solver``: A-optimal design solvers against CVXPY + Clarabel.

Problems (W = I):

* ``cheb19``: degree-19 Chebyshev regression on ``n`` equally spaced points of [-1, 1]
  (m = 20, rank-one ``A_i = f(x_i) f(x_i)^T``, ``f`` the Chebyshev basis);
* ``rank3``: a rank-3 smooth random curve, ``A(x) = F(x) F(x)^T`` with
  ``F(x) = sum_k T_k(x) B_k`` (``B_k`` 8 x 3, fixed seed 20260531, k <= 4), m = 8;
* ``model-like``: a posterior-weight-like curve in the log-SNR ``lam`` in [-8, 8]:
  ``f_k(lam) = sigmoid(lam - c_k) * exp(-(lam - c_k)^2 / 8)`` for 10 centres, plus a
  rank-one ``e^{lam/2} sigmoid(-lam)`` term, so ``A(lam) = f f^T + g g^T`` (rank 2, m = 10).
  (The real model-derived problems need the posterior engine; see issue 4.)

For each ``n`` our solver runs to a certified relative gap of 1e-8; for n in
{500, 2000} on ``cheb19`` CVXPY + Clarabel solves Sagnol's second-order-cone form of
A-optimal design,

    min sum_i ||z_i||_2  s.t.  sum_i f(x_i) z_i^T = I,    w_i = ||z_i|| / sum_j ||z_j||,

(Sagnol 2011, "Computing optimal designs of multiresponse experiments reduces to
second-order cone programming", J. Stat. Plan. Inference 141), and both allocations
are certified by the same code (:func:`noisealloc.solvers.certify`).  Times are
wall-clock in this run; the ratio is CVXPY time / our time.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["add_arguments", "run", "problem"]


def add_arguments(parser) -> None:
    parser.add_argument("--sizes", default="500,2000,20000", help="comma-separated grid sizes n (default 500,2000,20000)")
    parser.add_argument("--no-cvxpy", action="store_true", help="skip the CVXPY + Clarabel baseline")
    parser.add_argument("--cvxpy-sizes", default="500,2000", help="sizes at which CVXPY runs (default 500,2000)")
    parser.add_argument("--problems", default="cheb19,rank3,model-like", help="comma-separated problem names")


def problem(name: str, n: int):
    """``(grid, A)`` of a benchmark problem; ``A`` has shape (n, m, m)."""
    if name == "cheb19":
        x = np.linspace(-1.0, 1.0, n)
        F = np.polynomial.chebyshev.chebvander(x, 19)
        return x, F[:, :, None] * F[:, None, :]
    if name == "rank3":
        x = np.linspace(-1.0, 1.0, n)
        rng = np.random.default_rng(20260531)
        B = rng.normal(size=(5, 8, 3))
        T = np.polynomial.chebyshev.chebvander(x, 4)
        F = np.einsum("nk,kar->nar", T, B)
        return x, F @ np.swapaxes(F, 1, 2)
    if name == "model-like":
        lam = np.linspace(-8.0, 8.0, n)
        c = np.linspace(-6.0, 6.0, 10)
        sig = 1.0 / (1.0 + np.exp(-(lam[:, None] - c[None, :])))
        f = sig * np.exp(-((lam[:, None] - c[None, :]) ** 2) / 8.0)
        g = (np.exp(lam / 2) / (1 + np.exp(lam)))[:, None] * np.linspace(0.5, 1.5, 10)[None, :]
        return lam, f[:, :, None] * f[:, None, :] + g[:, :, None] * g[:, None, :]
    raise ValueError(f"unknown benchmark problem {name!r}; allowed: 'cheb19', 'rank3', 'model-like'")


def _cvxpy_socp(x_grid, deg=19):
    import cvxpy as cp

    F = np.polynomial.chebyshev.chebvander(x_grid, deg)
    n, m = F.shape
    Z = cp.Variable((n, m))
    cons = [F.T @ Z == np.eye(m)]
    prob = cp.Problem(cp.Minimize(cp.sum(cp.norm(Z, 2, axis=1))), cons)
    prob.solve(solver=cp.CLARABEL)
    z = np.linalg.norm(Z.value, axis=1)
    w = np.maximum(z, 0.0)
    return w / w.sum(), prob.status


def run(args) -> int:
    from noisealloc.solvers import certify, solve
    from noisealloc.solvers.support import merge_atoms, reduce_support

    sizes = [int(s) for s in str(args.sizes).split(",") if s.strip()]
    if not sizes or min(sizes) < 2:
        raise ValueError(f"--sizes must be integers >= 2; got {args.sizes!r}")
    cv_sizes = [int(s) for s in str(getattr(args, "cvxpy_sizes", "500,2000")).split(",") if s.strip()]
    problems = [p.strip() for p in str(getattr(args, "problems", "cheb19,rank3,model-like")).split(",") if p.strip()]
    have_cvxpy = False
    if not args.no_cvxpy:
        try:
            import clarabel  # noqa: F401
            import cvxpy  # noqa: F401

            have_cvxpy = True
        except ImportError:
            print("CVXPY baseline: cvxpy and/or clarabel are missing (pip install cvxpy clarabel); skipped")
    print("A-optimal design (W = I); ours = multiplicative + Newton polish, certified by noisealloc.solvers.certify")
    ours_times = {}
    for name in problems:
        for n in sizes:
            lam, A = problem(name, n)
            t0 = time.perf_counter()
            res = solve(A, "A", grid=lam)
            t_ours = time.perf_counter() - t0
            cert = certify(A, res.weights, "A")
            red = reduce_support(A, res.weights, "A")
            mer = merge_atoms(A, red.weights, "A", rtol=1e-6)  # O(h^2) cost of collapsing split atoms, printed
            ours_times[(name, n)] = t_ours
            print(
                f"{name:10s} n={n:6d} m={A.shape[1]:2d}  ours: {t_ours:8.3f} s  certified rel gap {cert.rel_gap:.2e}  "
                f"equivalence {'ok' if cert.equivalence_ok else 'FAILED'}  atoms {cert.n_atoms} -> reduced {red.n_atoms_after} "
                f"-> merged {mer.n_atoms_after} (value +{(mer.value_after - mer.value_before) / abs(mer.value_before):.1e} rel; "
                f"bound {cert.atom_bound})  grads {res.n_grad}"
            )
            if name == "cheb19" and have_cvxpy and n in cv_sizes:
                t0 = time.perf_counter()
                w, status = _cvxpy_socp(lam)
                t_cv = time.perf_counter() - t0
                cc = certify(A, w, "A")
                print(
                    f"{'':10s} n={n:6d}        CVXPY+Clarabel (SOCP, status {status}): {t_cv:8.3f} s  certified rel gap "
                    f"{cc.rel_gap:.2e}  atoms {np.count_nonzero(w > 1e-9 * w.max())} (weights > 1e-9 max)  "
                    f"time ratio CVXPY/ours = {t_cv / t_ours:.1f}x"
                )
    for name in problems:
        ns = [n for n in sizes if (name, n) in ours_times]
        if len(ns) >= 2:
            n0, n1 = ns[0], ns[-1]
            growth = ours_times[(name, n1)] / ours_times[(name, n0)]
            print(f"{name:10s} scaling: time(n={n1}) / time(n={n0}) = {growth:.2f} for n ratio {n1 / n0:.1f}")
    return 0
