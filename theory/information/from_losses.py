r"""Entropy-rate profiles from measured per-level losses (docs/THEORY.md sections 2 and 5).

A trained denoiser's held-out x0-prediction loss at log-SNR :math:`\lambda`
upper-bounds :math:`\mathrm{mmse}(\lambda)` (the MMSE is the smallest achievable
loss), so an entropy rate built from it,

.. math:: \hat h(\lambda) = \tfrac12 e^{\lambda}\, \widehat{\mathrm{mmse}}(\lambda),

is conservative.  The MMSE is non-increasing in :math:`\lambda` (more signal can
only help the optimal denoiser), so the profile is fitted as a smooth,
positive, non-increasing function: its logarithm is a constant minus a
non-negative combination of I-splines (monotone cubic splines; Ramsay 1988),

.. math:: \log \widehat{\mathrm{mmse}}(\lambda) = a_0 - \sum_j b_j I_j(\lambda), \qquad b_j \ge 0,

fitted by bound-constrained weighted least squares on the log losses (weights
from the stated standard errors, relative scale) with a small second-difference
penalty on ``b``.  The uncertainty band is a parametric bootstrap of that fit.

Parameterisations (docs/THEORY.md section 4: x0-, eps- and v-prediction are
lambda-dependent reweightings of the x0 loss):

- ``x0``:  :math:`\|x_0 - \hat x_0\|^2` as measured;
- ``eps``: :math:`\|x_0 - \hat x_0\|^2 = e^{-\lambda}\,\|\varepsilon - \hat\varepsilon\|^2`;
- ``v``:   (VP, :math:`v = \alpha\varepsilon - \sigma x_0`)
  :math:`\|x_0 - \hat x_0\|^2 = \sigma^2 \|v - \hat v\|^2`, :math:`\sigma^2 = \mathrm{sigmoid}(-\lambda)`.

Only the shape of :math:`h` matters for a schedule (it is normalised), so a
loss averaged over coordinates instead of summed gives the same schedule.

References
----------
Ramsay, J. O. (1988). Monotone regression splines in action. Statistical Science 3(4).
Kingma & Gao (2023). Understanding diffusion objectives as the ELBO with simple data augmentation.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from noisealloc.theory.coordinates import COORDINATES, _ALIASES, get_coordinate
from noisealloc.theory.errors import (as_float_array, as_float_scalar, as_generator, as_int_scalar, check_choice,
                                      check_finite)

__all__ = [
    "PARAMETERISATIONS",
    "LossTable",
    "MMSEProfile",
    "read_loss_csv",
    "bin_losses",
    "loss_profile_warnings",
    "PER_LEVEL_MAX_ROWS",
    "DEFAULT_LOSS_BINS",
    "POOR_FIT_REDUCED_CHI2",
    "POOR_FIT_LOG_RMS",
    "x0_loss_from",
    "fit_mmse_profile",
]

PARAMETERISATIONS = ("x0", "eps", "v")
_LOSS_COLUMNS = {f"loss_{p}": p for p in PARAMETERISATIONS}
_SE_COLUMNS = ("loss_se", "stderr", "se")
_COUNT_COLUMNS = ("count", "n")


def x0_loss_from(loss, lam, parameterisation: str):
    r"""Convert a per-level loss of ``parameterisation`` to the x0-prediction loss.

    .. math:: L_{x_0} = L_{x_0}, \quad e^{-\lambda} L_{\varepsilon}, \quad \mathrm{sigmoid}(-\lambda) L_v .

    Parameters
    ----------
    loss : array_like
        Per-level loss (or its standard error: the map is linear) in ``parameterisation``.
    lam : array_like
        Log-SNR of each level, broadcastable with ``loss``.  Element-wise: a NaN in ``loss`` or ``lam``
        gives NaN there, as numpy does.
    parameterisation : {'x0', 'eps', 'v'}
        What the loss measures (see the module docstring; ``v`` is the VP v-prediction).

    Returns
    -------
    ndarray of float64
        The x0-prediction loss :math:`\|x_0 - \hat x_0\|^2` per level (a copy for ``'x0'``).

    References
    ----------
    docs/THEORY.md section 4 (x0-, eps- and v-prediction are lambda-dependent reweightings);
    Kingma & Gao (2023).

    Examples
    --------
    >>> x0_loss_from([1.0, 1.0], [0.0, np.log(4.0)], "eps").tolist()   # e^{-lambda} L_eps
    [1.0, 0.25]
    >>> x0_loss_from([1.0], [0.0], "v").tolist()                        # sigmoid(-lambda) L_v
    [0.5]
    >>> x0_loss_from(1.0, 0.0, "score")
    Traceback (most recent call last):
    ...
    ValueError: parameterisation must be one of 'x0', 'eps', 'v'; got 'score'
    """
    check_choice(parameterisation, "parameterisation", PARAMETERISATIONS)
    loss = as_float_array(loss, "loss")
    lam = as_float_array(lam, "lam")
    if parameterisation == "x0":
        return loss.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        if parameterisation == "eps":
            out = loss * np.exp(-lam)
        else:
            out = loss * np.exp(-np.logaddexp(0.0, lam))
    overflow = np.isinf(out) & np.isfinite(loss) & np.isfinite(lam)
    if np.any(overflow):
        # loss_eps near 1e308 at lam < 0: the x0-loss is beyond float64 (it used to put all mass at an edge)
        i = int(np.flatnonzero(overflow.reshape(-1))[0])
        raise ValueError(f"loss_{parameterisation} = {float(np.broadcast_to(loss, out.shape).reshape(-1)[i])!r} at "
                         f"lam = {float(np.broadcast_to(lam, out.shape).reshape(-1)[i])!r} (entry {i}) converts to an "
                         "x0-loss beyond the float64 range; losses of a trained model are far smaller")
    return out


@dataclass(frozen=True)
class LossTable:
    """Per-level held-out losses, converted to the x0 parameterisation and log-SNR.

    Attributes
    ----------
    lam : (n,) array
        Log-SNR of each level (increasing).
    loss : (n,) array
        Mean x0-prediction loss per level (> 0).
    stderr : (n,) array or None
        Standard error of ``loss`` (same units), when the file gives it.
    count : (n,) array or None
        Held-out samples per level, when the file gives it.
    source : dict
        Coordinate, parameterisation and path of the file it came from.
    """

    lam: np.ndarray
    loss: np.ndarray
    stderr: np.ndarray | None = None
    count: np.ndarray | None = None
    source: dict = field(default_factory=dict, compare=False)


#: A table with more rows than this is read as per-sample losses and binned, even when its levels are
#: strictly increasing: the monotone fit selects its basis by refitting up to once per level, so it is
#: meant for tens to hundreds of levels, not for one row per training example.
PER_LEVEL_MAX_ROWS = 512
#: Default number of bins of per-sample losses: equal-width in log-SNR, or one per distinct level when
#: the file holds at most this many distinct levels (a loop that draws from a fixed grid).
DEFAULT_LOSS_BINS = 64
#: Bins holding fewer per-sample losses than this are dropped (no standard error from one value).
MIN_BIN_COUNT = 2
#: Lines parsed per chunk (and between two progress reports) when reading a CSV.
CSV_CHUNK_ROWS = 250_000


def _is_data(line: str) -> bool:
    return bool(line.strip()) and not line.lstrip().startswith("#")


def _scan_columns(path, first_row, cols, names, header_len):
    """The slow, exact reader: every data line split in Python; the first bad field raises with its row.

    Used when numpy's parser refuses the file (a bad field, a wrong field count, a non-numeric column
    the command does not use), so that the message names the line.
    """
    values = {k: [] for k in cols}
    rows = []
    with path.open(encoding="utf-8-sig") as fh:
        for r_i, line in enumerate(fh, start=1):
            if r_i < first_row or not _is_data(line):
                continue
            fields = line.rstrip("\r\n").split(",")
            if len(fields) != header_len:
                raise ValueError(f"{path}: row {r_i} has {len(fields)} fields; the header has {header_len}")
            for key, c in cols.items():
                text = fields[c].strip()
                try:
                    v = float(text)
                except ValueError:
                    raise ValueError(f"{path}: row {r_i}, column {names[key]!r}: {text!r} is not a number") from None
                if not np.isfinite(v):
                    raise ValueError(f"{path}: row {r_i}, column {names[key]!r}: {text!r} is not finite")
                values[key].append(v)
            rows.append(r_i)
    return {k: np.array(v, dtype=np.float64) for k, v in values.items()}, np.array(rows, dtype=np.int64)


def _read_columns(path, fh, cols, names, header_len, first_row, progress):
    """Parse the data lines of an open CSV into float64 columns, chunk by chunk, with numpy's C parser.

    Returns the columns and a function giving the file row (1-based line number) of a data index.
    """
    import warnings

    size = max(path.stat().st_size, 1)
    usecols = list(cols.values())
    parts = []
    n_read = 0
    try:
        while True:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "input contained no data" after the last chunk
                data = np.loadtxt(fh, delimiter=",", comments="#", max_rows=CSV_CHUNK_ROWS, ndmin=2,
                                  dtype=np.float64)
            if data.shape[0] == 0:
                break
            if data.shape[1] != header_len or not np.all(np.isfinite(data[:, usecols])):
                raise ValueError("bad chunk")
            parts.append(data[:, usecols])
            n_read += data.shape[0]
            if progress is not None:
                progress(min(fh.buffer.tell() / size, 1.0), n_read)
            if data.shape[0] < CSV_CHUNK_ROWS:
                break
    except ValueError:
        values, rows = _scan_columns(path, first_row, cols, names, header_len)
        return values, (lambda i: row_of(i))
    data = np.concatenate(parts) if parts else np.empty((0, len(cols)))
    values = {k: np.ascontiguousarray(data[:, j]) for j, k in enumerate(cols)}

    def row_of(i):
        # only on an error path: count data lines again to name the file row of data index i
        with path.open(encoding="utf-8-sig") as fh2:
            seen = -1
            for r_i, line in enumerate(fh2, start=1):
                if r_i >= first_row and _is_data(line):
                    seen += 1
                    if seen == i:
                        return r_i
        return -1

    return values, row_of


def bin_losses(lam, loss, *, n_bins: int = DEFAULT_LOSS_BINS, min_count: int = MIN_BIN_COUNT):
    r"""Per-sample losses grouped by noise level: mean loss, its standard error and count per bin.

    The levels are the distinct values of ``lam`` when there are at most ``n_bins`` of them, else
    ``n_bins`` equal-width bins of :math:`[\min\lambda, \max\lambda]`.  Per bin :math:`B`,

    .. math:: \bar\lambda_B = \frac{1}{n_B}\sum_{i\in B}\lambda_i, \quad
              \bar L_B = \frac{1}{n_B}\sum_{i\in B} L_i, \quad
              \mathrm{se}_B = \sqrt{\frac{\sum_{i\in B}(L_i - \bar L_B)^2}{n_B (n_B - 1)}},

    bins with fewer than ``min_count`` losses are dropped.

    Parameters
    ----------
    lam : (n,) array_like
        Log-SNR of each example, any order, repeats allowed.
    loss : (n,) array_like, >= 0
        Its x0-prediction loss.
    n_bins : int, >= 3
        Largest number of levels returned.
    min_count : int, >= 2
        Fewest losses a kept bin holds.

    Returns
    -------
    lam_bins, mean, stderr, count : (k,) ndarray
        Mean level (strictly increasing), mean loss, standard error of the mean (0 where all losses
        of the bin are equal) and count of each kept bin.

    Examples
    --------
    >>> lam_b, mean, se, count = bin_losses([0.0, 1.0, 0.0, 1.0, 2.0, 2.0], [2.0, 1.0, 4.0, 1.0, 0.5, 0.7])
    >>> lam_b.tolist(), mean.tolist(), count.tolist()
    ([0.0, 1.0, 2.0], [3.0, 1.0, 0.6], [2.0, 2.0, 2.0])
    """
    lam = check_finite(as_float_array(lam, "lam", ndim=1), "lam")
    loss = check_finite(as_float_array(loss, "loss", shape=lam.shape), "loss")
    if isinstance(n_bins, bool) or as_int_scalar(n_bins, "n_bins") != n_bins or n_bins < 3:
        raise ValueError(f"n_bins must be an integer >= 3; got {n_bins!r}")
    if isinstance(min_count, bool) or as_int_scalar(min_count, "min_count") != min_count or min_count < 2:
        raise ValueError(f"min_count must be an integer >= 2; got {min_count!r}")
    if lam.size == 0:
        raise ValueError("lam must hold at least one loss")
    uniq, inverse = np.unique(lam, return_inverse=True)
    if uniq.size <= n_bins:
        idx, k = inverse.ravel(), uniq.size
    else:
        lo, hi = float(lam.min()), float(lam.max())
        idx = np.minimum(((lam - lo) / (hi - lo) * n_bins).astype(np.int64), int(n_bins) - 1)
        k = int(n_bins)
    count = np.bincount(idx, minlength=k).astype(np.float64)
    lam_sum = np.bincount(idx, weights=lam, minlength=k)
    loss_sum = np.bincount(idx, weights=loss, minlength=k)
    keep = count >= min_count
    mean = loss_sum[keep] / count[keep]
    # Two-pass variance: the one-pass sum of squares loses every digit when the losses are large
    # and nearly equal.
    dev = loss - np.where(keep, loss_sum / np.maximum(count, 1.0), 0.0)[idx]
    ss = np.bincount(idx, weights=dev * dev, minlength=k)[keep]
    n = count[keep]
    return lam_sum[keep] / n, mean, np.sqrt(ss / (n * (n - 1.0))), n


def read_loss_csv(path, *, n_bins: int = DEFAULT_LOSS_BINS, progress=None) -> LossTable:
    r"""Read held-out losses from CSV: one row per noise level, or one row per example (binned).

    Format: a header row, then data rows.  Required columns:

    - one noise-level column named after a coordinate of
      :mod:`noisealloc.theory.coordinates` (``lam``/``lambda``, ``sigma``,
      ``log-sigma``, ``t`` (= ``t-cosine``), ``t-linear``, ``t-cosine``, ``t-edm``, ``t-rf``);
    - one loss column naming its parameterisation: ``loss_x0``, ``loss_eps`` or ``loss_v``
      (mean squared error summed over data coordinates, or averaged: only the shape matters).

    *Per-level table* (levels strictly increasing down the file, at most
    :data:`PER_LEVEL_MAX_ROWS` rows): one mean loss per level; optional ``loss_se`` (standard
    error of the mean, same units) and ``count`` (held-out samples per level); losses > 0.

    *Per-sample losses* (anything else: unsorted, repeated or continuous levels, one row per
    example, as a training loop logs them): losses >= 0, converted to x0 and grouped by
    :func:`bin_losses` into at most ``n_bins`` levels, with the standard error of each bin's mean
    from its scatter; ``loss_se`` and ``count`` columns are not used.

    Rows starting with ``#`` and empty rows are skipped; a UTF-8 byte-order mark and CRLF line
    ends are accepted.  The data are parsed by numpy in chunks of :data:`CSV_CHUNK_ROWS` rows (a
    file numpy refuses is read again line by line to name the bad row).

    Parameters
    ----------
    path : str or path-like
        The CSV file (at least 3 noise levels after binning).
    n_bins : int, default :data:`DEFAULT_LOSS_BINS`
        Largest number of bins of per-sample losses.
    progress : callable, optional
        Called as ``progress(fraction_of_file_read, rows_read)`` after each chunk (for long reads).

    Returns
    -------
    LossTable
        Levels converted to log-SNR and sorted increasing, losses and standard
        errors converted to the x0 parameterisation (:func:`x0_loss_from`).
        ``source`` holds ``path``, ``coordinate``, ``parameterisation``, ``rows`` and ``form``
        (``"per-level"`` or ``"per-sample, binned"``).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        Missing, duplicated or non-numeric columns, negative losses (zero in a per-level table),
        levels outside the coordinate's domain, an unknown parameterisation, fewer than 3 levels;
        the message names the row (1-based line number, the header is row 1) or the column.

    Examples
    --------
    Three levels in EDM's :math:`\sigma` with eps-prediction losses:

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, "losses.csv")
    ...     with open(path, "w") as fh:
    ...         _ = fh.write("sigma,loss_eps,loss_se\n0.5,0.05,0.001\n2.0,0.5,0.01\n8.0,0.9,0.01\n")
    ...     table = read_loss_csv(path)
    >>> table.lam.round(6).tolist()          # lambda = -2 log(sigma), increasing
    [-4.158883, -1.386294, 1.386294]
    >>> table.loss.round(6).tolist()         # x0 loss = e^{-lambda} eps loss
    [57.6, 2.0, 0.0125]
    >>> table.source["coordinate"], table.source["parameterisation"], table.source["form"]
    ('sigma', 'eps', 'per-level')

    Per-sample losses in any order are binned by level:

    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, "log.csv")
    ...     with open(path, "w") as fh:
    ...         _ = fh.write("lam,loss_x0\n1,0.5\n-1,2\n0,1\n1,0.7\n-1,2.2\n0,1.2\n")
    ...     table = read_loss_csv(path)
    >>> table.lam.tolist(), table.loss.round(6).tolist(), table.source["form"]
    ([-1.0, 0.0, 1.0], [2.1, 1.1, 0.6], 'per-sample, binned')
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"loss table not found: {str(path)!r}")
    # utf-8-sig drops a byte-order mark; universal newlines turn CRLF into LF.
    with path.open(encoding="utf-8-sig") as fh:
        header_line, first_row = None, 1
        for line in fh:
            if line.strip() and not line.lstrip().startswith("#"):
                header_line = line
                break
            first_row += 1
        if header_line is None:
            raise ValueError(f"{path}: empty file; expected a header row and one row per noise level")
        header = [h.strip().lower() for h in next(csv.reader([header_line]))]
        if len(set(header)) != len(header):
            raise ValueError(f"{path}: duplicate column names in header {header}")
        coord_names = [h for h in header if h in COORDINATES or h in _ALIASES]
        if len(coord_names) != 1:
            allowed = sorted(set(COORDINATES) | set(_ALIASES))
            raise ValueError(f"{path}: need exactly one noise-level column named one of {allowed}; "
                             f"header is {header}")
        loss_names = [h for h in header if h.startswith("loss") and h not in _SE_COLUMNS]
        if len(loss_names) != 1:
            raise ValueError(f"{path}: need exactly one loss column named one of {sorted(_LOSS_COLUMNS)}; "
                             f"header is {header}")
        if loss_names[0] not in _LOSS_COLUMNS:
            raise ValueError(f"{path}: unknown parameterisation in column {loss_names[0]!r}; "
                             f"allowed loss columns are {sorted(_LOSS_COLUMNS)} (x0-, eps- or v-prediction)")
        param = _LOSS_COLUMNS[loss_names[0]]
        cols = {"level": header.index(coord_names[0]), "loss": header.index(loss_names[0])}
        se_name = next((h for h in header if h in _SE_COLUMNS), None)
        count_name = next((h for h in header if h in _COUNT_COLUMNS), None)
        if se_name:
            cols["se"] = header.index(se_name)
        if count_name:
            cols["count"] = header.index(count_name)
        names = {"level": coord_names[0], "loss": loss_names[0], "se": se_name, "count": count_name}
        values, row_of = _read_columns(path, fh, cols, names, len(header), first_row + 1, progress)
    level, loss = values["level"], values["loss"]
    if level.size < 3:
        raise ValueError(f"{path}: need at least 3 noise levels; got {level.size}")
    per_level = level.size <= PER_LEVEL_MAX_ROWS and bool(np.all(np.diff(level) > 0))
    if per_level:
        bad = np.flatnonzero(loss <= 0)
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{path}: row {row_of(i)}, column {names['loss']!r}: loss must be > 0; "
                             f"got {float(loss[i])!r}")
    else:
        bad = np.flatnonzero(loss < 0)
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{path}: row {row_of(i)}, column {names['loss']!r}: a per-sample loss must be "
                             f">= 0; got {float(loss[i])!r}")
    coord = get_coordinate(coord_names[0])
    try:
        lam = coord.to_lam(level)
    except ValueError as exc:
        raise ValueError(f"{path}: column {names['level']!r}: {exc}") from None
    source = {"path": str(path), "coordinate": coord.name, "parameterisation": param, "rows": int(level.size)}
    if not per_level:
        x0 = x0_loss_from(loss, lam, param)
        lam_b, mean, se, count = bin_losses(lam, x0, n_bins=n_bins)
        if lam_b.size < 3:
            raise ValueError(f"{path}: need at least 3 noise levels with {MIN_BIN_COUNT} or more losses each; "
                             f"the {level.size} rows give {lam_b.size}")
        if np.any(mean <= 0):
            raise ValueError(f"{path}: the mean loss of a bin is 0 (at log-SNR {float(lam_b[mean <= 0][0]):.6g}); "
                             "the MMSE is positive")
        ok = se > 0
        # A bin whose losses are all equal has no scatter: give it the median relative error of the others.
        if not np.all(ok):
            se = np.where(ok, se, np.median(se[ok] / mean[ok]) * mean) if np.any(ok) else None
        source["form"] = "per-sample, binned"
        source["bins"] = int(lam_b.size)
        return LossTable(lam=lam_b, loss=mean, stderr=se, count=count, source=source)
    se = values.get("se")
    if se is not None and np.any(se <= 0):
        i = int(np.flatnonzero(se <= 0)[0])
        raise ValueError(f"{path}: row {row_of(i)}, column {se_name!r}: standard error must be > 0; "
                         f"got {float(se[i])!r}")
    count = values.get("count")
    if count is not None and np.any(count < 1):
        i = int(np.flatnonzero(count < 1)[0])
        raise ValueError(f"{path}: row {row_of(i)}, column {count_name!r}: count must be >= 1; "
                         f"got {float(count[i])!r}")
    order = np.argsort(lam)  # decreasing coordinates (sigma, DDPM t) arrive in reverse lam order
    lam = lam[order]
    x0 = x0_loss_from(loss[order], lam, param)
    x0_se = None if se is None else x0_loss_from(se[order], lam, param)
    source["form"] = "per-level"
    return LossTable(lam=lam, loss=x0, stderr=x0_se, count=None if count is None else count[order],
                     source=source)


