r"""Check: an entropic schedule recovered from measured losses converges to the exact one.

Synthetic held-out losses are generated with the *exact* denoiser of a data
model (so the only error is the finite held-out set):

.. math:: \hat L(\lambda) = \frac1n \sum_{i=1}^n \|x_{0,i} - m(x_i, \lambda)\|^2,
          \qquad \mathbb{E}\,\hat L(\lambda) = \mathrm{mmse}(\lambda),

fitted with :func:`noisealloc.theory.information.from_losses.fit_mmse_profile`, turned into
:math:`\hat h = \tfrac12 e^{\lambda}\widehat{\mathrm{mmse}}` and into the
square-root entropic schedule.  The report gives, for each held-out size, the
relative L1 error of :math:`\hat h` (entropy misplaced, relative to the
entropy produced on the interval), and the Wasserstein-1 distance in :math:`\lambda` between the recovered
and the exact square-root entropic schedules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.schedules.entropic import schedule_from_model, schedule_from_rate
from noisealloc.theory.errors import as_generator
from noisealloc.theory.information.from_losses import fit_mmse_profile

__all__ = ["synthetic_losses", "w1_lambda", "LossRecoveryReport", "loss_recovery"]


def synthetic_losses(model, lam, n_heldout: int, *, rng=None):
    r"""Per-level mean x0 loss of the exact denoiser on ``n_heldout`` fresh samples, with its standard error.

    .. math:: \hat L(\lambda) = \frac1n \sum_{i=1}^n \|x_{0,i} - m(x_i, \lambda)\|^2,
              \qquad \mathbb{E}\,\hat L(\lambda) = \mathrm{mmse}(\lambda).

    Parameters
    ----------
    model
        A data model with ``sample_x(lam, n, rng=...)`` and an exact ``denoiser``.
    lam : array_like
        Log-SNR levels (any shape).
    n_heldout : int
        Fresh samples per level.
    rng : numpy.random.Generator, int or None
        Randomness of the samples (keyword-only).

    Returns
    -------
    loss, stderr : ndarray
        Mean loss and its standard error (``ddof = 1``), each of shape ``lam.shape``.

    References
    ----------
    docs/THEORY.md §2 (MMSE), §5 (a tabulated density from measured per-level losses).
    """
    gen = as_generator(rng)
    lam = np.asarray(lam, dtype=np.float64)
    loss = np.empty(lam.size)
    se = np.empty(lam.size)
    for i, l in enumerate(lam.ravel()):
        x0, x = model.sample_x(float(l), int(n_heldout), rng=gen)
        err = np.sum((x0 - model.denoiser(x, float(l))) ** 2, axis=1)
        loss[i] = err.mean()
        se[i] = err.std(ddof=1) / np.sqrt(err.size)
    return loss.reshape(lam.shape), se.reshape(lam.shape)


def w1_lambda(a, b, *, n: int = 20001) -> float:
    r"""Wasserstein-1 distance :math:`\int |F_a(\lambda) - F_b(\lambda)|\,d\lambda` of two schedules, in log-SNR.

    Both are moved to :math:`\lambda`; the integral runs over the union of their
    intervals on a uniform grid of ``n`` points (trapezoid).

    Parameters
    ----------
    a, b : Schedule
        Schedules in any coordinate (with ``to``, ``interval`` and ``cdf``).
    n : int
        Points of the trapezoid grid.

    Returns
    -------
    float
        :math:`W_1 \ge 0` in units of log-SNR.

    Examples
    --------
    >>> from noisealloc.theory.schedules import uniform_lambda
    >>> round(w1_lambda(uniform_lambda(lam_min=0.0, lam_max=1.0), uniform_lambda(lam_min=1.0, lam_max=2.0)), 6)
    1.0
    """
    a_l, b_l = a.to("lambda"), b.to("lambda")
    lo = min(a_l.interval[0], b_l.interval[0])
    hi = max(a_l.interval[1], b_l.interval[1])
    lam = np.linspace(lo, hi, int(n))

    def F(s, x):
        lo_s, hi_s = s.interval
        out = np.where(x <= lo_s, 0.0, 1.0)
        inside = (x > lo_s) & (x < hi_s)
        out[inside] = s.cdf(x[inside])
        return out

    return float(np.trapezoid(np.abs(F(a_l, lam) - F(b_l, lam)), lam))


@dataclass(frozen=True)
class LossRecoveryReport:
    r"""Errors of the recovered entropy rate and schedule against held-out size, over independent seeds.

    Attributes
    ----------
    sizes : tuple of int
        Held-out samples per level.
    h_rel_error, h_rel_error_se : tuple of float
        Mean over seeds (and its standard error) of the relative L1 error of the entropy rate,
        :math:`\int |\hat h - h|\,d\lambda / \int h\,d\lambda` (entropy misplaced, relative to
        the entropy produced on the interval).
    w1, w1_se : tuple of float
        Mean over seeds (and its standard error) of the W1 distance in lambda between the recovered
        and exact square-root entropic schedules.
    holds : bool
        Both mean errors at the largest size are below those at the smallest size by more than
        two standard errors of the difference.
    """

    name: str
    sizes: tuple
    h_rel_error: tuple
    h_rel_error_se: tuple
    w1: tuple
    w1_se: tuple
    holds: bool
    info: dict = field(default_factory=dict, compare=False)

    def table(self) -> str:
        """The report as a fixed-width text table."""
        lines = [f"{'held-out n':>10}  {'L1 error of h':>20}  {'W1 to exact (lam)':>20}"]
        for n, e, es, w, ws in zip(self.sizes, self.h_rel_error, self.h_rel_error_se, self.w1, self.w1_se):
            lines.append(f"{n:>10d}  {e:>11.4f} +- {es:<6.4f}  {w:>11.4f} +- {ws:<6.4f}")
        return "\n".join(lines)


def _decreases(mean, se) -> bool:
    return (mean[0] - mean[-1]) > 2.0 * np.hypot(se[0], se[-1])


def loss_recovery(model, sizes=(100, 1000, 10000, 100000), *, lam_min: float = -8.0, lam_max: float = 8.0,
                  levels: int = 33, coordinate: str = "lambda", n_seeds: int = 4, rng=0,
                  name: str = "model") -> LossRecoveryReport:
    r"""Run the loss-recovery check on ``model`` for each held-out size and seed (see module docstring).

    The exact square-root entropic schedule comes from
    :func:`noisealloc.theory.schedules.entropic.schedule_from_model`; the recovered one from the fitted
    :math:`\hat h` through :func:`noisealloc.theory.schedules.entropic.schedule_from_rate`.

    Parameters
    ----------
    model
        A data model with an exact denoiser and a deterministic ``entropy_rate``.
    sizes : sequence of int
        Held-out samples per level, increasing.
    lam_min, lam_max : float
        Log-SNR interval (choose it so the exact loss is not 0 in float64 at ``lam_max``).
    levels : int
        Levels of the grid.
    coordinate : str
        Coordinate of the schedules.
    n_seeds : int
        Independent repetitions (>= 2 for standard errors).
    rng : numpy.random.Generator, int or None
        Randomness of the held-out samples.
    name : str
        Label of the report.

    Returns
    -------
    LossRecoveryReport

    References
    ----------
    docs/THEORY.md §4 (b), §5 (tabulated density from measured per-level losses).
    """
    gen = as_generator(rng)
    lam = np.linspace(lam_min, lam_max, int(levels))
    ent = schedule_from_model(model, lam, coordinate=coordinate)
    h_exact, exact = ent.h, ent.schedule
    errs = np.empty((int(n_seeds), len(sizes)))
    w1s = np.empty_like(errs)
    for s_i in range(int(n_seeds)):
        for j, n in enumerate(sizes):
            loss, se = synthetic_losses(model, lam, n, rng=gen)
            bad = np.flatnonzero(loss <= 0)
            if bad.size:
                raise ValueError(f"the exact denoiser's loss at lam = {lam[bad[0]]:g} is 0 in float64 (below "
                                 "rounding); choose a smaller lam_max for this model")
            prof = fit_mmse_profile(lam, loss, stderr=se, n_boot=0)
            h_hat = prof.entropy_rate(lam)
            errs[s_i, j] = np.trapezoid(np.abs(h_hat - h_exact), lam) / np.trapezoid(h_exact, lam)
            w1s[s_i, j] = w1_lambda(schedule_from_rate(lam, h_hat, coordinate=coordinate).schedule, exact)
    k = np.sqrt(errs.shape[0])
    e_m, e_s = errs.mean(0), errs.std(0, ddof=1) / k if errs.shape[0] > 1 else np.zeros(len(sizes))
    w_m, w_s = w1s.mean(0), w1s.std(0, ddof=1) / k if w1s.shape[0] > 1 else np.zeros(len(sizes))
    return LossRecoveryReport(name=name, sizes=tuple(int(s) for s in sizes), h_rel_error=tuple(e_m.tolist()),
                              h_rel_error_se=tuple(e_s.tolist()), w1=tuple(w_m.tolist()), w1_se=tuple(w_s.tolist()),
                              holds=bool(_decreases(e_m, e_s) and _decreases(w_m, w_s)),
                              info={"lam_min": lam_min, "lam_max": lam_max, "levels": levels, "n_seeds": n_seeds,
                                    "coordinate": coordinate, "seed": rng if isinstance(rng, int) else None})
