r"""Model-generic information helpers (THEORY.md section 2).

* :func:`entropy_rate_from_mmse`: :math:`h(\lambda) = \tfrac12 e^\lambda\,\mathrm{mmse}(\lambda)`
  moved to a coordinate :math:`u` as :math:`h_u(u(\lambda)) = h(\lambda)\,|d\lambda/du|`;
* :func:`budget_integral`: :math:`\int_{\lambda_{\min}}^{\lambda_{\max}} h\,d\lambda` with
  its error (adaptive Gauss--Kronrod over the model's ``entropy_rate``);
* :func:`i_mmse_check`: :math:`-dH/d\lambda` (or :math:`dI/d\lambda`) by a centred
  finite difference against :math:`\tfrac12 e^\lambda\,\mathrm{mmse}`.

Convention: :math:`x = x_0 + e^{-\lambda/2}\varepsilon` (VE/EDM scaling; a VP
observation divided by :math:`\alpha` is the same), so everything is a function
of :math:`\lambda`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.coordinates import get_coordinate
from noisealloc.theory.errors import as_float_array, check_finite, check_interval
from noisealloc.theory.estimates import Estimate
from noisealloc.theory.protocol import monte_carlo_options
from noisealloc.theory.quadrature import adaptive_gauss_kronrod
from noisealloc.theory.tolerances import FD_REL_STEP

__all__ = [
    "grid_quadrature_weights",
    "model_entropy_rate",
    "entropy_rate_from_mmse",
    "rate_jacobian",
    "half_snr_times",
    "BudgetResult",
    "budget_integral",
    "IMMSECheck",
    "i_mmse_check",
]


def grid_quadrature_weights(lam):
    r"""Trapezoid and Simpson weights on a grid, so that ``weights @ f`` approximates :math:`\int f\,d\lambda`.

    Returns ``(trapezoid, simpson)``, each of shape ``lam.shape``; their difference
    applied to ``f`` estimates the discretisation error of a budget integral.
    """
    from scipy.integrate import simpson

    lam = np.asarray(lam, dtype=np.float64)
    trap = np.empty_like(lam)
    dl = np.diff(lam)
    trap[0], trap[-1] = dl[0] / 2, dl[-1] / 2
    trap[1:-1] = (dl[:-1] + dl[1:]) / 2
    simp = simpson(np.eye(lam.size), x=lam, axis=1)
    return trap, simp


def model_entropy_rate(model, lam, *, coordinate="lambda", n_samples=None, rng=None) -> Estimate:
    r"""``model.entropy_rate(lam, coordinate)``, with the Monte-Carlo options for Monte-Carlo models only.

    Deterministic models (closed forms, quadrature) take no ``n_samples``/``rng``; Monte-Carlo models
    get them, so that a caller can bound the cost and fix the seed without knowing which kind of
    model it holds.  The choice is made by the model's declared ``monte_carlo`` attribute
    (:func:`noisealloc.theory.protocol.monte_carlo_options`).

    Parameters
    ----------
    model : DataModel
        The data model.
    lam : array_like
        Log-SNR levels.
    coordinate : str or Coordinate
        Coordinate of the rate (default ``"lambda"``).
    n_samples : int, optional
        Monte-Carlo sample count (Monte-Carlo models only).
    rng : Generator, int or None
        Monte-Carlo randomness (Monte-Carlo models only).

    Returns
    -------
    Estimate
        :math:`h_u(u(\lambda)) = h(\lambda)\,|d\lambda/du|`, of the shape of ``lam``.
    """
    return model.entropy_rate(lam, coordinate, **monte_carlo_options(model, n_samples=n_samples, rng=rng))


def half_snr_times(lam, values) -> np.ndarray:
    r""":math:`\tfrac12 e^\lambda v` without overflow for :math:`|\lambda| \le 700` and tiny ``v``.

    Computed as :math:`\mathrm{sign}(v)\exp(\lambda - \log 2 + \log|v|)`, which stays
    finite and relatively accurate when :math:`v \sim 10^{-300}` and :math:`\lambda = 50`.
    """
    lam = np.asarray(lam, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore"):
        out = np.sign(v) * np.exp(lam - np.log(2.0) + np.log(np.abs(v)))
    return np.where(v == 0, 0.0, out)


def rate_jacobian(lam, coordinate="lambda"):
    r""":math:`|d\lambda/du|` at :math:`u(\lambda)` and the coordinate's name: a rate per unit of
    :math:`\lambda` times this is the rate per unit of ``u``."""
    lam = np.asarray(lam, dtype=np.float64)
    coord = get_coordinate(coordinate)
    if coord.name == "lambda":
        return np.ones_like(lam), coord.name
    return np.abs(coord.dlam_du(coord.from_lam(lam))), coord.name


def entropy_rate_from_mmse(lam, mmse, coordinate="lambda") -> Estimate:
    r"""Generative entropy rate from the MMSE, in the coordinate ``coordinate``.

    .. math::

        h(\lambda) = \tfrac12 e^{\lambda}\,\mathrm{mmse}(\lambda), \qquad
        h_u\big(u(\lambda)\big) = h(\lambda)\,\Big|\frac{d\lambda}{du}\Big|_{u(\lambda)} .

    Parameters
    ----------
    lam : array_like
        Log-SNR levels (the input is always :math:`\lambda`).
    mmse : Estimate or array_like
        MMSE at ``lam`` (same shape); an :class:`Estimate` keeps its method,
        ``error_check`` (relative, so unchanged) and a scaled ``stderr``.
    coordinate : str or Coordinate
        Target coordinate (``"lambda"``, ``"sigma"``, ``"log-sigma"``, ``"t"``, ...).

    Returns
    -------
    Estimate
        Rate per unit of ``u`` at :math:`u(\lambda)`; ``info["coordinate"]`` names it.
    """
    lam = as_float_array(lam, "lam")
    check_finite(lam, "lam")
    coord = get_coordinate(coordinate)
    if isinstance(mmse, Estimate):
        value, stderr = mmse.value, mmse.stderr
        method, err, n, info = mmse.method, mmse.error_check, mmse.n_samples, dict(mmse.info)
    else:
        value = as_float_array(mmse, "mmse")
        stderr = np.zeros_like(value)
        method, err, n, info = "closed-form", None, None, {}
    if value.shape != np.broadcast_shapes(value.shape, lam.shape):
        raise ValueError(f"mmse must have the shape of lam {lam.shape}; got {value.shape}")
    jac, info["coordinate"] = rate_jacobian(lam, coord)
    return Estimate(half_snr_times(lam, value) * jac, half_snr_times(lam, stderr) * jac, method, err, n, info)


@dataclass(frozen=True)
class BudgetResult:
    r"""Result of :func:`budget_integral`: :math:`\int h\,d\lambda` over ``interval``.

    Attributes: ``value``, ``abs_error`` (quadrature estimate plus the models'
    own errors), ``stderr`` (Monte Carlo only, else 0), ``interval``, ``nfev``,
    ``success``.
    """

    value: float
    abs_error: float
    stderr: float
    interval: tuple
    nfev: int
    success: bool
    info: dict = field(default_factory=dict, compare=False)


def budget_integral(model, lam_min=-30.0, lam_max=30.0, *, rtol=1e-9, n_panels=16, **opts) -> BudgetResult:
    r"""The budget :math:`\int_{\lambda_{\min}}^{\lambda_{\max}} h(\lambda)\,d\lambda` of a model.

    For a Dirac mixture this tends to :math:`H(\pi)` as the interval grows
    (THEORY.md section 2); the remainder is :math:`H(\lambda_{\max}) + H(\pi) - H(\lambda_{\min})`.
    Adaptive Gauss--Kronrod over ``n_panels`` equal panels, calling
    ``model.entropy_rate`` on batches of levels (``opts`` are passed on).
    """
    lo, hi = check_interval(lam_min, lam_max, "lam interval")
    edges = np.linspace(lo, hi, int(n_panels) + 1)
    calls = {"nfev": 0}
    stderr2 = {"v": 0.0}

    def f(lam, pid):
        est = model.entropy_rate(lam, **opts)
        calls["nfev"] += lam.size
        return np.asarray(est.value)[None, :]

    res = adaptive_gauss_kronrod(f, edges[:-1], edges[1:], np.zeros(n_panels, dtype=np.intp), 1,
                                 rtol=rtol, atol=1e-300)
    return BudgetResult(float(res.value[0, 0]), float(res.abs_error[0, 0]), float(np.sqrt(stderr2["v"])),
                        (lo, hi), calls["nfev"], res.success)


@dataclass(frozen=True)
class IMMSECheck:
    r"""Result of :func:`i_mmse_check` at levels ``lam``.

    ``fd``: :math:`-dH/d\lambda` (discrete) or :math:`dI/d\lambda` (continuous) by a
    centred difference of step ``step``; ``rate``: :math:`\tfrac12 e^\lambda\mathrm{mmse}`;
    ``rel_error``: ``|fd - rate| / max(|rate|, floor)``.
    """

    lam: np.ndarray
    fd: np.ndarray
    rate: np.ndarray
    rel_error: np.ndarray
    step: float


def i_mmse_check(model, lam, *, step=None, **opts) -> IMMSECheck:
    r"""Compare :math:`-dH/d\lambda` (or :math:`dI/d\lambda`) by centred FD with :math:`\tfrac12 e^\lambda\mathrm{mmse}`.

    .. math:: \frac{H(\lambda - s) - H(\lambda + s)}{2s} \approx \tfrac12 e^\lambda\,\mathrm{mmse}(\lambda)

    The step defaults to ``FD_REL_STEP * max(1, |lam|)`` (balances the
    :math:`O(s^2)` truncation against the :math:`O(\epsilon/s)` rounding).
    """
    lam = as_float_array(lam, "lam")
    check_finite(lam, "lam")
    s = float(step) if step is not None else float(FD_REL_STEP * max(1.0, float(np.max(np.abs(lam))) if lam.size else 1.0))
    if getattr(model, "discrete", True):
        hp = np.asarray(model.conditional_entropy(lam + s, **opts).value)
        hm = np.asarray(model.conditional_entropy(lam - s, **opts).value)
        fd = (hm - hp) / (2 * s)
    else:
        ip = np.asarray(model.mutual_information(lam + s, **opts).value)
        im = np.asarray(model.mutual_information(lam - s, **opts).value)
        fd = (ip - im) / (2 * s)
    rate = np.asarray(model.entropy_rate(lam, **opts).value)
    rel = np.abs(fd - rate) / np.maximum(np.abs(rate), 1e-300)
    return IMMSECheck(lam, fd, rate, rel, s)
