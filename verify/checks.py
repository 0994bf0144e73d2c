r"""Numerical checks of the theorems of THEORY.md, as library functions returning :class:`CheckReport`.

Every check recomputes its conclusion from the returned numbers by an independent
route (its own gradient, its own simulation, its own closed form); it never
trusts a solver's claimed status.  Each report states the assumptions that were
verified on the instance it ran on.

Checks (THEORY.md section in brackets):

* :func:`check_i_mmse` (§2) -- :math:`-dH/d\lambda = \tfrac12 e^\lambda\,\mathrm{mmse}` by centred differences;
* :func:`check_budget` (§2) -- :math:`\int h\,d\lambda = H(\pi)` for a Dirac mixture;
* :func:`check_theorem1` (§4 a) -- certified optimum with at most :math:`m(m+1)/2 + 1` atoms;
* :func:`check_theorem1p` (§4 a) -- the reduction to :math:`\le m + 1` atoms keeps :math:`\theta^*`;
* :func:`check_theorem2` (§4 b) -- :math:`p_u \propto \sqrt{\omega_u c}` beats every perturbation and its
  closed-form minimum matches numerical minimisation over allocations on the grid;
* :func:`check_decoupling` (§4 b) -- :math:`c(\lambda) = q\,\mathrm{mmse}(\lambda)` for a Gaussian manifold,
  and the measured departure for a Dirac mixture (residual correlated with the squared features);
* :func:`check_sandwich_simulation` (§4) -- :math:`N(E R(\hat\theta_N) - R(\theta^*)) \to V(p)`
  against simulated training in well-specified models;
* :func:`check_coordinate_covariance` (§4 b) -- the square-root law in coordinate ``u`` moved to
  :math:`\lambda` is :math:`\propto \sqrt{h}\,|du/d\lambda|^{1/2}`, and only it is optimal for learners in ``u``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from noisealloc.solvers import single_blas_thread
from noisealloc.theory.errors import as_generator
from noisealloc.theory.tolerances import (
    EPS,
    FD_RTOL,
    FW_GAP_RTOL,
    I_MMSE_RATE_FLOOR,
    KKT_RTOL,
    MC_NSIGMA,
    THETA_STAR_ATOL,
)

__all__ = [
    "CheckReport",
    "default_dirac",
    "default_gaussian",
    "check_i_mmse",
    "check_i_mmse_monte_carlo",
    "check_budget",
    "check_theorem1",
    "check_theorem1p",
    "check_theorem2",
    "closed_form_sqrt_allocation",
    "numerical_min_allocation",
    "feature_cost_ratio",
    "check_decoupling",
    "simulate_sandwich",
    "check_sandwich_simulation",
    "check_coordinate_covariance",
]

#: Numerical minimisation of sum_i a_i / p_i over the simplex (L-BFGS in softmax
#: coordinates, gradient tolerance 1e-12): the value error is quadratic in the gradient
#: residual, ~1e-12 relative; 1e-9 leaves room for the ill-conditioning of tails.
THEOREM2_NUMERIC_RTOL = 1e-9
#: Finite-N allowance of the sandwich comparison, in units of (m + 1) / N: for OLS with
#: Gaussian design N E[excess] = V N / (N - m - 1) = V (1 + (m + 1)/N + ...); 3 covers
#: heteroscedastic designs (heavier fourth moments) at N >= 50 m.
SANDWICH_FINITE_N_FACTOR = 3.0


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if np.isfinite(v) else repr(v)
    return x


@dataclass(frozen=True)
class CheckReport:
    r"""Outcome of one numerical check.

    Attributes
    ----------
    name : str
        Short identifier (``'theorem1'``, ``'rmt.ols'``, ...).
    holds : bool
        Whether the conclusion was confirmed within ``tolerance``.
    measured : dict
        The measured numbers (floats and arrays a figure can plot); ``measured[headline]`` is
        the number compared with ``tolerance``.
    tolerance : float
        The bound the headline number was compared with (its meaning is in ``message``).
    assumptions : tuple of str
        Assumptions of the theorem that were checked on the instance.
    data : str
        Description of the instance (model, grid, seeds).
    seconds : float
        Wall time of the check.
    headline : str
        Key of ``measured`` shown in tables.
    message : str
        One line: what was compared with what.
    """

    name: str
    holds: bool
    measured: dict
    tolerance: float
    assumptions: tuple = ()
    data: str = ""
    seconds: float = 0.0
    headline: str = ""
    message: str = ""

    @property
    def value(self) -> float:
        """The headline measured number (NaN if there is none)."""
        v = self.measured.get(self.headline, np.nan)
        try:
            return float(v)
        except (TypeError, ValueError):
            return float("nan")

    def to_dict(self) -> dict:
        """Plain-JSON form (arrays become lists, non-finite floats strings)."""
        return _jsonable({
            "name": self.name, "holds": bool(self.holds), "value": self.value, "headline": self.headline,
            "tolerance": self.tolerance, "message": self.message, "assumptions": list(self.assumptions),
            "data": self.data, "seconds": self.seconds, "measured": self.measured,
        })


class _Timer:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        return False


# ------------------------------------------------------------------------------- default data


def default_dirac():
    """The 1-D, four-atom Dirac mixture used by the quick checks (unequal weights and gaps).

    Returns
    -------
    DiracMixture
        Atoms (-2, 0, 1.5, 4) with weights (0.1, 0.4, 0.3, 0.2).
    """
    from noisealloc.theory.dirac import DiracMixture

    return DiracMixture(np.array([[-2.0], [0.0], [1.5], [4.0]]), np.array([0.1, 0.4, 0.3, 0.2]))


def default_gaussian(D: int = 5, variances=(2.0, 0.3), rng=0):
    """A Gaussian manifold in R^D with a random orthonormal basis (closed-form posteriors).

    Parameters
    ----------
    D : int
        Ambient dimension.
    variances : sequence of float
        Variances along the basis directions (k = their number).
    rng : Generator, int or None
        Randomness of the basis.

    Returns
    -------
    GaussianManifold
        Mean ``(1, ..., 1)``, orthonormal basis from the QR of a Gaussian matrix.
    """
    from noisealloc.theory.gaussian import GaussianManifold

    s = np.asarray(variances, dtype=np.float64)
    basis, _ = np.linalg.qr(as_generator(rng).standard_normal((int(D), s.size)))
    return GaussianManifold(np.ones(int(D)), basis, s)


# ------------------------------------------------------------------------------- section 2


def check_i_mmse(model=None, lam=None, *, data: str = "dirac K=4 D=1") -> CheckReport:
    r"""I--MMSE identity :math:`-dH/d\lambda = \tfrac12 e^\lambda \mathrm{mmse}(\lambda)` (centred differences).

    The verdict is the library's one rule (:data:`noisealloc.theory.information.I_MMSE_RULE`): the
    largest relative error over levels with :math:`h >` ``I_MMSE_RATE_FLOOR`` is at most ``FD_RTOL``.

    Parameters
    ----------
    model : DataModel, optional
        A deterministic model (default :func:`default_dirac`).
    lam : array_like, optional
        Levels (default 13 levels on [-6, 6]).
    data : str
        Description of the instance for the report.

    Returns
    -------
    CheckReport
        Headline ``max_rel_error``.

    References
    ----------
    THEORY.md section 2 (I-MMSE).
    """
    from noisealloc.theory.information import i_mmse_check

    with _Timer() as t:
        model = default_dirac() if model is None else model
        lam = np.linspace(-6.0, 6.0, 13) if lam is None else np.asarray(lam, dtype=np.float64)
        r = i_mmse_check(model, lam)
    return CheckReport(
        name="i-mmse", holds=r.holds,
        measured={"max_rel_error": r.max_rel_error, "lam": r.lam, "fd": r.fd, "rate": r.rate, "rel_error": r.rel_error,
                  "step": r.step, "tested": r.tested},
        tolerance=r.tolerance,
        assumptions=("discrete data (H finite)" if model.discrete else "continuous data (I finite)",
                     f"h > {I_MMSE_RATE_FLOOR:g} where tested"),
        data=data, seconds=t.seconds, headline="max_rel_error", message=r.rule,
    )


def check_i_mmse_monte_carlo(model=None, lam=None, *, n_samples: int = 4096, rng=0,
                             data: str = "dirac:K=5,D=3,sep=2,seed=0 (Monte Carlo)") -> CheckReport:
    r"""I-MMSE identity of a Monte-Carlo model, integrated per draw and judged by its standard error.

    The verdict is the library's rule (:data:`noisealloc.theory.information.I_MMSE_MC_RULE`): on every
    interval between consecutive levels, :math:`|\bar r| \le` ``MC_NSIGMA`` standard errors, with
    :math:`r_i = H_i(a) - H_i(b) - \int_a^b \tfrac12 e^\lambda \mathrm{mmse}_i\,d\lambda` per draw.

    Parameters
    ----------
    model : DiscreteDataModel, optional
        A discrete Monte-Carlo model (default: a 5-atom mixture spanning 3 dimensions).
    lam : array_like, optional
        Interval ends (default -2, -1, ..., 3).
    n_samples : int
        Draws of common random numbers.
    rng : int, Generator or None
        Randomness (a seed is recorded).
    data : str
        Description of the instance for the report.

    Returns
    -------
    CheckReport
        Headline ``max_abs_z``.

    References
    ----------
    THEORY.md sections 2 (I-MMSE) and 3.1 (Monte-Carlo estimates carry standard errors).
    """
    from noisealloc.theory.datasets import load_data
    from noisealloc.theory.information import i_mmse_check

    with _Timer() as t:
        model = load_data("dirac:K=5,D=3,sep=2,seed=0") if model is None else model
        lam = np.arange(-2.0, 3.5, 1.0) if lam is None else np.asarray(lam, dtype=np.float64)
        r = i_mmse_check(model, lam, n_samples=n_samples, rng=rng)
    return CheckReport(
        name="i-mmse.monte-carlo", holds=r.holds,
        measured={"max_abs_z": float(np.max(np.abs(r.z))), "lam": r.lam, "difference": r.difference,
                  "integral": r.integral, "residual": r.residual, "stderr": r.stderr, "z": r.z,
                  "n_samples": r.n_samples, "seed": r.seed},
        tolerance=r.tolerance, assumptions=("discrete data, Monte Carlo (span dimension >= 3)",
                                            "common random numbers across levels"),
        data=data, seconds=t.seconds, headline="max_abs_z", message=r.rule,
    )


def check_budget(model=None, lam_min: float = -30.0, lam_max: float = 30.0, *, data: str = "dirac K=4 D=1") -> CheckReport:
    r"""Budget identity :math:`\int_a^b h\,d\lambda = H(a) - H(b)` (:math:`\to H(\pi)`), by adaptive quadrature.

    The verdict is the library's one rule (:data:`noisealloc.theory.information.BUDGET_RULE`,
    :func:`noisealloc.theory.information.budget_check`); what lies outside the finite interval,
    :math:`H(\pi) - (H(a) - H(b))`, is reported as ``tail``.

    Parameters
    ----------
    model : DiscreteDataModel, optional
        A discrete model (default :func:`default_dirac`).
    lam_min, lam_max : float
        The interval :math:`[a, b]`.
    data : str
        Description of the instance for the report.

    Returns
    -------
    CheckReport
        Headline ``abs_error`` (:math:`|\int_a^b h - (H(a) - H(b))|`).

    References
    ----------
    THEORY.md section 2 (budget identity).
    """
    from noisealloc.theory.information import budget_check

    with _Timer() as t:
        model = default_dirac() if model is None else model
        b = budget_check(model, lam_min, lam_max)
    return CheckReport(
        name="budget", holds=b.holds,
        measured={"abs_error": abs(b.error), "integral": b.value, "target": b.target, "entropy": b.entropy,
                  "tail": b.entropy - b.target, "quad_error": b.abs_error, "stderr": b.difference_stderr,
                  "nfev": b.nfev, "success": b.success},
        tolerance=b.tolerance, assumptions=("discrete data", "distinct atoms (H(lam) -> 0)"),
        data=data + f", lam in [{lam_min:g}, {lam_max:g}]", seconds=t.seconds, headline="abs_error",
        message=b.rule,
    )


# ------------------------------------------------------------------------------- Theorem 1


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
    THEORY.md section 4 (a), Theorem 1 and its certificates.
    """
    from noisealloc.solvers import solve
    from noisealloc.theory.information_matrices import random_feature_matrices

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
    THEORY.md section 4 (a), Theorem 1'.
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


