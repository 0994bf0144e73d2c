"""The exact inverse-CDF draw of a piecewise-linear density: the one kernel behind every table sampler.

numpy only (no scipy), so :mod:`noisealloc.theory.schedules.samplers`, which a training loop imports, stays light.
"""

from __future__ import annotations

import numpy as np

from noisealloc.theory.tolerances import TABLE_CDF_RTOL  # a module of constants over numpy: still light

__all__ = ["invert_piecewise_linear_cdf", "draw_piecewise_linear", "check_table"]


def check_table(knots, pdf, cdf, where: str = "table") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The arrays of a piecewise-linear density table as float64, or ``ValueError`` naming what is wrong.

    Checked: 1-d real arrays of equal length ``>= 2``, all finite; strictly increasing knots; ``pdf >= 0``
    with positive mass; ``cdf`` the cumulative trapezoid integral of ``pdf`` from 0, to
    :data:`~noisealloc.theory.tolerances.TABLE_CDF_RTOL` of the total mass (so it is non-decreasing).

    Parameters
    ----------
    knots, pdf, cdf : array_like, shape (K,)
    where : str
        What the arrays are, for the message.

    Returns
    -------
    knots, pdf, cdf : ndarray, shape (K,), float64

    Raises
    ------
    ValueError
        Naming the array, the value found and what is allowed.
    """
    arrays = []
    for name, a in (("knots", knots), ("pdf", pdf), ("cdf", cdf)):
        a = np.asarray(a)
        if a.dtype.kind not in "iuf":  # complex is not cut to its real part, objects and text are refused
            raise ValueError(f"{where}: {name} must hold real numbers; got dtype {a.dtype}")
        arrays.append(a.astype(np.float64))
    x, f, c = arrays
    if not (x.ndim == 1 and x.shape == f.shape == c.shape and x.size >= 2):
        raise ValueError(f"{where}: 'knots', 'pdf' and 'cdf' must be 1-d of equal length >= 2; "
                         f"got shapes {x.shape}, {f.shape}, {c.shape}")
    for name, a in (("knots", x), ("pdf", f), ("cdf", c)):
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{where}: {name} must be finite; got {a[~np.isfinite(a)][0]!r} at index "
                             f"{int(np.flatnonzero(~np.isfinite(a))[0])}")
    if np.any(np.diff(x) <= 0):
        raise ValueError(f"{where}: knots must be strictly increasing; they are not at index "
                         f"{int(np.flatnonzero(np.diff(x) <= 0)[0]) + 1}")
    if np.any(f < 0):
        raise ValueError(f"{where}: pdf must be >= 0; its minimum is {float(f.min())!r}")
    cells = 0.5 * (f[:-1] + f[1:]) * np.diff(x)
    expected = np.concatenate([[0.0], np.cumsum(cells)])
    total = float(expected[-1])
    if not (np.isfinite(total) and total > 0):
        raise ValueError(f"{where}: the pdf must have a finite positive mass; its trapezoid integral is {total!r}")
    if np.any(np.diff(c) < 0):
        raise ValueError(f"{where}: cdf must be non-decreasing; it decreases at index "
                         f"{int(np.flatnonzero(np.diff(c) < 0)[0]) + 1}")
    err = np.abs(c - expected)
    worst = int(np.argmax(err))
    if err[worst] > TABLE_CDF_RTOL * total:
        raise ValueError(f"{where}: cdf is not the cumulative trapezoid integral of pdf (from 0): at index {worst} "
                         f"it is {float(c[worst])!r}, the pdf gives {float(expected[worst])!r} "
                         f"(allowed difference {TABLE_CDF_RTOL:g} of the mass {total:.6g})")
    return x, f, c


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
