r"""The generative entropy rate from the MMSE, in any noise coordinate (docs/THEORY.md section 2).

.. math:: h(\lambda) = -\frac{dH}{d\lambda} = \tfrac12 e^\lambda\,\mathrm{mmse}(\lambda), \qquad
          h_u(u) = h(\lambda(u))\,\left|\frac{d\lambda}{du}\right|.

Pure formulas on arrays, used by every data model and by the information pipeline.
"""

from __future__ import annotations

import numpy as np

from noisealloc.theory.coordinates import get_coordinate
from noisealloc.theory.errors import as_float_array, check_finite
from noisealloc.theory.estimates import Estimate

__all__ = ["half_snr_times", "rate_jacobian", "entropy_rate_from_mmse"]


def half_snr_times(lam, values) -> np.ndarray:
    r""":math:`\tfrac12 e^\lambda v` without overflow for :math:`|\lambda| \le 700` and tiny ``v``.

    Computed as :math:`\mathrm{sign}(v)\exp(\lambda - \log 2 + \log|v|)`, which stays
    finite and relatively accurate when :math:`v \sim 10^{-300}` and :math:`\lambda = 50`.

    Parameters
    ----------
    lam : array_like
        Log-SNR levels.
    values : array_like
        :math:`v`, broadcastable with ``lam``.  Element-wise: a NaN in either gives NaN there, as numpy does.

    Returns
    -------
    ndarray
        :math:`\tfrac12 e^\lambda v` (exactly 0 where ``v == 0``).
    """
    lam = as_float_array(lam, "lam")
    v = as_float_array(values, "values")
    with np.errstate(divide="ignore"):
        out = np.sign(v) * np.exp(lam - np.log(2.0) + np.log(np.abs(v)))
    return np.where(v == 0, 0.0, out)


def rate_jacobian(lam, coordinate="lambda"):
    r""":math:`|d\lambda/du|` at :math:`u(\lambda)`: a rate per unit of :math:`\lambda` times this is the rate per unit of ``u``.

    Parameters
    ----------
    lam : array_like
        Log-SNR levels.
    coordinate : str or Coordinate
        The coordinate ``u`` (default ``"lambda"``).

    Returns
    -------
    jacobian : ndarray
        :math:`|d\lambda/du|` at :math:`u(\lambda)`, shape of ``lam`` (ones for ``lambda``).
    name : str
        The coordinate's canonical name.

    References
    ----------
    docs/THEORY.md section 1 (densities and rates between coordinates).
    """
    lam = as_float_array(lam, "lam")
    coord = get_coordinate(coordinate)
    if coord.name == "lambda":
        return np.ones_like(lam), coord.name
    return np.abs(coord.dlam_du(coord.from_lam(lam))), coord.name


def entropy_rate_from_mmse(lam, mmse, coordinate="lambda") -> Estimate:
    r"""Generative entropy rate from the MMSE, in the coordinate ``coordinate``.

    .. math::

        h(\lambda) = \tfrac12 e^{\lambda}\,\mathrm{mmse}(\lambda), \qquad
        h_u\big(u(\lambda)\big) = h(\lambda)\,\Big|\frac{d\lambda}{du}\Big|_{u(\lambda)} .

    Parameters
    ----------
    lam : array_like
        Log-SNR levels (the input is always :math:`\lambda`).
    mmse : Estimate or array_like
        MMSE at ``lam`` (same shape); an :class:`Estimate` keeps its method,
        ``error_check`` (relative, so unchanged) and a scaled ``stderr``.  Level by level: a NaN
        MMSE gives a NaN rate there, as numpy does.
    coordinate : str or Coordinate
        Target coordinate (``"lambda"``, ``"sigma"``, ``"log-sigma"``, ``"t"``, ...).

    Returns
    -------
    Estimate
        Rate per unit of ``u`` at :math:`u(\lambda)`; ``info["coordinate"]`` names it.

    References
    ----------
    docs/THEORY.md section 2 (entropy rate; I-MMSE).

    Examples
    --------
    >>> est = entropy_rate_from_mmse([0.0, 2.0], [1.0, 0.5])
    >>> np.round(est.value, 9).tolist()   # 1/2 e^lam mmse
    [0.5, 1.847264025]
    """
    lam = as_float_array(lam, "lam")
    check_finite(lam, "lam")
    coord = get_coordinate(coordinate)
    if isinstance(mmse, Estimate):
        value, stderr = mmse.value, mmse.stderr
        method, err, n, info = mmse.method, mmse.error_check, mmse.n_samples, dict(mmse.info)
    else:
        value = as_float_array(mmse, "mmse")
        stderr = np.zeros_like(value)
        method, err, n, info = "closed-form", None, None, {}
    if value.shape != np.broadcast_shapes(value.shape, lam.shape):
        raise ValueError(f"mmse must have the shape of lam {lam.shape}; got {value.shape}")
    jac, info["coordinate"] = rate_jacobian(lam, coord)
    return Estimate(half_snr_times(lam, value) * jac, half_snr_times(lam, stderr) * jac, method, err, n, info)
