r"""The masked (absorbing-state) forward process in its log-odds coordinate (docs/THEORY.md section 7).

A datum is a string :math:`x_0 = (x^1, \dots, x^L)` over the vocabulary :math:`\{0, \dots, V-1\}`.
At level :math:`\lambda` every token independently survives with probability

.. math:: \alpha(\lambda) = \mathrm{sigmoid}(\lambda) = \frac{1}{1 + e^{-\lambda}}, \qquad
          \varepsilon(\lambda) = 1 - \alpha(\lambda) = \mathrm{sigmoid}(-\lambda),

and otherwise becomes the mask symbol ``V``; :math:`\lambda = \log(\alpha/\varepsilon)` is the
log-odds of survival (everything is masked as :math:`\lambda \to -\infty`, nothing as
:math:`\lambda \to +\infty`).  Both probabilities are computed as :math:`\exp(-\log(1 + e^{\mp\lambda}))`
(``numpy.logaddexp``), so they are accurate to a few ulps in both tails and finite (0 at worst, never
NaN or an overflow) for every finite :math:`\lambda`, including :math:`|\lambda| = 10^4`.

Coordinates of the masked process (:data:`MASKED_COORDINATES`), objects of
:class:`~noisealloc.theory.coordinates.Coordinate` that every schedule of
:mod:`noisealloc.theory.schedules` accepts in place of a coordinate name:

=====================  =======================================================  ===========
``eps``                mask rate :math:`u = \varepsilon = \mathrm{sigmoid}(-\lambda)`  ``(0, 1)``
``t-masked``           the customary time with :math:`\alpha = 1 - t` (MDLM, MD4):     ``(0, 1)``
                       the same map as ``eps`` (:math:`t = \varepsilon`), named for training loops
``t-masked-cosine``    cosine time, :math:`\alpha = \cos(\pi t / 2)`                   ``(0, 1)``
                       (the form docs/THEORY.md section 7.6 specifies)
``t-maskgit``          MaskGIT's (and MD4's) cosine: a fraction :math:`\cos(\pi r/2)`   ``(0, 1)``
                       masked, :math:`r` uniform; with :math:`t = 1 - r`,
                       :math:`\varepsilon = \sin(\pi t/2)`
=====================  =======================================================  ===========

All four decrease with :math:`\lambda`.  They are deliberately *not* registered in
:data:`noisealloc.theory.coordinates.COORDINATES`: their :math:`\lambda` is the masked log-odds, not the
Gaussian log-SNR of docs/THEORY.md section 1, and a registry lookup by name (a loss-file column, a CLI
option) must not mix the two.  Use :func:`get_masked_coordinate` to look them up.

Densities move between coordinates with the Jacobian, :math:`p_\lambda(\lambda) = p_u(u(\lambda))
|du/d\lambda|` (:func:`transport_pdf_to_lam`), e.g. :math:`|d\varepsilon/d\lambda| = \alpha\varepsilon`.

Conditioning.  ``eps`` and ``t-masked`` carry :math:`\alpha = 1 - \varepsilon` through a float64
:math:`\varepsilon` near 1, whose absolute resolution is about 1e-16: :math:`\lambda \to \varepsilon \to
\lambda` is accurate to 1e-10 relative (to :math:`\max(1, |\lambda|)`) for :math:`\lambda \ge -15`
(:attr:`Coordinate.lam_accurate`); ``t-masked-cosine`` and ``t-maskgit`` have the same limit at :math:`t \to 1`.  Below that,
use :math:`\lambda` itself.

References
----------
S. S. Sahoo et al. (2024), Simple and Effective Masked Diffusion Language Models (MDLM).
J. Shi et al. (2024), Simplified and Generalized Masked Diffusion for Discrete Data (MD4).
docs/THEORY.md section 7.1 (the process) and 7.6 (the coordinates of its schedules).
"""

from __future__ import annotations

import math

import numpy as np

from dataclasses import dataclass, field
from typing import Callable