def closed_form_sqrt_allocation(a):
    r"""Theorem 2 on a grid: :math:`\min_p \sum_i a_i/p_i = (\sum_i \sqrt{a_i})^2` at :math:`p_i \propto \sqrt{a_i}`.

    Parameters
    ----------
    a : array_like, shape (n,)
        Cell costs :math:`a_i \ge 0`.

    Returns
    -------
    p : ndarray, shape (n,)
        :math:`p_i = \sqrt{a_i} / \sum_j \sqrt{a_j}`.
    value : float
        :math:`(\sum_i \sqrt{a_i})^2`.

    References
    ----------
    THEORY.md section 4 (b), Theorem 2.

    Examples
    --------
    >>> p, v = closed_form_sqrt_allocation([1.0, 4.0])
    >>> [round(float(x), 12) for x in p], v
    ([0.333333333333, 0.666666666667], 9.0)
    """
    a = np.asarray(a, dtype=np.float64)
    r = np.sqrt(a)
    return r / r.sum(), float(r.sum() ** 2)


def numerical_min_allocation(a, *, p0=None):
    r"""Minimise :math:`\sum_i a_i / p_i` over the simplex numerically (SLSQP, no closed form used).

    Sequential quadratic programming on :math:`p` with the equality constraint :math:`\sum_i p_i = 1`,
    bounds :math:`p_i \ge 10^{-12}` (far below any optimum here, whose smallest weight is
    :math:`\sqrt{a_{\min}}/\sum\sqrt{a}`) and the analytic gradient :math:`-a_i/p_i^2`; started from the
    uniform allocation (or ``p0``).

    Parameters
    ----------
    a : array_like, shape (n,)
        Cell costs :math:`a_i > 0`.
    p0 : array_like, optional
        Starting allocation (default uniform).

    Returns
    -------
    p : ndarray, shape (n,)
        The minimiser found.
    value : float
        :math:`\sum_i a_i / p_i` there.
    """
    from scipy.optimize import minimize

    a = np.asarray(a, dtype=np.float64)
    scale = a.sum()
    n = a.size
    x0 = np.full(n, 1.0 / n) if p0 is None else np.asarray(p0, dtype=np.float64)
    with single_blas_thread():
        res = minimize(lambda p: (np.sum(a / p) / scale, -a / p**2 / scale), x0, jac=True, method="SLSQP",
                       bounds=[(1e-12, 1.0)] * n,
                       constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1.0, "jac": lambda p: np.ones_like(p)}],
                       options={"ftol": 1e-16, "maxiter": 5000})
    p = np.maximum(res.x, 1e-12)
    p = p / p.sum()
    return p, float(np.sum(a / p))


