r"""Asymptotic limits of the information quantities and the input checks they rely on (docs/THEORY.md section 2).

At extreme log-SNR the posterior quantities take their limits to float64 precision, and the
rules that compute them in between (quadrature, sampling) divide by :math:`\sigma^2 = e^{-\lambda}`,
which overflows or underflows.  The models switch to the limits where these are exact in float64:

* low SNR, :math:`e^\lambda R^2 \le` :data:`LOW_SNR_LIMIT` (:math:`R` the largest distance of the
  law's support from its mean): the posterior is the prior to relative :math:`e^\lambda R^2`, so
  :math:`\mathrm{mmse} = \mathrm{Var}(P)`, :math:`H = H(\pi)`, :math:`I = 0` up to that relative
  error (the first neglected terms are :math:`e^\lambda \mathrm{tr}\,\Sigma^2` and
  :math:`\tfrac12 e^\lambda \mathrm{Var}(P)`);
* high SNR for a discrete law with distinct atoms: the Bhattacharyya bound
  (:func:`dirac_underflow_snr`) shows that mmse, :math:`H` and :math:`h` are below the smallest
  float64 subnormal, so exactly 0 is their correctly rounded value.
"""

from __future__ import annotations

import math

import numpy as np

__all__: list[str] = []

#: Relative size of the neglected terms at which the low-SNR limits are used: far below the
#: float64 epsilon (2.2e-16), so the limits are the correctly rounded values.
LOW_SNR_LIMIT = 1e-20
#: log of a bound below which a value rounds to exactly 0 in float64 (e^-750 ~ 2e-326 is below half
#: the smallest subnormal, 4.9e-324).
LOG_UNDERFLOW = -750.0
# Largest number of pair distances formed at once by min_distance_lower_bound (32 MB of float64).
_PAIR_BLOCK = 1 << 22
# min_distance_lower_bound forms all pairs up to this many multiply-adds (K^2 D; digits: 2.1e8, well
# under a second) and uses projections beyond it.
_EXACT_PAIR_WORK = 2.0**28
# Seeded unit directions of the projection bound (deterministic: a model's limits never depend on a seed).
_PROJECTIONS = 4
_PROJECTION_SEED = 20261202


def refuse_complex(value, name: str) -> None:
    """Raise ``ValueError`` naming ``name`` when ``value`` is complex (never silently take the real part)."""
    if value is not None and np.iscomplexobj(value):
        raise ValueError(f"{name} must be real; got a complex array (dtype {np.asarray(value).dtype}); "
                         "pass the real part explicitly if that is what you mean")


