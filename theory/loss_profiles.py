r"""Entropy-rate profiles from measured per-level losses (THEORY.md sections 2 and 5).

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

Parameterisations (THEORY.md section 4: x0-, eps- and v-prediction are
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
from noisealloc.theory.errors import as_float_array, as_generator, check_choice, check_finite

__all__ = [
    "PARAMETERISATIONS",
    "LossTable",
    "MMSEProfile",
    "read_loss_csv",
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
        Log-SNR of each level, broadcastable with ``loss``.
    parameterisation : {'x0', 'eps', 'v'}
        What the loss measures (see the module docstring; ``v`` is the VP v-prediction).

    Returns
    -------
    ndarray of float64
        The x0-prediction loss :math:`\|x_0 - \hat x_0\|^2` per level (a copy for ``'x0'``).

    References
    ----------
    THEORY.md section 4 (x0-, eps- and v-prediction are lambda-dependent reweightings);
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
    loss = np.asarray(loss, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    if parameterisation == "x0":
        return loss.copy()
    if parameterisation == "eps":
        return loss * np.exp(-lam)
    return loss * np.exp(-np.logaddexp(0.0, lam))


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


def read_loss_csv(path) -> LossTable:
    r"""Read a per-level loss table from CSV.

    Format: a header row, then one row per noise level.  Required columns:

    - one noise-level column named after a coordinate of
      :mod:`noisealloc.theory.coordinates` (``lam``/``lambda``, ``sigma``,
      ``log-sigma``, ``t`` (= ``t-cosine``), ``t-linear``, ``t-cosine``, ``t-edm``, ``t-rf``),
      strictly increasing down the file;
    - one loss column naming its parameterisation: ``loss_x0``, ``loss_eps`` or ``loss_v``
      (mean squared error summed over data coordinates, or averaged: only the shape matters).

    Optional: ``loss_se`` (standard error of the mean loss, same units) and
    ``count`` (held-out samples per level).  Rows starting with ``#`` are comments.

    Parameters
    ----------
    path : str or path-like
        The CSV file (at least 3 noise levels).

    Returns
    -------
    LossTable
        Levels converted to log-SNR and sorted increasing, losses and standard
        errors converted to the x0 parameterisation (:func:`x0_loss_from`).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        Missing, duplicated or non-numeric columns, negative or zero losses,
        unsorted or duplicate levels, levels outside the coordinate's domain,
        an unknown parameterisation; the message names the row (1-based, the
        header is row 1) or the column.

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
    >>> table.source["coordinate"], table.source["parameterisation"]
    ('sigma', 'eps')
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"loss table not found: {str(path)!r}")
    with path.open(newline="") as fh:
        rows = [r for r in csv.reader(fh) if r and not r[0].lstrip().startswith("#")]
    if not rows:
        raise ValueError(f"{path}: empty file; expected a header row and one row per noise level")
    header = [h.strip().lower() for h in rows[0]]
    if len(set(header)) != len(header):
        raise ValueError(f"{path}: duplicate column names in header {header}")
    coord_names = [h for h in header if h in COORDINATES or h in _ALIASES]
    if len(coord_names) != 1:
        allowed = sorted(set(COORDINATES) | set(_ALIASES))
        raise ValueError(f"{path}: need exactly one noise-level column named one of {allowed}; header is {header}")
    loss_names = [h for h in header if h.startswith("loss") and h not in _SE_COLUMNS]
    if len(loss_names) != 1:
        raise ValueError(f"{path}: need exactly one loss column named one of {sorted(_LOSS_COLUMNS)}; header is {header}")
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

    values = {k: [] for k in cols}
    for r_i, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ValueError(f"{path}: row {r_i} has {len(row)} fields; the header has {len(header)}")
        for key, c in cols.items():
            text = row[c].strip()
            try:
                v = float(text)
            except ValueError:
                raise ValueError(f"{path}: row {r_i}, column {names[key]!r}: {text!r} is not a number") from None
            if not np.isfinite(v):
                raise ValueError(f"{path}: row {r_i}, column {names[key]!r}: {text!r} is not finite")
            values[key].append(v)
    if len(values["level"]) < 3:
        raise ValueError(f"{path}: need at least 3 noise levels; got {len(values['level'])}")
    level = np.array(values["level"])
    loss = np.array(values["loss"])
    for i in range(1, level.size):
        if level[i] == level[i - 1]:
            raise ValueError(f"{path}: row {i + 2}, column {names['level']!r}: duplicate level {float(level[i])!r}")
        if level[i] < level[i - 1]:
            raise ValueError(f"{path}: row {i + 2}, column {names['level']!r}: levels must be strictly increasing "
                             f"down the file; {float(level[i])!r} follows {float(level[i - 1])!r}")
    for i, v in enumerate(loss):
        if v <= 0:
            raise ValueError(f"{path}: row {i + 2}, column {names['loss']!r}: loss must be > 0; got {float(v)!r}")
    coord = get_coordinate(coord_names[0])
    try:
        lam = coord.to_lam(level)
    except ValueError as exc:
        raise ValueError(f"{path}: column {names['level']!r}: {exc}") from None
    se = np.array(values["se"]) if "se" in values else None
    if se is not None and np.any(se <= 0):
        i = int(np.flatnonzero(se <= 0)[0])
        raise ValueError(f"{path}: row {i + 2}, column {se_name!r}: standard error must be > 0; got {float(se[i])!r}")
    count = np.array(values["count"]) if "count" in values else None
    if count is not None and np.any(count < 1):
        i = int(np.flatnonzero(count < 1)[0])
        raise ValueError(f"{path}: row {i + 2}, column {count_name!r}: count must be >= 1; got {float(count[i])!r}")
    order = np.argsort(lam)  # decreasing coordinates (sigma, DDPM t) arrive in reverse lam order
    lam = lam[order]
    x0 = x0_loss_from(loss[order], lam, param)
    x0_se = None if se is None else x0_loss_from(se[order], lam, param)
    return LossTable(lam=lam, loss=x0, stderr=x0_se, count=None if count is None else count[order],
                     source={"path": str(path), "coordinate": coord.name, "parameterisation": param})


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
            Entropy rate in nats per unit log-SNR (THEORY.md section 2), the shape of ``lam``.
        """
        lam = np.asarray(lam, dtype=np.float64)
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
    Ramsay (1988), Monotone regression splines in action; THEORY.md sections 2 and 5
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
    if penalty < 0:
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
        if int(n_basis) < 2:
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