from noisealloc.theory.coordinates import Coordinate, get_coordinate
from noisealloc.theory.errors import as_float_array, as_generator

__all__ = [
    "MASKED_COORDINATES",
    "MaskedCoordinate",
    "keep_probability",
    "mask_rate",
    "log_keep_probability",
    "log_mask_rate",
    "lam_from_mask_rate",
    "lam_from_t",
    "t_from_lam",
    "get_masked_coordinate",
    "transport_pdf_to_lam",
    "transport_pdf_from_lam",
    "check_tokens",
    "check_vocabulary",
    "masks_from_uniforms",
    "mask_tokens",
]


def _lam_array(lam, name: str = "lam") -> np.ndarray:
    arr = as_float_array(lam, name)
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not be NaN")
    return arr


def log_keep_probability(lam):
    r""":math:`\log\alpha(\lambda) = -\log(1 + e^{-\lambda})`, accurate in both tails.

    Parameters
    ----------
    lam : array_like
        Log-odds levels (``±inf`` allowed; NaN refused).

    Returns
    -------
    ndarray of float64
        :math:`\log\alpha \le 0`, the shape of ``lam`` (:math:`\approx \lambda` as :math:`\lambda \to -\infty`).

    Examples
    --------
    >>> float(log_keep_probability(-1e4))
    -10000.0
    """
    return -np.logaddexp(0.0, -_lam_array(lam))


def log_mask_rate(lam):
    r""":math:`\log\varepsilon(\lambda) = -\log(1 + e^{\lambda})`, accurate in both tails.

    Parameters
    ----------
    lam : array_like
        Log-odds levels (``±inf`` allowed; NaN refused).

    Returns
    -------
    ndarray of float64
        :math:`\log\varepsilon \le 0`, the shape of ``lam``.
    """
    return -np.logaddexp(0.0, _lam_array(lam))


def keep_probability(lam):
    r"""Survival probability of a token, :math:`\alpha(\lambda) = \mathrm{sigmoid}(\lambda)`.

    Parameters
    ----------
    lam : array_like
        Log-odds levels; any finite value (and ``±inf``) gives a number in :math:`[0, 1]`.

    Returns
    -------
    ndarray of float64
        :math:`\alpha`, the shape of ``lam``; exactly 0 or 1 only where float64 cannot tell.

    Examples
    --------
    >>> keep_probability([-1e4, 0.0, 1e4]).tolist()
    [0.0, 0.5, 1.0]
    """
    return np.exp(log_keep_probability(lam))


def mask_rate(lam):
    r"""Mask rate :math:`\varepsilon(\lambda) = 1 - \alpha(\lambda) = \mathrm{sigmoid}(-\lambda)`.

    Computed directly (not as ``1 - alpha``), so it keeps full relative accuracy as
    :math:`\lambda \to +\infty` (:math:`\varepsilon \approx e^{-\lambda}`).  This is also the function a
    training loop applies to a :math:`\lambda` drawn from a schedule.

    Parameters
    ----------
    lam : array_like
        Log-odds levels.

    Returns
    -------
    ndarray of float64
        :math:`\varepsilon \in [0, 1]`, the shape of ``lam``.

    Examples
    --------
    >>> mask_rate([0.0, 40.0]).tolist()
    [0.5, 4.248354255291589e-18]
    """
    return np.exp(log_mask_rate(lam))


def lam_from_mask_rate(eps):
    r"""Log-odds :math:`\lambda = \log((1 - \varepsilon)/\varepsilon)` of a mask rate.

    Parameters
    ----------
    eps : array_like
        Mask rates in :math:`[0, 1]` (0 gives :math:`+\infty`, 1 gives :math:`-\infty`).

    Returns
    -------
    ndarray of float64
        :math:`\lambda`, the shape of ``eps``.

    Raises
    ------
    ValueError
        For a rate outside :math:`[0, 1]` or NaN.

    Examples
    --------
    >>> lam_from_mask_rate([0.5, 0.0, 1.0]).tolist()
    [0.0, inf, -inf]
    """
    e = as_float_array(eps, "eps")
    bad = ~((e >= 0.0) & (e <= 1.0))
    if np.any(bad):
        first = float(e.ravel()[np.flatnonzero(bad.ravel())[0]])
        raise ValueError(f"eps must lie in [0, 1]; got {first!r}")
    with np.errstate(divide="ignore"):
        return np.log1p(-e) - np.log(e)