def min_distance_lower_bound(points: np.ndarray, abs_max: float | None = None) -> float:
    r"""A lower bound on :math:`\min_{i \ne j} \|p_i - p_j\|` (0 when two points coincide).

    Up to :data:`_EXACT_PAIR_WORK` multiply-adds (``K^2 D``): pairwise squared distances of the
    centred points by GEMM in row blocks (memory: at most 2**22 float64 entries at a time), minus the
    rounding bound :math:`(D + 4)\,\epsilon\,(\|p_i\|^2 + \|p_j\|^2)` of the GEMM form, so the result
    never exceeds the exact minimum distance.  Beyond that (MNIST: ``K^2 D = 8e10``, ten times the GEMM
    of a whole profile): the projections :math:`y_i = g^\top p_i` on :data:`_PROJECTIONS` seeded unit
    vectors :math:`g` contract distances, :math:`|y_i - y_j| \le \|p_i - p_j\|`, and the smallest gap of
    the sorted :math:`y` minus twice the rounding bound :math:`(D + 2)\,\epsilon \max_i \|p_i\|` of a
    computed :math:`y_i` is a valid, cheaper (``O(K D + K log K)``) and looser bound; the largest over
    the projections is returned.  A looser bound only moves the exact-zero level
    (:func:`dirac_underflow_snr`) up, never below the true one.

    Parameters
    ----------
    points : ndarray, shape (K, D)
    abs_max : float, optional
        :math:`\max_{i,d} |p_{id}|` when the caller already has it (computed when omitted); the
        projection path bounds :math:`\max_i \|p_i\|` (of the points as given, not centred) by
        :math:`\sqrt D` times it.

    Returns
    -------
    float
        ``inf`` for fewer than two points.
    """
    pts = np.asarray(points, dtype=np.float64)
    k, d = pts.shape
    if k < 2:
        return math.inf
    if float(k) * k * d > _EXACT_PAIR_WORK:
        # The points as given (a centred copy of MNIST would be a 63 MB pass for a bound whose rounding
        # term is negligible next to the gaps either way).
        if abs_max is None:
            abs_max = max(float(pts.max()), -float(pts.min()))
        max_norm = math.sqrt(d) * float(abs_max)
        g = np.random.default_rng(_PROJECTION_SEED).standard_normal((d, _PROJECTIONS))
        g /= np.linalg.norm(g, axis=0)
        err = 2.0 * (d + 2) * np.finfo(np.float64).eps * float(max_norm) * 1.01
        from noisealloc.theory.posterior._scan import project

        y = np.sort(project(pts, g), axis=0)  # one parallel pass (a 4-column GEMM runs on one core)
        gaps = np.min(np.diff(y, axis=0), axis=0) - err
        best = float(np.max(gaps))
        return best if best > 0 else 0.0
    pts = pts - pts.mean(axis=0)
    sq = np.einsum("kd,kd->k", pts, pts)
    margin = (d + 4) * np.finfo(np.float64).eps
    rows = max(1, _PAIR_BLOCK // k)
    best = math.inf
    for s in range(0, k, rows):
        blk = pts[s:s + rows]
        d2 = sq[s:s + rows, None] + sq[None, :] - 2.0 * (blk @ pts.T)
        d2 -= margin * (sq[s:s + rows, None] + sq[None, :])
        idx = np.arange(s, min(s + rows, k))
        d2[idx - s, idx] = np.inf
        best = min(best, float(d2.min()))
    return math.sqrt(best) if best > 0 else 0.0


def dirac_underflow_snr(n_atoms: int, min_distance: float) -> float:
    r"""SNR beyond which mmse, :math:`H` and :math:`h` of a Dirac mixture are below the float64 subnormals.

    With :math:`p_{jk} = \pi_j E[w_k \mid x_0 = \mu_j] \le \tfrac12\sqrt{\pi_j\pi_k}\,e^{-E_{jk}}` and
    :math:`\pi_j E[\sqrt{w_k} \mid \mu_j] \le \sqrt{\pi_j\pi_k}\,e^{-E_{jk}}`, where
    :math:`E_{jk} = d_{jk}^2 e^\lambda / 8` (Bhattacharyya), and :math:`-w\log w \le (2/e)\sqrt w`:

    .. math::

        \mathrm{mmse} \le \tfrac12 K d^2 e^{-E}, \quad h \le 2 K E e^{-E}, \quad H \le 1.24\,K e^{-E},
        \qquad E = d_{\min}^2 e^\lambda / 8 \ge 1.

    Returns the smallest :math:`e^\lambda` at which :math:`\log K + \log\max(d_{\min}^2, 2E, 1.24) - E`
    is at most :data:`LOG_UNDERFLOW` (``inf`` when ``min_distance`` is 0).
    """
    if not min_distance > 0:
        return math.inf
    if not math.isfinite(min_distance):
        return 0.0
    d2 = min_distance * min_distance
    if d2 == 0.0:  # atoms closer than 1e-162: the square underflows, the level lies beyond float64 SNRs
        return math.inf
    e = -LOG_UNDERFLOW
    for _ in range(8):  # increasing fixed-point iteration; converges in a few steps
        e = -LOG_UNDERFLOW + math.log(n_atoms) + math.log(max(d2, 2.0 * e, 1.24))
    return 8.0 * (e + 1.0) / d2


def live_coordinates(atoms) -> np.ndarray:
    r"""Indices of the coordinates in which not all atoms agree.

    A coordinate :math:`d` with :math:`\mu_{1d} = \dots = \mu_{Kd}` adds exactly 0 to every
    :math:`\|\mu_k - \mu_j\|^2`, to every :math:`\varepsilon \cdot (\mu_k - \mu_j)` and to every
    distance from a midpoint of atoms, so distance GEMMs may skip it.

    Parameters
    ----------
    atoms : ndarray, shape (K, D)

    Returns
    -------
    ndarray of int64, shape (D',)
        Increasing; all of ``range(D)`` when every coordinate varies (or ``K = 1``: then none
        varies, and all are kept so that shapes stay non-empty).

    Examples
    --------
    >>> live_coordinates(np.array([[0.0, 1.0, 5.0], [0.0, 2.0, 5.0]])).tolist()
    [1]
    """
    live = np.flatnonzero(np.any(atoms != atoms[:1], axis=0))
    return live if live.size else np.arange(atoms.shape[1])
