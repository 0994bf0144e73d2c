"""The exact inverse-CDF draw of a piecewise-linear density: the one kernel behind every table sampler.

numpy only (no scipy), so :mod:`noisealloc.theory.schedules.samplers`, which a training loop imports, stays light.
"""

from __future__ import annotations

import numpy as np

__all__ = ["invert_piecewise_linear_cdf", "draw_piecewise_linear"]


def invert_piecewise_linear_cdf(x, f, c, q) -> np.ndarray:
    r"""The point where the cumulative mass of a piecewise-linear density reaches ``q``, exactly.

    On the cell :math:`[x_i, x_{i+1}]` of width :math:`w` the density is linear from :math:`f_i` to
    :math:`f_{i+1}`, so the mass :math:`r` beyond :math:`x_i` is reached at
    :math:`x_i + 2r / (f_i + \sqrt{f_i^2 + 2 (f_{i+1} - f_i) r / w})` (the root of the quadratic in
    its cancellation-free form; the square root is the density at the solution).

    Parameters
    ----------
    x : ndarray, shape (K,)
        Increasing knots, ``K >= 2``.
    f : ndarray, shape (K,)
        Density at the knots (>= 0; runs of 0 allowed).
    c : ndarray, shape (K,)
        Its cumulative integral from ``x[0]`` (unnormalised: ``c[-1]`` is the total mass).
    q : ndarray
        Masses in ``[0, c[-1]]``.

    Returns
    -------
    ndarray, of the shape of ``q``
        Points in ``[x[0], x[-1]]``; never inside a run of zero density (at ``r = 0`` in a cell whose
        density starts at 0 the answer is its left knot, not 0/0).

    Examples
    --------
    >>> invert_piecewise_linear_cdf(np.array([0.0, 1.0]), np.array([1.0, 1.0]), np.array([0.0, 1.0]),
    ...                             np.array([0.25, 0.5])).tolist()
    [0.25, 0.5]
    """
    i = np.clip(np.searchsorted(c, q, side="right") - 1, 0, x.size - 2)
    w = x[i + 1] - x[i]
    r = np.clip(q - c[i], 0.0, c[i + 1] - c[i])
    disc = np.maximum(f[i] ** 2 + 2.0 * (f[i + 1] - f[i]) * r / w, 0.0)
    den = f[i] + np.sqrt(disc)
    step = np.divide(2.0 * r, den, out=np.zeros_like(r), where=den > 0)
    return x[i] + np.clip(step, 0.0, w)


def draw_piecewise_linear(x, f, c, u) -> np.ndarray:
    """Draws at uniform levels ``u`` in [0, 1] (clamped by the caller): :func:`invert_piecewise_linear_cdf`
    at ``u * c[-1]``.

    Parameters
    ----------
    x, f, c : ndarray, shape (K,)
        As in :func:`invert_piecewise_linear_cdf`.
    u : ndarray
        Uniform levels.

    Returns
    -------
    ndarray, of the shape of ``u``
    """
    return invert_piecewise_linear_cdf(x, f, c, u * c[-1])