def lam_from_t(t, schedule: str = "linear"):
    r"""Log-odds of a masked-diffusion time: :math:`\alpha = 1 - t` (``linear``) or :math:`\cos(\pi t/2)` (``cosine``).

    Parameters
    ----------
    t : array_like
        Times in the open interval :math:`(0, 1)`.
    schedule : {"linear", "cosine"}
        Which time: coordinate ``t-masked`` or ``t-masked-cosine`` of :data:`MASKED_COORDINATES`.

    Returns
    -------
    ndarray of float64
        :math:`\lambda(t)`, the shape of ``t``.

    Examples
    --------
    >>> lam_from_t(0.5).round(12).tolist(), round(float(lam_from_t(0.5, "cosine")), 6)
    (0.0, 0.881374)
    """
    return _TIME_COORD[_check_time_schedule(schedule)].to_lam(t)


def t_from_lam(lam, schedule: str = "linear"):
    r"""Masked-diffusion time of a log-odds level (inverse of :func:`lam_from_t`).

    Parameters
    ----------
    lam : array_like
        Log-odds levels.
    schedule : {"linear", "cosine"}
        ``linear``: :math:`t = \varepsilon(\lambda)`; ``cosine``: :math:`t = \tfrac{2}{\pi}\arccos\alpha(\lambda)`.

    Returns
    -------
    ndarray of float64
        :math:`t \in [0, 1]`, the shape of ``lam``.
    """
    return _TIME_COORD[_check_time_schedule(schedule)].from_lam(lam)


def _check_time_schedule(schedule: str) -> str:
    if schedule not in ("linear", "cosine"):
        raise ValueError(f"schedule must be 'linear' or 'cosine'; got {schedule!r}")
    return schedule


# --- coordinate maps -------------------------------------------------------------------


def _eps_to_lam(e):
    return np.log1p(-e) - np.log(e)


def _eps_dlam(e):
    return -1.0 / (e * (1.0 - e))


def _cos_to_lam(t):
    # alpha = cos(pi t / 2) (as sin(pi (1 - t)/2) where t > 1/2: 1 - t is exact there),
    # eps = 1 - cos(pi t / 2) = 2 sin^2(pi t / 4)
    alpha = np.where(t > 0.5, np.sin(0.5 * math.pi * (1.0 - t)), np.cos(0.5 * math.pi * t))
    return np.log(alpha) - math.log(2.0) - 2.0 * np.log(np.sin(0.25 * math.pi * t))


def _cos_from_lam(lam):
    # cos(pi t/2) = alpha, sin(pi t/2) = sqrt(1 - alpha^2) = sqrt(eps (1 + alpha)): atan2 is accurate at both ends
    la, le = log_keep_probability(lam), log_mask_rate(lam)
    alpha = np.exp(la)
    return (2.0 / math.pi) * np.arctan2(np.exp(0.5 * le) * np.sqrt(1.0 + alpha), alpha)


def _cos_dlam(t):
    q = 0.25 * math.pi * t
    alpha = np.where(t > 0.5, np.sin(0.5 * math.pi * (1.0 - t)), np.cos(0.5 * math.pi * t))
    return -(0.5 * math.pi) * np.cos(q) / (alpha * np.sin(q))


