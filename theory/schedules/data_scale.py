r"""The data scale of heuristic schedules and the log-SNR shift that moves them to other data (docs/THEORY.md §5).

Heuristic schedules (EDM log-normal, cosine, SD3 logit-normal, ...) were designed for data of a
fixed per-coordinate scale, EDM's :math:`\sigma_{data} = 0.5`.  On data of per-coordinate standard
deviation :math:`s`, write :math:`x_0 = c\,x_0'` with :math:`c = s/\sigma_{data}` and :math:`x_0'` at
the design scale.  The VE-scaled noisy sample :math:`x = x_0 + \sigma\varepsilon` divided by
:math:`c` is :math:`x_0' + (\sigma/c)\varepsilon`: the same posterior problem at noise
:math:`\sigma' = \sigma/c`, i.e. at

.. math:: \lambda' = \lambda + \Delta, \qquad \Delta = 2\log\frac{s}{\sigma_{data}} .

A schedule with density :math:`p_h` in the design frame therefore becomes, on the data,

.. math:: p(\lambda) = p_h(\lambda + \Delta)

(truncated to the training interval and renormalised).  Every comparison of a heuristic with the
entropic schedules either standardises the data to :math:`\sigma_{data}` or applies this shift and
says which (docs/THEORY.md §5); the entropic schedules come from the data themselves and need neither.
This module holds the one implementation of :math:`s`, :math:`\Delta` and the shifted densities.
"""

from __future__ import annotations

import numpy as np

from noisealloc.theory.errors import as_float_array, as_generator, check_count, check_finite, check_interval

__all__ = [
    "SIGMA_DATA",
    "DATA_SCALE_SAMPLES",
    "data_scale",
    "heuristic_shift",
    "shifted_heuristic_pdfs",
    "shifted_heuristic",
]

#: Per-coordinate data scale the heuristic schedules assume (EDM's ``sigma_data``, Karras et al. 2022).
SIGMA_DATA = 0.5
#: Samples of ``x0`` behind the Monte-Carlo data scale of a model without atoms.
DATA_SCALE_SAMPLES = 8192


def data_scale(model, *, n_samples: int = DATA_SCALE_SAMPLES, rng=None) -> float:
    r"""Per-coordinate standard deviation of the data, :math:`s = \sqrt{\mathrm{tr\,Cov}(x_0)/D}`.

    Exact for a Dirac mixture (a model with ``atoms`` and ``weights``):

    .. math:: s^2 = \frac1D \sum_k \pi_k \|\mu_k - \bar\mu\|^2, \qquad \bar\mu = \sum_k \pi_k \mu_k ;

    otherwise the same quantity from ``n_samples`` draws of ``model.sample_x0`` (the mean over the
    coordinates of the per-coordinate sample variances, ``ddof = 0``).

    Parameters
    ----------
    model
        A data model of :mod:`noisealloc.theory`: a Dirac mixture, or any model with
        ``sample_x0(n, rng=...)``.
    n_samples : int
        Monte-Carlo sample count for models without atoms (ignored for Dirac mixtures).
    rng : numpy.random.Generator, int or None
        Randomness of the Monte-Carlo path (keyword-only; ignored for Dirac mixtures).

    Returns
    -------
    float
        :math:`s`, in the units of the data (per coordinate).

    References
    ----------
    docs/THEORY.md §5 (data scale); §6.5 and §6.6 use it to shift the heuristic schedules.

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.theory.models.dirac import DiracMixture
    >>> data_scale(DiracMixture(np.array([[-1.0, 0.0], [1.0, 0.0]])))  # variance 1 and 0, mean 1/2
    0.7071067811865476
    """
    if hasattr(model, "atoms") and hasattr(model, "weights"):
        atoms = np.asarray(model.atoms, dtype=np.float64)
        w = np.asarray(model.weights, dtype=np.float64)
        mean = w @ atoms
        var = w @ np.sum((atoms - mean) ** 2, axis=1)
        return float(np.sqrt(var / atoms.shape[1]))
    if not callable(getattr(model, "sample_x0", None)):
        raise ValueError(f"model must be a Dirac mixture (atoms and weights) or have sample_x0(n, rng=...); "
                         f"got {type(model).__name__}")
    n = check_count(n_samples, "n_samples")
    if n < 2:
        raise ValueError(f"n_samples must be >= 2 (a variance needs two draws); got {n_samples!r}")
    x = np.asarray(model.sample_x0(n, rng=as_generator(rng)), dtype=np.float64)
    return float(np.sqrt(np.mean(np.var(x, axis=0))))


def heuristic_shift(s, *, sigma_data: float = SIGMA_DATA) -> float:
    r"""Log-SNR shift :math:`\Delta = 2\log(s/\sigma_{data})` that moves a heuristic schedule to data of scale ``s``.

    A heuristic density :math:`p_h` designed for data of scale :math:`\sigma_{data}` becomes
    :math:`p(\lambda) = p_h(\lambda + \Delta)` on data of scale :math:`s` (module docstring).

    Parameters
    ----------
    s : float
        Per-coordinate data standard deviation (:func:`data_scale`), > 0.
    sigma_data : float
        Scale the heuristic was designed for, > 0 (default EDM's 0.5).

    Returns
    -------
    float
        :math:`\Delta`, in units of log-SNR; positive for data wider than :math:`\sigma_{data}`.

    References
    ----------
    docs/THEORY.md §5 (data scale).

    Examples
    --------
    >>> round(heuristic_shift(1.0), 6)  # data twice EDM's scale: 2 log 2
    1.386294
    >>> heuristic_shift(0.5)
    0.0
    """
    s_f, sd = _positive(s, "s"), _positive(sigma_data, "sigma_data")
    return 2.0 * float(np.log(s_f / sd))