def check_theorem2(model=None, *, lam=None, n_perturb: int = 200, rng=0, data: str = "dirac K=4 D=1") -> CheckReport:
    r"""Theorem 2 (square-root law) on cells of a log-SNR grid.

    With :math:`a_i = \omega_i c_i \Delta` and :math:`c \propto \mathrm{mmse}` (decoupled learners, ELBO weight:
    :math:`a_i \propto h_i`), the excess risk of an allocation is :math:`\sum_i a_i/(N p_i)`.  Checks (1) the
    closed-form minimum :math:`(\sum\sqrt{a_i})^2` equals a numerical minimisation over allocations to
    ``THEOREM2_NUMERIC_RTOL``, (2) the factor :math:`\sum a_i/p_i / (\sum \sqrt{a_i})^2 \ge 1` for ``n_perturb``
    random perturbations of the square-root allocation (log-normal, scales 1e-3 to 1), and equals 1 at it.

    Parameters
    ----------
    model : DataModel, optional
        Data model whose entropy rate gives the cell costs (default :func:`default_dirac`).
    lam : array_like, optional
        Level grid (default 53 levels on [-8, 5]).
    n_perturb : int
        Number of random perturbations of the square-root allocation.
    rng : Generator, int or None
        Randomness of the perturbations.
    data : str
        Description of the instance for the report.

    Returns
    -------
    CheckReport
        Headline ``rel_error_min``.

    References
    ----------
    THEORY.md section 4 (b), Theorem 2.
    """
    with _Timer() as t:
        model = default_dirac() if model is None else model
        lam = np.linspace(-8.0, 5.0, 53) if lam is None else np.asarray(lam, dtype=np.float64)
        h = np.asarray(model.entropy_rate(lam).value)
        if np.any(h <= 0):
            raise ValueError("the entropy rate vanishes (underflows) on the grid; every cell needs a_i > 0 (shrink lam)")
        dl = np.gradient(lam)
        a = h * dl
        p_star, v_star = closed_form_sqrt_allocation(a)
        p_num, v_num = numerical_min_allocation(a)
        rel = abs(v_num - v_star) / v_star
        gen = as_generator(rng)
        scales = np.geomspace(1e-3, 1.0, n_perturb)
        factors = np.empty(n_perturb)
        for k, s in enumerate(scales):
            q = p_star * np.exp(s * gen.standard_normal(a.size))
            q /= q.sum()
            factors[k] = np.sum(a / q) / v_star
        f_star = float(np.sum(a / p_star) / v_star)
        ok = bool(rel <= THEOREM2_NUMERIC_RTOL and np.all(factors >= 1 - 64 * EPS * a.size)
                  and abs(f_star - 1) <= 64 * EPS * a.size)
    return CheckReport(
        name="theorem2", holds=ok,
        measured={"rel_error_min": rel, "closed_form_min": v_star, "numerical_min": v_num, "min_factor": float(factors.min()),
                  "factors": factors, "perturbation_scales": scales, "lam": lam, "p_sqrt": p_star, "p_numerical": p_num,
                  "max_abs_p_diff": float(np.max(np.abs(p_num - p_star)))},
        tolerance=THEOREM2_NUMERIC_RTOL,
        assumptions=("independent learners (one per cell)", "excess risk omega c / n (first order)", "c = q mmse"),
        data=data + f", {lam.size} cells on [{lam[0]:g}, {lam[-1]:g}]", seconds=t.seconds, headline="rel_error_min",
        message="|numerical min - (sum sqrt a)^2| / (sum sqrt a)^2; all perturbation factors >= 1",
    )