@dataclass(frozen=True)
class MaskedCoordinate(Coordinate):
    r"""A coordinate of the masked process: a :class:`~noisealloc.theory.coordinates.Coordinate` whose
    Jacobian :math:`du/d\lambda` is computed from :math:`\lambda` directly (accurate in both tails, where
    the generic :math:`1/(d\lambda/du)` at :math:`u(\lambda)` loses the digits of :math:`1 - u`).

    Attributes
    ----------
    name, label, domain, increasing, lam_accurate
        As for :class:`~noisealloc.theory.coordinates.Coordinate`.
    """

    _du_dlam: Callable = field(default=None, repr=False, compare=False)

    def du_dlam(self, lam):
        r"""Jacobian :math:`du/d\lambda` (signed), from :math:`\lambda` directly.

        Parameters
        ----------
        lam : array_like
            Log-odds values.

        Returns
        -------
        ndarray of float64
            :math:`du/d\lambda`, the shape of ``lam``.
        """
        return self._du_dlam(_lam_array(lam))


def _eps_du(lam):
    return -np.exp(log_keep_probability(lam) + log_mask_rate(lam))  # d eps / d lam = -alpha eps


def _cos_du(lam):
    # t = (2/pi) arccos(alpha): dt/dlam = -(2/pi) alpha' / sqrt(1 - alpha^2) = -(2/pi) alpha sqrt(eps / (1 + alpha))
    la, le = log_keep_probability(lam), log_mask_rate(lam)
    return -(2.0 / math.pi) * np.exp(la + 0.5 * le) / np.sqrt(1.0 + np.exp(la))


def _mg_to_lam(t):
    # eps = sin(pi t / 2); alpha = 1 - sin(pi t / 2) = 2 sin^2(pi (1 - t) / 4)  (1 - t exact for t >= 1/2)
    e = np.sin(0.5 * math.pi * t)
    log_alpha = math.log(2.0) + 2.0 * np.log(np.sin(0.25 * math.pi * (1.0 - t)))
    return log_alpha - np.log(e)


def _mg_from_lam(lam):
    # t = (2/pi) arcsin(eps) = (2/pi) atan2(eps, sqrt(1 - eps^2)), 1 - eps^2 = alpha (1 + eps)
    la, le = log_keep_probability(lam), log_mask_rate(lam)
    e = np.exp(le)
    return (2.0 / math.pi) * np.arctan2(e, np.exp(0.5 * la) * np.sqrt(1.0 + e))


def _mg_dlam(t):
    e = np.sin(0.5 * math.pi * t)
    alpha = 2.0 * np.sin(0.25 * math.pi * (1.0 - t)) ** 2
    return -(0.5 * math.pi) * np.cos(0.5 * math.pi * t) / (alpha * e)


def _mg_du(lam):
    # dt/dlam = (2/pi) eps' / sqrt(1 - eps^2) = -(2/pi) eps sqrt(alpha / (1 + eps))
    la, le = log_keep_probability(lam), log_mask_rate(lam)
    return -(2.0 / math.pi) * np.exp(le + 0.5 * la) / np.sqrt(1.0 + np.exp(le))


#: The coordinates of the masked process (module docstring); values are
#: :class:`~noisealloc.theory.coordinates.Coordinate` objects.
MASKED_COORDINATES: dict[str, Coordinate] = {
    c.name: c
    for c in (
        MaskedCoordinate("eps", r"mask rate $\varepsilon = \mathrm{sigmoid}(-\lambda)$", (0.0, 1.0), False,
                         (-15.0, 700.0), _eps_to_lam, lambda lam: np.exp(log_mask_rate(lam)), _eps_dlam, _eps_du),
        MaskedCoordinate("t-masked", r"masked-diffusion time $t$ ($\alpha = 1 - t$)", (0.0, 1.0), False,
                         (-15.0, 700.0), _eps_to_lam, lambda lam: np.exp(log_mask_rate(lam)), _eps_dlam, _eps_du),
        MaskedCoordinate("t-masked-cosine", r"masked-diffusion time $t$ ($\alpha = \cos(\pi t/2)$)", (0.0, 1.0),
                         False, (-15.0, 700.0), _cos_to_lam, _cos_from_lam, _cos_dlam, _cos_du),
        MaskedCoordinate("t-maskgit", r"MaskGIT time $t$ ($\varepsilon = \sin(\pi t/2)$)", (0.0, 1.0), False,
                         (-15.0, 700.0), _mg_to_lam, _mg_from_lam, _mg_dlam, _mg_du),
    )
}
_TIME_COORD = {"linear": MASKED_COORDINATES["t-masked"], "cosine": MASKED_COORDINATES["t-masked-cosine"]}


