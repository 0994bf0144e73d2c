r"""Check: an entropic schedule recovered from measured losses converges to the exact one.

Synthetic held-out losses are generated with the *exact* denoiser of a data
model (so the only error is the finite held-out set):

.. math:: \hat L(\lambda) = \frac1n \sum_{i=1}^n \|x_{0,i} - m(x_i, \lambda)\|^2,
          \qquad \mathbb{E}\,\hat L(\lambda) = \mathrm{mmse}(\lambda),

fitted with :func:`noisealloc.theory.loss_profiles.fit_mmse_profile`, turned into
:math:`\hat h = \tfrac12 e^{\lambda}\widehat{\mathrm{mmse}}` and into the
square-root entropic schedule.  The report gives, for each held-out size, the
largest relative error of :math:`\hat h` where :math:`h` carries most of its
mass, and the Wasserstein-1 distance in :math:`\lambda` between the recovered
and the exact square-root entropic schedules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.entropic import entropic_schedule
from noisealloc.theory.errors import as_generator
from noisealloc.theory.loss_profiles import fit_mmse_profile

__all__ = ["synthetic_losses", "w1_lambda", "LossRecoveryReport", "loss_recovery"]


def synthetic_losses(model, lam, n_heldout: int, *, rng=None):
    """Per-level mean x0 loss of the exact denoiser on ``n_heldout`` fresh samples, with its standard error.

    Returns ``(loss, stderr)``, each of shape ``lam.shape``.
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
    """Errors of the recovered entropy rate and schedule against held-out size.

    Attributes
    ----------
    sizes : tuple of int
    h_rel_error : tuple of float
        max |h_hat/h - 1| over the levels where h >= ``mass_threshold`` * max h.
    w1 : tuple of float
        W1 distance in lambda between the recovered and exact sqrt-entropic schedules.
    holds : bool
        Both sequences decrease from the smallest to the largest size.
    """

    name: str
    sizes: tuple
    h_rel_error: tuple
    w1: tuple
    holds: bool
    info: dict = field(default_factory=dict, compare=False)


def loss_recovery(model, sizes=(100, 1000, 10000, 100000), *, lam_min: float = -8.0, lam_max: float = 8.0,
                  levels: int = 33, coordinate: str = "lambda", mass_threshold: float = 1e-3, rng=0,
                  name: str = "model") -> LossRecoveryReport:
    """Run the loss-recovery check on ``model`` for each held-out size (see module docstring)."""
    gen = as_generator(rng)
    lam = np.linspace(lam_min, lam_max, int(levels))
    h_exact = np.asarray(model.entropy_rate(lam).value)
    exact = entropic_schedule(lam, h_exact, coordinate=coordinate)
    mask = h_exact >= mass_threshold * h_exact.max()
    errs, w1s = [], []
    for n in sizes:
        loss, se = synthetic_losses(model, lam, n, rng=gen)
        prof = fit_mmse_profile(lam, loss, stderr=se, n_boot=0)
        h_hat = prof.entropy_rate(lam)
        errs.append(float(np.max(np.abs(h_hat[mask] / h_exact[mask] - 1.0))))
        w1s.append(w1_lambda(entropic_schedule(lam, h_hat, coordinate=coordinate), exact))
    holds = errs[-1] < errs[0] and w1s[-1] < w1s[0]
    return LossRecoveryReport(name=name, sizes=tuple(int(s) for s in sizes), h_rel_error=tuple(errs),
                              w1=tuple(w1s), holds=bool(holds),
                              info={"lam_min": lam_min, "lam_max": lam_max, "levels": levels,
                                    "coordinate": coordinate, "seed": rng if isinstance(rng, int) else None})
