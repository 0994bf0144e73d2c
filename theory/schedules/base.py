r"""Training noise schedules: densities over noise levels (docs/THEORY.md section 5).

A :class:`Schedule` is a probability density on a finite interval
``interval = (lo, hi)`` of one noise coordinate (:mod:`noisealloc.theory.coordinates`)
with

* ``pdf(u)``, ``cdf(u)``, ``sf(u)``, ``ppf(q)``, ``isf(q)``: vectorised, float64;
* ``sample(n, *, rng=None)``: inverse-CDF sampling, :math:`u = F^{-1}(U)` with
  :math:`U` uniform, clamped to ``[U_CLAMP, 1 - U_CLAMP]``;
* ``to(coordinate)``: the same distribution in another coordinate, exactly
  (no tabulation):

  .. math:: p_v(v) = p_u(u(v)) \left|\frac{du}{dv}\right|, \qquad
            F_v(v) = F_u(u(v)) \text{ if } u(v) \text{ increases, else } 1 - F_u(u(v));

* ``truncate(lo, hi)``: restriction to a sub-interval, renormalised;
* ``tabulate(n, spacing)``: a :class:`TabulatedSchedule` (piecewise-linear pdf).

Built-in schedules (one signature shape: parameters, then keyword-only
``lam_min``, ``lam_max``, ``coordinate``), each truncated to
:math:`\lambda \in [\lambda_{\min}, \lambda_{\max}]` and renormalised:

=========================  ===================================================================
``uniform_lambda``          uniform in :math:`\lambda`
``edm_lognormal``           :math:`\ln\sigma \sim N(P_{mean}, P_{std}^2)`, i.e.
                            :math:`\lambda \sim N(-2P_{mean}, 4P_{std}^2) = N(2.4, 2.4^2)` (Karras et al. 2022)
``cosine``                  uniform in cosine time ``t-cosine`` (Nichol & Dhariwal 2021)
``linear_beta_uniform_t``   uniform in linear-:math:`\beta` time ``t-linear`` over :math:`t \in [0, 1]`
``logit_normal_sd3``        :math:`\mathrm{logit}(t) \sim N(m, s^2)` in rectified-flow time ``t-rf``,
                            i.e. :math:`\lambda = -2\,\mathrm{logit}(t) \sim N(-2m, 4s^2)` (Esser et al. 2024)
``laplace_lambda``          :math:`p(\lambda) \propto e^{-|\lambda-\mu|/b}` (Hang et al. 2024)
=========================  ===================================================================

Every built-in takes its own parameters (paper symbols), then keyword-only
``lam_min``, ``lam_max`` (the training interval in log-SNR, default ``[-12, 12]``)
and ``coordinate`` (the coordinate of the returned schedule, default ``'lambda'``).

Examples
--------
>>> from noisealloc.theory.schedules import edm_lognormal
>>> s = edm_lognormal()                       # lambda ~ N(2.4, 2.4^2) on [-12, 12]
>>> round(float(s.untruncated.mean), 12), round(float(s.untruncated.std), 12)
(2.4, 2.4)
>>> x = s.sample(4, rng=0)                    # inverse-CDF draws in lambda
>>> bool(abs(float(s.cdf(s.ppf(0.3))) - 0.3) < 1e-13)
True
>>> sig = s.to("sigma")                       # the same law as a density in sigma
>>> [round(v, 6) for v in sig.interval]
[0.002479, 403.428793]

Tail accuracy.  Truncated parametric families work with the logarithm of the
CDF or of the survival function of the untruncated law (``scipy.special.log_ndtr``
and ``ndtri_exp`` for the normal), choosing the side on which the truncation
interval lies, so that mass and quantiles keep full relative accuracy even when
the interval sits deep in a tail.

References
----------
Karras, Aittala, Aila & Laine (2022), Elucidating the Design Space of Diffusion-Based Generative Models.
Nichol & Dhariwal (2021), Improved Denoising Diffusion Probabilistic Models.
Esser et al. (2024), Scaling Rectified Flow Transformers for High-Resolution Image Synthesis.
Hang, Gu, Geng et al. (2024), Improved Noise Schedule for Diffusion Training.
Kingma & Gao (2023), Understanding Diffusion Objectives as the ELBO with Simple Data Augmentation.
"""