def get_masked_coordinate(name) -> Coordinate:
    r"""A coordinate of the masked process by name: ``lambda`` (the log-odds itself) or a key of :data:`MASKED_COORDINATES`.

    Parameters
    ----------
    name : str or Coordinate
        ``'lambda'`` (alias ``'lam'``), ``'eps'``, ``'t-masked'``, ``'t-masked-cosine'`` or ``'t-maskgit'``; a
        :class:`~noisealloc.theory.coordinates.Coordinate` is returned as is.

    Returns
    -------
    Coordinate

    Raises
    ------
    ValueError
        For any other name (the message lists the allowed names).

    Examples
    --------
    >>> c = get_masked_coordinate("eps")
    >>> round(float(c.from_lam(0.0)), 6), c.increasing
    (0.5, False)
    """
    if isinstance(name, Coordinate):
        return name
    if name in ("lambda", "lam"):
        return get_coordinate("lambda")
    try:
        return MASKED_COORDINATES[name]
    except (KeyError, TypeError):
        allowed = ", ".join(repr(n) for n in ("lambda", *MASKED_COORDINATES))
        raise ValueError(f"coordinate must be one of {allowed}; got {name!r}") from None


def transport_pdf_to_lam(pdf_u, lam, coordinate):
    r"""Density in the log-odds :math:`\lambda` from a density in a masked coordinate ``u``.

    .. math:: p_\lambda(\lambda) = p_u(u(\lambda))\,|du/d\lambda|,
              \qquad |d\varepsilon/d\lambda| = \alpha\varepsilon .

    Parameters
    ----------
    pdf_u : callable
        Vectorised density of ``u`` (per unit ``u``).
    lam : array_like
        Log-odds values.
    coordinate : str or Coordinate
        The coordinate ``u`` (:func:`get_masked_coordinate`).

    Returns
    -------
    ndarray of float64
        :math:`p_\lambda(\lambda)` per unit log-odds, the shape of ``lam``.

    Examples
    --------
    The uniform law of :math:`t` (linear schedule) is the logistic density in :math:`\lambda`:

    >>> round(float(transport_pdf_to_lam(lambda t: np.ones_like(t), 0.0, "t-masked")), 12)
    0.25
    """
    c = get_masked_coordinate(coordinate)
    lam = _lam_array(lam)
    return pdf_u(c.from_lam(lam)) * np.abs(c.du_dlam(lam))


def transport_pdf_from_lam(pdf_lam, u, coordinate):
    r"""Density in a masked coordinate ``u`` from one in :math:`\lambda`: :math:`p_u = p_\lambda(\lambda(u))|d\lambda/du|`.

    Parameters
    ----------
    pdf_lam : callable
        Vectorised density of :math:`\lambda`.
    u : array_like
        Values of the coordinate inside its domain.
    coordinate : str or Coordinate
        The coordinate ``u`` (:func:`get_masked_coordinate`).

    Returns
    -------
    ndarray of float64
        :math:`p_u(u)`, the shape of ``u``.
    """
    c = get_masked_coordinate(coordinate)
    u = as_float_array(u, "u")
    return pdf_lam(c.to_lam(u)) * np.abs(c.dlam_du(u))


# --- masking token strings ------------------------------------------------------------


