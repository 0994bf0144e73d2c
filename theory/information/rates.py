r"""Rates on a grid: quadrature weights for integrals of h over log-SNR, and a model's entropy rate.

* :func:`grid_quadrature_weights`: trapezoid and Simpson weights on a (possibly non-uniform) grid, so
  that ``weights @ f`` approximates :math:`\int f\,d\lambda`;
* :func:`gregory_weights`: Gregory end corrections of the trapezoid rule on a uniform grid;
* :func:`model_entropy_rate`: :math:`h_u(\lambda)` of a data model in any coordinate, with the
  Monte-Carlo options only for the models that take them.
"""

from __future__ import annotations

import numpy as np

from noisealloc.theory.errors import as_float_array, as_float_scalar
from noisealloc.theory.estimates import Estimate
from noisealloc.theory.models.protocol import monte_carlo_options

__all__ = ['grid_quadrature_weights', 'model_entropy_rate', 'gregory_weights']


def grid_quadrature_weights(lam):
    r"""Trapezoid and Simpson weights on a grid, so that ``weights @ f`` approximates :math:`\int f\,d\lambda`.

    Parameters
    ----------
    lam : array_like, shape (L,)
        Strictly increasing finite grid, ``L >= 2`` (an unsorted grid would give negative weights).

    Returns
    -------
    trapezoid, simpson : ndarray, shape (L,)
        Quadrature weights; their difference applied to ``f`` estimates the discretisation
        error of a budget integral on the grid.

    Raises
    ------
    ValueError
        ``lam`` is not one-dimensional, has fewer than 2 levels, is not finite or not strictly
        increasing.

    Examples
    --------
    >>> trap, simp = grid_quadrature_weights([0.0, 0.5, 1.0])
    >>> trap.tolist(), np.round(simp, 9).tolist()
    ([0.25, 0.5, 0.25], [0.166666667, 0.666666667, 0.166666667])
    """
    from scipy.integrate import simpson

    lam = as_float_array(lam, "lam")
    if lam.ndim != 1 or lam.size < 2:
        raise ValueError(f"lam must be a one-dimensional grid of at least 2 levels; got shape {lam.shape}")
    if not np.all(np.isfinite(lam)):
        raise ValueError("lam must be finite; got a non-finite level")
    steps = np.diff(lam)
    if not np.all(steps > 0):
        i = int(np.argmin(steps > 0))
        raise ValueError(f"lam must be strictly increasing (Simpson weights of an unsorted grid are negative); "
                         f"lam[{i}] = {float(lam[i])!r} >= lam[{i + 1}] = {float(lam[i + 1])!r}")
    trap = np.empty_like(lam)
    dl = np.diff(lam)
    trap[0], trap[-1] = dl[0] / 2, dl[-1] / 2
    trap[1:-1] = (dl[:-1] + dl[1:]) / 2
    simp = simpson(np.eye(lam.size), x=lam, axis=1)
    return trap, simp


#: Order of the end corrections of the grid budget rule (:func:`gregory_weights`): order 6 is exact for
#: polynomials of degree 7 and keeps every weight positive (order 8 has a negative one).
GREGORY_ORDER = 6


def _gregory_coefficients(order: int) -> list:
    r"""Gregory coefficients :math:`G_0, \dots, G_{order}` (exact fractions): :math:`x/\log(1+x) = \sum_n G_n x^n`."""
    from fractions import Fraction

    inv = [Fraction((-1) ** n, n + 1) for n in range(order + 1)]  # log(1+x)/x
    g = [Fraction(1)]
    for n in range(1, order + 1):
        g.append(-sum(inv[j] * g[n - j] for j in range(1, n + 1)))
    return g


def gregory_weights(n: int, step: float, order: int = GREGORY_ORDER) -> np.ndarray:
    r"""Weights of Gregory's end-corrected trapezoid rule on ``n`` equally spaced levels.

    .. math:: \int_{x_0}^{x_{n-1}} f\,dx \approx \delta\Big(\tfrac12 f_0 + f_1 + \dots + \tfrac12 f_{n-1}\Big)
              - \delta\sum_{k=1}^{p} |G_{k+1}|\big(\nabla^k f_{n-1} + (-1)^k \Delta^k f_0\big),

    with forward (:math:`\Delta`) and backward (:math:`\nabla`) differences and the Gregory
    coefficients :math:`G` (:math:`1/12, 1/24, 19/720, \dots`); order :math:`p` is exact for
    polynomials of degree :math:`p + 1`, and on an analytic integrand the trapezoid part converges
    geometrically in :math:`1/\delta`.

    Parameters
    ----------
    n : int
        Number of levels, at least ``2 * (order + 1)`` (the two ends' corrections do not overlap).
    step : float
        The spacing :math:`\delta`.
    order : int
        :math:`p`, the highest difference used.

    Returns
    -------
    ndarray, shape (n,)

    Examples
    --------
    >>> x = np.linspace(0.0, 1.0, 15)
    >>> w = gregory_weights(15, x[1] - x[0])
    >>> round(float(w @ x ** 7), 14), abs(float(w @ np.exp(x)) - (np.e - 1.0)) < 1e-11
    (0.125, True)
    """
    from math import comb

    if n < 2 * (order + 1):
        raise ValueError(f"Gregory's rule of order {order} needs at least {2 * (order + 1)} levels; got {n}")
    step = as_float_scalar(step, "step")
    g = _gregory_coefficients(order + 1)
    w = np.full(n, step)
    w[0] = w[-1] = 0.5 * step
    for k in range(1, order + 1):
        c = -step * float(abs(g[k + 1]))
        for j in range(k + 1):
            w[n - 1 - j] += c * (-1) ** j * comb(k, j)  # nabla^k f_{n-1}
            w[j] += c * (-1) ** j * comb(k, j)  # (-1)^k Delta^k f_0 = sum_j (-1)^j C(k, j) f_j
    return w


def model_entropy_rate(model, lam, *, coordinate="lambda", n_samples=None, rng=None) -> Estimate:
    r"""``model.entropy_rate(lam, coordinate)``, with the Monte-Carlo options for Monte-Carlo models only.

    Deterministic models (closed forms, quadrature) take no ``n_samples``/``rng``; Monte-Carlo models
    get them, so that a caller can bound the cost and fix the seed without knowing which kind of
    model it holds.  The choice is made by the model's declared ``monte_carlo`` attribute
    (:func:`noisealloc.theory.models.protocol.monte_carlo_options`).

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


