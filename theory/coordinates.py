r"""Noise coordinates and the maps between them (docs/THEORY.md section 1).

The canonical coordinate is the log signal-to-noise ratio

.. math:: \lambda = \log(\alpha^2 / \sigma^2), \qquad \mathrm{snr} = e^{\lambda},

for the forward process :math:`x = \alpha x_0 + \sigma \varepsilon`.  Every other
coordinate :math:`u` is a strictly monotone map :math:`\lambda(u)`; a density
moves between coordinates by

.. math:: p_\lambda(\lambda) = p_u(u(\lambda)) \, |du/d\lambda| .

Coordinates (``name``: map, natural domain of ``u``):

==============  =====================================================  ==================
``lambda``      :math:`u = \lambda`                                      :math:`\mathbb{R}`
``sigma``       EDM / VE: :math:`\alpha = 1,\ \sigma = e^{-\lambda/2}`   :math:`(0, \infty)`
``log-sigma``   :math:`u = \log\sigma = -\lambda/2`                      :math:`\mathbb{R}`
``t-linear``    DDPM linear-:math:`\beta` (VP-SDE),                      :math:`(0, \infty)`
                :math:`\lambda = -\log(\mathrm{expm1}(B(t)))`,
                :math:`B(t) = \beta_{\min} t + \tfrac12(\beta_{\max}-\beta_{\min}) t^2`
``t-cosine``    Nichol & Dhariwal cosine,                               :math:`(0, 1)`
                :math:`\bar\alpha(t) = \cos^2\theta(t) / \cos^2\theta_0`,
                :math:`\theta(t) = \frac{t + s}{1 + s}\frac{\pi}{2}`
``t-edm``       EDM :math:`\rho`-schedule,                              :math:`(-\infty, t_0)`
                :math:`\sigma(t) = (\sigma_{\max}^{1/\rho} + t(\sigma_{\min}^{1/\rho} - \sigma_{\max}^{1/\rho}))^\rho`
``t-rf``        rectified flow (SD3): :math:`\alpha = 1 - t,\ \sigma = t`, :math:`(0, 1)`
                :math:`\lambda = -2\,\mathrm{logit}(t)`
==============  =====================================================  ==================

``t`` is an alias of ``t-cosine``.  Training uses ``t`` in :math:`[0, 1]`; the
maps are defined on their whole natural domain (``t-linear`` beyond 1 continues
the linear :math:`\beta`; ``t-edm`` beyond 1 continues the :math:`\rho` law down
to :math:`\sigma = 0`), so every :math:`\lambda \in \mathbb{R}` has a coordinate.

Conditioning.  ``t-cosine`` and ``t-rf`` reach :math:`\lambda \to -\infty` at
:math:`t \to 1`, where a float64 ``t`` carries only ~1e-16 absolute resolution:
:math:`\lambda \to t \to \lambda` is then accurate to about
:math:`\epsilon / ((1 - t)|\lambda|)` relative, which is below 1e-10 for
:math:`\lambda \ge -30` (:attr:`Coordinate.lam_accurate`).  ``t-edm`` has the same
problem at the other end: :math:`\sigma^{1/\rho} = A + B t` cancels as
:math:`\sigma \to 0`, so the round trip is accurate to 1e-10 only for
:math:`\lambda \le 200` (the map's image of :math:`\lambda > 14\cdot 38` is not
even representable below the end point :math:`t_0`).  The other coordinates
round-trip to 1e-10 relative on all of :math:`|\lambda| \le 700`.  "Relative" means
relative to :math:`\max(1, |\lambda|)` (at :math:`\lambda = 0` a pure relative
error is meaningless).

References
----------
Kingma, Salimans, Poole & Ho (2021), Variational Diffusion Models.
Nichol & Dhariwal (2021), Improved DDPM, eq. (17).
Karras, Aittala, Aila & Laine (2022), EDM, eq. (5) and Table 1.
Esser et al. (2024), Scaling Rectified Flow Transformers (SD3), section 3.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from noisealloc.theory.errors import as_float_array, check_choice

__all__ = [
    "COORDINATES",
    "Coordinate",
    "get_coordinate",
    "to_lam",
    "from_lam",
    "dlam_du",
    "du_dlam",
    "transport_pdf_to_lam",
    "transport_pdf_from_lam",
    "vp_alpha_sigma",
    "lam_from_alpha_sigma",
    "edm_sigma",
    "lam_from_edm_sigma",
    "LINEAR_BETA_MIN",
    "LINEAR_BETA_MAX",
    "COSINE_S",
    "EDM_SIGMA_MIN",
    "EDM_SIGMA_MAX",
    "EDM_RHO",
]

#: VP-SDE linear-beta constants (Song et al. 2021; the continuous DDPM schedule).
LINEAR_BETA_MIN = 0.1
LINEAR_BETA_MAX = 20.0
#: Nichol & Dhariwal's offset.
COSINE_S = 0.008
#: EDM rho-schedule constants (Karras et al. 2022, Table 1).
EDM_SIGMA_MIN = 0.002
EDM_SIGMA_MAX = 80.0
EDM_RHO = 7.0


# --- VP and VE parameterisations ------------------------------------------------


def vp_alpha_sigma(lam):
    r"""Variance-preserving :math:`(\alpha, \sigma)` at log-SNR ``lam``.

    .. math:: \alpha^2 = \mathrm{sigmoid}(\lambda), \quad \sigma^2 = \mathrm{sigmoid}(-\lambda).

    Computed as ``exp(-½ log1p(exp(∓λ)))`` so both are accurate for |λ| up to 700.

    Parameters
    ----------
    lam : array_like
        Log-SNR :math:`\lambda` (any shape); element-wise, a NaN gives NaN there, as numpy does.

    Returns
    -------
    alpha, sigma : ndarray of float64
        Signal and noise scales, each of the shape of ``lam``, with
        :math:`\alpha^2 + \sigma^2 = 1`.

    References
    ----------
    docs/THEORY.md section 1 (VP parameterisation); Kingma et al. (2021), Variational Diffusion Models.

    Examples
    --------
    >>> alpha, sigma = vp_alpha_sigma(0.0)
    >>> round(float(alpha), 6), round(float(sigma), 6)
    (0.707107, 0.707107)
    """
    lam = as_float_array(lam, "lam")
    alpha = np.exp(-0.5 * np.logaddexp(0.0, -lam))
    sigma = np.exp(-0.5 * np.logaddexp(0.0, lam))
    return alpha, sigma


def lam_from_alpha_sigma(alpha, sigma):
    r""":math:`\lambda = 2\log\alpha - 2\log\sigma` for any (VP or not) :math:`(\alpha, \sigma)`.

    Parameters
    ----------
    alpha, sigma : array_like
        Signal and noise scales of :math:`x = \alpha x_0 + \sigma\varepsilon`, > 0, broadcastable;
        element-wise, a NaN gives NaN there, as numpy does.

    Returns
    -------
    ndarray of float64
        Log-SNR :math:`\lambda = \log(\alpha^2/\sigma^2)`.

    References
    ----------
    docs/THEORY.md section 1.

    Examples
    --------
    >>> round(float(lam_from_alpha_sigma(0.6, 0.8)), 6)   # log(0.36 / 0.64)
    -0.575364
    """
    return 2.0 * np.log(as_float_array(alpha, "alpha")) - 2.0 * np.log(as_float_array(sigma, "sigma"))


def edm_sigma(lam):
    r"""EDM / VE noise level :math:`\sigma = e^{-\lambda/2}` (with :math:`\alpha = 1`).

    Parameters
    ----------
    lam : array_like
        Log-SNR :math:`\lambda`; element-wise, a NaN gives NaN there, as numpy does.

    Returns
    -------
    ndarray of float64
        :math:`\sigma`, the shape of ``lam``.

    References
    ----------
    docs/THEORY.md section 1; Karras et al. (2022), EDM, Table 1.

    Examples
    --------
    >>> round(float(edm_sigma(2.0)), 6)   # e^{-1}
    0.367879
    """
    return np.exp(-0.5 * as_float_array(lam, "lam"))


def lam_from_edm_sigma(sigma):
    r""":math:`\lambda = -2\log\sigma` (EDM / VE).

    Parameters
    ----------
    sigma : array_like
        EDM noise level :math:`\sigma > 0`; element-wise, a NaN gives NaN there, as numpy does.

    Returns
    -------
    ndarray of float64
        Log-SNR :math:`\lambda`, the shape of ``sigma``.

    References
    ----------
    docs/THEORY.md section 1; Karras et al. (2022), EDM.

    Examples
    --------
    >>> round(float(lam_from_edm_sigma(0.5)), 6)   # EDM's sigma_data = 0.5 sits at lambda = 2 log 2
    1.386294
    """
    return -2.0 * np.log(as_float_array(sigma, "sigma"))


# --- the coordinate maps ----------------------------------------------------------
# Each coordinate is three vectorised functions u -> lambda, lambda -> u and
# u -> dlambda/du.  They are written to avoid cancellation at both ends.


def _lin_B(t):
    return LINEAR_BETA_MIN * t + 0.5 * (LINEAR_BETA_MAX - LINEAR_BETA_MIN) * t * t


def _lin_to_lam(t):
    # lambda = log(abar / (1 - abar)), abar = exp(-B)  =>  lambda = -log(expm1(B))
    # = -B - log(-expm1(-B)): the second form cannot overflow for large t and
    # keeps full relative accuracy for small B (where -expm1(-B) ~ B).
    B = _lin_B(t)
    return -B - np.log(-np.expm1(-B))


def _lin_from_lam(lam):
    # B = log1p(exp(-lambda)); stable positive root of ½Δ t² + β0 t - B = 0.
    B = np.logaddexp(0.0, -lam)
    d = LINEAR_BETA_MAX - LINEAR_BETA_MIN
    return 2.0 * B / (LINEAR_BETA_MIN + np.sqrt(LINEAR_BETA_MIN**2 + 2.0 * d * B))


def _lin_dlam(t):
    # dλ/dt = -B'(t) e^B / expm1(B) = -B'(t) / (-expm1(-B)).
    Bp = LINEAR_BETA_MIN + (LINEAR_BETA_MAX - LINEAR_BETA_MIN) * t
    return -Bp / (-np.expm1(-_lin_B(t)))


_COS_THETA0 = COSINE_S / (1.0 + COSINE_S) * (math.pi / 2.0)
_COS_DTHETA = (math.pi / 2.0) / (1.0 + COSINE_S)


def _cos_to_lam(t):
    # abar = cos²θ / cos²θ0 and 1 - abar = sin(θ-θ0) sin(θ+θ0) / cos²θ0, so
    # λ = 2 log cos θ - log sin(θ-θ0) - log sin(θ+θ0): no cancellation at t -> 0.
    # Near t -> 1, cos θ = sin(π/2 - θ) = sin(Δθ (1 - t)) with 1 - t exact in
    # float64 for t >= ½ (Sterbenz), so λ keeps the full accuracy of t there too.
    d = _COS_DTHETA * t  # θ - θ0
    theta = _COS_THETA0 + d
    e = _COS_DTHETA * (1.0 - t)  # π/2 - θ
    return 2.0 * np.log(np.sin(e)) - np.log(np.sin(d)) - np.log(np.sin(theta + _COS_THETA0))


def _cos_from_lam(lam):
    # Two branches, each free of cancellation on its side:
    #  λ >= 0 (t small): solve sin(d) sin(d + 2θ0) = c, c = sigmoid(-λ) cos²θ0, for
    #    d = θ - θ0 through x = tan d: x² (cos 2θ0 - c) + x sin 2θ0 - c = 0 (stable root);
    #  λ < 0 (t near 1): with e = π/2 - θ, cos θ = sin e, so sin e = cos θ0 sqrt(sigmoid(λ)).
    lam = as_float_array(lam, "lam")
    hi = lam >= 0
    c = np.exp(-np.logaddexp(0.0, np.where(hi, lam, 0.0))) * math.cos(_COS_THETA0) ** 2
    s2, c2 = math.sin(2 * _COS_THETA0), math.cos(2 * _COS_THETA0)
    x = 2.0 * c / (s2 + np.sqrt(s2 * s2 + 4.0 * c * (c2 - c)))
    t_hi = np.arctan(x) / _COS_DTHETA
    e = np.arcsin(math.cos(_COS_THETA0) * np.exp(-0.5 * np.logaddexp(0.0, -np.where(hi, 0.0, lam))))
    t_lo = 1.0 - e / _COS_DTHETA
    return np.where(hi, t_hi, t_lo)


def _cos_dlam(t):
    # dλ/dθ = -2 tan θ - cot(θ-θ0) - cot(θ+θ0), with tan θ = cot(π/2 - θ) computed
    # from 1 - t (see _cos_to_lam) so the pole at t -> 1 keeps full accuracy.
    d = _COS_DTHETA * t
    theta = _COS_THETA0 + d
    e = _COS_DTHETA * (1.0 - t)
    dlam_dtheta = -2.0 / np.tan(e) - 1.0 / np.tan(d) - 1.0 / np.tan(theta + _COS_THETA0)
    return dlam_dtheta * _COS_DTHETA


_EDM_A = EDM_SIGMA_MAX ** (1.0 / EDM_RHO)
_EDM_B = EDM_SIGMA_MIN ** (1.0 / EDM_RHO) - _EDM_A  # < 0: t = 0 is the noisiest level


def _edm_to_lam(t):
    return -2.0 * EDM_RHO * np.log(_EDM_A + _EDM_B * t)


def _edm_from_lam(lam):
    return (np.exp(-lam / (2.0 * EDM_RHO)) - _EDM_A) / _EDM_B


def _edm_dlam(t):
    return -2.0 * EDM_RHO * _EDM_B / (_EDM_A + _EDM_B * t)


def _rf_to_lam(t):
    # α = 1 - t, σ = t  =>  λ = 2 log((1 - t)/t).
    return 2.0 * (np.log1p(-t) - np.log(t))


def _rf_from_lam(lam):
    # t = sigmoid(-λ/2), written through exp(-logaddexp) for both tails.
    return np.exp(-np.logaddexp(0.0, lam / 2.0))


def _rf_dlam(t):
    return -2.0 / (t * (1.0 - t))


@dataclass(frozen=True)
class Coordinate:
    r"""A noise coordinate :math:`u` with its monotone map to log-SNR :math:`\lambda`.

    Attributes
    ----------
    name : str
        Registry name (see module docstring).
    label : str
        Axis label for plots, with units.
    domain : tuple of float
        Natural open domain of ``u`` (the image of :math:`\lambda \in \mathbb{R}`).
    increasing : bool
        Whether ``u`` increases with :math:`\lambda` (``sigma`` and DDPM times decrease).
    lam_accurate : tuple of float
        Range of :math:`\lambda` over which :math:`\lambda \to u \to \lambda` is
        accurate to 1e-10 relative in float64 (see the module note on conditioning).
    """

    name: str
    label: str
    domain: tuple[float, float]
    increasing: bool
    lam_accurate: tuple[float, float]
    _to_lam: Callable = field(repr=False, compare=False)
    _from_lam: Callable = field(repr=False, compare=False)
    _dlam_du: Callable = field(repr=False, compare=False)

    def to_lam(self, u):
        r"""Log-SNR :math:`\lambda(u)`; ``ValueError`` outside the natural domain.

        Parameters
        ----------
        u : array_like
            Values of this coordinate, inside the open interval ``domain``.

        Returns
        -------
        ndarray of float64
            :math:`\lambda(u)`, the shape of ``u``.
        """
        u = as_float_array(u, "u")
        self._check_domain(u)
        return self._to_lam(u)

    def from_lam(self, lam):
        r"""Coordinate :math:`u(\lambda)`; ``ValueError`` for NaN input.

        Parameters
        ----------
        lam : array_like
            Log-SNR values (``±inf`` map to the ends of ``domain``).

        Returns
        -------
        ndarray of float64
            :math:`u(\lambda)`, the shape of ``lam``.
        """
        lam = as_float_array(lam, "lam")
        if np.any(np.isnan(lam)):
            raise ValueError(f"lam must not be NaN (coordinate {self.name!r})")
        return self._from_lam(lam)

    def dlam_du(self, u):
        r"""Jacobian :math:`d\lambda/du` at ``u`` (signed).

        Parameters
        ----------
        u : array_like
            Values of this coordinate, inside ``domain``.

        Returns
        -------
        ndarray of float64
            :math:`d\lambda/du`: positive when ``increasing``, negative otherwise.
        """
        u = as_float_array(u, "u")
        self._check_domain(u)
        return self._dlam_du(u)

    def du_dlam(self, lam):
        r"""Jacobian :math:`du/d\lambda = 1 / (d\lambda/du)` at :math:`u(\lambda)` (signed).

        Parameters
        ----------
        lam : array_like
            Log-SNR values.

        Returns
        -------
        ndarray of float64
            :math:`du/d\lambda`, the shape of ``lam``.
        """
        return 1.0 / self._dlam_du(self.from_lam(lam))

    def _check_domain(self, u: np.ndarray) -> None:
        lo, hi = self.domain
        bad = ~((u > lo) & (u < hi))
        if np.any(bad):
            first = u.ravel()[np.flatnonzero(bad.ravel())[0]]
            raise ValueError(
                f"u must lie in the open domain ({lo}, {hi}) of coordinate {self.name!r}; got {float(first)!r}"
            )


_INF = math.inf
COORDINATES: dict[str, Coordinate] = {
    c.name: c
    for c in (
        Coordinate("lambda", r"log-SNR $\lambda$", (-_INF, _INF), True, (-_INF, _INF),
                   lambda u: u.copy(), lambda lam: lam.copy(), np.ones_like),
        Coordinate("sigma", r"EDM noise level $\sigma = e^{-\lambda/2}$", (0.0, _INF), False, (-1400.0, 1400.0),
                   lam_from_edm_sigma, edm_sigma, lambda s: -2.0 / s),
        Coordinate("log-sigma", r"$\log\sigma = -\lambda/2$", (-_INF, _INF), False, (-_INF, _INF),
                   lambda u: -2.0 * u, lambda lam: -0.5 * lam, lambda u: np.full_like(u, -2.0)),
        Coordinate("t-linear", r"DDPM time $t$ (linear $\beta$)", (0.0, _INF), False, (-700.0, 700.0),
                   _lin_to_lam, _lin_from_lam, _lin_dlam),
        Coordinate("t-cosine", r"DDPM time $t$ (cosine)", (0.0, 1.0), False, (-30.0, 700.0),
                   _cos_to_lam, _cos_from_lam, _cos_dlam),
        Coordinate("t-edm", r"EDM time $t$ ($\rho$-schedule)", (-_INF, _EDM_A / -_EDM_B), True, (-1400.0, 200.0),
                   _edm_to_lam, _edm_from_lam, _edm_dlam),
        Coordinate("t-rf", r"rectified-flow time $t$", (0.0, 1.0), False, (-30.0, 700.0),
                   _rf_to_lam, _rf_from_lam, _rf_dlam),
    )
}
_ALIASES = {"t": "t-cosine", "log_sigma": "log-sigma", "lam": "lambda"}


def get_coordinate(name: str | Coordinate) -> Coordinate:
    r"""Look up a coordinate by name (``ValueError`` naming the allowed names).

    Parameters
    ----------
    name : str or Coordinate
        A key of :data:`COORDINATES` (``'lambda'``, ``'sigma'``, ``'log-sigma'``,
        ``'t-linear'``, ``'t-cosine'``, ``'t-edm'``, ``'t-rf'``) or an alias (``'t'`` is
        ``'t-cosine'``, ``'lam'`` is ``'lambda'``, ``'log_sigma'`` is ``'log-sigma'``).
        A :class:`Coordinate` is returned as is.

    Returns
    -------
    Coordinate

    Raises
    ------
    ValueError
        For an unknown name; the message lists every allowed name.

    Examples
    --------
    >>> get_coordinate("t").name
    't-cosine'
    >>> get_coordinate("snr")
    Traceback (most recent call last):
    ...
    ValueError: coordinate must be one of 'lambda', 'sigma', ...; got 'snr'
    """
    if isinstance(name, Coordinate):
        return name
    if isinstance(name, str) and name in _ALIASES:
        name = _ALIASES[name]
    check_choice(name, "coordinate", tuple(COORDINATES) + tuple(_ALIASES))
    return COORDINATES[name]


def to_lam(u, coordinate: str | Coordinate):
    r""":math:`\lambda(u)` in the named coordinate.

    Parameters
    ----------
    u : array_like
        Values of the coordinate, inside its open natural domain (``ValueError`` otherwise).
    coordinate : str or Coordinate
        See :func:`get_coordinate`.

    Returns
    -------
    ndarray of float64
        Log-SNR :math:`\lambda(u)`, the shape of ``u``.

    References
    ----------
    docs/THEORY.md section 1 (the maps are listed in this module's docstring).

    Examples
    --------
    >>> round(float(to_lam(0.5, "t-cosine")), 6)   # the middle of cosine time is near lambda = 0
    -0.024627
    >>> to_lam([0.5, 2.0], "sigma").round(6).tolist()   # lambda = -2 log(sigma)
    [1.386294, -1.386294]
    """
    return get_coordinate(coordinate).to_lam(u)


def from_lam(lam, coordinate: str | Coordinate):
    r""":math:`u(\lambda)` in the named coordinate.

    Parameters
    ----------
    lam : array_like
        Log-SNR values (not NaN).
    coordinate : str or Coordinate
        See :func:`get_coordinate`.

    Returns
    -------
    ndarray of float64
        The coordinate :math:`u(\lambda)`, the shape of ``lam``.

    References
    ----------
    docs/THEORY.md section 1.

    Examples
    --------
    >>> from_lam([-2.0, 0.0, 2.0], "sigma").round(6).tolist()   # sigma = exp(-lambda / 2)
    [2.718282, 1.0, 0.367879]
    >>> float(from_lam(0.0, "t-rf"))   # rectified flow: alpha = 1 - t = sigma = t
    0.5
    >>> lam = 3.7
    >>> abs(float(to_lam(from_lam(lam, "t-linear"), "t-linear")) - lam) < 1e-10
    True
    """
    return get_coordinate(coordinate).from_lam(lam)


def dlam_du(u, coordinate: str | Coordinate):
    r"""Jacobian :math:`d\lambda/du` (signed) at ``u``.

    Parameters
    ----------
    u : array_like
        Values of the coordinate, inside its natural domain.
    coordinate : str or Coordinate
        See :func:`get_coordinate`.

    Returns
    -------
    ndarray of float64
        :math:`d\lambda/du`, negative for decreasing coordinates (``sigma``, DDPM times).

    Examples
    --------
    >>> float(dlam_du(0.5, "t-rf"))   # lambda = 2 log((1 - t)/t): -2 / (t (1 - t))
    -8.0
    """
    return get_coordinate(coordinate).dlam_du(u)


def du_dlam(lam, coordinate: str | Coordinate):
    r"""Jacobian :math:`du/d\lambda` (signed) at :math:`u(\lambda)`.

    Parameters
    ----------
    lam : array_like
        Log-SNR values.
    coordinate : str or Coordinate
        See :func:`get_coordinate`.

    Returns
    -------
    ndarray of float64
        :math:`du/d\lambda = 1/(d\lambda/du)` at :math:`u(\lambda)`, the shape of ``lam``.

    Examples
    --------
    >>> float(du_dlam(0.0, "t-rf"))
    -0.125
    """
    return get_coordinate(coordinate).du_dlam(lam)


def transport_pdf_to_lam(pdf_u, lam, coordinate: str | Coordinate):
    r"""Density in :math:`\lambda` from a density in ``u``.

    .. math:: p_\lambda(\lambda) = p_u(u(\lambda))\,|du/d\lambda|

    Parameters
    ----------
    pdf_u : callable
        Vectorised density of ``u`` (per unit ``u``), called on an array of ``u`` values.
    lam : array_like
        Log-SNR values at which the density is wanted.
    coordinate : str or Coordinate
        The coordinate ``u`` of ``pdf_u`` (see :func:`get_coordinate`).

    Returns
    -------
    ndarray of float64
        :math:`p_\lambda(\lambda)` per unit log-SNR, the shape of ``lam``.

    References
    ----------
    docs/THEORY.md section 1 (densities move between coordinates with the Jacobian).

    Examples
    --------
    A standard normal in :math:`\lambda`, moved to :math:`\sigma` and back:

    >>> import math
    >>> pdf = lambda lam: np.exp(-0.5 * lam**2) / math.sqrt(2 * math.pi)
    >>> p_sigma = lambda s: transport_pdf_from_lam(pdf, s, "sigma")
    >>> round(float(transport_pdf_to_lam(p_sigma, 0.0, "sigma")), 10)
    0.3989422804
    """
    c = get_coordinate(coordinate)
    lam = as_float_array(lam, "lam")
    return pdf_u(c.from_lam(lam)) * np.abs(c.du_dlam(lam))


def transport_pdf_from_lam(pdf_lam, u, coordinate: str | Coordinate):
    r"""Density in ``u`` from a density in :math:`\lambda`.

    .. math:: p_u(u) = p_\lambda(\lambda(u))\,|d\lambda/du|

    Parameters
    ----------
    pdf_lam : callable
        Vectorised density of :math:`\lambda` (per unit log-SNR).
    u : array_like
        Values of the coordinate, inside its natural domain.
    coordinate : str or Coordinate
        The target coordinate ``u`` (see :func:`get_coordinate`).

    Returns
    -------
    ndarray of float64
        :math:`p_u(u)` per unit ``u``, the shape of ``u``.

    References
    ----------
    docs/THEORY.md section 1.

    Examples
    --------
    At :math:`\sigma = 1` (:math:`\lambda = 0`) the Jacobian :math:`|d\lambda/d\sigma| = 2/\sigma` is 2:

    >>> import math
    >>> pdf = lambda lam: np.exp(-0.5 * lam**2) / math.sqrt(2 * math.pi)
    >>> round(float(transport_pdf_from_lam(pdf, 1.0, "sigma")), 6)
    0.797885
    """
    c = get_coordinate(coordinate)
    u = as_float_array(u, "u")
    return pdf_lam(c.to_lam(u)) * np.abs(c.dlam_du(u))
