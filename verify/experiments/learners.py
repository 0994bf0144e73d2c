r"""Regime (ii) of docs/THEORY.md §6.6: independent learners per λ-cell, simulated against Theorem 2.

The training interval :math:`[\lambda_{min}, \lambda_{max}]` is cut into :math:`L` cells of width
:math:`\Delta` with centres :math:`\lambda_u`.  Each cell has its own learner and receives
:math:`n_u \approx N P_u` of the :math:`N` training samples, :math:`P_u` the schedule's mass in the
cell (:math:`P_u \approx p(\lambda_u)\Delta`; counts by largest remainder, so :math:`\sum_u n_u = N`).
Evaluation: the ELBO weight :math:`\omega = \tfrac12 e^\lambda` times the cell width, so the total
excess risk approximates :math:`\int \omega\,E\|D - m\|^2 d\lambda` by the midpoint rule.

The learner (docs/THEORY.md §4 (b), feature-noise decoupling made exact): for a Gaussian data law
(:class:`~noisealloc.theory.models.gaussian.GaussianManifold`, mean :math:`\mu`), ordinary least squares of
:math:`x_0 - \mu` on the :math:`q = D` features :math:`x - \mu` (no intercept).  The Bayes denoiser is
linear, :math:`m = \mu + B(x-\mu)`, and the residual :math:`x_0 - m` is Gaussian and independent of
:math:`x`, so the expected excess risk of a cell with :math:`n` samples is exactly

.. math:: E\|(\hat B - B)(x - \mu)\|^2 = \mathrm{mmse}(\lambda_u)\,\frac{q}{n - q - 1} \qquad (n > q + 1)

(Gaussian design, homoscedastic residual).  Hence :math:`c(\lambda) = q\,\mathrm{mmse}(\lambda)`,
:math:`\omega c = q\,h`, and Theorem 2 predicts, for a schedule with cell masses :math:`P`, the loss
factor against the square-root law

.. math:: F(P) = \sum_u \frac{\Delta\,\omega_u c_u}{P_u} \Big/ \Big(\sum_u \sqrt{\Delta\,\omega_u c_u}\Big)^2 \;\ge 1

as :math:`N \to \infty` (:func:`cell_loss_factor`).  At finite :math:`N` the exact expected ratio uses
:math:`q/(n_u-q-1)` in place of :math:`q/n_u` (the *finite-N prediction*); the simulation is compared
with that, and both with :math:`F`.  The simulated excess risk of each cell is computed exactly from
the fitted :math:`\hat B` (:math:`\mathrm{tr}((\hat B-B)\Sigma_x(\hat B-B)^\top)`), so its only noise is
the training draw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from noisealloc.theory.errors import as_float_array, as_generator, check_count, check_finite, check_interval

__all__ = [
    "cell_counts",
    "cell_loss_factor",
    "IndependentLearnersResult",
    "independent_learners",
]


def cell_loss_factor(omega_c, mass) -> float:
    r"""Theorem 2's loss factor of cell masses ``mass`` against the square-root law.

    .. math:: F(P) = \sum_u \frac{a_u}{P_u} \Big/ \Big(\sum_u \sqrt{a_u}\Big)^2, \qquad a_u = \Delta\,\omega_u c_u ,

    :math:`\ge 1`, with equality iff :math:`P_u \propto \sqrt{a_u}` (Cauchy-Schwarz).  ``mass`` is
    normalised to sum 1 first.

    Parameters
    ----------
    omega_c : array_like, shape (L,)
        Per-cell :math:`a_u \ge 0` (weight times cost times cell width).
    mass : array_like, shape (L,)
        Per-cell allocation :math:`P_u > 0` (need not be normalised).

    Returns
    -------
    float

    References
    ----------
    docs/THEORY.md §4 (b), Theorem 2.

    Examples
    --------
    >>> cell_loss_factor([1.0, 4.0], [1.0, 2.0])      # the square-root law itself
    1.0
    >>> round(cell_loss_factor([1.0, 4.0], [1.0, 1.0]), 6)   # uniform: (2 + 8) / 9
    1.111111
    """
    a = check_finite(as_float_array(omega_c, "omega_c", ndim=1), "omega_c")
    P = check_finite(as_float_array(mass, "mass", shape=a.shape), "mass")
    if np.any(a < 0):
        raise ValueError(f"omega_c must be >= 0; got {a[a < 0][0]!r}")
    if not np.any(a > 0):
        raise ValueError("omega_c must be positive in at least one cell")
    if np.any(P <= 0):
        i = int(np.flatnonzero(P <= 0)[0])
        raise ValueError(f"mass must be > 0 in every cell (a starved learner has infinite loss); mass[{i}] = {P[i]!r}")
    P = P / P.sum()
    return float(np.sum(a / P) / np.sum(np.sqrt(a)) ** 2)


def cell_counts(mass, N: int) -> np.ndarray:
    r"""Integer sample counts :math:`n_u` with :math:`\sum_u n_u = N`, closest to :math:`N P_u`.

    Largest-remainder rounding of :math:`N P_u` (``mass`` normalised first); ties go to the lower index.

    Parameters
    ----------
    mass : array_like, shape (L,)
        Non-negative cell masses, not all zero.
    N : int
        Total samples.

    Returns
    -------
    ndarray of int, shape (L,)

    Examples
    --------
    >>> cell_counts([0.5, 0.3, 0.2], 7).tolist()
    [4, 2, 1]
    """
    P = check_finite(as_float_array(mass, "mass", ndim=1), "mass")
    N = check_count(N, "N")
    if np.any(P < 0) or not np.any(P > 0):
        raise ValueError(f"mass must be >= 0 and not all zero; got {P.tolist()[:6]}")
    target = N * P / P.sum()
    n = np.floor(target).astype(np.int64)
    short = N - int(n.sum())
    if short > 0:
        order = np.argsort(-(target - n), kind="stable")
        n[order[:short]] += 1
    return n


@dataclass(frozen=True)
class IndependentLearnersResult:
    r"""Independent learners under one schedule, against the square-root law (regime (ii)).

    Attributes
    ----------
    schedule, reference : str
        Names of the compared allocation and of the reference (the square-root law on the cells).
    N, q, seeds : int
        Training samples per run, features per learner, simulated runs per allocation.
    lam : ndarray, shape (L,)
        Cell centres; ``width`` the cell width :math:`\Delta`.
    counts, counts_ref : ndarray of int, shape (L,)
        :math:`n_u` of the schedule and of the reference.
    predicted_factor : float
        Theorem 2's asymptotic factor :math:`F(P)` (:func:`cell_loss_factor`).
    exact_factor : float
        Finite-N expected ratio :math:`\sum_u a_u/(n_u-q-1) \,/\, \sum_u a_u/(n^{ref}_u-q-1)` (OLS, exact).
    simulated_factor, simulated_se : float
        Ratio of the mean simulated losses over ``seeds`` runs, and its delta-method standard error.
    loss, loss_ref : ndarray, shape (seeds,)
        Simulated total excess risk per run (nats-scale: :math:`\sum_u \Delta\omega_u E_u`).
    """

    schedule: str
    reference: str
    N: int
    q: int
    seeds: int
    lam: np.ndarray
    width: float
    counts: np.ndarray
    counts_ref: np.ndarray
    predicted_factor: float
    exact_factor: float
    simulated_factor: float
    simulated_se: float
    loss: np.ndarray
    loss_ref: np.ndarray

    def to_dict(self) -> dict:
        """JSON-ready summary (scalars and per-cell lists).

        Returns
        -------
        dict
        """
        return {
            "schedule": self.schedule, "reference": self.reference, "N": self.N, "q": self.q,
            "seeds": self.seeds, "lam": self.lam.tolist(), "width": self.width,
            "counts": self.counts.tolist(), "counts_ref": self.counts_ref.tolist(),
            "predicted_factor": self.predicted_factor, "exact_factor": self.exact_factor,
            "simulated_factor": self.simulated_factor, "simulated_se": self.simulated_se,
        }


def _cell_mass(schedule, edges) -> np.ndarray:
    coord = getattr(schedule, "coordinate", None)
    u = edges if coord is None or coord.name == "lambda" else np.asarray(coord.from_lam(edges), dtype=np.float64)
    cdf = np.asarray(schedule.cdf(u), dtype=np.float64)
    return np.abs(np.diff(cdf))


def _linear_gaussian(model):
    for attr in ("mean", "basis", "variances"):
        if not hasattr(model, attr):
            raise ValueError(f"model must be a Gaussian manifold (mean, basis, variances) so that OLS on x is "
                             f"well specified; got {type(model).__name__}")
    cov0 = (model.basis * model.variances) @ model.basis.T
    return np.asarray(model.mean, dtype=np.float64), cov0


def _run_losses(model, counts, lam, weight, mean, cov0, seeds, gen):
    """Simulated total weighted excess risk per run, shape (seeds,)."""
    d = mean.size
    out = np.zeros(seeds)
    for n, l, w in zip(counts, lam, weight):
        cov_x = cov0 + np.exp(-l) * np.eye(d)
        B = np.linalg.solve(cov_x, cov0).T  # Bayes map: m - mu = B (x - mu), B = cov0 cov_x^{-1}
        # All runs of the cell at once: OLS by the normal equations (q = D is small and X^T X is
        # well conditioned once n > q + 1 with noise of variance e^-lam in every direction).
        y = (model.sample_x0(int(n) * seeds, rng=gen) - mean).reshape(seeds, int(n), d)
        x = y + np.exp(-0.5 * l) * gen.standard_normal((seeds, int(n), d))
        xt = np.swapaxes(x, 1, 2)
        Bhat_t = np.linalg.solve(xt @ x, xt @ y)
        E = np.swapaxes(Bhat_t, 1, 2) - B
        out += w * np.einsum("sij,jk,sik->s", E, cov_x, E)  # E over a fresh x of ||E (x - mu)||^2
    return out


def independent_learners(model, schedule, *, N: int, lam_min: float = -6.0, lam_max: float = 6.0,
                         cells: int = 16, seeds: int = 200, rng=None) -> IndependentLearnersResult:
    r"""Simulate one OLS learner per λ-cell under ``schedule`` and under the square-root law.

    Parameters
    ----------
    model : GaussianManifold
        Data law (the learners' model class contains its linear Bayes denoiser).
    schedule : schedule object
        With ``cdf`` in its ``coordinate`` (cell masses from CDF differences at the cell edges).
    N : int
        Training samples per run, split over the cells (:func:`cell_counts`).
    lam_min, lam_max : float
        Interval cut into ``cells`` equal cells in :math:`\lambda`.
    cells : int
        Number of cells, >= 2.
    seeds : int
        Simulated runs per allocation, >= 2.
    rng : numpy.random.Generator, int or None

    Returns
    -------
    IndependentLearnersResult

    Raises
    ------
    ValueError
        If a cell would get :math:`n_u \le q + 1` samples under either allocation (the OLS risk is
        infinite there): raise ``N`` or narrow the interval.

    References
    ----------
    docs/THEORY.md §4 (b) (Theorem 2, feature-noise decoupling, random-matrix form), §6.6 (ii).
    """
    mean, cov0 = _linear_gaussian(model)
    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
    L = check_count(cells, "cells")
    seeds = check_count(seeds, "seeds")
    N = check_count(N, "N")
    if L < 2 or seeds < 2:
        raise ValueError(f"cells and seeds must be >= 2; got cells={cells!r}, seeds={seeds!r}")
    q = mean.size
    edges = np.linspace(lo, hi, L + 1)
    lam = 0.5 * (edges[1:] + edges[:-1])
    width = float(edges[1] - edges[0])
    mmse = np.asarray(model.mmse(lam).value, dtype=np.float64)
    a = width * 0.5 * np.exp(lam) * q * mmse          # Delta * omega_u * c_u
    mass = _cell_mass(schedule, edges)
    if np.any(mass <= 0):
        i = int(np.flatnonzero(mass <= 0)[0])
        raise ValueError(f"schedule {getattr(schedule, 'name', schedule)!r} puts no mass in the cell at "
                         f"lam = {lam[i]:.3g}; its independent learner would never train")
    mass_ref = np.sqrt(a)
    counts, counts_ref = cell_counts(mass, N), cell_counts(mass_ref, N)
    for name, c in (("schedule", counts), ("square-root law", counts_ref)):
        if np.any(c <= q + 1):
            i = int(np.argmin(c))
            raise ValueError(f"N = {N} gives the cell at lam = {lam[i]:.3g} only {c[i]} samples under the {name}; "
                             f"OLS with q = {q} features needs > q + 1 = {q + 1} (raise N)")
    predicted = cell_loss_factor(a, mass)
    exact = float(np.sum(a / (counts - q - 1)) / np.sum(a / (counts_ref - q - 1)))
    gen = as_generator(rng)
    weight = width * 0.5 * np.exp(lam)  # Delta * omega_u; the simulated risk carries mmse * q / (n - q - 1)
    loss = _run_losses(model, counts, lam, weight, mean, cov0, seeds, gen)
    loss_ref = _run_losses(model, counts_ref, lam, weight, mean, cov0, seeds, gen)
    m1, m0 = loss.mean(), loss_ref.mean()
    ratio = float(m1 / m0)
    # Delta method for a ratio of means (independent runs): var(R)/R^2 = var1/(k m1^2) + var0/(k m0^2).
    se = ratio * float(np.sqrt(loss.var(ddof=1) / (seeds * m1 * m1) + loss_ref.var(ddof=1) / (seeds * m0 * m0)))
    return IndependentLearnersResult(
        schedule=str(getattr(schedule, "name", "schedule")), reference="sqrt-entropy (cells)", N=N, q=q,
        seeds=seeds, lam=lam, width=width, counts=counts, counts_ref=counts_ref, predicted_factor=predicted,
        exact_factor=exact, simulated_factor=ratio, simulated_se=se, loss=loss, loss_ref=loss_ref,
    )