def shifted_heuristic_pdfs(lam, s, *, names=None, sigma_data: float = SIGMA_DATA) -> dict:
    r"""Densities :math:`p(\lambda) = p_h(\lambda + \Delta)` of built-in heuristic schedules on the grid ``lam``.

    Each built-in schedule :math:`p_h` of :func:`noisealloc.theory.schedules.builtin.builtin_schedules` is
    truncated to the shifted interval :math:`[\lambda_0 + \Delta, \lambda_{n-1} + \Delta]` (so the
    result integrates to one over ``[lam[0], lam[-1]]``) and evaluated at ``lam + Δ``, with
    :math:`\Delta` from :func:`heuristic_shift`.

    Parameters
    ----------
    lam : (n,) array_like
        Strictly increasing log-SNR grid, n >= 2; its ends are the training interval.
    s : float
        Per-coordinate data standard deviation, > 0.
    names : sequence of str, optional
        Built-in schedules to evaluate (default all, in display order).
    sigma_data : float
        Scale the heuristics were designed for (default 0.5).

    Returns
    -------
    dict of str to (n,) ndarray
        Density per unit :math:`\lambda` of each schedule at ``lam``, keyed by name in the order asked.

    References
    ----------
    docs/THEORY.md §5 (schedules to compare; data scale).

    Examples
    --------
    >>> import numpy as np
    >>> lam = np.linspace(-8.0, 8.0, 5)
    >>> p = shifted_heuristic_pdfs(lam, 0.5, names=["uniform_lambda"])  # s = sigma_data: no shift
    >>> p["uniform_lambda"]
    array([0.0625, 0.0625, 0.0625, 0.0625, 0.0625])
    """
    from noisealloc.theory.schedules.builtin import builtin_schedules

    lam = check_finite(as_float_array(lam, "lam", ndim=1), "lam")
    if lam.size < 2 or np.any(np.diff(lam) <= 0):
        raise ValueError(f"lam must be a strictly increasing grid of at least 2 levels; got {lam.size} levels"
                         + ("" if lam.size < 2 else " that are not strictly increasing"))
    shift = heuristic_shift(s, sigma_data=sigma_data)
    scheds = builtin_schedules(lam[0] + shift, lam[-1] + shift)
    names = list(scheds) if names is None else list(names)
    unknown = [n for n in names if n not in scheds]
    if unknown:
        raise ValueError(f"name must be one of {tuple(scheds)}; got {unknown[0]!r}")
    return {n: scheds[n].pdf(lam + shift) for n in names}


def shifted_heuristic(name: str, s: float, lam_min: float, lam_max: float, *, sigma_data: float = SIGMA_DATA,
                      knots: int = 1025):
    r"""A built-in heuristic schedule moved to data of scale ``s``, :math:`p(\lambda) = p_h(\lambda + \Delta)`.

    With :math:`\Delta = 2\log(s/\sigma_{data})` (:func:`heuristic_shift`): the density of
    :func:`shifted_heuristic_pdfs` on ``knots`` uniform levels of
    ``[lam_min, lam_max]``, as a piecewise-linear
    :class:`~noisealloc.theory.schedules.base.TabulatedSchedule` in :math:`\lambda` (renormalised).
    Values below ``1e-300`` are raised to it, since a tabulated density must be positive (this adds
    at most 1e-300 per unit :math:`\lambda`).

    Parameters
    ----------
    name : str
        A built-in schedule (``"edm_lognormal"``, ``"cosine"``, ...).
    s : float
        Per-coordinate data standard deviation, > 0.
    lam_min, lam_max : float
        Training interval in log-SNR.
    sigma_data : float
        Scale the heuristic was designed for (default 0.5).
    knots : int
        Knots of the tabulated density, >= 2.

    Returns
    -------
    TabulatedSchedule
        In the coordinate ``"lambda"``, named ``"<name> (shifted <Δ>)"``.

    References
    ----------
    docs/THEORY.md §5 (data scale).

    Examples
    --------
    >>> sch = shifted_heuristic("edm_lognormal", 1.0, -8.0, 8.0)
    >>> sch.name
    'edm_lognormal (shifted +1.386)'
    >>> round(float(sch.cdf(8.0)), 12)
    1.0
    """
    from noisealloc.theory.schedules.base import TabulatedSchedule

    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
    n = check_count(knots, "knots")
    if n < 2:
        raise ValueError(f"knots must be >= 2; got {knots!r}")
    lam = np.linspace(lo, hi, n)
    pdf = shifted_heuristic_pdfs(lam, s, names=[name], sigma_data=sigma_data)[name]
    shift = heuristic_shift(s, sigma_data=sigma_data)
    return TabulatedSchedule(lam, np.maximum(pdf, 1e-300), name=f"{name} (shifted {shift:+.3f})")


def _positive(value, name: str) -> float:
    if np.iscomplexobj(value):  # float() of a numpy complex drops the imaginary part with only a warning
        raise ValueError(f"{name} must be real; got a complex {'number' if np.ndim(value) == 0 else 'array'} "
                         f"{value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}") from None
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return v
