r"""The built-in heuristic schedules of docs/THEORY.md section 5 (EDM log-normal, cosine, linear-beta,
SD3 logit-normal, Laplace in log-SNR, uniform log-SNR), each as a :class:`Schedule` truncated to
the training interval, in any coordinate.
"""

from __future__ import annotations


import numpy as np

from noisealloc.theory.coordinates import get_coordinate
from noisealloc.theory.errors import (
    as_float_scalar,
    check_finite,
    check_interval,
    check_positive,
)
from noisealloc.theory.schedules.base import Schedule, TransportedSchedule, TruncatedSchedule
from noisealloc.theory.schedules.laws import DEFAULT_LAM_MAX, DEFAULT_LAM_MIN, Distribution, Laplace, Normal, Uniform

__all__ = ['uniform_lambda', 'edm_lognormal', 'edm_lognormal_moments', 'cosine', 'linear_beta_uniform_t', 'logit_normal_sd3', 'laplace_lambda', 'builtin_schedules', 'BUILTIN_NAMES']


def _lam_interval(lam_min, lam_max) -> tuple[float, float]:
    return check_interval(lam_min, lam_max, "[lam_min, lam_max]")


def _in_coordinate(law_coord: str, law: Distribution, lam_min, lam_max, coordinate, name, *, clip=None):
    """Truncate ``law`` (a law of ``law_coord``) to the image of [lam_min, lam_max], then move to ``coordinate``."""
    lam_lo, lam_hi = _lam_interval(lam_min, lam_max)
    target = get_coordinate(coordinate)
    c = get_coordinate(law_coord)
    ends = np.sort(c.from_lam(np.array([lam_lo, lam_hi])))
    lo, hi = float(ends[0]), float(ends[1])
    lam_ends = (lam_lo, lam_hi)
    if clip is not None and (lo < clip[0] or hi > clip[1]):
        lo, hi = max(lo, clip[0]), min(hi, clip[1])
        if not lo < hi:
            raise ValueError(
                f"[lam_min, lam_max] = [{lam_lo}, {lam_hi}] does not meet the support {clip} of {name!r} "
                f"in coordinate {c.name!r}"
            )
        lam_ends = tuple(float(v) for v in np.sort(c.to_lam(np.array([lo, hi]))))
    sched = TruncatedSchedule(law, lo, hi, coordinate=c, name=name)
    if target.name == c.name:
        return sched
    return TransportedSchedule(sched, target, lam_interval=lam_ends)


def uniform_lambda(*, lam_min: float = DEFAULT_LAM_MIN, lam_max: float = DEFAULT_LAM_MAX,
                   coordinate="lambda") -> Schedule:
    r"""Uniform density in log-SNR on :math:`[\lambda_{\min}, \lambda_{\max}]`.

    .. math:: p(\lambda) = \frac{1}{\lambda_{\max} - \lambda_{\min}}

    Parameters
    ----------
    lam_min, lam_max : float, default -12.0, 12.0
        Training interval in log-SNR (finite, ``lam_min < lam_max``); the law is
        truncated to its image and renormalised.
    coordinate : str or Coordinate, default 'lambda'
        Coordinate of the returned schedule (see
        :func:`~noisealloc.theory.coordinates.get_coordinate`); the change is exact.

    Returns
    -------
    Schedule
        A :class:`TruncatedSchedule` of the law in its own coordinate, or a
        :class:`TransportedSchedule` of it when ``coordinate`` differs.

    References
    ----------
    docs/THEORY.md section 5; Kingma et al. (2021), Variational Diffusion Models.

    Examples
    --------
    >>> s = uniform_lambda()
    >>> round(float(s.pdf(0.0)), 6), float(s.cdf(6.0))
    (0.041667, 0.75)
    """
    lo, hi = _lam_interval(lam_min, lam_max)
    return _in_coordinate("lambda", Uniform(lo, hi), lo, hi, coordinate, "uniform_lambda")