def _ispline_basis(x, knots_inner, lo, hi, degree: int = 3):
    """I-spline basis (monotone from 0 to 1) of the given degree at ``x`` (clipped to [lo, hi])."""
    from scipy.interpolate import BSpline

    k = degree - 1  # M-splines of degree k integrate to I-splines of degree k + 1
    t = np.concatenate([[lo] * (k + 1), knots_inner, [hi] * (k + 1)])
    n_basis = len(t) - k - 1
    x = np.clip(np.asarray(x, dtype=np.float64), lo, hi)
    out = np.empty((x.size, n_basis))
    for j in range(n_basis):
        c = np.zeros(n_basis)
        c[j] = 1.0
        anti = BSpline(t, c, k, extrapolate=False).antiderivative()
        total = anti(hi)
        out[:, j] = anti(x) / total
    return np.clip(out, 0.0, 1.0)


@dataclass(frozen=True)
class MMSEProfile:
    r"""A fitted non-increasing MMSE profile with a bootstrap band.

    ``mmse(lam)`` and ``entropy_rate(lam)`` evaluate the fit; ``band(lam, q)``
    gives pointwise bootstrap quantiles of :math:`h` (e.g. ``q = (0.025, 0.975)``).
    Evaluation is restricted to the measured range ``lam_range``: outside it the
    fit is an extrapolation and a ``ValueError`` says so.  Built by
    :func:`fit_mmse_profile`.

    .. math:: \log \widehat{\mathrm{mmse}}(\lambda) = a_0 - \sum_{j=1}^J b_j I_j(\lambda), \qquad
              \hat h(\lambda) = \tfrac12 e^{\lambda}\, \widehat{\mathrm{mmse}}(\lambda).

    Attributes
    ----------
    lam_range : tuple of float
        ``(lo, hi)``: the measured log-SNR range, the domain of the fit.
    knots_inner : ndarray, shape (J - degree,)
        Interior knots of the I-spline basis.
    coef : ndarray, shape (J + 1,)
        :math:`(a_0, b_1, \dots, b_J)` with :math:`b_j \ge 0`.
    boot_coef : ndarray, shape (B, J + 1)
        Coefficients of the ``B`` bootstrap refits.
    rel_scale : float
        Relative error scale of the losses: the residual scale of the log fit
        without standard errors, else the RMS relative standard error.
    degree : int
        Degree of the I-splines (3: cubic).
    info : dict
        Fit diagnostics: ``n_levels``, ``n_basis``, ``basis_selection``,
        ``reduced_chi2``, ``penalty``, ``n_boot``, ``weights``.
    """

    lam_range: tuple[float, float]
    knots_inner: np.ndarray
    coef: np.ndarray                 # (a0, b_1..b_J)
    boot_coef: np.ndarray            # (B, J + 1)
    rel_scale: float                 # residual scale of the log fit (relative error of the losses)
    degree: int = 3
    info: dict = field(default_factory=dict, compare=False)

    def _basis(self, lam):
        lam = check_finite(as_float_array(lam, "lam"), "lam")
        lo, hi = self.lam_range
        tol = 1e-9 * max(1.0, hi - lo)
        if np.any(lam < lo - tol) or np.any(lam > hi + tol):
            raise ValueError(f"lam must lie in the measured range [{lo}, {hi}] of the loss profile; got "
                             f"[{lam.min()}, {lam.max()}] (extrapolating a fitted MMSE is not supported)")
        B = _ispline_basis(lam.ravel(), self.knots_inner, lo, hi, self.degree)
        return lam, np.hstack([np.ones((B.shape[0], 1)), -B])

    def log_mmse(self, lam):
        r"""Fitted :math:`\log\widehat{\mathrm{mmse}}(\lambda)`, the shape of ``lam`` (inside ``lam_range``)."""
        lam, X = self._basis(lam)
        return (X @ self.coef).reshape(lam.shape)

    def mmse(self, lam):
        """Fitted MMSE (x0 units), the shape of ``lam``; ``ValueError`` outside ``lam_range``.

        Parameters
        ----------
        lam : array_like
            Log-SNR values inside ``lam_range``.

        Returns
        -------
        ndarray of float64
        """
        return np.exp(self.log_mmse(lam))

    def entropy_rate(self, lam):
        r"""Fitted :math:`h(\lambda) = \tfrac12 e^{\lambda}\,\widehat{\mathrm{mmse}}(\lambda)` per unit log-SNR.

        Parameters
        ----------
        lam : array_like
            Log-SNR values inside ``lam_range``.

        Returns
        -------
        ndarray of float64
            Entropy rate in nats per unit log-SNR (docs/THEORY.md section 2), the shape of ``lam``.
        """
        lam = as_float_array(lam, "lam")
        return 0.5 * np.exp(lam + self.log_mmse(lam))

    def band(self, lam, q=(0.025, 0.975)):
        """Pointwise bootstrap quantiles of the entropy rate, shape (len(q),) + lam.shape.

        Parameters
        ----------
        lam : array_like
            Log-SNR values inside ``lam_range``.
        q : sequence of float, default (0.025, 0.975)
            Quantile levels in ``[0, 1]``.

        Returns
        -------
        ndarray of float64, shape ``(len(q),) + lam.shape``
        """
        lam, X = self._basis(lam)
        logs = self.boot_coef @ X.T  # (B, n)
        h = 0.5 * np.exp(lam.ravel()[None, :] + logs)
        return np.quantile(h, q, axis=0).reshape((len(q),) + lam.shape)