from __future__ import annotations

import abc
import math

import numpy as np

from noisealloc.theory import tolerances
from noisealloc.theory.schedules._inverse_cdf import invert_piecewise_linear_cdf
from noisealloc.theory.coordinates import Coordinate, get_coordinate
from noisealloc.theory.errors import (
    as_float_array,
    as_generator,
    check_choice,
    check_count,
    check_finite,
    check_interval,
    check_positive,
)
from noisealloc.theory.schedules.laws import Distribution, SPACINGS, _LOG_HALF, _check_n, _log

__all__ = ['Schedule', 'TruncatedSchedule', 'TransportedSchedule', 'TabulatedSchedule']



def _pair(value, name: str) -> tuple:
    """``(lo, hi)`` from a pair, or a ``ValueError`` naming ``name``."""
    if np.ndim(value) != 1 or np.size(value) != 2:
        raise ValueError(f"{name} must be a pair (lo, hi); got {value!r}")
    return tuple(value)


def _saturation_lam(coordinate) -> float:
    """The widest symmetric log-SNR interval whose ends stay strictly inside ``coordinate``'s domain."""
    lam = 1.0
    for _ in range(12):
        lo, hi = coordinate.domain
        u = np.asarray(coordinate.from_lam(np.array([-2.0 * lam, 2.0 * lam])), dtype=float)
        if not (min(u) > lo and max(u) < hi):
            break
        lam *= 2.0
    return lam

class _ScheduleLaw(Distribution):
    """A :class:`Schedule` seen as a :class:`Distribution` (for truncating it further)."""

    def __init__(self, schedule: "Schedule"):
        self.schedule = schedule

    def logpdf(self, u):
        return _log(self.schedule.pdf(u))

    def logcdf(self, u):
        return _log(self.schedule.cdf(u))

    def logsf(self, u):
        return _log(self.schedule.sf(u))

    def ppf_log(self, logq):
        return self.schedule.ppf(np.clip(np.exp(logq), 0.0, 1.0))

    def isf_log(self, logq):
        return self.schedule.isf(np.clip(np.exp(logq), 0.0, 1.0))

    @property
    def mean(self) -> float:  # pragma: no cover - not used
        raise NotImplementedError

    @property
    def std(self) -> float:  # pragma: no cover - not used
        raise NotImplementedError


class _Side:
    r"""Truncation arithmetic in log space on one side of a law.

    ``logF`` is :math:`\log F` (``side='cdf'``, from ``a = lo`` to ``b = hi``) or
    :math:`\log S` (``side='sf'``, from ``a = hi`` to ``b = lo``); ``G`` is
    increasing from ``a`` towards ``b`` in both cases.
    """

    def __init__(self, logG, invlogG, a: float, b: float):
        self.logG, self.invlogG = logG, invlogG
        self.la = float(logG(a))
        self.lb = float(logG(b))
        # log Z = log(G(b) - G(a)) = lb + log(1 - exp(la - lb))
        self.logZ = self.lb + math.log(-math.expm1(self.la - self.lb)) if self.la < self.lb else -math.inf

    def from_a(self, u):
        """:math:`(G(u) - G(a)) / Z`."""
        lg = self.logG(u)
        with np.errstate(invalid="ignore"):
            val = np.exp(lg - self.logZ) * -np.expm1(self.la - lg)
        return np.where(lg > self.la, np.clip(val, 0.0, 1.0), 0.0)

    def to_b(self, u):
        """:math:`(G(b) - G(u)) / Z`."""
        lg = self.logG(u)
        val = math.exp(self.lb - self.logZ) * -np.expm1(np.minimum(lg, self.lb) - self.lb)
        return np.clip(val, 0.0, 1.0)

    def quant_from_a(self, q):
        """Point with ``from_a == q``."""
        with np.errstate(divide="ignore"):
            return self.invlogG(np.logaddexp(self.la, np.log(q) + self.logZ))

    def quant_from_b(self, q):
        """Point with ``to_b == q``."""
        return self.invlogG(self.lb + np.log1p(-q * math.exp(self.logZ - self.lb)))