# ------------------------------------------------------------------------------- decoupling


def feature_cost_ratio(model, lam: float, features, *, n: int = 200_000, n_batches: int = 20, rng=None):
    r"""Monte-Carlo estimate of :math:`c(\lambda) / (q\,\mathrm{mmse}(\lambda))` with its standard error.

    :math:`c = \tfrac12 \mathrm{tr}(A^{-1} G)` for a learner regressing every output coordinate on the
    features :math:`\psi(x)` (``features(x) -> (n, q)``): :math:`A = 2E[\psi\psi^\top]`,
    :math:`G = 4E[\psi\psi^\top\|r\|^2]`, so :math:`c = \mathrm{tr}(E[\psi\psi^\top]^{-1}E[\psi\psi^\top\|r\|^2])`,
    with the Bayes residual :math:`r = x_0 - m(x,\lambda)`.  The MMSE in the denominator is the
    model's own (closed form or quadrature).  Standard error across ``n_batches`` independent batches.

    Parameters
    ----------
    model : DataModel
        Deterministic data model (``mmse``, ``sample_x``, ``denoiser``).
    lam : float
        Level.
    features : callable
        ``features(x) -> (n, q)`` array :math:`\psi(x)`.
    n : int
        Total samples (split into batches).
    n_batches : int
        Independent batches for the standard error.
    rng : Generator, int or None
        Randomness.

    Returns
    -------
    (ratio, stderr) : tuple of float
    """
    gen = as_generator(rng)
    mmse = float(np.asarray(model.mmse(float(lam)).value))
    per = max(int(n) // int(n_batches), 10)
    vals = np.empty(int(n_batches))
    for b in range(int(n_batches)):
        x0, x = model.sample_x(float(lam), per, rng=gen)
        psi = np.asarray(features(x), dtype=np.float64)
        r2 = np.sum((x0 - model.denoiser(x, float(lam))) ** 2, axis=1)
        S = psi.T @ psi / per
        T = (psi * r2[:, None]).T @ psi / per
        vals[b] = np.trace(np.linalg.solve(S, T)) / (psi.shape[1] * mmse)
    return float(vals.mean()), float(vals.std(ddof=1) / np.sqrt(vals.size))


def affine_features(x):
    """:math:`\\psi(x) = (1, x)`, q = D + 1."""
    return np.column_stack([np.ones(x.shape[0]), x])


def quadratic_features(x):
    """:math:`\\psi(x) = (1, x, x^2)` per coordinate, q = 2D + 1."""
    return np.column_stack([np.ones(x.shape[0]), x, x**2])


def check_decoupling(gaussian=None, dirac=None, *, lam=(-4.0, -2.0, 0.0, 2.0), n: int = 100_000, rng=0) -> CheckReport:
    r"""Feature--noise decoupling: :math:`c(\lambda) = q\,\mathrm{mmse}(\lambda)`, and its failure.

    Decoupled: a Gaussian manifold (the Bayes residual is independent of ``x``, so it is
    uncorrelated with any squared features) with features :math:`(1, x, x^2)`:
    the ratio :math:`c/(q\,\mathrm{mmse})` must be 1 within ``MC_NSIGMA`` standard errors at every level.
    Coupled: a Dirac mixture with the same features (residual concentrated near decision
    boundaries, correlated with :math:`x^2`): the measured departure, in standard errors, is reported
    and must exceed ``MC_NSIGMA`` at some level (the conclusion fails without the assumption).
    Levels stop at :math:`\lambda = 2`: beyond it the Dirac residual is made of rare boundary
    crossings that a Monte-Carlo batch of this size rarely samples, so its standard error is not reliable.

    Parameters
    ----------
    gaussian : GaussianManifold, optional
        The decoupled model (default :func:`default_gaussian` with D = 2).
    dirac : DiracMixture, optional
        The coupled model (default :func:`default_dirac`).
    lam : sequence of float
        Levels.
    n : int
        Samples per level and model.
    rng : Generator, int or None
        Randomness.

    Returns
    -------
    CheckReport
        Headline ``max_dev_decoupled_se``.

    References
    ----------
    THEORY.md section 4 (b), feature--noise decoupling.
    """
    with _Timer() as t:
        gen = as_generator(rng)
        gaussian = default_gaussian(D=2, variances=(2.0, 0.3)) if gaussian is None else gaussian
        dirac = default_dirac() if dirac is None else dirac
        lam = np.asarray(lam, dtype=np.float64)
        g_ratio = np.empty(lam.size)
        g_se = np.empty(lam.size)
        d_ratio = np.empty(lam.size)
        d_se = np.empty(lam.size)
        for i, l in enumerate(lam):
            g_ratio[i], g_se[i] = feature_cost_ratio(gaussian, l, quadratic_features, n=n, rng=gen)
            d_ratio[i], d_se[i] = feature_cost_ratio(dirac, l, quadratic_features, n=n, rng=gen)
        g_dev = np.abs(g_ratio - 1) / g_se
        # where no boundary crossing was sampled (high SNR) the batch SE is 0: no evidence either way
        d_dev = np.where(d_se > 0, np.abs(d_ratio - 1) / np.where(d_se > 0, d_se, 1.0), 0.0)
        ok = bool(np.all(g_dev <= MC_NSIGMA) and np.any(d_dev > MC_NSIGMA))
    return CheckReport(
        name="decoupling", holds=ok,
        measured={"max_dev_decoupled_se": float(g_dev.max()), "max_dev_coupled_se": float(d_dev.max()), "lam": lam,
                  "ratio_decoupled": g_ratio, "se_decoupled": g_se, "ratio_coupled": d_ratio, "se_coupled": d_se},
        tolerance=MC_NSIGMA,
        assumptions=("residual uncorrelated with squared features (Gaussian: independent)",
                     "dropped for the Dirac mixture"),
        data=f"Gaussian manifold D=2 k=2 and dirac K=4 D=1, features (1, x, x^2), {n} samples per level",
        seconds=t.seconds, headline="max_dev_decoupled_se",
        message="Gaussian: |c/(q mmse) - 1| <= 4 SE at every level; Dirac: > 4 SE somewhere",
    )


# ------------------------------------------------------------------------------- sandwich vs training


def _draw_levels(gen, lam, p, size):
    return lam[gen.choice(lam.size, size=size, p=p)]


def simulate_sandwich(problem, p, model, *, N: int = 2000, n_seeds: int = 300, rng=None):
    r"""Simulated :math:`N(R(\hat\theta_N) - R(\theta^*))` for the well-specified families, per seed.

    ``problem.family`` 'linear' (Gaussian manifold, shrinkage features written out here from the
    posterior formulas, not taken from the problem builder) or 'posterior-weights' (Dirac mixture,
    features = the model's posterior weights).  Each seed draws ``N`` triples
    :math:`(\lambda_i \sim p, x_0, \varepsilon)`, fits the least-squares readout and evaluates the excess
    risk :math:`\tfrac12\mathrm{tr}(\Delta^\top A_\omega \Delta)` exactly (quadratic in :math:`\Delta = \hat\Theta - \Theta^*`).

    Parameters
    ----------
    problem : Problem
        A well-specified problem (``family`` 'linear' or 'posterior-weights') with ``lam`` and ``A_eval``.
    p : array_like
        Allocation on ``problem.lam``.
    model : DataModel
        The data model the problem was built from.
    N : int
        Training samples per seed.
    n_seeds : int
        Number of simulated training runs.
    rng : Generator, int or None
        Randomness.

    Returns
    -------
    ndarray, shape (n_seeds,)
    """
    gen = as_generator(rng)
    lam = problem.lam
    p = np.asarray(p, dtype=np.float64)
    out = np.empty(int(n_seeds))
    if problem.family == "linear":
        s = np.asarray(model.variances, dtype=np.float64)
        for k in range(int(n_seeds)):
            l = _draw_levels(gen, lam, p, N)
            sig2 = np.exp(-l)[:, None]
            z = gen.standard_normal((N, s.size)) * np.sqrt(s)
            y = z + np.sqrt(sig2) * gen.standard_normal((N, s.size))
            psi = s / (s + sig2) * y  # the Bayes shrinkage along each direction
            theta = np.sum(psi * z, axis=0) / np.sum(psi * psi, axis=0)
            d = theta - 1.0
            out[k] = N * 0.5 * d @ problem.A_eval @ d
        return out
    if problem.family == "posterior-weights":
        atoms = np.asarray(model.atoms, dtype=np.float64)
        for k in range(int(n_seeds)):
            l = _draw_levels(gen, lam, p, N)
            x0, _ = model.sample_x(0.0, N, rng=gen)
            x = x0 + np.exp(-0.5 * l)[:, None] * gen.standard_normal(x0.shape)
            w = np.exp(model.log_posterior_weights(x, l))
            theta = np.linalg.lstsq(w, x0, rcond=None)[0]
            d = theta - atoms
            out[k] = N * 0.5 * np.trace(d.T @ problem.A_eval @ d)
        return out
    raise ValueError(f"problem.family must be 'linear' or 'posterior-weights' (well specified); got {problem.family!r}")


def check_sandwich_simulation(*, N: int = 2000, n_seeds: int = 300, rng=0, models=("linear", "posterior-weights")) -> CheckReport:
    r"""The sandwich :math:`V(p) = \tfrac12\mathrm{tr}(A_\omega A_p^{-1} G_p A_p^{-1})` against simulated training.

    Well-specified families on 9 levels in :math:`[-4, 4]` with a non-uniform allocation
    :math:`p_i \propto 1 + i`.  Holds when, for each model,
    :math:`|\overline{N\,\mathrm{excess}} - V| \le` ``MC_NSIGMA`` SE + ``SANDWICH_FINITE_N_FACTOR`` (m+1)/N V.
    The headline is the largest deviation in units of that bound.

    Parameters
    ----------
    N : int
        Training samples per simulated run.
    n_seeds : int
        Simulated runs per model.
    rng : Generator, int or None
        Randomness.
    models : sequence of {'linear', 'posterior-weights'}
        Families to check.

    Returns
    -------
    CheckReport
        Headline ``max_dev_over_allowance``.

    References
    ----------
    THEORY.md section 4 (sandwich V(p)).
    """
    from noisealloc.solvers import sandwich_value
    from noisealloc.theory.information_matrices import gaussian_linear_matrices, posterior_weight_matrices

    with _Timer() as t:
        gen = as_generator(rng)
        lam = np.linspace(-4.0, 4.0, 9)
        p = 1.0 + np.arange(lam.size)
        p /= p.sum()
        rows = {}
        worst = 0.0
        for fam in models:
            if fam == "linear":
                model = default_gaussian(D=3, variances=(2.0, 0.3))
                prob = gaussian_linear_matrices(model, lam)
            else:
                model = default_dirac()
                prob = posterior_weight_matrices(model, lam)
            V = sandwich_value(prob.A, prob.G, prob.A_eval, p)
            sims = simulate_sandwich(prob, p, model, N=N, n_seeds=n_seeds, rng=gen)
            mean, se = float(sims.mean()), float(sims.std(ddof=1) / np.sqrt(sims.size))
            allow = MC_NSIGMA * se + SANDWICH_FINITE_N_FACTOR * (prob.m + 1) / N * V
            dev = abs(mean - V) / allow
            rows[fam] = {"V": V, "simulated": mean, "stderr": se, "allowance": allow, "m": prob.m}
            worst = max(worst, dev)
    return CheckReport(
        name="sandwich-vs-training", holds=bool(worst <= 1.0), measured={"max_dev_over_allowance": worst, **rows},
        tolerance=1.0, assumptions=("well-specified family (theta* reproduces m at every level)", "convex loss",
                                    f"N = {N} >= 50 m"),
        data=f"Gaussian manifold (linear) and dirac K=4 (posterior weights), {n_seeds} seeds x N = {N}",
        seconds=t.seconds, headline="max_dev_over_allowance",
        message="|mean N excess - V| / (4 SE + 3 (m+1)/N V) <= 1",
    )


# ------------------------------------------------------------------------------- coordinate covariance


def check_coordinate_covariance(model=None, coordinates=("sigma", "log-sigma", "t-cosine"), *, lam=None,
                                data: str = "dirac K=4 D=1") -> CheckReport:
    r"""Coordinate covariance of the square-root law.

    For learners uniform in ``u``: (1) the schedule built in ``u`` and moved to :math:`\lambda` equals
    :math:`\sqrt{h}\,|du/d\lambda|^{1/2}` normalised (the Jacobian by centred differences of ``u(lambda)``,
    independent of the coordinate module's analytic derivative), to ``FD_RTOL``; (2) its
    independent-learner factor in ``u`` is 1 while the :math:`\lambda`-law moved to ``u`` loses a factor > 1
    (equal to 1 for an affine coordinate such as log-sigma, where the two laws coincide).

    Parameters
    ----------
    model : DataModel, optional
        Data model (default :func:`default_dirac`).
    coordinates : sequence of str
        Coordinates ``u`` of the learners.
    lam : array_like, optional
        Level grid (default 121 levels on [-6, 6]).
    data : str
        Description of the instance for the report.

    Returns
    -------
    CheckReport
        Headline ``max_rel_pdf_error``.

    References
    ----------
    THEORY.md section 4 (b): the square-root law is not coordinate invariant.
    """
    from noisealloc.theory.coordinates import get_coordinate
    from noisealloc.theory.entropic import entropic_schedule, independent_learner_factor
    from noisealloc.theory.tolerances import FD_REL_STEP

    with _Timer() as t:
        model = default_dirac() if model is None else model
        lam = np.linspace(-6.0, 6.0, 121) if lam is None else np.asarray(lam, dtype=np.float64)
        h = np.asarray(model.entropy_rate(lam).value)
        lam_law = entropic_schedule(lam, h, coordinate="lambda")
        inner = lam[1:-1]
        rows = {}
        worst = 0.0
        ok = True
        for name in coordinates:
            c = get_coordinate(name)
            step = FD_REL_STEP * np.maximum(1.0, np.abs(inner))
            dudl = np.abs((c.from_lam(inner + step) - c.from_lam(inner - step)) / (2 * step))
            sched = entropic_schedule(lam, h, coordinate=name).to("lambda")
            got = sched.pdf(inner)
            ref = np.sqrt(h[1:-1] * dudl)
            # normalise both on the same interior grid (the schedule's own normalisation is the trapezoid in u)
            got_n = got / np.trapezoid(got, inner)
            ref_n = ref / np.trapezoid(ref, inner)
            rel = float(np.max(np.abs(got_n - ref_n) / ref_n))
            u = c.from_lam(lam)
            order = np.argsort(u)
            u_s = u[order]
            hu = (h * np.abs(c.dlam_du(u)))[order]
            f_u = independent_learner_factor(u_s, hu, np.sqrt(hu))
            p_lam_in_u = (np.sqrt(h) * np.abs(c.dlam_du(u)))[order]
            f_lam = independent_learner_factor(u_s, hu, p_lam_in_u)
            # an affine coordinate (log-sigma = -lam/2) has a constant Jacobian: there both laws coincide
            affine = bool(np.ptp(dudl) <= FD_RTOL * np.max(dudl))
            rows[name] = {"max_rel_pdf_error": rel, "factor_u_law": f_u, "factor_lambda_law_in_u": f_lam,
                          "affine": affine}
            worst = max(worst, rel)
            lam_ok = abs(f_lam - 1) <= 1e-12 if affine else f_lam > 1 + 1e-6
            ok &= bool(rel <= FD_RTOL and abs(f_u - 1) <= 1e-12 and lam_ok)
        del lam_law
    return CheckReport(
        name="coordinate-covariance", holds=ok, measured={"max_rel_pdf_error": worst, **rows}, tolerance=FD_RTOL,
        assumptions=("learners on a grid uniform in u", "decoupled features (omega_u c ∝ h_u)"),
        data=data + f", coordinates {', '.join(coordinates)}", seconds=t.seconds, headline="max_rel_pdf_error",
        message="pdf in lambda of the u-law vs sqrt(h |du/dlam|) (relative, after normalisation on the grid); "
                "factor(u-law) = 1 < factor(lambda-law)",
    )
