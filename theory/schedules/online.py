r"""Online re-estimation of the entropy-rate profile from training losses.

:class:`EntropyRateEstimator` ingests per-example (or per-batch) pairs
:math:`(\lambda_i, \ell_i)` of log-SNR and x0-prediction loss during training,
keeps a running mean of the loss in bins of :math:`\lambda` with exponential
forgetting, and on demand returns an updated square-root entropic schedule
(docs/THEORY.md section 4 (b)) built from a monotone fit of the binned losses
(:func:`noisealloc.theory.information.from_losses.fit_mmse_profile`).

Forgetting rule.  Each call to :meth:`EntropyRateEstimator.update` first
multiplies every bin's accumulated loss sum and count by ``forgetting``
(:math:`\gamma \in (0, 1]`), then adds the new batch: a bin's estimate is a
weighted mean in which a batch seen :math:`s` updates ago has weight
:math:`\gamma^s` (effective memory :math:`1/(1-\gamma)` batches).

Stability safeguards, applied in this order by :meth:`schedule`:

1. *smoothing*: the binned log-loss is fitted by a smooth non-increasing profile
   (I-splines with a curvature penalty), never used raw;
2. *floor*: the target density is mixed with a uniform density,
   :math:`p \leftarrow (1-\varepsilon)p + \varepsilon/|U|`;
3. *maximum change per update*: the returned density moves from the previous
   one toward the target by the largest step whose total-variation distance is
   at most ``max_change``:
   :math:`p_{new} = p_{old} + t\,(p_{target} - p_{old})` with
   :math:`t = \min(1, \delta / \mathrm{TV}(p_{target}, p_{old}))`, so
   :math:`\mathrm{TV}(p_{new}, p_{old}) = t\,\mathrm{TV}(p_{target}, p_{old}) \le \delta`
   exactly (TV is computed exactly for piecewise-linear densities on the common knots).

Until at least ``min_bins`` bins have data the schedule stays as it was
(uniform in the chosen coordinate at the start).
"""

from __future__ import annotations

import numpy as np

from noisealloc.theory.coordinates import Coordinate, get_coordinate
from noisealloc.theory.errors import as_float_array, as_float_scalar, as_int_scalar, check_finite, check_interval
from noisealloc.theory.information.from_losses import PARAMETERISATIONS, fit_mmse_profile, x0_loss_from

__all__ = ["EntropyRateEstimator", "tv_distance_piecewise_linear"]


def tv_distance_piecewise_linear(u, p, q) -> float:
    r"""Exact total-variation distance :math:`\tfrac12\int |p - q|\,du` of two piecewise-linear densities.

    Both are linear on each cell :math:`[u_i, u_{i+1}]`, so is :math:`d = p - q`; a cell where
    :math:`d` keeps its sign contributes :math:`\tfrac12 w (|d_i| + |d_{i+1}|)`, and one where it
    changes sign is split at the root, contributing :math:`\tfrac12 w (d_i^2 + d_{i+1}^2)/(|d_i| + |d_{i+1}|)`
    (:math:`w` the cell width).

    Parameters
    ----------
    u : (n,) array_like
        Common knots, increasing.
    p, q : (n,) array_like
        Values of the two densities at the knots.

    Returns
    -------
    float
        :math:`\tfrac12\int_{u_0}^{u_{n-1}} |p - q|\,du` (in [0, 1] for two densities on the knots).

    References
    ----------
    docs/THEORY.md §4 (b); the maximum-change safeguard of :class:`EntropyRateEstimator`.

    Examples
    --------
    >>> tv_distance_piecewise_linear([0.0, 1.0], [0.0, 2.0], [2.0, 0.0])  # d = -2 .. 2 crosses at 1/2
    0.5
    """
    u = as_float_array(u, "u")
    d = as_float_array(p, "p") - as_float_array(q, "q")
    a, b, w = d[:-1], d[1:], np.diff(u)
    same = a * b >= 0
    area_same = 0.5 * w * (np.abs(a) + np.abs(b))
    denom = np.where(same, 1.0, np.abs(a) + np.abs(b))
    area_cross = 0.5 * w * (a * a + b * b) / denom
    return 0.5 * float(np.sum(np.where(same, area_same, area_cross)))


