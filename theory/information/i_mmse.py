r"""The I--MMSE identity of docs/THEORY.md section 2, :math:`dH/d\lambda = -\tfrac12 e^\lambda
\mathrm{mmse}(\lambda)`, checked by finite differences (deterministic models) or per draw with
common random numbers (Monte Carlo), each with its one pass rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from noisealloc.theory.errors import as_float_array, as_float_scalar, check_finite
from noisealloc.theory.tolerances import (
    FD_REL_STEP,
    FD_RTOL,
    I_MMSE_RATE_FLOOR,
    MC_NSIGMA,
)
from noisealloc.theory.information.budget import _fixed_seed

__all__ = ['I_MMSE_RULE', 'IMMSECheck', 'i_mmse_check', 'IMMSEMonteCarloCheck']


#: The one pass rule of the I-MMSE identity (what :attr:`IMMSECheck.holds` tests).
I_MMSE_RULE = ("max |fd - h| / h over the levels with h > I_MMSE_RATE_FLOOR <= FD_RTOL "
               "(and at least one level tested)")

#: The pass rule of the Monte-Carlo I-MMSE identity (:attr:`IMMSEMonteCarloCheck.holds`).
I_MMSE_MC_RULE = ("|mean residual| <= MC_NSIGMA * stderr on every interval, residual_i = H_i(a) - H_i(b) - "
                  "int_a^b 1/2 e^lam mmse_i dlam per draw (common random numbers; Gauss-Legendre in lam)")
#: Gauss-Legendre nodes per interval of the Monte-Carlo I-MMSE check: per draw (fixed x0 and noise
#: direction) the integrand is smooth on the scale of one unit of lambda, where 16 nodes are exact to
#: rounding against its standard error.
I_MMSE_MC_NODES = 16


@dataclass(frozen=True)
class IMMSECheck:
    r"""Result of :func:`i_mmse_check` at levels ``lam``, with its verdict (:data:`I_MMSE_RULE`).

    Attributes
    ----------
    lam : ndarray
        The levels.
    fd : ndarray
        :math:`-dH/d\lambda` (discrete) or :math:`dI/d\lambda` (continuous) by a centred
        difference of step ``step``.
    rate : ndarray
        :math:`h = \tfrac12 e^\lambda\mathrm{mmse}` from the model.
    rel_error : ndarray
        ``|fd - rate| / max(|rate|, 1e-300)``.
    step : float
        The finite-difference step.
    tested : ndarray of bool
        Levels where ``rate > I_MMSE_RATE_FLOOR`` (the relative error is judged there only).
    max_rel_error : float
        Largest ``rel_error`` over the tested levels (0 when none is tested).
    tolerance : float
        ``FD_RTOL``.
    holds : bool
        At least one level tested and ``max_rel_error <= tolerance``.
    rule : str
        :data:`I_MMSE_RULE`.
    message : str
        One line: the comparison and the verdict.

    References
    ----------
    docs/THEORY.md section 2 (I-MMSE, Guo--Shamai--Verdu).
    """

    lam: np.ndarray
    fd: np.ndarray
    rate: np.ndarray
    rel_error: np.ndarray
    step: float
    tested: np.ndarray
    max_rel_error: float
    tolerance: float
    holds: bool
    rule: str = I_MMSE_RULE
    message: str = ""


def i_mmse_check(model, lam, *, step=None, n_samples=None, rng=0):
    r"""Compare :math:`-dH/d\lambda` (or :math:`dI/d\lambda`) by centred FD with :math:`\tfrac12 e^\lambda\mathrm{mmse}`.

    .. math:: \frac{H(\lambda - s) - H(\lambda + s)}{2s} \approx \tfrac12 e^\lambda\,\mathrm{mmse}(\lambda)

    The step defaults to ``FD_REL_STEP * max(1, |lam|)`` (balances the :math:`O(s^2)` truncation
    against the :math:`O(\epsilon/s)` rounding).  Verdict: :data:`I_MMSE_RULE`.

    For a Monte-Carlo model a difference of two estimates at a step of ~1e-5 has no usable accuracy;
    the identity is then checked in integrated form on each interval between consecutive ``lam``, per
    draw of common random numbers,

    .. math:: r_i = H_i(\lambda_j) - H_i(\lambda_{j+1}) - \int_{\lambda_j}^{\lambda_{j+1}}
              \tfrac12 e^\lambda\,\mathrm{mmse}_i(\lambda)\,d\lambda, \qquad E\,r_i = 0,

    (Gauss--Legendre with :data:`I_MMSE_MC_NODES` nodes per interval), judged by
    :data:`I_MMSE_MC_RULE`: the mean residual within ``MC_NSIGMA`` of its standard error.

    Parameters
    ----------
    model : DataModel
        Deterministic (``monte_carlo = False``): :math:`H` (discrete) or :math:`I` (continuous) is
        differenced.  Monte Carlo: a discrete model (Dirac mixtures of three or more span dimensions).
    lam : array_like
        Levels (Monte Carlo: at least 2, increasing; interval ends, best at most ~1 apart).
    step : float, optional
        Finite-difference step (deterministic models).
    n_samples : int, optional
        Draws of the Monte-Carlo check (the model's default when None).
    rng : int, Generator or None, default 0
        Randomness of the Monte-Carlo check (a seed is recorded).

    Returns
    -------
    IMMSECheck or IMMSEMonteCarloCheck
        The latter for a Monte-Carlo model.

    Raises
    ------
    ValueError
        Non-finite ``lam``; for a Monte-Carlo model, a continuous model or fewer than 2 increasing levels.

    References
    ----------
    docs/THEORY.md section 2; Guo, Shamai & Verdu (2005).

    Examples
    --------
    >>> from noisealloc.theory.models.gaussian import GaussianManifold
    >>> chk = i_mmse_check(GaussianManifold([0.0], [[1.0]], [2.0]), [-1.0, 0.0, 1.0])
    >>> chk.holds, bool(chk.max_rel_error < 1e-8)
    (True, True)
    """
    lam = as_float_array(lam, "lam")
    check_finite(lam, "lam")
    if model.monte_carlo:
        # a centred difference of two Monte-Carlo estimates has no usable accuracy: the identity is
        # checked in integrated form, per draw, with its standard error
        return _i_mmse_check_mc(model, lam, n_samples=n_samples, rng=rng)
    s = as_float_scalar(step, "step") if step is not None else float(FD_REL_STEP * max(1.0, float(np.max(np.abs(lam))) if lam.size else 1.0))
    if model.discrete:
        hp = np.asarray(model.conditional_entropy(lam + s).value)
        hm = np.asarray(model.conditional_entropy(lam - s).value)
        fd = (hm - hp) / (2 * s)
    else:
        ip = np.asarray(model.mutual_information(lam + s).value)
        im = np.asarray(model.mutual_information(lam - s).value)
        fd = (ip - im) / (2 * s)
    rate = np.asarray(model.entropy_rate(lam).value)
    rel = np.abs(fd - rate) / np.maximum(np.abs(rate), 1e-300)
    tested = np.abs(rate) > I_MMSE_RATE_FLOOR
    worst = float(np.max(rel[tested])) if tested.any() else 0.0
    holds = bool(tested.any() and worst <= FD_RTOL)
    message = (f"max relative error {worst:.3g} over {int(tested.sum())} of {tested.size} levels with h > "
               f"{I_MMSE_RATE_FLOOR:g}: {'<=' if holds else 'not <='} FD_RTOL = {FD_RTOL:g}")
    return IMMSECheck(lam, fd, rate, rel, s, tested, worst, FD_RTOL, holds, I_MMSE_RULE, message)


@dataclass(frozen=True)
class IMMSEMonteCarloCheck:
    r"""Result of :func:`i_mmse_check` for a Monte-Carlo model: the integrated identity with standard errors.

    Attributes
    ----------
    lam : ndarray, shape (L,)
        Interval ends (increasing); the identity is checked on each ``[lam[j], lam[j+1]]``.
    difference : ndarray, shape (L-1,)
        :math:`H(\lambda_j) - H(\lambda_{j+1})` (nats), Monte Carlo.
    integral : ndarray, shape (L-1,)
        :math:`\int h\,d\lambda` over the interval, Monte Carlo (same draws).
    residual : ndarray, shape (L-1,)
        ``difference - integral`` (its expectation is 0).
    stderr : ndarray, shape (L-1,)
        Standard error of ``residual`` (per-draw residuals, stratified design).
    z : ndarray, shape (L-1,)
        ``residual / stderr``.
    tolerance : float
        ``MC_NSIGMA``.
    holds : bool
        ``|z| <= tolerance`` on every interval.
    n_samples : int
    seed : int or None
    rule : str
        :data:`I_MMSE_MC_RULE`.
    message : str

    References
    ----------
    docs/THEORY.md section 2 (I-MMSE) and section 3.1 (Monte-Carlo estimates carry standard errors).
    """

    lam: np.ndarray
    difference: np.ndarray
    integral: np.ndarray
    residual: np.ndarray
    stderr: np.ndarray
    z: np.ndarray
    tolerance: float
    holds: bool
    n_samples: int
    seed: int | None
    rule: str = I_MMSE_MC_RULE
    message: str = ""


def _i_mmse_check_mc(model, lam, *, n_samples=None, rng=0) -> IMMSEMonteCarloCheck:
    """The integrated I-MMSE identity of a discrete Monte-Carlo model, per draw (see :func:`i_mmse_check`)."""
    if not model.discrete:
        raise ValueError(f"the Monte-Carlo I-MMSE check needs a discrete model (H is the posterior entropy of its "
                         f"atoms); {model!r} is continuous")
    ends = np.asarray(lam, dtype=np.float64).reshape(-1)
    if ends.size < 2 or not np.all(np.diff(ends) > 0):
        raise ValueError("lam must hold at least 2 strictly increasing levels for a Monte-Carlo model (the identity "
                         "is checked on the intervals between them)")
    x, w = np.polynomial.legendre.leggauss(I_MMSE_MC_NODES)
    a, b = ends[:-1], ends[1:]
    nodes = (0.5 * (a + b))[:, None] + (0.5 * (b - a))[:, None] * x[None, :]      # (J, Q)
    weights = (0.5 * (b - a))[:, None] * w[None, :]
    levels = np.concatenate([ends, nodes.ravel()])
    seed = _fixed_seed(rng)
    smp = model.information_samples(levels, n_samples=n_samples, rng=seed)
    ent = smp.entropy[: ends.size]                                                  # (L, n)
    rate = 0.5 * np.exp(nodes.ravel())[:, None] * smp.mmse[ends.size:]             # (J*Q, n)
    integral_i = np.einsum("jq,jqn->jn", weights, rate.reshape(nodes.shape + (-1,)))
    diff_i = ent[:-1] - ent[1:]
    res, se = smp.mean_stderr(diff_i - integral_i)
    diff, _ = smp.mean_stderr(diff_i)
    integral, _ = smp.mean_stderr(integral_i)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, res / se, np.where(res == 0, 0.0, np.inf))
    holds = bool(np.all(np.abs(z) <= MC_NSIGMA))
    worst = int(np.argmax(np.abs(z)))
    message = (f"max |z| = {abs(z[worst]):.3g} on [{a[worst]:g}, {b[worst]:g}] over {a.size} intervals "
               f"({smp.entropy.shape[1]} draws): {'<=' if holds else 'not <='} MC_NSIGMA = {MC_NSIGMA:g}")
    return IMMSEMonteCarloCheck(ends, diff, integral, res, se, z, MC_NSIGMA, holds, int(smp.entropy.shape[1]), seed,
                                I_MMSE_MC_RULE, message)