# --- schedules --------------------------------------------------------------------


class Schedule(abc.ABC):
    r"""A probability density over noise levels on a finite interval of one coordinate.

    Attributes
    ----------
    coordinate : Coordinate
        The coordinate :math:`u` in which ``pdf``, ``cdf``, ``ppf`` and ``sample`` work.
    interval : tuple of float
        ``(lo, hi)``, finite, ``lo < hi``, inside the coordinate's natural domain.
    name : str
        Short name (used as the key in exports and plots).

    Notes
    -----
    Subclasses implement ``_pdf``, ``_cdf``, ``_sf``, ``_ppf``, ``_isf`` on
    arrays already inside the interval / inside ``[0, 1]``; the public methods
    validate input, handle points outside the interval (density 0, CDF 0 or 1)
    and pin the end points (``ppf(0) == lo``, ``ppf(1) == hi``).
    """

    coordinate: Coordinate
    interval: tuple[float, float]
    name: str

    def _init_common(self, coordinate, interval, name) -> None:
        self.coordinate = get_coordinate(coordinate)
        lo, hi = check_interval(interval[0], interval[1], "interval")
        dlo, dhi = self.coordinate.domain
        if not (dlo < lo and hi < dhi):
            message = (f"interval must lie inside the open domain ({dlo}, {dhi}) of coordinate "
                       f"{self.coordinate.name!r}; got ({lo}, {hi})")
            if self.coordinate.name != "lambda" and (lo == dlo or hi == dhi):
                # an end reached in float64 only: a log-SNR beyond the coordinate's resolution was asked for
                message += (f" (an end of the domain itself: the coordinate saturates in float64 for a log-SNR "
                            f"interval this wide; give a narrower one, e.g. |lam| <= "
                            f"{_saturation_lam(self.coordinate):g})")
            raise ValueError(message)
        self.interval = (lo, hi)
        if not isinstance(name, str):
            raise TypeError(f"name must be a str; got {name!r}")
        self.name = name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} in {self.coordinate.name} on {self.interval}>"

    # -- subclass hooks
    @abc.abstractmethod
    def _pdf(self, u): ...

    @abc.abstractmethod
    def _cdf(self, u): ...

    def _sf(self, u):
        return 1.0 - self._cdf(u)

    @abc.abstractmethod
    def _ppf(self, q): ...

    def _isf(self, q):
        return self._ppf(1.0 - q)

    # -- public API
    def _points(self, u, name: str = "u") -> np.ndarray:
        u = as_float_array(u, name)
        if np.any(np.isnan(u)):
            raise ValueError(f"{name} must not contain NaN (schedule {self.name!r})")
        return u

    def pdf(self, u):
        r"""Density :math:`p_u(u)` (zero outside ``interval``); same shape as ``u``.

        Parameters
        ----------
        u : array_like
            Points of this schedule's coordinate (not NaN).

        Returns
        -------
        float or ndarray of float64
            Probability per unit ``u``; a float for scalar input.
        """
        u = self._points(u)
        lo, hi = self.interval
        inside = (u >= lo) & (u <= hi)
        out = np.zeros(u.shape)
        out[inside] = self._pdf(u[inside])
        return out[()]

    def cdf(self, u):
        r""":math:`F(u) = P(U \le u)`, 0 below ``lo`` and 1 above ``hi``.

        Parameters
        ----------
        u : array_like
            Points of this schedule's coordinate (not NaN).

        Returns
        -------
        float or ndarray of float64
            Values in ``[0, 1]``, the shape of ``u``.
        """
        u = self._points(u)
        lo, hi = self.interval
        out = np.where(u >= hi, 1.0, 0.0)
        inside = (u > lo) & (u < hi)
        out[inside] = np.clip(self._cdf(u[inside]), 0.0, 1.0)
        return out[()]

    def sf(self, u):
        r"""Survival function :math:`S(u) = P(U > u) = 1 - F(u)`, accurate in the upper tail."""
        u = self._points(u)
        lo, hi = self.interval
        out = np.where(u <= lo, 1.0, 0.0)
        inside = (u > lo) & (u < hi)
        out[inside] = np.clip(self._sf(u[inside]), 0.0, 1.0)
        return out[()]

    def _levels(self, q) -> np.ndarray:
        q = as_float_array(q, "q")
        if not np.all((q >= 0.0) & (q <= 1.0)):
            bad = q.ravel()[np.flatnonzero(~((q >= 0.0) & (q <= 1.0)).ravel())[0]]
            raise ValueError(f"q must lie in [0, 1]; got {float(bad)!r}")
        return q

    def ppf(self, q):
        r"""Quantile function :math:`F^{-1}(q)` for ``q`` in ``[0, 1]``; ``ppf(0) = lo``, ``ppf(1) = hi``.

        Parameters
        ----------
        q : array_like
            Levels in ``[0, 1]`` (``ValueError`` otherwise).

        Returns
        -------
        float or ndarray of float64
            Points of ``interval``, the shape of ``q``.
        """
        q = self._levels(q)
        lo, hi = self.interval
        out = np.clip(self._ppf(q), lo, hi)
        out = np.where(q == 0.0, lo, np.where(q == 1.0, hi, out))
        return out[()]

    def isf(self, q):
        r"""Inverse survival function :math:`S^{-1}(q) = F^{-1}(1 - q)`, accurate for small ``q``."""
        q = self._levels(q)
        lo, hi = self.interval
        out = np.clip(self._isf(q), lo, hi)
        out = np.where(q == 0.0, hi, np.where(q == 1.0, lo, out))
        return out[()]

    def sample(self, n: int, *, rng=None) -> np.ndarray:
        r"""``n`` independent draws by inversion, shape ``(n,)``, float64.

        .. math:: u_i = F^{-1}(\min(\max(U_i, c), 1 - c)), \quad U_i \sim \mathrm{Uniform}(0, 1),

        with :math:`c` = ``tolerances.U_CLAMP``.  The same ``rng`` seed gives the same draws.

        Parameters
        ----------
        n : int
            Number of draws, >= 0.
        rng : numpy.random.Generator, int or None
            Source of randomness (keyword-only).

        Returns
        -------
        ndarray of float64, shape (n,)
            Draws in this schedule's coordinate.

        Examples
        --------
        >>> from noisealloc.theory.schedules.builtin import uniform_lambda
        >>> uniform_lambda().sample(3, rng=0).round(6).tolist()
        [3.28708, -5.525119, -11.016635]
        """
        n = _check_n(n)
        q = np.clip(as_generator(rng).random(n), tolerances.U_CLAMP, 1.0 - tolerances.U_CLAMP)
        return np.asarray(self.ppf(q), dtype=np.float64).reshape(n)

    def to(self, coordinate) -> "Schedule":
        r"""The same distribution expressed in another coordinate (exact transport).

        Parameters
        ----------
        coordinate : str or Coordinate
            Target coordinate (see :func:`~noisealloc.theory.coordinates.get_coordinate`).

        Returns
        -------
        Schedule
            ``self`` for its own coordinate, else a :class:`TransportedSchedule` with
            :math:`p_v(v) = p_u(u(v))\,|du/dv|`.

        Examples
        --------
        >>> from noisealloc.theory.schedules.builtin import cosine
        >>> s = cosine().to("t-cosine")      # uniform in cosine time
        >>> round(float(s.pdf(0.5)), 6), [round(v, 6) for v in s.interval]
        (1.00175, [0.000157, 0.998409])
        """
        c = get_coordinate(coordinate)
        if c.name == self.coordinate.name:
            return self
        return TransportedSchedule(self, c)

    def truncate(self, lo: float, hi: float, *, name: str | None = None) -> "Schedule":
        r"""Restriction to ``[lo, hi]`` (inside ``interval``), renormalised: :math:`p / (F(hi) - F(lo))`.

        Parameters
        ----------
        lo, hi : float
            The sub-interval, in this schedule's coordinate.
        name : str, optional
            Name of the result (default: this schedule's name).

        Returns
        -------
        TruncatedSchedule
        """
        lo, hi = check_interval(lo, hi, "interval")
        if not (self.interval[0] <= lo and hi <= self.interval[1]):
            raise ValueError(
                f"truncation interval must lie within the schedule's interval {self.interval}; got ({lo}, {hi})"
            )
        return TruncatedSchedule(_ScheduleLaw(self), lo, hi, coordinate=self.coordinate,
                                 name=self.name if name is None else name)

    @property
    def lam_interval(self) -> tuple[float, float]:
        r"""The interval in log-SNR :math:`\lambda` (sorted)."""
        a, b = (float(x) for x in self.coordinate.to_lam(np.array(self.interval)))
        return (min(a, b), max(a, b))

    def tabulate(self, n: int = 513, spacing: str = "both") -> "TabulatedSchedule":
        """Piecewise-linear :class:`TabulatedSchedule` through the exact pdf at ``n`` knots.

        Parameters
        ----------
        n : int
            Number of knots (>= 2).
        spacing : {'uniform', 'quantile', 'both'}
            Knots equally spaced in this schedule's coordinate, at equally spaced
            quantiles, or the union of ``n // 2`` of each (the default: the
            quantile knots follow the mass, the uniform ones resolve the tails).

        Returns
        -------
        TabulatedSchedule
            The exact pdf at the knots (duplicates removed), renormalised by the
            trapezoid rule, in this schedule's coordinate.
        """
        n = _check_n(n)
        if n < 2:
            raise ValueError(f"n must be >= 2 knots; got {n}")
        check_choice(spacing, "spacing", SPACINGS)
        lo, hi = self.interval
        if spacing == "uniform":
            knots = np.linspace(lo, hi, n)
        elif spacing == "quantile":
            knots = self.ppf(np.linspace(0.0, 1.0, n))
        else:
            knots = np.concatenate([np.linspace(lo, hi, n // 2), self.ppf(np.linspace(0.0, 1.0, n - n // 2))])
        knots = np.unique(np.clip(knots, lo, hi))
        return TabulatedSchedule(knots, self.pdf(knots), coordinate=self.coordinate, name=self.name)

    def lam_moments(self, n_cells: int = 256, order: int = 16) -> tuple[float, float]:
        r"""Mean and standard deviation of :math:`\lambda` under this schedule.

        Composite Gauss-Legendre quadrature of :math:`\int \lambda^k p_\lambda\, d\lambda` over
        ``n_cells`` cells of equal probability (``order`` nodes each).

        Parameters
        ----------
        n_cells : int, default 256
            Number of equal-probability cells.
        order : int, default 16
            Gauss-Legendre nodes per cell.

        Returns
        -------
        mean, std : float
            Moments of :math:`\lambda` (whatever this schedule's coordinate).

        Examples
        --------
        >>> from noisealloc.theory.schedules.builtin import edm_lognormal
        >>> [round(v, 4) for v in edm_lognormal().lam_moments()]   # truncation at +-12 barely moves N(2.4, 2.4^2)
        [2.3997, 2.3994]
        """
        n_cells, order = check_count(n_cells, "n_cells"), check_count(order, "order")
        s = self.to("lambda")
        edges = np.unique(np.asarray(s.ppf(np.linspace(0.0, 1.0, n_cells + 1)), dtype=np.float64))
        x, w = np.polynomial.legendre.leggauss(order)
        a, b = edges[:-1, None], edges[1:, None]
        lam = 0.5 * (b - a) * x + 0.5 * (a + b)
        wt = 0.5 * (b - a) * w * s.pdf(lam)
        mass = wt.sum()
        mean = float((wt * lam).sum() / mass)
        var = float((wt * (lam - mean) ** 2).sum() / mass)
        return mean, math.sqrt(var)


class TruncatedSchedule(Schedule):
    r"""A law truncated to ``[lo, hi]`` and renormalised.

    .. math:: p(u) = \frac{p_0(u)}{F_0(hi) - F_0(lo)}, \quad u \in [lo, hi].

    Parameters
    ----------
    law : Distribution
        The untruncated law :math:`p_0`, a law of ``coordinate``.
    lo, hi : float
        Truncation interval, finite, inside the coordinate's natural domain.
    coordinate : str or Coordinate, default 'lambda'
    name : str, default 'truncated'

    Attributes
    ----------
    untruncated : Distribution
        The law before truncation (``untruncated.mean``, ``untruncated.std``,
        ``untruncated.sample(n, rng=...)``).
    mass : float
        :math:`F_0(hi) - F_0(lo)`, the probability the untruncated law puts on the interval.

    Examples
    --------
    >>> from noisealloc.theory.schedules.laws import Normal
    >>> s = TruncatedSchedule(Normal(0.0, 1.0), -1.0, 1.0)
    >>> round(s.mass, 6), round(float(s.pdf(0.0)), 6)
    (0.682689, 0.584369)
    """

    def __init__(self, law: Distribution, lo: float, hi: float, *, coordinate="lambda", name: str = "truncated"):
        if not isinstance(law, Distribution):
            raise TypeError(f"law must be a Distribution; got {type(law).__name__}")
        self._init_common(coordinate, (lo, hi), name)
        lo, hi = self.interval
        self.untruncated = law
        # Work on the side of the law where the interval's lower end has at most
        # half the mass below it, so that no difference of two numbers near 1 is taken.
        self._left = float(law.logcdf(lo)) <= _LOG_HALF
        if self._left:
            self._side = _Side(law.logcdf, law.ppf_log, lo, hi)
        else:
            self._side = _Side(law.logsf, law.isf_log, hi, lo)
        if not np.isfinite(self._side.logZ):
            raise ValueError(f"the law {law!r} puts no (representable) mass on the interval ({lo}, {hi})")
        self.mass = math.exp(self._side.logZ)

    def _pdf(self, u):
        return np.exp(self.untruncated.logpdf(u) - self._side.logZ)

    def _cdf(self, u):
        return self._side.from_a(u) if self._left else self._side.to_b(u)

    def _sf(self, u):
        return self._side.to_b(u) if self._left else self._side.from_a(u)

    def _lower(self, q):
        # quantile counted from lo
        return self._side.quant_from_a(q) if self._left else self._side.quant_from_b(q)

    def _upper(self, q):
        # quantile counted from hi
        return self._side.quant_from_b(q) if self._left else self._side.quant_from_a(q)

    def _ppf(self, q):
        # 1 - q is exact for q >= ½ (Sterbenz), so each branch works with a level <= ½.
        low = q <= 0.5
        return np.where(low, self._lower(np.where(low, q, 0.5)), self._upper(np.where(low, 0.5, 1.0 - q)))

    def _isf(self, q):
        low = q <= 0.5
        return np.where(low, self._upper(np.where(low, q, 0.5)), self._lower(np.where(low, 0.5, 1.0 - q)))

    def truncate(self, lo: float, hi: float, *, name: str | None = None) -> "Schedule":
        lo, hi = check_interval(lo, hi, "interval")
        if not (self.interval[0] <= lo and hi <= self.interval[1]):
            raise ValueError(
                f"truncation interval must lie within the schedule's interval {self.interval}; got ({lo}, {hi})"
            )
        return TruncatedSchedule(self.untruncated, lo, hi, coordinate=self.coordinate,
                                 name=self.name if name is None else name)


class TransportedSchedule(Schedule):
    r"""A schedule moved exactly to another coordinate :math:`v`.

    .. math:: p_v(v) = p_u(u(v)) \frac{|d\lambda/dv|}{|d\lambda/du|}, \qquad
              F_v(v) = F_u(u(v)) \text{ or } S_u(u(v)), \qquad
              F_v^{-1}(q) = v(F_u^{-1}(q)) \text{ or } v(S_u^{-1}(q)),

    the second forms when :math:`v(u)` decreases.  ``to`` returns the base
    schedule itself for its own coordinate, so chains never accumulate error.

    Parameters
    ----------
    base : Schedule
        The schedule in its coordinate :math:`u`.
    coordinate : str or Coordinate
        The target coordinate :math:`v`.
    lam_interval : tuple of float, optional
        The base interval's exact end points in log-SNR, when known (one map
        from :math:`\lambda` is more accurate than two through the base).

    Attributes
    ----------
    base : Schedule
        As given.

    References
    ----------
    docs/THEORY.md section 1 (densities move between coordinates with the Jacobian).

    Examples
    --------
    >>> from noisealloc.theory.schedules.builtin import uniform_lambda
    >>> s = TransportedSchedule(uniform_lambda(), "sigma")
    >>> [round(v, 6) for v in s.interval], s.to("lambda").name
    ([0.002479, 403.428793], 'uniform_lambda')
    """

    def __init__(self, base: Schedule, coordinate, *, lam_interval: tuple[float, float] | None = None):
        if not isinstance(base, Schedule):
            raise TypeError(f"base must be a Schedule; got {type(base).__name__}")
        c = get_coordinate(coordinate)
        self.base = base
        self._increasing = base.coordinate.increasing == c.increasing
        # The interval's image; when the caller knows the exact lambda end points
        # (built-ins), one map from lambda is more accurate than two through the base.
        if lam_interval is None:
            lam_ends = base.coordinate.to_lam(np.array(base.interval))
        else:
            lam_ends = np.array(check_interval(*_pair(lam_interval, "lam_interval"), "lam_interval"))
        ends = np.sort(c.from_lam(lam_ends))
        self._init_common(c, (float(ends[0]), float(ends[1])), base.name)

    def _u(self, v):
        lo, hi = self.base.interval
        return np.clip(self.base.coordinate.from_lam(self.coordinate.to_lam(v)), lo, hi)

    def _v(self, u):
        lo, hi = self.interval
        return np.clip(self.coordinate.from_lam(self.base.coordinate.to_lam(u)), lo, hi)

    def _pdf(self, v):
        u = self._u(v)
        return self.base.pdf(u) * np.abs(self.coordinate.dlam_du(v)) / np.abs(self.base.coordinate.dlam_du(u))

    def _cdf(self, v):
        u = self._u(v)
        return self.base.cdf(u) if self._increasing else self.base.sf(u)

    def _sf(self, v):
        u = self._u(v)
        return self.base.sf(u) if self._increasing else self.base.cdf(u)

    def _ppf(self, q):
        return self._v(self.base.ppf(q) if self._increasing else self.base.isf(q))

    def _isf(self, q):
        return self._v(self.base.isf(q) if self._increasing else self.base.ppf(q))

    def to(self, coordinate) -> Schedule:
        return self.base.to(coordinate)


def _cell_cum(x, f, C, h, u):
    """Mass from the left end to ``u`` of the piecewise-linear density (f, C from the left)."""
    i = np.clip(np.searchsorted(x, u, side="right") - 1, 0, len(h) - 1)
    s = u - x[i]
    return C[i] + f[i] * s + (f[i + 1] - f[i]) * s * s / (2.0 * h[i])


def _cell_inv(x, f, C, h, m, q):
    r"""Inverse of :func:`_cell_cum` (see :func:`noisealloc.theory.schedules._inverse_cdf.invert_piecewise_linear_cdf`)."""
    return invert_piecewise_linear_cdf(x, f, C, q)


class TabulatedSchedule(Schedule):
    r"""Positive piecewise-linear density through ``(knots[i], pdf_values[i])``, normalised.

    In cell :math:`[x_i, x_{i+1}]` with :math:`s = u - x_i`, :math:`h_i = x_{i+1} - x_i`:

    .. math::
        p(u) = f_i + (f_{i+1} - f_i) \frac{s}{h_i}, \qquad
        F(u) = C_i + f_i s + (f_{i+1} - f_i) \frac{s^2}{2 h_i},

    with :math:`C_i = \sum_{j<i} \tfrac12 (f_j + f_{j+1}) h_j`; the inverse CDF
    solves that quadratic in closed form.  The survival function and its
    inverse use the same formulas counted from the right end (exact in the upper tail).

    Parameters
    ----------
    knots : array_like, shape (K,)
        Strictly increasing, finite, inside the coordinate's natural domain, K >= 2.
    pdf_values : array_like, shape (K,)
        Finite and > 0; rescaled so the density integrates to one.
    coordinate : str or Coordinate
    name : str

    Attributes
    ----------
    knots, pdf_values, cdf_values : ndarray, shape (K,)
        Knots, normalised density and CDF at the knots (``cdf_values[0] = 0``).
    """

    def __init__(self, knots, pdf_values, coordinate="lambda", name: str = "tabulated"):
        x = check_finite(as_float_array(knots, "knots", ndim=1), "knots")
        if x.size < 2:
            raise ValueError(f"knots must have at least 2 entries; got {x.size}")
        dx = np.diff(x)
        if np.any(dx <= 0):
            i = int(np.flatnonzero(dx <= 0)[0])
            raise ValueError(
                f"knots must be strictly increasing; knots[{i}] = {float(x[i])!r} >= knots[{i + 1}] = {float(x[i + 1])!r}"
            )
        f = as_float_array(pdf_values, "pdf_values", ndim=1)
        if f.shape != x.shape:
            raise ValueError(f"pdf_values must have the shape of knots {x.shape}; got {f.shape}")
        f = check_positive(f, "pdf_values")
        self._init_common(coordinate, (x[0], x[-1]), name)
        Z = math.fsum(0.5 * (f[:-1] + f[1:]) * dx)
        f = f / Z
        m = 0.5 * (f[:-1] + f[1:]) * dx
        self.knots = x
        self.pdf_values = f
        self._h = dx
        self._m = m
        self.cdf_values = np.concatenate([[0.0], np.cumsum(m)])
        # mirrored arrays for the right-hand (survival) side
        self._xr = -x[::-1]
        self._fr = f[::-1]
        self._hr = dx[::-1]
        self._mr = m[::-1]
        self._Cr = np.concatenate([[0.0], np.cumsum(self._mr)])
        for arr in (self.knots, self.pdf_values, self.cdf_values):
            arr.setflags(write=False)

    def _pdf(self, u):
        return np.interp(u, self.knots, self.pdf_values)

    def _cdf(self, u):
        return _cell_cum(self.knots, self.pdf_values, self.cdf_values, self._h, u)

    def _sf(self, u):
        return _cell_cum(self._xr, self._fr, self._Cr, self._hr, -u)

    def _ppf(self, q):
        return _cell_inv(self.knots, self.pdf_values, self.cdf_values, self._h, self._m, q)

    def _isf(self, q):
        return -_cell_inv(self._xr, self._fr, self._Cr, self._hr, self._mr, q)

    def tabulate(self, n: int | None = None, spacing: str = "both") -> "TabulatedSchedule":
        """Itself when ``n`` is None (already tabulated); otherwise re-tabulate."""
        if n is None:
            return self
        return super().tabulate(n, spacing)


# --- built-in schedules -----------------------------------------------------------