def check_tokens(tokens, V: int, name: str = "tokens") -> np.ndarray:
    r"""Token strings as a ``(n, L)`` int64 array with entries in :math:`\{0, \dots, V-1\}`, checked once.

    Parameters
    ----------
    tokens : array_like, shape (n, L)
        Integer tokens (integral floats such as ``1.0`` are accepted; ``1.5`` is not).
    V : int
        Vocabulary size, at least 2.
    name : str
        Argument name quoted in error messages.

    Returns
    -------
    ndarray of int64, shape (n, L)

    Raises
    ------
    ValueError
        One line naming the argument: ragged or non-2-D input, non-integer, negative or
        :math:`\ge V` tokens, or :math:`V < 2`.
    """
    V = check_vocabulary(V)
    try:
        arr = np.asarray(tokens)
    except ValueError:
        raise ValueError(f"{name} must be a rectangular (n, L) array of integers; got ragged input") from None
    if arr.dtype == object:
        raise ValueError(f"{name} must be a rectangular (n, L) array of integers; got ragged or non-numeric input")
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} must be a non-empty two-dimensional (n, L) array; got shape {arr.shape}")
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold integers; got dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold integers; got a non-integer value")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0; got {int(arr.min())}")
    if np.any(arr >= V):
        raise ValueError(f"{name} must be < V = {V} (the mask symbol is V); got {int(arr.max())}")
    return arr.astype(np.int64)


def check_vocabulary(V) -> int:
    r"""The vocabulary size as an int :math:`\ge 2` (one-line ``ValueError`` otherwise).

    Parameters
    ----------
    V : int
        Number of token values.

    Returns
    -------
    int
    """
    if isinstance(V, bool) or not isinstance(V, (int, np.integer)):
        raise ValueError(f"V must be an integer >= 2; got {V!r}")
    if V < 2:
        raise ValueError(f"V must be an integer >= 2 (a one-letter vocabulary carries no information); got {V}")
    return int(V)


def masks_from_uniforms(u, lam):
    r"""Masks from uniforms thresholded at the mask rate: token masked iff :math:`u < \varepsilon(\lambda)`.

    With the same uniforms at every level (common random numbers), the masks are nested: a token
    masked at :math:`\lambda` stays masked at every lower level.

    Parameters
    ----------
    u : array_like, shape (..., L)
        Uniforms in :math:`[0, 1)`.
    lam : array_like
        Levels broadcastable against ``u[..., 0]`` (one level per string, or a scalar).

    Returns
    -------
    ndarray of bool, the shape of ``u``
        True where the token is masked.
    """
    u = as_float_array(u, "u")
    eps = mask_rate(lam)
    return u < np.asarray(eps)[..., None]


def mask_tokens(tokens, lam, V: int, *, rng=None) -> np.ndarray:
    r"""Mask a batch of token strings: each token becomes ``V`` with probability :math:`\varepsilon(\lambda)`.

    Parameters
    ----------
    tokens : array_like, shape (n, L)
        Integer tokens in :math:`\{0, \dots, V-1\}`.
    lam : float or array_like, shape (n,)
        One level for all strings, or one per string (e.g. draws of a schedule).
    V : int
        Vocabulary size; the mask symbol is ``V``.
    rng : numpy.random.Generator, int or None
        Randomness (keyword-only).

    Returns
    -------
    ndarray of int64, shape (n, L)
        :math:`z_\lambda`: the tokens with masked positions set to ``V``.

    Examples
    --------
    >>> mask_tokens([[0, 1, 1, 0]], 1e4, 2, rng=0).tolist(), mask_tokens([[0, 1, 1, 0]], -1e4, 2, rng=0).tolist()
    ([[0, 1, 1, 0]], [[2, 2, 2, 2]])
    """
    x = check_tokens(tokens, V)
    lam = _lam_array(lam)
    if lam.ndim > 1 or (lam.ndim == 1 and lam.shape[0] != x.shape[0]):
        raise ValueError(f"lam must be a scalar or have one level per string ({x.shape[0]},); got shape {lam.shape}")
    gen = as_generator(rng)
    mask = masks_from_uniforms(gen.random(x.shape), lam)
    return np.where(mask, V, x)
