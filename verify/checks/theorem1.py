r"""Checks of Theorem 1 (atomic optima, with the Carath\'eodory bound) and Theorem 1' (population
form) of docs/THEORY.md section 4 (a).
"""

from __future__ import annotations


import numpy as np

from noisealloc.theory.errors import as_generator
from noisealloc.theory.tolerances import (
    EPS,
    FW_GAP_RTOL,
    THETA_STAR_ATOL,
)
from noisealloc.verify.checks.report import CheckReport, _Timer, default_dirac

__all__ = ['check_theorem1', 'check_theorem1p']


def _l_gap(A, W, p):
    """Independent L-criterion value and Frank-Wolfe gap (numpy inverse, no solver code)."""
    M = np.einsum("i,ijk->jk", p, A)
    Minv = np.linalg.inv(M)
    val = float(np.trace(W @ Minv))
    B = Minv @ W @ Minv
    g = -np.einsum("jk,ijk->i", B, A)
    return val, float(p @ g - g.min()), g


def _d_gap(A, p):
    M = np.einsum("i,ijk->jk", p, A)
    Minv = np.linalg.inv(M)
    g = -np.einsum("jk,ijk->i", Minv, A)
    return float(-np.linalg.slogdet(M)[1]), float(p @ g - g.min()), g


def check_theorem1(problem=None, *, criteria=("L", "D"), data: str = "dirac K=4 D=1, random features q=6") -> CheckReport:
    r"""Theorem 1: the certified optimum has at most :math:`m(m+1)/2 + 1` atoms (convex criteria).

    For each criterion the solver's allocation is re-certified here with an independent
    gradient (:math:`g_i = -\mathrm{tr}(M^{-1} W M^{-1} A_i)` for L with :math:`W = A_\omega`,
    :math:`g_i = -\mathrm{tr}(M^{-1} A_i)` for D): holds when every relative duality gap is at
    most ``FW_GAP_RTOL`` (D: the gap itself, a log-efficiency, over m) and every atom count is within the bound.
    The headline is the largest relative gap.

    The default instance is the random-feature family (lazy two-layer network, q = 6) on the
    four-atom Dirac mixture: for the well-specified posterior-weight and linear families
    :math:`A(\lambda)` increases to its clean-data limit in the PSD order
    (:math:`E[ww^\top] \preceq \mathrm{diag}(\pi)`), so every convex criterion puts all mass on the
    saturated top levels, a degenerate optimum whose solver support can hold many tied levels.

    Parameters
    ----------
    problem : Problem, optional
        An allocation problem with ``A``, ``A_eval``, ``lam`` and ``m`` (default: the instance above).
    criteria : sequence of {'L', 'D'}
        Convex criteria to solve and re-certify.
    data : str
        Description of the instance for the report.

    Returns
    -------
    CheckReport
        Headline ``max_rel_gap``; ``measured`` holds each criterion's atoms, weights and gaps.

    References
    ----------
    docs/THEORY.md section 4 (a), Theorem 1 and its certificates.
    """
    from noisealloc.solvers import solve
    from noisealloc.theory.information.matrices import random_feature_matrices

    with _Timer() as t:
        if problem is None:
            problem = random_feature_matrices(default_dirac(), np.linspace(-8.0, 8.0, 97), q=6, n_mc=4096, rng=0)
        A, m = problem.A, problem.m
        bound = m * (m + 1) // 2 + 1
        rows = {}
        ok = True
        worst = 0.0
        for crit in criteria:
            if crit == "L":
                res = solve(A, "L", W=problem.A_eval, grid=problem.lam)
                val, gap, _ = _l_gap(A, problem.A_eval, res.weights)
                rel = gap / abs(val)
            elif crit == "D":
                res = solve(A, "D", grid=problem.lam)
                val, gap, _ = _d_gap(A, res.weights)
                rel = gap / m
            else:
                raise ValueError(f"criteria must hold 'L' or 'D' (convex criteria with an independent gap); got {crit!r}")
            n_atoms = int(np.count_nonzero(res.weights))
            rows[crit] = {"value": val, "rel_gap": rel, "n_atoms": n_atoms, "atoms": problem.lam[res.weights > 0],
                          "weights": res.weights[res.weights > 0], "solver_rel_gap": res.rel_gap}
            ok &= bool(rel <= FW_GAP_RTOL and n_atoms <= bound)
            worst = max(worst, rel)
    return CheckReport(
        name="theorem1", holds=ok, measured={"max_rel_gap": worst, "m": m, "atom_bound": bound, **rows},
        tolerance=FW_GAP_RTOL, assumptions=("convex criterion", "compact matrix curve on the grid", f"m = {m}"),
        data=data, seconds=t.seconds, headline="max_rel_gap",
        message=f"independent duality gap <= FW_GAP_RTOL and atoms <= m(m+1)/2+1 = {bound}",
    )