def edm_lognormal_moments(P_mean: float = -1.2, P_std: float = 1.2) -> tuple[float, float]:
    r"""Mean and standard deviation of :math:`\lambda = -2\ln\sigma` before truncation.

    .. math:: \ln\sigma \sim N(P_{mean}, P_{std}^2) \implies
              \lambda \sim N(-2 P_{mean}, 4 P_{std}^2); \ (2.4, 2.4) \text{ for the defaults.}

    Parameters
    ----------
    P_mean : float, default -1.2
        Mean of :math:`\ln\sigma`, finite.
    P_std : float, default 1.2
        Standard deviation of :math:`\ln\sigma`, > 0.

    Returns
    -------
    mean, std : float
        :math:`(-2P_{mean},\ 2P_{std})`.

    References
    ----------
    Karras et al. (2022), EDM, Table 1; docs/THEORY.md section 5.

    Examples
    --------
    >>> edm_lognormal_moments()
    (2.4, 2.4)
    """
    P_mean = float(check_finite(as_float_scalar(P_mean, "P_mean"), "P_mean"))
    P_std = float(check_positive(as_float_scalar(P_std, "P_std"), "P_std"))
    return -2.0 * P_mean, 2.0 * P_std


def edm_lognormal(P_mean: float = -1.2, P_std: float = 1.2, *, lam_min: float = DEFAULT_LAM_MIN,
                  lam_max: float = DEFAULT_LAM_MAX, coordinate="lambda") -> Schedule:
    r"""EDM training distribution :math:`\ln\sigma \sim N(P_{mean}, P_{std}^2)` (Karras et al. 2022, Table 1).

    In log-SNR :math:`\lambda = -2\ln\sigma \sim N(-2P_{mean}, (2P_{std})^2)`, truncated to
    :math:`[\lambda_{\min}, \lambda_{\max}]`.  The untruncated law is ``schedule.untruncated``
    when ``coordinate='lambda'`` (see also :func:`edm_lognormal_moments`).

    Parameters
    ----------
    P_mean : float, default -1.2
        Mean of :math:`\ln\sigma`, finite.
    P_std : float, default 1.2
        Standard deviation of :math:`\ln\sigma`, > 0.
    lam_min, lam_max : float, default -12.0, 12.0
        Training interval in log-SNR (finite, ``lam_min < lam_max``); the law is
        truncated to its image and renormalised.
    coordinate : str or Coordinate, default 'lambda'
        Coordinate of the returned schedule (see
        :func:`~noisealloc.theory.coordinates.get_coordinate`); the change is exact.

    Returns
    -------
    Schedule
        A :class:`TruncatedSchedule` of the law in its own coordinate, or a
        :class:`TransportedSchedule` of it when ``coordinate`` differs.

    References
    ----------
    Karras et al. (2022), EDM, Table 1; docs/THEORY.md section 5.

    Examples
    --------
    >>> s = edm_lognormal()
    >>> round(s.mass, 6), round(float(s.ppf(0.5)), 4)   # almost all of N(2.4, 2.4^2) lies in [-12, 12]
    (0.999968, 2.3999)
    """
    mu, sd = edm_lognormal_moments(P_mean, P_std)
    return _in_coordinate("lambda", Normal(mu, sd), lam_min, lam_max, coordinate, "edm_lognormal")


def cosine(*, lam_min: float = DEFAULT_LAM_MIN, lam_max: float = DEFAULT_LAM_MAX, coordinate="lambda") -> Schedule:
    r"""Uniform in cosine time ``t-cosine`` (Nichol & Dhariwal 2021), restricted to :math:`[\lambda_{\min}, \lambda_{\max}]`.

    In :math:`\lambda`: :math:`p(\lambda) \propto |dt/d\lambda|`.

    Parameters
    ----------
    lam_min, lam_max : float, default -12.0, 12.0
        Training interval in log-SNR (finite, ``lam_min < lam_max``); the law is
        truncated to its image and renormalised.
    coordinate : str or Coordinate, default 'lambda'
        Coordinate of the returned schedule (see
        :func:`~noisealloc.theory.coordinates.get_coordinate`); the change is exact.

    Returns
    -------
    Schedule
        A :class:`TruncatedSchedule` of the law in its own coordinate, or a
        :class:`TransportedSchedule` of it when ``coordinate`` differs.

    References
    ----------
    Nichol & Dhariwal (2021), Improved DDPM, eq. (17); docs/THEORY.md section 5.

    Examples
    --------
    >>> s = cosine()
    >>> round(float(s.cdf(0.0)), 6)      # half the cosine-time mass lies above lambda = 0
    0.503239
    """
    return _in_coordinate("t-cosine", Uniform(0.0, 1.0), lam_min, lam_max, coordinate, "cosine")


