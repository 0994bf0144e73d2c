r"""Untruncated continuous laws on the real line (normal, Laplace, uniform) that the built-in
schedules truncate to a training interval (docs/THEORY.md section 5).
"""

from __future__ import annotations

import abc
import math

import numpy as np
from scipy import special

from noisealloc.theory import tolerances
from noisealloc.theory.errors import (
    as_float_array,
    as_float_scalar,
    as_generator,
    check_finite,
    check_interval,
    check_positive,
)

__all__ = ['Distribution', 'Normal', 'Laplace', 'Uniform', 'SPACINGS', 'DEFAULT_LAM_MIN', 'DEFAULT_LAM_MAX']


#: Default training interval in log-SNR (docs/THEORY.md section 1).
DEFAULT_LAM_MIN = -12.0
DEFAULT_LAM_MAX = 12.0
#: Knot placements accepted by :meth:`Schedule.tabulate`.
SPACINGS = ("uniform", "quantile", "both")
_LOG_HALF = -math.log(2.0)


def _log(x):
    # log with log(0) = -inf and no RuntimeWarning (the pytest config turns those into errors).
    with np.errstate(divide="ignore"):
        return np.log(x)


def _check_n(n, name: str = "n") -> int:
    if np.iscomplexobj(n):  # complex input is a ValueError everywhere in the toolkit
        raise ValueError(f"{name} must be a real integer; got {n!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{name} must be an integer; got {n!r}")
    if n < 0:
        raise ValueError(f"{name} must be >= 0; got {n}")
    return int(n)


# --- untruncated laws -------------------------------------------------------------


class Distribution(abc.ABC):
    r"""An untruncated continuous law on the real line (in some coordinate).

    Works in log space: ``logcdf``, ``logsf`` and their inverses ``ppf_log``
    (:math:`\ell \mapsto F^{-1}(e^\ell)`) and ``isf_log``
    (:math:`\ell \mapsto S^{-1}(e^\ell)`), so truncations deep in a tail keep
    full relative accuracy.  ``pdf``, ``cdf``, ``sf``, ``ppf``, ``isf`` and
    ``sample`` are derived from them.  Subclasses: :class:`Normal`,
    :class:`Laplace`, :class:`Uniform`; :class:`TruncatedSchedule` restricts one
    to an interval.

    Attributes
    ----------
    mean : float
        Mean of the untruncated law.
    std : float
        Standard deviation of the untruncated law.
    """

    @abc.abstractmethod
    def logpdf(self, u):
        r""":math:`\log p(u)`."""

    @abc.abstractmethod
    def logcdf(self, u):
        r""":math:`\log F(u)`, accurate in the lower tail."""

    @abc.abstractmethod
    def logsf(self, u):
        r""":math:`\log S(u) = \log(1 - F(u))`, accurate in the upper tail."""

    @abc.abstractmethod
    def ppf_log(self, logq):
        r""":math:`F^{-1}(e^{\ell})`."""

    @abc.abstractmethod
    def isf_log(self, logq):
        r""":math:`S^{-1}(e^{\ell})`."""

    @property
    @abc.abstractmethod
    def mean(self) -> float:
        """Mean of the untruncated law."""

    @property
    @abc.abstractmethod
    def std(self) -> float:
        """Standard deviation of the untruncated law."""

    def pdf(self, u):
        r"""Density :math:`p(u) = e^{\log p(u)}`, the shape of ``u`` (element-wise: NaN gives NaN, as numpy does)."""
        return np.exp(self.logpdf(as_float_array(u, "u")))

    def cdf(self, u):
        r""":math:`F(u) = P(U \le u)`, the shape of ``u`` (element-wise: NaN gives NaN, as numpy does)."""
        return np.exp(self.logcdf(as_float_array(u, "u")))

    def sf(self, u):
        r""":math:`S(u) = P(U > u)`, accurate in the upper tail (element-wise: NaN gives NaN, as numpy does)."""
        return np.exp(self.logsf(as_float_array(u, "u")))

    def ppf(self, q):
        r"""Quantile :math:`F^{-1}(q)` for ``q`` in ``[0, 1]`` (element-wise: NaN gives NaN, as numpy does)."""
        return self.ppf_log(_log(as_float_array(q, "q")))

    def isf(self, q):
        r"""Inverse survival function :math:`S^{-1}(q)`, accurate for small ``q`` (element-wise: NaN gives NaN)."""
        return self.isf_log(_log(as_float_array(q, "q")))

    def sample(self, n: int, *, rng=None) -> np.ndarray:
        """``n`` draws by inversion of a uniform clamped to ``[U_CLAMP, 1 - U_CLAMP]``.

        Parameters
        ----------
        n : int
            Number of draws, >= 0.
        rng : numpy.random.Generator, int or None
            Source of randomness (keyword-only); a seed gives reproducible draws.

        Returns
        -------
        ndarray of float64, shape (n,)
        """
        n = _check_n(n)
        q = np.clip(as_generator(rng).random(n), tolerances.U_CLAMP, 1.0 - tolerances.U_CLAMP)
        return self.ppf(q)