# ------------------------------------------------------------------------------- Theorem 1'


def population_gradients(A, b, theta):
    r"""Per-level gradients :math:`\nabla E\ell_i(\theta) = A_i\theta - b_i` of quadratic losses, shape (n, m)."""
    return np.einsum("ijk,k->ij", A, theta) - b


def check_theorem1p(n: int = 60, m: int = 4, *, rng=0) -> CheckReport:
    r"""Theorem 1': a schedule with at most m + 1 atoms reaches the same population optimum.

    Misspecified class with convex quadratic per-level losses
    :math:`E\ell(\theta;\lambda_i) = \tfrac12\theta^\top A_i\theta - b_i^\top\theta` (PSD random ``A_i``,
    target ``b_i`` not of the form :math:`A_i\theta_0`), so :math:`\theta^*(p) = A_p^{-1} b_p`.
    The reduced ``q`` from :func:`noisealloc.solvers.reduce_population` is checked here by recomputing
    :math:`\theta^*(q) = A_q^{-1} b_q` (first order is sufficient by convexity):
    holds when :math:`\|\theta^*(q) - \theta^*(p)\|_\infty \le` ``THETA_STAR_ATOL`` and ``q`` has at most m + 1 atoms.

    Parameters
    ----------
    n : int
        Number of levels.
    m : int
        Parameter dimension.
    rng : Generator, int or None
        Randomness of the instance.

    Returns
    -------
    CheckReport
        Headline ``theta_error``.

    References
    ----------
    docs/THEORY.md section 4 (a), Theorem 1'.
    """
    from noisealloc.solvers.theorem1p import reduce_population

    with _Timer() as t:
        gen = as_generator(rng)
        X = gen.standard_normal((n, m, m + 2))
        A = np.einsum("ijk,ilk->ijl", X, X) / (m + 2)
        b = gen.standard_normal((n, m))
        p = gen.dirichlet(np.ones(n))
        theta_p = np.linalg.solve(np.einsum("i,ijk->jk", p, A), p @ b)
        grads = population_gradients(A, b, theta_p)
        red = reduce_population(grads, p)
        q = np.asarray(red.weights)
        theta_q = np.linalg.solve(np.einsum("i,ijk->jk", q, A), q @ b)
        err = float(np.max(np.abs(theta_q - theta_p)))
        n_atoms = int(np.count_nonzero(q > 0))
    return CheckReport(
        name="theorem1p", holds=bool(err <= THETA_STAR_ATOL and n_atoms <= m + 1 and abs(q.sum() - 1) <= 64 * EPS * n
                                     and np.all(q >= 0)),
        measured={"theta_error": err, "n_atoms": n_atoms, "atom_bound": m + 1, "n_atoms_before": n,
                  "residual": float(red.residual), "theta_p": theta_p, "theta_q": theta_q},
        tolerance=THETA_STAR_ATOL, assumptions=("convex per-level losses (PSD A_i)", "misspecified targets b_i"),
        data=f"random quadratic losses, n = {n} levels, m = {m}, seed {rng}", seconds=t.seconds,
        headline="theta_error", message="||theta*(q) - theta*(p)||_inf <= THETA_STAR_ATOL and atoms <= m + 1",
    )


# ------------------------------------------------------------------------------- Theorem 2
