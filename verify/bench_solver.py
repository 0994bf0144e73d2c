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

:func:`measure` runs the benchmark and returns a :class:`SolverBenchResult`; :func:`run` (with
:func:`add_arguments`) is the ``noisealloc bench solver`` front end that prints it.

E-optimal rows (:func:`measure_e`): ``solve(A, 'E')`` on :func:`cheb_problem` ``(m, n)`` (Chebyshev
degree ``m - 1`` on ``n`` points), its certified relative gap (spectraplex dual of
:func:`noisealloc.solvers.certificates.e_dual_bound`) and, where cvxpy and clarabel are installed,
CVXPY + Clarabel on the SDP :math:`\\max_{p \\in \\Delta} \\lambda_{\\min}(\\sum_i p_i A_i)`, certified by
the same code; the ratio is CVXPY time / our time in the same run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["EBenchRow", "SolverBenchRow", "SolverBenchResult", "cheb_problem", "measure", "measure_e", "problem"]


def problem(name: str, n: int):
    """Grid and matrices of a benchmark problem.

    Parameters
    ----------
    name : {'cheb19', 'rank3', 'model-like'}
        Problem (module docstring).
    n : int
        Grid size.

    Returns
    -------
    grid : ndarray, shape (n,)
    A : ndarray, shape (n, m, m)
    """
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


@dataclass(frozen=True)
class SolverBenchRow:
    """One benchmark run (our solver, and the CVXPY baseline where it ran).

    Attributes
    ----------
    name : str
    n, m : int
        Grid size and parameter count.
    seconds : float
        Wall time of :func:`noisealloc.solvers.solve`.
    certificate : Certificate
        Recomputed from the allocation alone (:func:`noisealloc.solvers.certify`).
    n_reduced, n_merged : int
        Atoms after Carathéodory reduction and after merging adjacent atoms.
    merge_rel_increase : float
        Relative value increase of the merge (its O(h^2) cost).
    njev : int
        Full gradient evaluations of the solve.
    cvxpy : dict or None
        ``seconds``, ``status``, ``certificate``, ``n_atoms`` (weights > 1e-9 max) and ``ratio``
        (CVXPY time / ours) where the baseline ran.
    """

    name: str
    n: int
    m: int
    seconds: float
    certificate: object
    n_reduced: int
    n_merged: int
    merge_rel_increase: float
    njev: int
    cvxpy: dict | None = None


@dataclass(frozen=True)
class SolverBenchResult:
    """Result of :func:`measure`.

    Attributes
    ----------
    rows : list of SolverBenchRow
    scaling : dict
        ``name -> (n0, n1, time(n1) / time(n0))`` for problems run at two sizes or more.
    cvxpy_available : bool
    """

    rows: list
    scaling: dict = field(default_factory=dict)
    cvxpy_available: bool = False


def measure(problems=("cheb19", "rank3", "model-like"), sizes=(500, 2000, 20000), *, cvxpy_sizes=(500, 2000),
            use_cvxpy: bool = True) -> SolverBenchResult:
    """Run the benchmark: our A-optimal solver (and CVXPY + Clarabel on ``cheb19``), certified alike.

    Parameters
    ----------
    problems : sequence of str
        Problem names (see :func:`problem`).
    sizes : sequence of int
        Grid sizes (each >= 2).
    cvxpy_sizes : sequence of int
        Sizes at which the CVXPY baseline runs (``cheb19`` only).
    use_cvxpy : bool
        Run the baseline when cvxpy and clarabel are installed.

    Returns
    -------
    SolverBenchResult
    """
    from noisealloc.solvers import certify, merge_atoms, reduce_support, solve

    sizes = [int(s) for s in sizes]
    if not sizes or min(sizes) < 2:
        raise ValueError(f"sizes must be integers >= 2; got {sizes!r}")
    have_cvxpy = False
    if use_cvxpy:
        try:
            import clarabel  # noqa: F401
            import cvxpy  # noqa: F401

            have_cvxpy = True
        except ImportError:
            have_cvxpy = False
    rows, times = [], {}
    for name in problems:
        for n in sizes:
            lam, A = problem(name, n)
            t0 = time.perf_counter()
            res = solve(A, "A", grid=lam)
            t_ours = time.perf_counter() - t0
            cert = certify(A, res.weights, "A")
            red = reduce_support(A, res.weights, "A")
            mer = merge_atoms(A, red.weights, "A", rtol=1e-6)  # O(h^2) cost of collapsing split atoms
            times[(name, n)] = t_ours
            cv = None
            if name == "cheb19" and have_cvxpy and n in cvxpy_sizes:
                t0 = time.perf_counter()
                w, status = _cvxpy_socp(lam)
                t_cv = time.perf_counter() - t0
                cv = {"seconds": t_cv, "status": status, "certificate": certify(A, w, "A"),
                      "n_atoms": int(np.count_nonzero(w > 1e-9 * w.max())), "ratio": t_cv / t_ours}
            rows.append(SolverBenchRow(name=name, n=n, m=A.shape[1], seconds=t_ours, certificate=cert,
                                       n_reduced=red.n_atoms_after, n_merged=mer.n_atoms_after,
                                       merge_rel_increase=(mer.value_after - mer.value_before) / abs(mer.value_before),
                                       njev=res.njev, cvxpy=cv))
    scaling = {}
    for name in problems:
        ns = [n for n in sizes if (name, n) in times]
        if len(ns) >= 2:
            scaling[name] = (ns[0], ns[-1], times[(name, ns[-1])] / times[(name, ns[0])])
    return SolverBenchResult(rows=rows, scaling=scaling, cvxpy_available=have_cvxpy)


