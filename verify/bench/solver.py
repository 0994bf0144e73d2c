"""``noisealloc bench solver``: A-optimal design solvers against CVXPY + Clarabel.

Problems (W = I):

* ``cheb19``: degree-19 Chebyshev regression on ``n`` equally spaced points of [-1, 1]
  (m = 20, rank-one ``A_i = f(x_i) f(x_i)^T``, ``f`` the Chebyshev basis);
* ``rank3``: a rank-3 smooth random curve, ``A(x) = F(x) F(x)^T`` with
  ``F(x) = sum_k T_k(x) B_k`` (``B_k`` 8 x 3, fixed seed 20260531, k <= 4), m = 8;
* ``model-like``: a posterior-weight-like curve in the log-SNR ``lam`` in [-8, 8]:
  ``f_k(lam) = sigmoid(lam - c_k) * exp(-(lam - c_k)^2 / 8)`` for 10 centres, plus a
  rank-one ``e^{lam/2} sigmoid(-lam)`` term, so ``A(lam) = f f^T + g g^T`` (rank 2, m = 10).
  (The real model-derived problems need the posterior engine.)

For each ``n`` our solver runs to a certified relative gap of 1e-8; for n in
{500, 2000} on ``cheb19`` CVXPY + Clarabel solves Sagnol's second-order-cone form of
A-optimal design,

    min sum_i ||z_i||_2  s.t.  sum_i f(x_i) z_i^T = I,    w_i = ||z_i|| / sum_j ||z_j||,

(Sagnol 2011, "Computing optimal designs of multiresponse experiments reduces to
second-order cone programming", J. Stat. Plan. Inference 141), and both allocations
are certified by the same code (:func:`noisealloc.solvers.certify`).  Times are
wall-clock in this run; the ratio is CVXPY time / our time.

:func:`measure` runs the benchmark and returns a :class:`SolverBenchResult`; the ``noisealloc bench
solver`` front end that parses and prints is :mod:`noisealloc.commands.bench`.

Both modes end with a ``reduce_support`` row (:func:`measure_reduction`): Carathéodory reduction
of dense weights at n = 1000, m = 10, and the updated-QR sweep against the former SVD elimination
at n = 200.  ``bench solver --kernels`` instead times each compiled solver kernel against its numpy
reference on the same inputs (:func:`measure_kernels`; first call excluded): the kernels that ``solve``
runs, those of the two-parameter sandwich proof (:mod:`noisealloc.solvers._sandwich_kernels`), against
the same code uncompiled.

E-optimal rows (:func:`measure_e`): ``solve(A, 'E')`` on :func:`cheb_problem` ``(m, n)`` (Chebyshev
degree ``m - 1`` on ``n`` points), its certified relative gap (spectraplex dual of
:func:`noisealloc.solvers.certificates.e_dual_bound`) and, where cvxpy and clarabel are installed,
CVXPY + Clarabel on the SDP :math:`\\max_{p \\in \\Delta} \\lambda_{\\min}(\\sum_i p_i A_i)`, certified by
the same code; the ratio is CVXPY time / our time in the same run.

Near-tied rows (:func:`measure_near_tied`): the ``model-like`` levels of :func:`problem` on a fine grid
(:func:`near_tied_problem`, default ``n = 1001``), where neighbouring levels carry nearly equal matrices
(:math:`\\|A_{i+1} - A_i\\|_F / \\|A_i\\|_F` has median 1 % at ``n = 1001``), so the optimal support is a few
clusters of near-ties.  ``solve`` runs D (the reference the issue compares with), A and c (``c`` all ones,
:func:`near_tied_problem`); beside A and c, CVXPY + Clarabel solve Sagnol's second-order-cone forms
with the rank-revealing factors :math:`A_i = F_i F_i^\\top` (:math:`F_i` m x r),

    A:  min sum_i ||Z_i||_F  s.t.  sum_i F_i Z_i = I,        c:  min sum_i ||z_i||_2  s.t.  sum_i F_i z_i = c,

(the second is Elfving's theorem), ``w_i = ||Z_i|| / sum_j ||Z_j||``, certified by the same code.  Until
2026-12 the c solve took 65 s CPU here (1,040 Newton steps over all n candidates) where D took 0.14 s.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np

__all__ = ["EBenchRow", "KernelBenchResult", "KernelBenchRow", "NearTiedRow", "ReductionBenchRow", "SolverBenchResult",
           "SolverBenchRow", "cheb_problem", "measure", "measure_e", "measure_kernels", "measure_near_tied",
           "measure_reduction", "near_tied_problem", "problem"]


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


def _cvxpy_available() -> bool:
    """Whether the CVXPY + Clarabel baseline can run (both optional packages import)."""
    try:
        import clarabel  # noqa: F401
        import cvxpy  # noqa: F401
    except ImportError:
        return False
    return True


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
    have_cvxpy = use_cvxpy and _cvxpy_available()
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


# ------------------------------------------------------------------ kernels (bench solver --kernels)


@dataclass(frozen=True)
class KernelBenchRow:
    """One compiled kernel that ``solve`` runs, against its pure-Python/numpy path on the same inputs.

    Attributes
    ----------
    name : str
        Kernel name (:mod:`noisealloc.solvers._sandwich_kernels`).
    case : str
        Inputs (instance, levels, supports).
    numba_seconds, numpy_seconds : float
        Wall time of the compiled kernel and of the same code uncompiled (the path taken when numba is
        missing or ``NOISEALLOC_DISABLE_NUMBA`` is set), first call (compile or cache load) excluded.
    ratio : float
        ``numpy_seconds / numba_seconds``: above 1 the kernel wins.
    max_rel_diff : float
        Largest difference of the two paths' outputs (status and simplices per support), relative.
    wired : bool
        Whether ``solve`` calls the kernel.
    verdict : str
        Where it runs.
    """

    name: str
    case: str
    numba_seconds: float
    numpy_seconds: float
    ratio: float
    max_rel_diff: float
    wired: bool
    verdict: str = ""


@dataclass(frozen=True)
class KernelBenchResult:
    """Result of :func:`measure_kernels`.

    Attributes
    ----------
    rows : list of KernelBenchRow
    warmup_seconds : dict
        Kernel name -> time of its first call (numba compile, or load from numba's cache), excluded
        from the rows.
    sweeps : list of (str, float, int)
        ``(case, seconds, simplices)`` of the whole compiled sweep (every set of four levels, numba's
        threads) at the sizes ``solve`` uses it, for scale; the uncompiled path is not run there (the
        sample's ratio says how long it would take).
    have_numba : bool
        False when numba is missing or disabled (then nothing is measured).
    """

    rows: list
    warmup_seconds: dict
    sweeps: list
    have_numba: bool


def _best(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _proof_inputs(prob, target):
    """The arguments of the Bernstein kernels for ``prob`` at ``target`` (as :func:`~noisealloc.solvers.sandwich_global.bernstein_proof` builds them)."""
    from noisealloc.solvers import _sandwich_kernels as K
    from noisealloc.solvers.sandwich_global import bernstein_tensors, sigma_margins
    from noisealloc.theory.tolerances import EPS, SANDWICH_BERNSTEIN_MAX_DEPTH, SANDWICH_BERNSTEIN_ULPS

    SN3, SN3a, B2, B2a = bernstein_tensors(prob)
    md = SANDWICH_BERNSTEIN_MAX_DEPTH
    tau = SANDWICH_BERNSTEIN_ULPS * EPS * (md + 4)
    Aq = np.ascontiguousarray(np.stack([prob.A[:, 0, 0], 0.5 * (prob.A[:, 0, 1] + prob.A[:, 1, 0]), prob.A[:, 1, 1]], 1))
    return (SN3, SN3a, B2, B2a, target, tau, md, K.MULTISETS, K.CHILD_SRC, K.CHILD_W, K.VERTEX_ROWS, K._MULTINOM,
            sigma_margins(prob, target), Aq)


def _sweep_sample(sweep_one, supports, args):
    """``_sweep_one`` over the given supports (serial); returns (status, simplices) per support."""
    md = args[6]
    cap = md + 2
    work = (np.empty((cap, 35)), np.empty((cap, 4, 4)), np.empty(cap, np.int64), np.empty(35), np.empty(35), np.zeros(4))
    out = np.empty((len(supports), 2))
    for k, S in enumerate(supports):
        st, pcs, _no = sweep_one(S, *args, *work)
        out[k] = st, pcs
    return out


def measure_kernels(sizes=(41, 64), *, sample: int = 120, repeat: int = 3, full_sweep: bool = True) -> KernelBenchResult:
    """Time the compiled kernels that ``solve`` runs against their uncompiled path, on the same inputs.

    The numba kernels on ``solve``'s path are E's double-double interior point's
    (:mod:`noisealloc.solvers._dd_kernels`: LU, Cholesky and triangular inverse, ``m x m`` products, the
    accumulation of exact GEMMs; one row each against the numpy double-double path, and one for the whole
    E solve with numba off) and the two-parameter sandwich proof's
    (:mod:`noisealloc.solvers._sandwich_kernels`, run by
    :func:`~noisealloc.solvers.sandwich_global.bernstein_proof` for every two-parameter sandwich on at
    most ``SANDWICH_BERNSTEIN_MAX_LEVELS`` levels).  Inputs: the issue-15 instance
    (:func:`noisealloc.verify.bench.sandwich.sandwich_instance`) on ``n`` levels, at its global optimum
    (the target the proof runs at); ``sample`` sets of four levels spread evenly over all of them.  The
    per-support kernel ``_sweep_one`` (with its helpers ``_root``, ``_gather``) runs compiled and as the
    same Python code (the path without numba), serially, best of ``repeat``; the outputs (status and
    simplices per support) must agree.  ``full_sweep`` also times the whole compiled sweep
    (``bernstein_sweep``, all :math:`\binom n4` supports on numba's threads) for scale.

    Parameters
    ----------
    sizes : sequence of int
        Levels of the instances (the bench table's 41 and 64).
    sample : int
        Supports timed on both paths per size.
    repeat : int
        Best of this many runs (the uncompiled path once: it is the slow one).
    full_sweep : bool
        Time the whole compiled sweep too.

    Returns
    -------
    KernelBenchResult
    """
    import itertools
    import warnings
    from math import comb

    from noisealloc.theory import _numba

    if not _numba.HAVE_NUMBA:
        return KernelBenchResult(rows=[], warmup_seconds={}, sweeps=[], have_numba=False)
    from noisealloc.solvers import _sandwich_kernels as K
    from noisealloc.solvers import solve
    from noisealloc.solvers.problem import as_problem
    from noisealloc.theory.tolerances import SANDWICH_GLOBAL_RTOL
    from noisealloc.verify.bench.sandwich import sandwich_instance

    rows, warm, sweeps = [], {}, []
    helpers = ("_root", "_gather", "_n_sets", "_unrank")
    for n in sizes:
        lam, A, G, Aw = sandwich_instance(None, int(n))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = solve(A, "sandwich", G=G, A_eval=Aw, grid=lam, global_search=False)
        prob = as_problem(A, "sandwich", G=G, A_eval=Aw, grid=lam)
        target = (1.0 - SANDWICH_GLOBAL_RTOL) * float(res.value)
        args = _proof_inputs(prob, target)
        total = comb(int(n), 4)
        pick = set(np.linspace(0, total - 1, min(sample, total)).astype(int).tolist())
        supports = [np.array(S, dtype=np.int64) for q, S in enumerate(itertools.combinations(range(int(n)), 4)) if q in pick]
        name = "_sweep_one"
        if name not in warm:
            t0 = time.perf_counter()
            _sweep_sample(K._sweep_one, supports[:1], args)
            warm[name] = time.perf_counter() - t0
        t_nb = _best(lambda: _sweep_sample(K._sweep_one, supports, args), repeat)
        out_nb = _sweep_sample(K._sweep_one, supports, args)
        saved = {h: getattr(K, h) for h in helpers}
        try:
            # the uncompiled path: the same Python functions, helpers included (looked up as module globals)
            for h in helpers:
                setattr(K, h, saved[h].py_func)
            t0 = time.perf_counter()
            out_py = _sweep_sample(K._sweep_one.py_func, supports, args)
            t_py = time.perf_counter() - t0
        finally:
            for h, f in saved.items():
                setattr(K, h, f)
        diff = float(np.max(np.abs(out_nb - out_py) / np.maximum(np.abs(out_py), 1.0)))
        pieces = int(out_nb[:, 1].sum())
        rows.append(KernelBenchRow(
            name="bernstein _sweep_one", case=f"issue n={n}, {len(supports)} of {total} supports ({pieces} simplices)",
            numba_seconds=t_nb, numpy_seconds=t_py, ratio=t_py / t_nb, max_rel_diff=diff, wired=True,
            verdict="runs in solve for every two-parameter sandwich on <= SANDWICH_BERNSTEIN_MAX_LEVELS levels "
                    "(bernstein_proof, through bernstein_sweep on numba's threads)"))
        if full_sweep:
            from noisealloc.solvers.sandwich_global import bernstein_proof

            if "bernstein_sweep" not in warm:
                t0 = time.perf_counter()
                bernstein_proof(as_problem(A[:8], "sandwich", G=G[:8], A_eval=Aw), 1.0, rtol=SANDWICH_GLOBAL_RTOL)
                warm["bernstein_sweep"] = time.perf_counter() - t0
            bb = bernstein_proof(prob, float(res.value), rtol=SANDWICH_GLOBAL_RTOL)
            sweeps.append((f"issue n={n}, all {total} supports, {_numba.num_threads()} threads", bb.seconds, int(bb.boxes)))
    rows.extend(_dd_rows(warm, repeat))
    return KernelBenchResult(rows=rows, warmup_seconds=warm, sweeps=sweeps, have_numba=True)


def _compare_row(warm: dict, repeat: int, name: str, case: str, compiled, reference, verdict: str) -> KernelBenchRow:
    """One :class:`KernelBenchRow`: ``compiled()`` (its first call timed apart, into ``warm``) against
    ``reference()``, best of ``repeat``; both return a double-double pair, compared relative to 1 or the value."""
    t0 = time.perf_counter()
    compiled()
    warm[name] = time.perf_counter() - t0
    t_nb, t_np = _best(compiled, repeat), _best(reference, repeat)
    x_nb, x_np = compiled(), reference()
    diff = float(np.max(np.abs((x_nb[0] + x_nb[1]) - (x_np[0] + x_np[1])) / np.maximum(np.abs(x_np[0]), 1.0)))
    return KernelBenchRow(name=name, case=case, numba_seconds=t_nb, numpy_seconds=t_np, ratio=t_np / t_nb,
                          max_rel_diff=diff, wired=True, verdict=verdict)


def _dd_rows(warm: dict, repeat: int, size: int = 100, m: int = 20, s: int = 140) -> list:
    """The compiled double-double kernels of E's interior point against the numpy double-double path
    (:mod:`noisealloc.solvers._double_double`), at the sizes of Chebyshev m = 20, n = 500 (working sets of
    ``s`` ~ 140 candidates, ``m x m`` matrices), on seeded inputs; then the whole E solve of that problem
    with numba and with ``HAVE_NUMBA`` off (every kernel on its numpy path)."""
    from noisealloc.solvers import _dd_kernels as ddk
    from noisealloc.solvers import _double_double as ddn
    from noisealloc.solvers import solve
    from noisealloc.theory import _numba

    rng = np.random.default_rng(0)
    hi = rng.standard_normal((size, size)) + size * np.eye(size)
    K = (hi, rng.standard_normal((size, size)) * 1e-17)
    b = (rng.standard_normal(size), np.zeros(size))
    G = rng.standard_normal((m, m))
    X = (G @ G.T + m * np.eye(m), np.zeros((m, m)))
    Y = (rng.standard_normal((m, m)), rng.standard_normal((m, m)) * 1e-17)
    terms = [rng.standard_normal((s * m, m)) * 2.0 ** (-21 * k) for k in range(21)]
    where = "runs in solve for E: the double-double interior point (barrier_sdp_dd)"

    def acc(add):
        out = (np.zeros((s * m, m)), np.zeros((s * m, m)))
        for t in terms:
            out = add(out, t)
        return out

    rows = [
        _compare_row(warm, repeat, "dd lu_factor + lu_solve", f"{size} x {size} double-double system",
                     lambda: ddk.lu_solve(ddk.lu_factor(K), b), lambda: ddn.lu_solve(ddn.lu_factor(K), b),
                     where + ", its Newton systems"),
        _compare_row(warm, repeat, "dd chol + trinv", f"{m} x {m} SPD", lambda: ddk.trinv(ddk.chol(X)),
                     lambda: ddn.trinv(ddn.chol(X)), where + ", the factors of X and E every iteration"),
        _compare_row(warm, repeat, "dd matmul", f"{m} x {m} times {m} x {m}", lambda: ddk.matmul(X, Y),
                     lambda: ddn.matmul(X, Y), where + ", the m x m products (5 per iteration)"),
        _compare_row(warm, repeat, "dd add_into", f"21 exact-slice products of {s * m} x {m} summed",
                     lambda: acc(ddk.add_into), lambda: acc(lambda a, t: ddn.add(a, ddn.dd(t))),
                     where + ", the accumulation of _dd_matmul's exact GEMMs"),
    ]
    _x, A = cheb_problem(m, 500)
    saved = _numba.HAVE_NUMBA

    def e_solve():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            w = solve(A, "E").weights
        return w, np.zeros_like(w)

    def e_solve_numpy():
        _numba.HAVE_NUMBA = False
        try:
            return e_solve()
        finally:
            _numba.HAVE_NUMBA = saved

    rows.append(_compare_row(warm, 1, "E solve", f"Chebyshev m={m}, n=500: every kernel above at once", e_solve,
                             e_solve_numpy, "the whole solve(A, 'E') with numba and with HAVE_NUMBA off"))
    return rows


# ------------------------------------------------------------------ support reduction (reduce_support row)


@dataclass(frozen=True)
class ReductionBenchRow:
    """:func:`~noisealloc.solvers.reduce_support` on dense weights, against the former SVD elimination.

    Attributes
    ----------
    n, m : int
        Grid size and parameter count of the problem (Chebyshev features of degree ``m - 1`` on
        ``n`` points of [-1, 1], ``A_i = f_i f_i^T``, D criterion, Dirichlet(1) weights, seed 0).
    seconds : float
        Wall time of ``reduce_support`` at ``n``.
    atoms_before, atoms_after : int
    moment_residual : float
        Largest change of a moment-vector entry.
    baseline_n : int
        Size at which the former algorithm (one full SVD per eliminated atom, O(n^4)) runs.
    baseline_seconds, new_seconds_at_baseline : float
        The former and the current :func:`~noisealloc.solvers.caratheodory` at ``baseline_n``.
    ratio : float
        ``baseline_seconds / new_seconds_at_baseline``.
    """

    n: int
    m: int
    seconds: float
    atoms_before: int
    atoms_after: int
    moment_residual: float
    baseline_n: int
    baseline_seconds: float
    new_seconds_at_baseline: float
    ratio: float


def measure_reduction(n: int = 1000, m: int = 10, *, baseline_n: int = 200) -> ReductionBenchRow:
    """Time :func:`~noisealloc.solvers.reduce_support` at ``n``, and old vs new Carathéodory at ``baseline_n``.

    One BLAS thread (the solvers' setting; the former algorithm's SVDs are also ~100x slower with
    oversubscribed threads on a shared machine).

    Parameters
    ----------
    n, m : int
        Size of the timed reduction.
    baseline_n : int
        Size of the comparison with the former O(n^4) algorithm (about 0.2 s at 200, 6 s at 1000).

    Returns
    -------
    ReductionBenchRow
    """
    from noisealloc.solvers import reduce_support, single_blas_thread
    from noisealloc.solvers.algorithms.support import CARATHEODORY_RCOND, _caratheodory_svd, _scaled_rows, caratheodory, moment_vectors

    def case(k):
        x = np.linspace(-1.0, 1.0, k)
        F = np.polynomial.chebyshev.chebvander(x, m - 1)
        return F[:, :, None] * F[:, None, :], np.random.default_rng(0).dirichlet(np.ones(k))

    with single_blas_thread():
        A, p = case(n)
        t0 = time.perf_counter()
        red = reduce_support(A, p, "D")
        t = time.perf_counter() - t0
        Ab, pb = case(baseline_n)
        V = moment_vectors(Ab)
        t_new = _best(lambda: caratheodory(V, pb), 3)
        t0 = time.perf_counter()
        _caratheodory_svd(_scaled_rows(V), pb.copy(), CARATHEODORY_RCOND)
        t_old = time.perf_counter() - t0
    return ReductionBenchRow(n=n, m=m, seconds=t, atoms_before=red.n_atoms_before, atoms_after=red.n_atoms_after,
                             moment_residual=red.moment_residual, baseline_n=baseline_n, baseline_seconds=t_old,
                             new_seconds_at_baseline=t_new, ratio=t_old / t_new)

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


def _timed(fn, repeat: int):
    """``(result, first wall time, median wall time, median CPU time)`` of ``1 + repeat`` calls of ``fn``.

    The first call is timed apart (it pays one-time costs: numba's import and JIT start, CVXPY's first
    canonicalisation); the medians are over the other ``repeat`` calls.
    """
    walls, cpus, out = [], [], None
    for _ in range(1 + int(repeat)):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return out, walls[0], float(np.median(walls[1:])), float(np.median(cpus[1:]))


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
        Wall time of ``solve(A, 'E')``: the median of the ``repeat`` runs after the first.
    first_seconds : float
        Wall time of the first run, which also pays one-time costs (numba's import and JIT start, about
        0.4 s, when it is the process's first double-double solve).
    status : int
        Its status (0: certified at its tol).
    certificate : Certificate
        Recomputed from the allocation alone (:func:`noisealloc.solvers.certify`).
    lam_min : float
        :math:`\\lambda_{\\min}(M(p))` of our allocation.
    cvxpy : dict or None
        ``seconds`` and ``first_seconds`` (as ours), ``status``, ``certificate``, ``lam_min``, ``n_atoms``
        (weights > 1e-9 max), ``ratio`` (CVXPY's median time / ours) and ``first_ratio`` (the first runs')
        where the baseline ran.
    repeat : int
        Runs after the first, of which ``seconds`` is the median.
    """

    m: int
    n: int
    seconds: float
    first_seconds: float
    status: int
    certificate: object
    lam_min: float
    cvxpy: dict | None = None
    repeat: int = 3


def measure_e(sizes=((20, 500), (20, 2000)), *, cvxpy_sizes=(500,), use_cvxpy: bool = True, repeat: int = 3):
    """E-optimal rows: ``solve(A, 'E')`` on Chebyshev problems, certified, against CVXPY + Clarabel.

    Each solver runs ``1 + repeat`` times on each problem: the first run's time is reported on its own
    (it pays one-time costs: numba's import and JIT start for ours, CVXPY's first canonicalisation), the
    median of the others is the row's time and the ratio's.

    Parameters
    ----------
    sizes : sequence of (int, int)
        ``(m, n)`` pairs (parameters, grid size), each >= 2.
    cvxpy_sizes : sequence of int
        Grid sizes ``n`` at which the CVXPY baseline runs.
    use_cvxpy : bool
        Run the baseline when cvxpy and clarabel are installed.
    repeat : int
        Timed runs after the first (>= 1).

    Returns
    -------
    rows : list of EBenchRow
    cvxpy_available : bool
    """
    from noisealloc.solvers import certify, solve

    pairs = [(int(m), int(n)) for m, n in sizes]
    if not pairs or min(min(mn) for mn in pairs) < 2:
        raise ValueError(f"E sizes must be (m, n) pairs of integers >= 2; got {sizes!r}")
    if int(repeat) < 1:
        raise ValueError(f"repeat must be an integer >= 1; got {repeat!r}")
    have_cvxpy = use_cvxpy and _cvxpy_available()

    def ours(A):
        with warnings.catch_warnings():
            # a stalled certificate is the figure this row reports (status and gap), not an error
            warnings.simplefilter("ignore")
            return solve(A, "E")

    rows = []
    for m, n in pairs:
        _x, A = cheb_problem(m, n)
        res, first, t_ours, _cpu = _timed(lambda: ours(A), repeat)
        cert = certify(A, res.weights, "E")
        cv = None
        if have_cvxpy and n in cvxpy_sizes:
            (w, status), cv_first, t_cv, _cpu = _timed(lambda: _cvxpy_e(A), repeat)
            c_cv = certify(A, w, "E")
            cv = {"seconds": t_cv, "first_seconds": cv_first, "status": status, "certificate": c_cv,
                  "lam_min": -c_cv.value, "n_atoms": int(np.count_nonzero(w > 1e-9 * w.max())),
                  "ratio": t_cv / t_ours, "first_ratio": cv_first / first}
        rows.append(EBenchRow(m=m, n=n, seconds=t_ours, first_seconds=first, status=int(res.status),
                              certificate=cert, lam_min=-cert.value, cvxpy=cv, repeat=int(repeat)))
    return rows, have_cvxpy


# ------------------------------------------------------------------------------------- near-tied A / c


def near_tied_problem(n: int = 1001):
    """The near-tied benchmark: :func:`problem` ``('model-like', n)`` and the c-vector of its c row.

    On ``n = 1001`` levels of [-8, 8] neighbouring matrices differ by 0.4-3.4 % (5th-95th percentile of
    :math:`\\|A_{i+1} - A_i\\|_F / \\|A_i\\|_F`, median 1 %; the features vary on the scale 1 in
    :math:`\\lambda`, the step is 16 / (n - 1)), so an optimal atom is a cluster of
    near-tied levels, and a dense start (the multiplicative algorithm's) spreads its heaviest weights
    over one such cluster.

    Parameters
    ----------
    n : int
        Grid size (``n >= 2``).

    Returns
    -------
    grid : ndarray, shape (n,)
    A : ndarray, shape (n, 10, 10)
        :math:`A(\\lambda) = f f^\\top + g g^\\top` (rank 2; see the module docstring).
    c : ndarray, shape (10,)
        All ones: the sum of the ten parameters.
    """
    lam, A = problem("model-like", int(n))
    return lam, A, np.ones(A.shape[1])


def _factors(A, rtol: float = 1e-12):
    """Rank-revealing factors ``F`` (n, m, r) with ``A_i = F_i F_i^T`` (eigenvalues below rtol * max dropped)."""
    w, U = np.linalg.eigh(A)
    r = int(max(1, np.max(np.sum(w > rtol * w[:, -1:], axis=1))))
    return U[:, :, -r:] * np.sqrt(np.maximum(w[:, None, -r:], 0.0))


def _cvxpy_socp_general(A, criterion: str, c=None):
    r"""A- or c-optimal weights by CVXPY + Clarabel from Sagnol's SOCP (module docstring), any rank of ``A_i``."""
    import cvxpy as cp

    F = _factors(A)
    n, m, r = F.shape
    Fbig = np.concatenate(list(F), axis=1)  # m x (n r): block i is F_i
    if criterion == "A":
        Z = cp.Variable((n * r, m))
        rows = cp.reshape(Z, (n, r * m), order="C")  # row i: the r x m block Z_i
        cons = [Fbig @ Z == np.eye(m)]
    else:
        Z = cp.Variable(n * r)
        rows = cp.reshape(Z, (n, r), order="C")
        cons = [Fbig @ Z == np.asarray(c, dtype=float)]
    prob = cp.Problem(cp.Minimize(cp.sum(cp.norm(rows, 2, axis=1))), cons)
    prob.solve(solver=cp.CLARABEL)
    z = np.linalg.norm(np.asarray(Z.value, dtype=float).reshape(n, -1), axis=1)
    return z / z.sum(), prob.status, float(prob.value) ** 2


@dataclass(frozen=True)
class NearTiedRow:
    """One criterion on the near-tied levels (:func:`near_tied_problem`), and the CVXPY baseline where it ran.

    Attributes
    ----------
    criterion : str
        'D', 'A' or 'c'.
    n, m : int
    seconds, cpu_seconds : float
        Wall and process CPU time of :func:`noisealloc.solvers.solve` (medians of the ``repeat`` runs after
        the first, :func:`measure_near_tied`).
    status : int
    nit, njev : int
        Iterations and full gradient evaluations of the solve.
    certificate : Certificate
        Recomputed from the allocation alone (:func:`noisealloc.solvers.certify`).
    cvxpy : dict or None
        ``seconds``, ``status``, ``certificate``, ``value`` (the SOCP's optimal value squared, the
        criterion's optimum), ``n_atoms`` (weights > 1e-9 max) and ``ratio`` (CVXPY time / ours).
    repeat : int
        Runs after the first, of which the times are the medians.
    """

    criterion: str
    n: int
    m: int
    seconds: float
    cpu_seconds: float
    status: int
    nit: int
    njev: int
    certificate: object
    cvxpy: dict | None = None
    repeat: int = 3


def measure_near_tied(n: int = 1001, *, criteria=("D", "A", "c"), use_cvxpy: bool = True, repeat: int = 3):
    """Near-tied rows: ``solve`` on :func:`near_tied_problem` for D, A and c, with CVXPY beside A and c.

    Each solve runs ``1 + repeat`` times; the row's times are the medians of the runs after the first (the
    rows differ by tens of milliseconds, about the noise of one run on a shared machine).

    Parameters
    ----------
    n : int
        Grid size (``n >= 2``).
    criteria : sequence of {'D', 'A', 'c'}
        Criteria to run (D is the time the others are compared with).
    use_cvxpy : bool
        Run the baseline (A and c) when cvxpy and clarabel are installed.
    repeat : int
        Timed runs after the first (>= 1).

    Returns
    -------
    rows : list of NearTiedRow
    cvxpy_available : bool
    """
    from noisealloc.solvers import certify, solve

    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 2:
        raise ValueError(f"n must be an integer >= 2; got {n!r}")
    bad = [k for k in criteria if k not in ("D", "A", "c")]
    if bad:
        raise ValueError(f"criteria must be among 'D', 'A', 'c'; got {bad[0]!r}")
    if int(repeat) < 1:
        raise ValueError(f"repeat must be an integer >= 1; got {repeat!r}")
    have_cvxpy = use_cvxpy and _cvxpy_available()
    _lam, A, c = near_tied_problem(n)
    rows = []

    def ours(crit, kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a failed certificate is what the row reports (status, gap)
            return solve(A, crit, **kw)

    for crit in criteria:
        kw = {"c": c} if crit == "c" else {}
        res, _first, t_ours, cpu = _timed(lambda: ours(crit, kw), repeat)
        cert = certify(A, res.weights, crit, **kw)
        cv = None
        if have_cvxpy and crit in ("A", "c"):
            (w, status, value), _first, t_cv, _cpu = _timed(lambda: _cvxpy_socp_general(A, crit, c), repeat)
            cv = {"seconds": t_cv, "status": status, "certificate": certify(A, w, crit, **kw), "value": value,
                  "n_atoms": int(np.count_nonzero(w > 1e-9 * w.max())), "ratio": t_cv / t_ours}
        rows.append(NearTiedRow(criterion=crit, n=int(n), m=A.shape[1], seconds=t_ours, cpu_seconds=cpu,
                                status=int(res.status), nit=int(res.nit), njev=int(res.njev), certificate=cert,
                                cvxpy=cv, repeat=int(repeat)))
    return rows, have_cvxpy