class Normal(Distribution):
    r"""Normal law :math:`N(\mu, s^2)`; CDF tails through ``log_ndtr`` / ``ndtri_exp``.

    .. math:: p(u) = \frac{1}{s\sqrt{2\pi}} e^{-(u - \mu)^2 / 2s^2}

    Parameters
    ----------
    mu : float
        Mean, finite.
    sd : float
        Standard deviation :math:`s > 0`.

    Attributes
    ----------
    mu, sd : float
        As given.

    Examples
    --------
    >>> law = Normal(2.4, 2.4)               # EDM's lambda before truncation
    >>> float(law.cdf(2.4)), round(float(law.ppf(0.975)), 6)
    (0.5, 7.103914)
    >>> round(float(law.logsf(40.0)), 6)     # deep upper tail, no underflow in log space
    -126.39673
    """

    def __init__(self, mu: float, sd: float):
        self.mu = float(check_finite(as_float_scalar(mu, "mu"), "mu"))
        self.sd = float(check_positive(as_float_scalar(sd, "sd"), "sd"))

    def __repr__(self) -> str:
        return f"Normal(mu={self.mu!r}, sd={self.sd!r})"

    def _z(self, u):
        return (as_float_array(u, "u") - self.mu) / self.sd

    def logpdf(self, u):
        z = self._z(u)
        return -0.5 * z * z - math.log(self.sd) - 0.5 * math.log(2.0 * math.pi)

    def logcdf(self, u):
        return special.log_ndtr(self._z(u))

    def logsf(self, u):
        return special.log_ndtr(-self._z(u))

    def ppf_log(self, logq):
        return self.mu + self.sd * special.ndtri_exp(as_float_array(logq, "logq"))

    def isf_log(self, logq):
        return self.mu - self.sd * special.ndtri_exp(as_float_array(logq, "logq"))

    @property
    def mean(self) -> float:
        return self.mu

    @property
    def std(self) -> float:
        return self.sd


class Laplace(Distribution):
    r"""Laplace law :math:`p(u) = \frac{1}{2b} e^{-|u-\mu|/b}`.

    Parameters
    ----------
    mu : float
        Location (median), finite.
    b : float
        Scale, > 0 (standard deviation :math:`\sqrt2\, b`).

    Attributes
    ----------
    mu, b : float
        As given.

    Examples
    --------
    >>> law = Laplace(0.0, 0.5)
    >>> float(law.cdf(0.0)), round(float(law.ppf(0.9)), 6), round(law.std, 6)
    (0.5, 0.804719, 0.707107)
    """

    def __init__(self, mu: float, b: float):
        self.mu = float(check_finite(as_float_scalar(mu, "mu"), "mu"))
        self.b = float(check_positive(as_float_scalar(b, "b"), "b"))

    def __repr__(self) -> str:
        return f"Laplace(mu={self.mu!r}, b={self.b!r})"

    def logpdf(self, u):
        return -np.abs(as_float_array(u, "u") - self.mu) / self.b - math.log(2.0 * self.b)

    def _logcdf_z(self, z):
        # z < 0: F = ½ e^z; z >= 0: F = 1 - ½ e^{-z}.
        neg = np.minimum(z, 0.0)
        return np.where(z < 0, neg + _LOG_HALF, np.log1p(-0.5 * np.exp(-np.maximum(z, 0.0))))

    def logcdf(self, u):
        return self._logcdf_z((as_float_array(u, "u") - self.mu) / self.b)

    def logsf(self, u):
        return self._logcdf_z((self.mu - as_float_array(u, "u")) / self.b)

    def _z_of_logq(self, logq):
        logq = as_float_array(logq, "logq")
        low = logq < _LOG_HALF
        z_low = np.where(low, logq, _LOG_HALF) - _LOG_HALF
        # upper branch: 1 - ½ e^{-z} = q  =>  z = -log(2 (1 - q)) = -log 2 - log(-expm1(log q)).
        with np.errstate(divide="ignore"):
            z_high = -math.log(2.0) - np.log(-np.expm1(np.where(low, _LOG_HALF, logq)))
        return np.where(low, z_low, z_high)

    def ppf_log(self, logq):
        return self.mu + self.b * self._z_of_logq(logq)

    def isf_log(self, logq):
        return self.mu - self.b * self._z_of_logq(logq)

    @property
    def mean(self) -> float:
        return self.mu

    @property
    def std(self) -> float:
        return math.sqrt(2.0) * self.b


class Uniform(Distribution):
    r"""Uniform law on :math:`[a, b]` (only used truncated to a sub-interval of itself).

    Parameters
    ----------
    a, b : float
        Finite end points, ``a < b``.

    Attributes
    ----------
    a, b : float
        As given.

    Examples
    --------
    >>> law = Uniform(-12.0, 12.0)
    >>> float(law.cdf(0.0)), law.mean, round(law.std, 6)
    (0.5, 0.0, 6.928203)
    """

    def __init__(self, a: float, b: float):
        self.a, self.b = check_interval(a, b, "interval")

    def __repr__(self) -> str:
        return f"Uniform(a={self.a!r}, b={self.b!r})"

    def logpdf(self, u):
        u = as_float_array(u, "u")
        inside = (u >= self.a) & (u <= self.b)
        return np.where(inside, -math.log(self.b - self.a), -np.inf)

    def logcdf(self, u):
        return _log(np.clip((as_float_array(u, "u") - self.a) / (self.b - self.a), 0.0, 1.0))

    def logsf(self, u):
        return _log(np.clip((self.b - as_float_array(u, "u")) / (self.b - self.a), 0.0, 1.0))

    def ppf_log(self, logq):
        return self.a + (self.b - self.a) * np.exp(as_float_array(logq, "logq"))

    def isf_log(self, logq):
        return self.b - (self.b - self.a) * np.exp(as_float_array(logq, "logq"))

    @property
    def mean(self) -> float:
        return 0.5 * (self.a + self.b)

    @property
    def std(self) -> float:
        return (self.b - self.a) / math.sqrt(12.0)


