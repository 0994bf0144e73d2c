r"""Evaluation weights over log-SNR (docs/THEORY.md section 5).

Convention.  A weight :math:`W(\lambda) \ge 0` weights the x0-prediction
(denoising) mean squared error per unit of log-SNR:

.. math:: L_W = \int W(\lambda)\, \mathrm{mmse}(\lambda)\, d\lambda,
          \qquad \mathrm{mmse}(\lambda) = E\|x_0 - \hat x_0(x_\lambda)\|^2 .

Kingma & Gao (2023) write the same objectives with a weight :math:`w(\lambda)`
on the :math:`\varepsilon`-prediction error,
:math:`\tfrac12\int w(\lambda)\, E\|\varepsilon - \hat\varepsilon\|^2 d\lambda`; since
:math:`\|\varepsilon - \hat\varepsilon\|^2 = e^\lambda \|x_0 - \hat x_0\|^2`,

.. math:: W(\lambda) = \tfrac12 e^{\lambda} w(\lambda).

So the ELBO (:math:`w = 1`) is :math:`W = \tfrac12 e^\lambda` (the I-MMSE relation
:math:`dI/d\lambda = \tfrac12 e^\lambda \mathrm{mmse}`), min-SNR-:math:`\gamma`
(:math:`w = \min(e^\lambda, \gamma)/e^\lambda`) is :math:`W = \tfrac12\min(e^\lambda, \gamma)`,
and EDM is Kingma & Gao's effective weight

.. math:: w_{EDM}(\lambda) = N(\lambda; -2P_{mean}, 4P_{std}^2)\,
          \frac{e^{-\lambda} + \sigma_{data}^2}{\sigma_{data}^2}, \qquad
          W_{EDM}(\lambda) = \tfrac12 N(\lambda; -2P_{mean}, 4P_{std}^2)
          \left(e^{\lambda} + \sigma_{data}^{-2}\right).

How EDM's weight moves to :math:`\lambda`: EDM's loss is
:math:`E_{\ln\sigma \sim N(P_{mean}, P_{std}^2)}[\lambda_{EDM}(\sigma)\,\|D(x;\sigma) - x_0\|^2]`
with :math:`\lambda_{EDM}(\sigma) = (\sigma^2 + \sigma_{data}^2)/(\sigma\sigma_{data})^2
= e^{\lambda} + \sigma_{data}^{-2}` at :math:`\sigma = e^{-\lambda/2}`.  Changing the
variable :math:`\ln\sigma = -\lambda/2` turns the sampling density into
:math:`N(\lambda; -2P_{mean}, 4P_{std}^2)`, so EDM's loss equals
:math:`\int N(\lambda)\,(e^\lambda + \sigma_{data}^{-2})\,\mathrm{mmse}\,d\lambda = 2 L_{W_{EDM}}`;
the factor ½ puts it on Kingma & Gao's scale, where ELBO is :math:`w = 1`.  (The
x0 error is the same in the VE/EDM and VP scalings, since :math:`D` predicts :math:`x_0`.)
The EDM weight therefore includes EDM's own sampling density (the untruncated
log-normal); min-SNR-:math:`\gamma` does not include a sampling density.

References
----------
Kingma & Gao (2023), Understanding Diffusion Objectives as the ELBO with Simple Data Augmentation, Table 1 and Appendix D.
Karras, Aittala, Aila & Laine (2022), EDM, Table 1 (loss weighting and P_mean, P_std, sigma_data).
Hang et al. (2023), Efficient Diffusion Training via Min-SNR Weighting Strategy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from noisealloc.theory.errors import (
    as_float_array,
    as_float_scalar,
    check_choice,
    check_finite,
    check_nonnegative,
    check_positive,
)

__all__ = [
    "Weight",
    "elbo_weight",
    "edm_weight",
    "min_snr_weight",
    "uniform_weight",
    "tabulated_weight",
    "get_weight",
    "WEIGHT_NAMES",
    "LOSS_WEIGHTS",
    "MASKED_LOSS_WEIGHTS",
    "loss_weight",
    "log_loss_weight",
    "check_loss_weight",
]


def _lam(lam) -> np.ndarray:
    lam = as_float_array(lam, "lam")
    if np.any(np.isnan(lam)):
        raise ValueError("lam must not contain NaN")
    return lam


def elbo_weight(lam):
    r"""ELBO weight :math:`W(\lambda) = \tfrac12 e^{\lambda}` (finite for :math:`\lambda < 709`).

    With this weight :math:`\int W\,\mathrm{mmse}\,d\lambda` is the diffusion ELBO (the I-MMSE
    relation :math:`dI/d\lambda = \tfrac12 e^\lambda\,\mathrm{mmse}`), the default evaluation
    weight :math:`\omega` of docs/THEORY.md section 4.

    Parameters
    ----------
    lam : array_like
        Log-SNR :math:`\lambda` (not NaN).

    Returns
    -------
    float or ndarray of float64
        :math:`W(\lambda)` per unit log-SNR on the x0-MSE; a float for scalar input,
        else the shape of ``lam``.

    References
    ----------
    docs/THEORY.md sections 2 and 5; Kingma et al. (2021), Variational Diffusion Models.

    Examples
    --------
    >>> float(elbo_weight(0.0))
    0.5
    >>> elbo_weight([0.0, 2.0]).round(6).tolist()
    [0.5, 3.694528]
    """
    lam = _lam(lam)
    return np.exp(lam - math.log(2.0))[()]


def edm_weight(lam, sigma_data: float = 0.5, P_mean: float = -1.2, P_std: float = 1.2):
    r"""EDM weight moved to log-SNR (see the module docstring for the derivation).

    .. math:: W_{EDM}(\lambda) = \tfrac12\, N(\lambda; -2P_{mean}, 4P_{std}^2)\,(e^{\lambda} + \sigma_{data}^{-2})

    computed as :math:`\tfrac12\exp(\log N + \mathrm{logaddexp}(\lambda, -2\log\sigma_{data}))`
    so it stays finite (and underflows gracefully to 0) for any finite :math:`\lambda`.

    Parameters
    ----------
    lam : array_like
        Log-SNR :math:`\lambda` (not NaN).
    sigma_data : float, default 0.5
        EDM's data standard deviation per coordinate, > 0.
    P_mean, P_std : float, default -1.2, 1.2
        EDM's training law :math:`\ln\sigma \sim N(P_{mean}, P_{std}^2)`; ``P_std > 0``.

    Returns
    -------
    float or ndarray of float64
        :math:`W_{EDM}(\lambda) \ge 0` per unit log-SNR on the x0-MSE (EDM's sampling
        density included); a float for scalar input, else the shape of ``lam``.

    References
    ----------
    Karras et al. (2022), EDM, Table 1; Kingma & Gao (2023), Appendix D; docs/THEORY.md section 5.

    Examples
    --------
    >>> round(float(edm_weight(0.0)), 6)
    0.252053
    >>> round(float(edm_weight(2.4, sigma_data=1.0)), 6)   # at the mode of N(2.4, 2.4^2)
    0.999282
    """
    lam = _lam(lam)
    sigma_data = float(check_positive(as_float_scalar(sigma_data, "sigma_data"), "sigma_data"))
    P_mean = float(check_finite(as_float_scalar(P_mean, "P_mean"), "P_mean"))
    P_std = float(check_positive(as_float_scalar(P_std, "P_std"), "P_std"))
    mu, sd = -2.0 * P_mean, 2.0 * P_std
    z = (lam - mu) / sd
    log_n = -0.5 * z * z - math.log(sd) - 0.5 * math.log(2.0 * math.pi)
    return np.exp(log_n + np.logaddexp(lam, -2.0 * math.log(sigma_data)) - math.log(2.0))[()]


def min_snr_weight(lam, gamma: float = 5.0):
    r"""Min-SNR-:math:`\gamma` weight :math:`W(\lambda) = \tfrac12 \min(e^{\lambda}, \gamma)` (Hang et al. 2023).

    Parameters
    ----------
    lam : array_like
        Log-SNR :math:`\lambda` (not NaN).
    gamma : float, default 5.0
        SNR cap :math:`\gamma > 0`.

    Returns
    -------
    float or ndarray of float64
        :math:`W(\lambda)`: the ELBO weight below :math:`\lambda = \log\gamma`, constant
        :math:`\gamma/2` above; a float for scalar input, else the shape of ``lam``.

    References
    ----------
    Hang et al. (2023), Efficient Diffusion Training via Min-SNR Weighting Strategy; docs/THEORY.md section 5.

    Examples
    --------
    >>> [round(float(min_snr_weight(lam, gamma=5.0)), 6) for lam in (0.0, 10.0)]
    [0.5, 2.5]
    """
    lam = _lam(lam)
    gamma = float(check_positive(as_float_scalar(gamma, "gamma"), "gamma"))
    return (0.5 * np.exp(np.minimum(lam, math.log(gamma))))[()]


def uniform_weight(lam):
    r"""Uniform weight :math:`W(\lambda) = 1` (plain x0-MSE averaged uniformly over :math:`\lambda`).

    Parameters
    ----------
    lam : array_like
        Log-SNR :math:`\lambda` (not NaN).

    Returns
    -------
    float or ndarray of float64
        Ones, a float for scalar input, else the shape of ``lam``.

    References
    ----------
    docs/THEORY.md section 5.

    Examples
    --------
    >>> uniform_weight([-3.0, 4.0]).tolist()
    [1.0, 1.0]
    """
    lam = _lam(lam)
    return np.ones(lam.shape)[()]


@dataclass(frozen=True)
class Weight:
    r"""A named evaluation weight :math:`W(\lambda) \ge 0` with its parameters bound.

    Calling it evaluates the function and checks the result: a negative or NaN
    value raises ``ValueError`` (a weight is a non-negative measure density).

    Parameters
    ----------
    name : str
        Name of the weight (a key of :data:`WEIGHT_NAMES`, or a free label).
    func : callable
        ``func(lam, **params)`` returning :math:`W(\lambda)` per unit log-SNR.
    params : dict, optional
        Keyword arguments bound to ``func`` (e.g. ``{"gamma": 5.0}``).

    Attributes
    ----------
    name, func, params
        As given; ``Weight(lam)`` returns ``func(lam, **params)`` as a float for scalar
        input, else an array of the shape of ``lam``.

    Examples
    --------
    >>> w = Weight("half", lambda lam: 0.5 + 0.0 * np.asarray(lam))
    >>> float(w(3.0))
    0.5
    >>> Weight("neg", lambda lam: -1.0 + 0.0 * np.asarray(lam))(0.0)
    Traceback (most recent call last):
    ...
    ValueError: weight 'neg' must be >= 0; got -1.0
    """

    name: str
    func: Callable = field(repr=False, compare=False)
    params: dict = field(default_factory=dict)

    def __call__(self, lam):
        val = as_float_array(self.func(lam, **self.params), f"weight {self.name!r}")
        if np.any(np.isnan(val)):
            raise ValueError(f"weight {self.name!r} returned NaN")
        if np.any(val < 0):
            bad = val.ravel()[np.flatnonzero(val.ravel() < 0)[0]]
            raise ValueError(f"weight {self.name!r} must be >= 0; got {float(bad)!r}")
        return val[()]


def tabulated_weight(lam_knots, values, name: str = "tabulated") -> Weight:
    r"""Weight interpolated linearly through ``(lam_knots[i], values[i])``, constant beyond the ends.

    Parameters
    ----------
    lam_knots : array_like, shape (K,)
        Strictly increasing, finite log-SNR values, K >= 2.
    values : array_like, shape (K,)
        Finite and >= 0 (a negative weight raises ``ValueError``).
    name : str, default 'tabulated'
        Name of the returned weight.

    Returns
    -------
    Weight
        :math:`W(\lambda)` = ``np.interp(lam, lam_knots, values)`` (the knots and values are copied).

    Examples
    --------
    >>> w = tabulated_weight([0.0, 2.0], [1.0, 3.0])
    >>> float(w(1.0)), float(w(5.0))   # linear inside, constant beyond the last knot
    (2.0, 3.0)
    """
    x = check_finite(as_float_array(lam_knots, "lam_knots", ndim=1), "lam_knots")
    if x.size < 2 or np.any(np.diff(x) <= 0):
        raise ValueError(f"lam_knots must be strictly increasing with at least 2 entries; got {x!r}")
    v = check_nonnegative(as_float_array(values, "values", ndim=1), "values")
    if v.shape != x.shape:
        raise ValueError(f"values must have the shape of lam_knots {x.shape}; got {v.shape}")
    x, v = x.copy(), v.copy()

    def func(lam):
        return np.interp(_lam(lam), x, v)

    return Weight(name, func)


_REGISTRY: dict[str, Callable] = {
    "elbo": elbo_weight,
    "edm": edm_weight,
    "min_snr": min_snr_weight,
    "uniform": uniform_weight,
}
#: Names accepted by :func:`get_weight`.
WEIGHT_NAMES = tuple(_REGISTRY)


def get_weight(name: str, **params) -> Weight:
    r"""Look up an evaluation weight by name and bind its parameters.

    Parameters
    ----------
    name : {'elbo', 'edm', 'min_snr', 'uniform'}
        One of :data:`WEIGHT_NAMES`.
    **params
        Keyword parameters of that weight (``sigma_data``, ``P_mean``, ``P_std`` for
        ``'edm'``; ``gamma`` for ``'min_snr'``); checked now, by one evaluation at
        :math:`\lambda = 0`, so a bad value fails here rather than at first use.

    Returns
    -------
    Weight

    Raises
    ------
    ValueError
        For an unknown name (listing the allowed ones) or a bad parameter value.
    TypeError
        For a parameter the weight does not take.

    References
    ----------
    docs/THEORY.md section 5 (evaluation weights).

    Examples
    --------
    >>> w = get_weight("min_snr", gamma=5.0)
    >>> float(w(0.0))
    0.5
    """
    check_choice(name, "weight", WEIGHT_NAMES)
    func = _REGISTRY[name]
    # Validate the parameters once, now, rather than at the first call.
    func(0.0, **params)
    return Weight(name, func, dict(params))


# ----------------------------------------------------------------------------- training loss weights
#: Per-example training loss weights of the x0 loss (:func:`loss_weight`); not evaluation weights: no
#: sampling density is folded in (the schedule draws the levels).
LOSS_WEIGHTS = ("edm", "elbo", "none")
#: Per-example training loss weights of the masked process's cross-entropy (docs/THEORY.md §7):
#: "elbo" = alpha / p (the unbiased negative ELBO whatever the schedule p: MDLM and MD4's practice) and
#: "alpha" = alpha (the schedule then weights the levels, the allocation view of §4).
MASKED_LOSS_WEIGHTS = ("elbo", "alpha")
_LOG_MAX = math.log(np.finfo(np.float64).max)


def check_loss_weight(kind) -> str:
    """``kind`` if it is one of :data:`LOSS_WEIGHTS`, else a one-line ``ValueError`` naming it.

    Parameters
    ----------
    kind : str
        A training loss weight name.

    Returns
    -------
    str
        ``kind``.
    """
    return check_choice(kind, "loss_weight", LOSS_WEIGHTS)


def log_loss_weight(lam, kind: str, sigma_data: float = 1.0, *, xp=np):
    r""":math:`\log w(\lambda)` of :func:`loss_weight`, in the array namespace ``xp`` (NumPy or jax.numpy).

    In logs (``logaddexp``), so that no weight overflows before it multiplies the small high-SNR errors
    (float32 inside a JAX training step included).  No argument checks: :func:`loss_weight` is the
    checked entry point.

    Parameters
    ----------
    lam : array
        Log-SNR levels (any finite values).
    kind : str
        One of :data:`LOSS_WEIGHTS`.
    sigma_data : float
        :math:`s > 0` (EDM's weight only).
    xp : module
        ``numpy`` or ``jax.numpy``.

    Returns
    -------
    array
        :math:`\log w(\lambda)`: ``logaddexp(lam, -2 log s)``, ``lam - log 2`` or 0.
    """
    if kind == "edm":  # 1 / c_out^2 = 1 / sigma^2 + 1 / s^2
        return xp.logaddexp(lam, -2.0 * math.log(sigma_data))
    if kind == "elbo":
        return lam - math.log(2.0)
    return xp.zeros_like(lam)


def loss_weight(lam, kind: str, sigma_data: float = 1.0):
    r"""Training loss weight :math:`w(\lambda)` of the x0 loss :math:`w(\lambda)\,\|D_\theta(x,\lambda) - x_0\|^2`.

    .. math::

        w_{edm} = \frac{1}{c_{out}^2} = \frac{s^2 + \sigma^2}{\sigma^2 s^2} = e^{\lambda} + s^{-2},\qquad
        w_{elbo} = \tfrac12 e^{\lambda},\qquad w_{none} = 1,\qquad \sigma = e^{-\lambda/2}.

    EDM's weight is :math:`\lambda(\sigma)` of EDM's Table 1 at the data scale :math:`s`: with the
    preconditioned denoiser :math:`D = c_{skip}x + c_{out}F_\theta` it makes the loss of the network
    output unit-weighted at every level (:math:`\|D - x_0\|^2 = c_{out}^2\|F_\theta - F^*\|^2`).  The ELBO
    weight is the held-out metric's own; ``"none"`` is the plain x0 loss.  Unlike :func:`edm_weight`
    (an *evaluation* weight), no sampling density is folded in: the schedule draws the levels.

    Parameters
    ----------
    lam : float or array_like
        Log-SNR levels (finite).
    kind : str
        One of :data:`LOSS_WEIGHTS`.
    sigma_data : float
        :math:`s > 0`, the preconditioning's data scale (EDM's weight only).

    Returns
    -------
    float or ndarray of float64
        :math:`w(\lambda)`; a ``ValueError`` where it exceeds the float64 range (:math:`\lambda > 709`;
        :func:`log_loss_weight` has no such limit).

    References
    ----------
    Karras et al. (2022), EDM, Table 1; Kingma et al. (2021), VDM (the ELBO); docs/THEORY.md §3, §6.6 (iii).

    Examples
    --------
    >>> [round(float(loss_weight(0.0, k, 1.0)), 6) for k in ("edm", "elbo", "none")]
    [2.0, 0.5, 1.0]
    """
    kind = check_loss_weight(kind)
    lam = check_finite(_lam(lam), "lam")
    s = float(check_positive(as_float_scalar(sigma_data, "sigma_data"), "sigma_data"))
    logw = log_loss_weight(lam, kind, s)
    if np.any(logw > _LOG_MAX):
        bad = float(np.asarray(lam).flat[int(np.argmax(logw))])
        raise ValueError(f"lam = {bad!r} makes the {kind!r} loss weight overflow float64 (w = e^{float(np.max(logw)):.4g}); "
                         "allowed: weights below 1.8e308 (lam up to about 709), or use log_loss_weight")
    return np.exp(logw)[()]