def linear_beta_uniform_t(*, lam_min: float = DEFAULT_LAM_MIN, lam_max: float = DEFAULT_LAM_MAX,
                          coordinate="lambda") -> Schedule:
    r"""Uniform in DDPM linear-:math:`\beta` time over :math:`t \in [0, 1]` intersected with the :math:`\lambda` interval.

    :math:`\lambda(t=1) = -\log\mathrm{expm1}(\beta_{\min} + \tfrac12(\beta_{\max} - \beta_{\min})) \approx -10.05`,
    so with the defaults the :math:`\lambda` interval is :math:`[-10.05, 12]`.

    Parameters
    ----------
    lam_min, lam_max : float, default -12.0, 12.0
        Training interval in log-SNR (finite, ``lam_min < lam_max``); the law is
        truncated to its image and renormalised.
    coordinate : str or Coordinate, default 'lambda'
        Coordinate of the returned schedule (see
        :func:`~noisealloc.theory.coordinates.get_coordinate`); the change is exact.

    Returns
    -------
    Schedule
        A :class:`TruncatedSchedule` of the law in its own coordinate, or a
        :class:`TransportedSchedule` of it when ``coordinate`` differs.

    Raises
    ------
    ValueError
        When ``[lam_min, lam_max]`` does not meet the image of :math:`t \in [0, 1]`.

    References
    ----------
    Ho et al. (2020), DDPM; Song et al. (2021), score SDEs (the VP-SDE linear :math:`\beta`); docs/THEORY.md section 5.

    Examples
    --------
    >>> [round(v, 4) for v in linear_beta_uniform_t().lam_interval]
    [-10.05, 12.0]
    """
    return _in_coordinate("t-linear", Uniform(0.0, 1.0), lam_min, lam_max, coordinate, "linear_beta_uniform_t",
                          clip=(0.0, 1.0))


def logit_normal_sd3(m: float = 0.0, s: float = 1.0, *, lam_min: float = DEFAULT_LAM_MIN,
                     lam_max: float = DEFAULT_LAM_MAX, coordinate="lambda") -> Schedule:
    r"""Logit-normal in rectified-flow time (SD3; Esser et al. 2024, eq. 19): :math:`\mathrm{logit}(t) \sim N(m, s^2)`.

    Since :math:`\lambda = 2\log((1-t)/t) = -2\,\mathrm{logit}(t)`, this is exactly
    :math:`\lambda \sim N(-2m, (2s)^2)`; it is implemented that way (no Jacobian
    round-off), and ``.to('t-rf')`` gives the logit-normal density
    :math:`\varphi((\mathrm{logit}\,t - m)/s) / (s\,t(1-t))`.

    Parameters
    ----------
    m : float, default 0.0
        Location of :math:`\mathrm{logit}(t)`, finite.
    s : float, default 1.0
        Scale of :math:`\mathrm{logit}(t)`, > 0.
    lam_min, lam_max : float, default -12.0, 12.0
        Training interval in log-SNR (finite, ``lam_min < lam_max``); the law is
        truncated to its image and renormalised.
    coordinate : str or Coordinate, default 'lambda'
        Coordinate of the returned schedule (see
        :func:`~noisealloc.theory.coordinates.get_coordinate`); the change is exact.

    Returns
    -------
    Schedule
        A :class:`TruncatedSchedule` of the law in its own coordinate, or a
        :class:`TransportedSchedule` of it when ``coordinate`` differs.

    References
    ----------
    Esser et al. (2024), Scaling Rectified Flow Transformers (SD3), section 3.1; docs/THEORY.md section 5.

    Examples
    --------
    >>> t = logit_normal_sd3().to("t-rf")
    >>> round(float(t.pdf(0.5)), 6)      # phi(0) / (0.25 * mass)
    1.595769
    """
    m = float(check_finite(as_float_scalar(m, "m"), "m"))
    s = float(check_positive(as_float_scalar(s, "s"), "s"))
    return _in_coordinate("lambda", Normal(-2.0 * m, 2.0 * s), lam_min, lam_max, coordinate, "logit_normal_sd3")