class EntropyRateEstimator:
    r"""Binned running estimate of the entropy rate, turned into a schedule on demand.

    Parameters
    ----------
    lam_min, lam_max : float
        Training interval in log-SNR.
    n_bins : int
        Number of equal-width bins in :math:`\lambda`.
    parameterisation : {"x0", "eps", "v"}
        Of the losses passed to :meth:`update` (converted with
        :func:`~noisealloc.theory.information.from_losses.x0_loss_from`).
    forgetting : float in (0, 1]
        Decay :math:`\gamma` applied to all bin statistics at each update.
    floor : float in [0, 1)
        Uniform mixture weight of the returned schedule.
    max_change : float in (0, 1]
        Largest total-variation distance between consecutive schedules.
    coordinate : str or Coordinate
        Coordinate of the schedule (the square-root law is coordinate dependent).
    rule : {"sqrt-entropy", "entropy"}
    process : {"gaussian", "masked"}
        The forward process whose losses are fed: Gaussian noise (x0 losses, :math:`h = \tfrac12 e^\lambda
        \mathrm{mmse}`) or masking (the cross-entropy summed over the masked tokens of a string,
        :math:`h = \alpha L` with :math:`\alpha = \mathrm{sigmoid}(\lambda)`, docs/THEORY.md §7; ``parameterisation``
        must then be ``"x0"``; a coordinate other than ``"lambda"`` is passed as the masked process's
        Coordinate object, :func:`noisealloc.theory.masked.process.get_masked_coordinate`).
    min_bins : int
        Bins with data needed before the schedule starts to move.
    knots : int
        Knots of the returned tabulated density.
    """

    def __init__(self, lam_min: float = -12.0, lam_max: float = 12.0, *, n_bins: int = 32,
                 parameterisation: str = "x0", forgetting: float = 0.99, floor: float = 0.05,
                 max_change: float = 0.1, coordinate: str = "lambda", rule: str = "sqrt-entropy",
                 min_bins: int = 4, knots: int = 129, process: str = "gaussian"):
        self.lam_min, self.lam_max = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
        for name, value in (("n_bins", n_bins), ("min_bins", min_bins), ("knots", knots)):
            as_int_scalar(value, name)  # named errors; the checks below keep int()'s conversion
        if int(n_bins) < 3:
            raise ValueError(f"n_bins must be >= 3; got {n_bins!r}")
        if parameterisation not in PARAMETERISATIONS:
            raise ValueError(f"parameterisation must be one of {PARAMETERISATIONS}; got {parameterisation!r}")
        forgetting = as_float_scalar(forgetting, "forgetting")
        floor = as_float_scalar(floor, "floor")
        max_change = as_float_scalar(max_change, "max_change")
        if not (0.0 < forgetting <= 1.0):
            raise ValueError(f"forgetting must lie in (0, 1]; got {forgetting!r}")
        if not (0.0 <= floor < 1.0):
            raise ValueError(f"floor must lie in [0, 1); got {floor!r}")
        if not (0.0 < max_change <= 1.0):
            raise ValueError(f"max_change must lie in (0, 1] (a total-variation distance); got {max_change!r}")
        if not (3 <= int(min_bins) <= int(n_bins)):
            raise ValueError(f"min_bins must lie in [3, n_bins]; got {min_bins!r}")
        self.n_bins = int(n_bins)
        self.parameterisation = parameterisation
        self.forgetting = float(forgetting)
        self.floor = float(floor)
        self.max_change = float(max_change)
        if process not in ("gaussian", "masked"):
            raise ValueError(f"process must be 'gaussian' or 'masked'; got {process!r}")
        if process == "masked" and parameterisation != "x0":
            raise ValueError(f"parameterisation must be 'x0' for the masked process (its losses are cross-entropies); "
                             f"got {parameterisation!r}")
        self.process = process
        # A Coordinate object is taken as it is (the masked process's own, from noisealloc.theory.masked,
        # which this layer does not import); a name is looked up among the Gaussian-process coordinates,
        # whose "lambda" is the masked log-odds too.
        self.coordinate = coordinate if isinstance(coordinate, Coordinate) else get_coordinate(coordinate)
        self.rule = rule
        self.min_bins = int(min_bins)
        self.edges = np.linspace(self.lam_min, self.lam_max, self.n_bins + 1)
        self.centers = 0.5 * (self.edges[1:] + self.edges[:-1])
        self._sum = np.zeros(self.n_bins)
        self._sumsq = np.zeros(self.n_bins)
        self._count = np.zeros(self.n_bins)
        self.n_updates = 0
        lam_knots = np.linspace(self.lam_min, self.lam_max, int(knots))
        u = self.coordinate.from_lam(lam_knots)
        self._u = np.sort(u)
        self._pdf = np.full(self._u.size, 1.0 / (self._u[-1] - self._u[0]))

    def update(self, lam, loss) -> None:
        """Ingest one batch of per-example (or per-batch-mean) losses at log-SNR ``lam``.

        Values outside ``[lam_min, lam_max]`` raise ``ValueError``; losses must be >= 0.
        """
        lam = check_finite(as_float_array(lam, "lam").ravel(), "lam")
        loss = check_finite(as_float_array(loss, "loss").ravel(), "loss")
        if lam.shape != loss.shape:
            raise ValueError(f"lam and loss must have the same length; got {lam.size} and {loss.size}")
        if np.any(loss < 0):
            raise ValueError(f"loss must be >= 0; got {float(loss[loss < 0][0])!r}")
        if np.any((lam < self.lam_min) | (lam > self.lam_max)):
            bad = lam[(lam < self.lam_min) | (lam > self.lam_max)][0]
            raise ValueError(f"lam must lie in [{self.lam_min}, {self.lam_max}]; got {float(bad)!r}")
        x0 = x0_loss_from(loss, lam, self.parameterisation)
        idx = np.clip(np.searchsorted(self.edges, lam, side="right") - 1, 0, self.n_bins - 1)
        g = self.forgetting
        self._sum *= g
        self._sumsq *= g
        self._count *= g
        np.add.at(self._sum, idx, x0)
        np.add.at(self._sumsq, idx, x0 * x0)
        np.add.at(self._count, idx, 1.0)
        self.n_updates += 1

    def binned(self):
        """Current ``(centers, mean_loss, stderr, weight)`` per bin (NaN where a bin is empty)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = self._sum / self._count
            var = np.maximum(self._sumsq / self._count - mean**2, 0.0)
            se = np.sqrt(var / np.maximum(self._count - 1.0, 1.0))
        empty = self._count <= 0
        mean[empty] = np.nan
        se[empty] = np.nan
        return self.centers.copy(), mean, se, self._count.copy()

    def target(self):
        """The unconstrained target density at the knots (smoothed + floored), or ``None`` without enough data."""
        from noisealloc.theory.schedules.entropic import entropic_pdf_values

        centers, mean, se, count = self.binned()
        ok = (count > 0) & (mean > 0)
        if ok.sum() < self.min_bins:
            return None
        # Relative standard errors; a bin with one example gets the median relative error of the others.
        rel = se[ok] / mean[ok]
        good = np.isfinite(rel) & (rel > 0)
        fill = float(np.median(rel[good])) if good.any() else 1.0
        rel = np.where(good, rel, fill)
        prof = fit_mmse_profile(centers[ok], mean[ok], stderr=rel * mean[ok], n_boot=0)
        lo, hi = prof.lam_range
        lam_knots = self.coordinate.to_lam(self._u)
        # Beyond the outermost filled bins the fit is held constant in log MMSE (documented extrapolation).
        log_loss = prof.log_mmse(np.clip(lam_knots, lo, hi))
        if self.process == "masked":  # h = alpha L, alpha = sigmoid(lam), in logs
            h = np.exp(log_loss - np.logaddexp(0.0, -lam_knots))
        else:
            h = 0.5 * np.exp(lam_knots + log_loss)
        order = np.argsort(lam_knots)
        u, pdf = entropic_pdf_values(lam_knots[order], h[order], rule=self.rule,
                                     coordinate=self.coordinate.name, floor=self.floor)
        return pdf

    def schedule(self):
        """Return the updated schedule (a TabulatedSchedule), moved at most ``max_change`` in TV."""
        from noisealloc.theory.schedules.base import TabulatedSchedule

        target = self.target()
        if target is not None:
            tv = tv_distance_piecewise_linear(self._u, target, self._pdf)
            t = 1.0 if tv <= self.max_change else self.max_change / tv
            self._pdf = self._pdf + t * (target - self._pdf)
        return TabulatedSchedule(self._u.copy(), self._pdf.copy(), coordinate=self.coordinate.name,
                                 name=f"online-{self.rule}")

    @property
    def pdf_values(self):
        """Density of the current schedule at its knots (per unit of the coordinate)."""
        return self._pdf.copy()

    @property
    def knots(self):
        return self._u.copy()
