r"""The sandwich :math:`V(p)` of docs/THEORY.md section 4 against simulated training runs.
"""

from __future__ import annotations


import numpy as np

from noisealloc.theory.errors import as_generator
from noisealloc.theory.tolerances import (
    MC_NSIGMA,
)
from noisealloc.verify.checks.report import CheckReport, _Timer, default_dirac, default_gaussian

__all__ = ['simulate_sandwich', 'check_sandwich_simulation']


#: Finite-N allowance of the sandwich comparison, in units of (m + 1) / N: for OLS with
#: Gaussian design N E[excess] = V N / (N - m - 1) = V (1 + (m + 1)/N + ...); 3 covers
#: heteroscedastic designs (heavier fourth moments) at N >= 50 m.
SANDWICH_FINITE_N_FACTOR = 3.0
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
    docs/THEORY.md section 4 (sandwich V(p)).
    """
    from noisealloc.solvers import sandwich_value
    from noisealloc.theory.information.matrices import gaussian_linear_matrices, posterior_weight_matrices

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