def fit_mmse_profile(lam, loss, stderr=None, *, n_basis: int | None = None, penalty: float = 1e-3,
                     n_boot: int = 200, rng=None) -> MMSEProfile:
    r"""Fit a smooth, positive, non-increasing MMSE profile to per-level losses.

    Solves

    .. math:: \min_{a_0,\, b \ge 0} \sum_i w_i^2 \big(\log L_i - a_0 + \textstyle\sum_j b_j I_j(\lambda_i)\big)^2
              + \kappa \|\Delta^2 b\|^2

    with ``scipy.optimize.lsq_linear`` (bounded least squares), where
    :math:`w_i = L_i / \mathrm{se}_i` (inverse relative standard error) when
    standard errors are given, else :math:`w_i = 1`.  The residual scale and a
    parametric bootstrap (``n_boot`` refits on log losses perturbed by the
    relative standard errors, or by the residual scale when none are given)
    give the band.

    Parameters
    ----------
    lam : (n,) array, strictly increasing
        Log-SNR of the measured levels, n >= 3, finite.
    loss : (n,) array, > 0
        x0-prediction losses (see :func:`x0_loss_from`).
    stderr : (n,) array or None
        Standard errors of ``loss`` (> 0, same units), or None.
    n_basis : int, optional
        Number of I-spline functions.  Default: with ``stderr``, the smallest
        basis whose reduced chi-square is within 3 standard deviations of 1
        (the fit is as flexible as the data's precision warrants, so it
        converges as the held-out set grows); without, ``min(16, max(3, n // 3))``.
    penalty : float
        :math:`\kappa \ge 0`, relative to the data weight.
    n_boot : int, default 200
        Bootstrap refits for the band.
    rng : Generator, int or None
        Seed of the bootstrap.

    Returns
    -------
    MMSEProfile
        The fit, its bootstrap coefficients and diagnostics in ``info``.

    References
    ----------
    Ramsay (1988), Monotone regression splines in action; docs/THEORY.md sections 2 and 5
    (a tabulated density from measured per-level losses).

    Examples
    --------
    Exact losses of a 1-D Gaussian of variance 2, :math:`\mathrm{mmse} = 2/(1 + 2e^\lambda)`,
    whose entropy rate at :math:`\lambda = 0` is 1/3:

    >>> lam = np.linspace(-6.0, 6.0, 25)
    >>> prof = fit_mmse_profile(lam, 2.0 / (1.0 + 2.0 * np.exp(lam)), n_boot=20, rng=0)
    >>> round(float(prof.mmse(0.0)), 3), round(float(prof.entropy_rate(0.0)), 3)
    (0.667, 0.333)
    >>> prof.mmse(7.0)
    Traceback (most recent call last):
    ...
    ValueError: lam must lie in the measured range [-6.0, 6.0] of the loss profile; got [7.0, 7.0] ...
    """
    from scipy.optimize import lsq_linear

    lam = check_finite(as_float_array(lam, "lam", ndim=1), "lam")
    loss = check_finite(as_float_array(loss, "loss", shape=lam.shape), "loss")
    if lam.size < 3:
        raise ValueError(f"lam must hold at least 3 levels; got {lam.size}")
    if np.any(np.diff(lam) <= 0):
        raise ValueError("lam must be strictly increasing")
    if np.any(loss <= 0):
        i = int(np.flatnonzero(loss <= 0)[0])
        raise ValueError(f"loss must be > 0; loss[{i}] = {float(loss[i])!r}")
    if stderr is not None:
        stderr = check_finite(as_float_array(stderr, "stderr", shape=lam.shape), "stderr")
        if np.any(stderr <= 0):
            raise ValueError("stderr must be > 0")
        rel = stderr / loss
    else:
        rel = None
    penalty = as_float_scalar(penalty, "penalty")
    n_boot = as_int_scalar(n_boot, "n_boot")
    if not penalty >= 0:  # NaN too
        raise ValueError(f"penalty must be >= 0; got {penalty!r}")
    n = lam.size
    lo, hi = float(lam[0]), float(lam[-1])
    w = np.ones(n) if rel is None else 1.0 / rel
    y = np.log(loss)

    def fit(J):
        n_inner = max(J - 3, 0)  # cubic I-splines: J = n_inner + degree
        knots_inner = np.linspace(lo, hi, n_inner + 2)[1:-1]
        B = _ispline_basis(lam, knots_inner, lo, hi, 3)
        J = B.shape[1]
        X = np.hstack([np.ones((n, 1)), -B])
        D2 = np.diff(np.eye(J), 2, axis=0)
        P = np.hstack([np.zeros((D2.shape[0], 1)), D2]) * np.sqrt(penalty * np.sum(w**2) / max(J, 1))
        lb = np.r_[-np.inf, np.zeros(J)]
        ub = np.full(J + 1, np.inf)

        def solve(yy):
            A = np.vstack([X * w[:, None], P])
            b = np.concatenate([yy * w, np.zeros(P.shape[0])])
            return lsq_linear(A, b, bounds=(lb, ub), method="bvls").x

        coef = solve(y)
        resid = y - X @ coef
        dof = max(n - (J + 1), 1)
        chi2 = float(np.sum((w * resid) ** 2) / dof)
        return knots_inner, X, coef, solve, chi2, dof, J

    if n_basis is not None:
        if as_int_scalar(n_basis, "n_basis") < 2:
            raise ValueError(f"n_basis must be >= 2; got {n_basis!r}")
        knots_inner, X, coef, solve, chi2, dof, J = fit(int(n_basis))
        selection = "given"
    elif rel is None:
        knots_inner, X, coef, solve, chi2, dof, J = fit(min(16, max(3, n // 3)))
        selection = "default min(16, n // 3)"
    else:
        # With stated standard errors, use the smallest basis whose weighted residuals are
        # consistent with them: reduced chi-square within 3 standard deviations of 1.
        for J_try in range(3, max(4, n - 3)):
            knots_inner, X, coef, solve, chi2, dof, J = fit(J_try)
            if chi2 <= 1.0 + 3.0 * np.sqrt(2.0 / dof):
                break
        selection = "smallest basis with reduced chi-square <= 1 + 3 sqrt(2/dof)"
    scale = float(np.sqrt(chi2)) if rel is None else 1.0
    gen = as_generator(rng)
    fitted = X @ coef
    noise_sd = rel if rel is not None else np.full(n, scale)
    boot = np.empty((int(n_boot), J + 1))
    for b_i in range(int(n_boot)):
        boot[b_i] = solve(fitted + noise_sd * gen.standard_normal(n))
    return MMSEProfile(lam_range=(lo, hi), knots_inner=knots_inner, coef=coef, boot_coef=boot,
                       rel_scale=scale if rel is None else float(np.sqrt(np.mean(rel**2))),
                       info={"n_levels": n, "n_basis": J, "basis_selection": selection,
                             "reduced_chi2": chi2, "penalty": penalty, "n_boot": int(n_boot),
                             "weights": "inverse relative stderr" if rel is not None else "uniform (log scale)"})


#: A fit whose reduced chi-square (with standard errors) exceeds this is reported as poor: the smallest
#: monotone profile consistent with the data has chi2/dof within 3 sd of 1, i.e. about 1.5 for 20 levels,
#: so 4 means the losses are not a smooth non-increasing function of lambda within their errors.
POOR_FIT_REDUCED_CHI2 = 4.0
#: Without standard errors, the RMS residual of the log-loss fit above which the fit is reported as poor
#: (0.25: a typical deviation of about 28 % between the measured and the fitted loss).
POOR_FIT_LOG_RMS = 0.25


def loss_profile_warnings(table: LossTable, profile: MMSEProfile) -> list[str]:
    r"""Plain-language warnings about a loss table and its monotone fit (empty list when none apply).

    Two checks, each a one-line message:

    - *losses increase with* :math:`\lambda`: the correlation of :math:`\lambda_i` and
      :math:`\log L_i` is positive.  The MMSE cannot increase with the signal-to-noise ratio, so the
      column's parameterisation is probably wrong (an eps-prediction loss labelled ``loss_x0``
      grows like :math:`e^{\lambda}`) or the model is far from converged;
    - *poor fit*: reduced chi-square above :data:`POOR_FIT_REDUCED_CHI2` (with standard errors),
      or an RMS log residual above :data:`POOR_FIT_LOG_RMS` (without).

    Parameters
    ----------
    table : LossTable
        The measured levels (:func:`read_loss_csv`).
    profile : MMSEProfile
        Its fit (:func:`fit_mmse_profile`).

    Returns
    -------
    list of str
        The messages, in the order above.

    Examples
    --------
    >>> lam = np.linspace(-4.0, 4.0, 9)
    >>> t = LossTable(lam=lam, loss=np.exp(0.5 * lam))   # increasing: not an x0 loss
    >>> [m.split(":")[0] for m in loss_profile_warnings(t, fit_mmse_profile(t.lam, t.loss, n_boot=0))]
    ['losses increase with lambda', 'poor fit']
    """
    out = []
    y = np.log(table.loss)
    if table.lam.size >= 3 and np.std(y) > 0:
        r = float(np.corrcoef(table.lam, y)[0, 1])
        if r > 0:
            out.append(f"losses increase with lambda: correlation of lambda and log loss is {r:+.2f}; the MMSE "
                       "cannot increase with SNR (is the loss column's parameterisation right, e.g. loss_eps "
                       "written as loss_x0?), so the monotone fit flattens them")
    chi2 = float(profile.info.get("reduced_chi2", 0.0))
    if table.stderr is not None and chi2 > POOR_FIT_REDUCED_CHI2:
        out.append(f"poor fit: reduced chi-square {chi2:.3g} > {POOR_FIT_REDUCED_CHI2:g}; the losses are not a "
                   "smooth non-increasing function of lambda within their standard errors")
    elif table.stderr is None and np.sqrt(chi2) > POOR_FIT_LOG_RMS:
        out.append(f"poor fit: RMS residual of log loss {np.sqrt(chi2):.3g} > {POOR_FIT_LOG_RMS:g}; the losses "
                   "are not a smooth non-increasing function of lambda")
    return out