# ------------------------------------------------------------------------------------------ E-optimal


def cheb_problem(m: int, n: int):
    """Chebyshev regression of degree ``m - 1`` on ``n`` equally spaced points of [-1, 1].

    Parameters
    ----------
    m : int
        Number of parameters (``m >= 2``); ``cheb_problem(20, n)`` is :func:`problem` ``('cheb19', n)``.
    n : int
        Grid size (``n >= 2``).

    Returns
    -------
    grid : ndarray, shape (n,)
    A : ndarray, shape (n, m, m)
        :math:`A_i = f(x_i) f(x_i)^\\top`, ``f`` the Chebyshev basis :math:`(T_0, \\dots, T_{m-1})`.
    """
    x = np.linspace(-1.0, 1.0, int(n))
    F = np.polynomial.chebyshev.chebvander(x, int(m) - 1)
    return x, F[:, :, None] * F[:, None, :]


def _cvxpy_e(A):
    r"""E-optimal weights by CVXPY + Clarabel: :math:`\max_{p \in \Delta} \lambda_{\min}(\sum_i p_i A_i)` (an SDP)."""
    import cvxpy as cp

    n, m, _ = A.shape
    p = cp.Variable(n, nonneg=True)
    M = cp.reshape(A.reshape(n, m * m).T @ p, (m, m), order="C")
    prob = cp.Problem(cp.Maximize(cp.lambda_min((M + M.T) / 2)), [cp.sum(p) == 1])
    prob.solve(solver=cp.CLARABEL)
    w = np.maximum(np.asarray(p.value, dtype=float), 0.0)
    return w / w.sum(), prob.status


@dataclass(frozen=True)
class EBenchRow:
    """One E-optimal benchmark run on :func:`cheb_problem` (and the CVXPY baseline where it ran).

    Attributes
    ----------
    m, n : int
        Parameters and grid size.
    seconds : float
        Wall time of ``solve(A, 'E')``.
    status : int
        Its status (0: certified at its tol).
    certificate : Certificate
        Recomputed from the allocation alone (:func:`noisealloc.solvers.certify`).
    lam_min : float
        :math:`\\lambda_{\\min}(M(p))` of our allocation.
    cvxpy : dict or None
        ``seconds``, ``status``, ``certificate``, ``lam_min``, ``n_atoms`` (weights > 1e-9 max) and
        ``ratio`` (CVXPY time / ours) where the baseline ran.
    """

    m: int
    n: int
    seconds: float
    status: int
    certificate: object
    lam_min: float
    cvxpy: dict | None = None


def measure_e(sizes=((20, 500), (20, 2000)), *, cvxpy_sizes=(500,), use_cvxpy: bool = True):
    """E-optimal rows: ``solve(A, 'E')`` on Chebyshev problems, certified, against CVXPY + Clarabel.

    Parameters
    ----------
    sizes : sequence of (int, int)
        ``(m, n)`` pairs (parameters, grid size), each >= 2.
    cvxpy_sizes : sequence of int
        Grid sizes ``n`` at which the CVXPY baseline runs.
    use_cvxpy : bool
        Run the baseline when cvxpy and clarabel are installed.

    Returns
    -------
    rows : list of EBenchRow
    cvxpy_available : bool
    """
    import warnings

    from noisealloc.solvers import certify, solve

    pairs = [(int(m), int(n)) for m, n in sizes]
    if not pairs or min(min(mn) for mn in pairs) < 2:
        raise ValueError(f"E sizes must be (m, n) pairs of integers >= 2; got {sizes!r}")
    have_cvxpy = False
    if use_cvxpy:
        try:
            import clarabel  # noqa: F401
            import cvxpy  # noqa: F401

            have_cvxpy = True
        except ImportError:
            have_cvxpy = False
    rows = []
    for m, n in pairs:
        _x, A = cheb_problem(m, n)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            # a stalled certificate is the figure this row reports (status and gap), not an error
            warnings.simplefilter("ignore")
            res = solve(A, "E")
        t_ours = time.perf_counter() - t0
        cert = certify(A, res.weights, "E")
        cv = None
        if have_cvxpy and n in cvxpy_sizes:
            t0 = time.perf_counter()
            w, status = _cvxpy_e(A)
            t_cv = time.perf_counter() - t0
            c_cv = certify(A, w, "E")
            cv = {"seconds": t_cv, "status": status, "certificate": c_cv, "lam_min": -c_cv.value,
                  "n_atoms": int(np.count_nonzero(w > 1e-9 * w.max())), "ratio": t_cv / t_ours}
        rows.append(EBenchRow(m=m, n=n, seconds=t_ours, status=int(res.status), certificate=cert,
                              lam_min=-cert.value, cvxpy=cv))
    return rows, have_cvxpy