def laplace_lambda(mu: float = 0.0, b: float = 0.5, *, lam_min: float = DEFAULT_LAM_MIN,
                   lam_max: float = DEFAULT_LAM_MAX, coordinate="lambda") -> Schedule:
    r"""Laplace density in log-SNR, :math:`p(\lambda) \propto e^{-|\lambda - \mu|/b}` (Hang et al. 2024, Improved Noise Schedule).

    Parameters
    ----------
    mu : float, default 0.0
        Location in log-SNR, finite.
    b : float, default 0.5
        Scale, > 0.
    lam_min, lam_max : float, default -12.0, 12.0
        Training interval in log-SNR (finite, ``lam_min < lam_max``); the law is
        truncated to its image and renormalised.
    coordinate : str or Coordinate, default 'lambda'
        Coordinate of the returned schedule (see
        :func:`~noisealloc.theory.coordinates.get_coordinate`); the change is exact.

    Returns
    -------
    Schedule
        A :class:`TruncatedSchedule` of the law in its own coordinate, or a
        :class:`TransportedSchedule` of it when ``coordinate`` differs.

    References
    ----------
    Hang, Gu, Geng et al. (2024), Improved Noise Schedule for Diffusion Training; docs/THEORY.md section 5.

    Examples
    --------
    >>> s = laplace_lambda()
    >>> float(s.cdf(0.0)), round(float(s.pdf(0.0)), 6)   # 1/(2b) at the mode
    (0.5, 1.0)
    """
    return _in_coordinate("lambda", Laplace(mu, b), lam_min, lam_max, coordinate, "laplace_lambda")


_BUILTINS = {
    "uniform_lambda": uniform_lambda,
    "edm_lognormal": edm_lognormal,
    "cosine": cosine,
    "linear_beta_uniform_t": linear_beta_uniform_t,
    "logit_normal_sd3": logit_normal_sd3,
    "laplace_lambda": laplace_lambda,
}
#: Names of the built-in schedules, in display order.
BUILTIN_NAMES = tuple(_BUILTINS)


def builtin_schedules(lam_min: float = DEFAULT_LAM_MIN, lam_max: float = DEFAULT_LAM_MAX,
                      coordinate="lambda") -> dict[str, Schedule]:
    """All built-in schedules with default parameters on ``[lam_min, lam_max]``, keyed by name.

    Parameters
    ----------
    lam_min, lam_max : float, default -12.0, 12.0
        Training interval in log-SNR (finite, ``lam_min < lam_max``); the law is
        truncated to its image and renormalised.
    coordinate : str or Coordinate, default 'lambda'
        Coordinate of the returned schedule (see
        :func:`~noisealloc.theory.coordinates.get_coordinate`); the change is exact.

    Returns
    -------
    dict of str -> Schedule
        Keys :data:`BUILTIN_NAMES`, in that order.

    References
    ----------
    docs/THEORY.md section 5 (schedules to compare).

    Examples
    --------
    >>> scheds = builtin_schedules()
    >>> list(scheds)
    ['uniform_lambda', 'edm_lognormal', 'cosine', 'linear_beta_uniform_t', 'logit_normal_sd3', 'laplace_lambda']
    >>> {k: round(float(v.cdf(0.0)), 4) for k, v in scheds.items()}
    {'uniform_lambda': 0.5, 'edm_lognormal': 0.1587, 'cosine': 0.5032, 'linear_beta_uniform_t': 0.7411, 'logit_normal_sd3': 0.5, 'laplace_lambda': 0.5}
    """
    return {name: fn(lam_min=lam_min, lam_max=lam_max, coordinate=coordinate) for name, fn in _BUILTINS.items()}
