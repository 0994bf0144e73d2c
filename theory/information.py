r"""Model-generic information helpers and the two checks of THEORY.md section 2, each with one rule.

* :func:`entropy_rate_from_mmse`: :math:`h(\lambda) = \tfrac12 e^\lambda\,\mathrm{mmse}(\lambda)`
  moved to a coordinate :math:`u` as :math:`h_u(u(\lambda)) = h(\lambda)\,|d\lambda/du|`;
* :func:`budget_integral`: :math:`\int_{a}^{b} h\,d\lambda` with its integration error and, for
  Monte-Carlo models, its standard error (adaptive Gauss--Kronrod of the per-sample rates);
* the **budget check** (:func:`budget_check`, :func:`budget_check_from_samples`, both returning
  :class:`BudgetCheck`): on any interval :math:`[a, b]` the identity :math:`-dH/d\lambda = h` gives
  :math:`\int_a^b h\,d\lambda = H(a) - H(b)`, which tends to the budget :math:`H(\pi)` as the
  interval grows.  One pass rule (:data:`BUDGET_RULE`):
  :math:`|\int_a^b h - (H(a) - H(b))| \le` ``BUDGET_ATOL_QUAD`` + integration error +
  ``MC_NSIGMA`` standard errors of the difference, the latter from per-sample values (common random
  numbers make the levels' errors correlated, so per-level standard errors are never summed);
* the **I-MMSE check** (:func:`i_mmse_check` returning :class:`IMMSECheck`): :math:`-dH/d\lambda`
  (or :math:`dI/d\lambda`) by a centred finite difference against :math:`\tfrac12 e^\lambda\,\mathrm{mmse}`;
  one pass rule (:data:`I_MMSE_RULE`): relative error at most ``FD_RTOL`` wherever
  :math:`h >` ``I_MMSE_RATE_FLOOR``.

Convention: :math:`x = x_0 + e^{-\lambda/2}\varepsilon` (VE/EDM scaling; a VP
observation divided by :math:`\alpha` is the same), so everything is a function
of :math:`\lambda`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.coordinates import get_coordinate
from noisealloc.theory.errors import as_float_array, as_generator, check_finite, check_interval
from noisealloc.theory.estimates import Estimate
from noisealloc.theory.protocol import monte_carlo_options
from noisealloc.theory.quadrature import adaptive_gauss_kronrod
from noisealloc.theory.tolerances import (
    BUDGET_ATOL_QUAD,
    FD_REL_STEP,
    FD_RTOL,
    GRID_UNIFORM_RTOL,
    I_MMSE_RATE_FLOOR,
    MC_NSIGMA,
)

__all__ = [
    "grid_quadrature_weights",
    "model_entropy_rate",
    "entropy_rate_from_mmse",
    "rate_jacobian",
    "half_snr_times",
    "BudgetResult",
    "budget_integral",
    "BUDGET_RULE",
    "BudgetCheck",
    "budget_check",
    "budget_check_from_samples",
    "budget_check_on_grid",
    "gregory_weights",
    "I_MMSE_RULE",
    "IMMSECheck",
    "i_mmse_check",
    "IMMSEMonteCarloCheck",
    "QUADRATURE_STATUS",
]

#: Status codes of the results that integrate adaptively (:class:`BudgetResult`, :class:`BudgetCheck`),
#: with the messages they carry (SciPy's convention: 0 is success).
QUADRATURE_STATUS = {
    0: "converged: the integration error estimate met rtol",
    1: "iteration limit: adaptive Gauss-Kronrod stopped (round or interval budget, or intervals too short "
       "to halve in float64) before meeting rtol; abs_error is still a conservative estimate",
}
#: The one pass rule of the budget identity (what :attr:`BudgetCheck.holds` tests): the integral identity
#: on [a, b], and the interval covering the budget (H(b) -> 0 needs distinct atoms; the left tail is
#: bounded a priori by 1/2 e^a Var(P) since mmse <= Var(P)).
BUDGET_RULE = ("|int_a^b h dlam - (H(a) - H(b))| <= BUDGET_ATOL_QUAD + abs_error + MC_NSIGMA * difference_stderr, "
               "and the interval covers the budget: H(b) <= BUDGET_ATOL_QUAD + H_error + MC_NSIGMA * SE(H(b)), "
               "H(pi) - H(a) <= BUDGET_ATOL_QUAD + 1/2 e^a Var(P) + H_error + MC_NSIGMA * SE(H(a))")
#: The one pass rule of the I-MMSE identity (what :attr:`IMMSECheck.holds` tests).
I_MMSE_RULE = ("max |fd - h| / h over the levels with h > I_MMSE_RATE_FLOOR <= FD_RTOL "
               "(and at least one level tested)")

#: The pass rule of the Monte-Carlo I-MMSE identity (:attr:`IMMSEMonteCarloCheck.holds`).
I_MMSE_MC_RULE = ("|mean residual| <= MC_NSIGMA * stderr on every interval, residual_i = H_i(a) - H_i(b) - "
                  "int_a^b 1/2 e^lam mmse_i dlam per draw (common random numbers; Gauss-Legendre in lam)")
#: Gauss-Legendre nodes per interval of the Monte-Carlo I-MMSE check: per draw (fixed x0 and noise
#: direction) the integrand is smooth on the scale of one unit of lambda, where 16 nodes are exact to
#: rounding against its standard error.
I_MMSE_MC_NODES = 16


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

    lam = np.asarray(lam, dtype=np.float64)
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
    g = _gregory_coefficients(order + 1)
    w = np.full(n, float(step))
    w[0] = w[-1] = 0.5 * step
    for k in range(1, order + 1):
        c = -float(step) * float(abs(g[k + 1]))
        for j in range(k + 1):
            w[n - 1 - j] += c * (-1) ** j * comb(k, j)  # nabla^k f_{n-1}
            w[j] += c * (-1) ** j * comb(k, j)  # (-1)^k Delta^k f_0 = sum_j (-1)^j C(k, j) f_j
    return w


def budget_check_on_grid(lam, mmse, H, H_rel_error, *, entropy, total_variance, rtol):
    r"""The budget check of a deterministic model from its values on a uniform grid, or ``None``.

    ``value`` is Gregory's rule (:func:`gregory_weights`) of :math:`h = \tfrac12 e^\lambda
    \mathrm{mmse}` on the grid, its error estimate ``abs_error`` the difference from the same rule on
    every other level (step :math:`2\delta`, whose error is :math:`2^{p+2}` times larger for a smooth
    :math:`h`, and far larger for the geometric convergence of an analytic one): the same kind of
    estimate as :math:`|K_{21} - G_{10}|` of the adaptive route, whose levels it saves.  The target
    :math:`H(a) - H(b)` is read at the grid's ends.  Returns ``None`` (the caller integrates
    adaptively) when the grid is not uniform to
    :data:`~noisealloc.theory.tolerances.GRID_UNIFORM_RTOL`, has an odd number of steps, is too
    short for the coarse rule, or the estimate exceeds ``rtol`` of the value.

    Parameters
    ----------
    lam, mmse, H : ndarray, shape (L,)
        The grid and the model's mmse and conditional entropy there.
    H_rel_error : float
        Relative error estimate of ``H`` (the target's error is this times ``max |H|``, per end).
    entropy, total_variance : float
        :math:`H(\pi)` and :math:`\mathrm{Var}(P)` of the model.
    rtol : float
        Relative target of the estimate.

    Returns
    -------
    BudgetCheck or None
    """
    lam = np.asarray(lam, dtype=np.float64)
    n = lam.size
    if n % 2 == 0 or (n + 1) // 2 < 2 * (GREGORY_ORDER + 1):
        return None
    steps = np.diff(lam)
    step = (lam[-1] - lam[0]) / (n - 1)
    if np.max(np.abs(steps - step)) > GRID_UNIFORM_RTOL * step:
        return None
    h = half_snr_times(lam, np.asarray(mmse, dtype=np.float64))
    fine = float(gregory_weights(n, step) @ h)
    coarse = float(gregory_weights((n + 1) // 2, 2.0 * step) @ h[::2])
    est = abs(fine - coarse)
    if not (np.isfinite(fine) and est <= rtol * abs(fine)):
        return None
    H = np.asarray(H, dtype=np.float64)
    h_err = float(H_rel_error) * float(np.abs(H).max())
    return _budget_verdict(value=fine, stderr=0.0, target=float(H[0] - H[-1]), target_stderr=0.0,
                           difference_stderr=0.0, abs_error=est + 2 * h_err, interval=(float(lam[0]), float(lam[-1])),
                           entropy=entropy, total_variance=total_variance, ends=(H[0], H[-1]), ends_stderr=(0.0, 0.0),
                           ends_error=h_err, method=f"Gregory order {GREGORY_ORDER} on the grid (vs every other level)",
                           nfev=n, success=True)


def model_entropy_rate(model, lam, *, coordinate="lambda", n_samples=None, rng=None) -> Estimate:
    r"""``model.entropy_rate(lam, coordinate)``, with the Monte-Carlo options for Monte-Carlo models only.

    Deterministic models (closed forms, quadrature) take no ``n_samples``/``rng``; Monte-Carlo models
    get them, so that a caller can bound the cost and fix the seed without knowing which kind of
    model it holds.  The choice is made by the model's declared ``monte_carlo`` attribute
    (:func:`noisealloc.theory.protocol.monte_carlo_options`).

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


def half_snr_times(lam, values) -> np.ndarray:
    r""":math:`\tfrac12 e^\lambda v` without overflow for :math:`|\lambda| \le 700` and tiny ``v``.

    Computed as :math:`\mathrm{sign}(v)\exp(\lambda - \log 2 + \log|v|)`, which stays
    finite and relatively accurate when :math:`v \sim 10^{-300}` and :math:`\lambda = 50`.

    Parameters
    ----------
    lam : array_like
        Log-SNR levels.
    values : array_like
        :math:`v`, broadcastable with ``lam``.

    Returns
    -------
    ndarray
        :math:`\tfrac12 e^\lambda v` (exactly 0 where ``v == 0``).
    """
    lam = np.asarray(lam, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
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
    THEORY.md section 1 (densities and rates between coordinates).
    """
    lam = np.asarray(lam, dtype=np.float64)
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
        ``error_check`` (relative, so unchanged) and a scaled ``stderr``.
    coordinate : str or Coordinate
        Target coordinate (``"lambda"``, ``"sigma"``, ``"log-sigma"``, ``"t"``, ...).

    Returns
    -------
    Estimate
        Rate per unit of ``u`` at :math:`u(\lambda)`; ``info["coordinate"]`` names it.

    References
    ----------
    THEORY.md section 2 (entropy rate; I-MMSE).

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


def _fixed_seed(rng) -> int:
    """An integer seed from ``rng`` (int, Generator or None), so that every batch of levels sees the same draws."""
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return int(rng)
    if rng is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    return int(as_generator(rng).integers(2**63))


def _status(success: bool) -> tuple[int, str]:
    status = 0 if success else 1
    return status, QUADRATURE_STATUS[status]


def _integrate_rate(model, lo: float, hi: float, *, rtol: float, n_panels: int, n_samples, seed):
    r"""Adaptive G10/K21 of :math:`h` over ``[lo, hi]``; for Monte-Carlo models also per sample.

    Returns ``(result, per_sample, samples)``: the quadrature result of the mean rate, and for
    Monte-Carlo models the integral of every sample's rate (shape (n,)) and one
    ``InformationSamples`` (for its strata); ``None`` otherwise.
    """
    edges = np.linspace(lo, hi, int(n_panels) + 1)
    pids = np.zeros(int(n_panels), dtype=np.intp)
    if not model.monte_carlo:
        def f(lam, pid):
            return np.asarray(model.entropy_rate(lam).value)[None, :]

        res = adaptive_gauss_kronrod(f, edges[:-1], edges[1:], pids, 1, rtol=rtol, atol=1e-300)
        return res, None, None
    opts = monte_carlo_options(model, n_samples=n_samples, rng=seed)
    kept = {}

    def f(lam, pid):
        # The same seed at every batch of nodes: the same draws, so the per-sample rates are one
        # function of lam per sample and each can be integrated.
        smp = model.information_samples(lam, **opts)
        kept.setdefault("samples", smp)
        per = half_snr_times(lam[:, None], smp.mmse).T  # (n, nodes)
        return np.vstack([per.mean(axis=0)[None, :], per])

    # One level first, to learn the sample count (the model's default when n_samples is None).
    probe = model.information_samples(np.array([lo]), **opts)
    kept_n = probe.mmse.shape[1]
    active = np.zeros((kept_n + 1, 1), dtype=bool)
    active[0] = True  # the tolerance applies to the mean rate, not to every sample's
    res = adaptive_gauss_kronrod(f, edges[:-1], edges[1:], pids, 1, n_out=kept_n + 1, rtol=rtol, atol=1e-300,
                                 active=active)
    return res, res.value[1:, 0], kept.get("samples", probe)


@dataclass(frozen=True)
class BudgetResult:
    r"""Result of :func:`budget_integral`: :math:`\int_a^b h\,d\lambda` over ``interval``.

    Attributes
    ----------
    value : float
        The integral (nats).
    abs_error : float
        Conservative integration error estimate (summed :math:`|K_{21} - G_{10}|`).
    stderr : float
        Monte-Carlo standard error of ``value`` from the per-sample integrals (0 for
        deterministic models).
    interval : tuple of float
        :math:`(a, b)`.
    nfev : int
        Levels at which the rate was evaluated.
    success : bool
        Whether the adaptive quadrature met ``rtol``.
    nit : int
        Refinement rounds.
    status : int
        Key of :data:`QUADRATURE_STATUS` (0 converged, 1 iteration limit).
    message : str
        ``QUADRATURE_STATUS[status]``.
    info : dict
        ``seed`` and ``n_samples`` of a Monte-Carlo integral.
    """

    value: float
    abs_error: float
    stderr: float
    interval: tuple
    nfev: int
    success: bool
    nit: int = 0
    status: int = 0
    message: str = QUADRATURE_STATUS[0]
    info: dict = field(default_factory=dict, compare=False)


def budget_integral(model, lam_min=-30.0, lam_max=30.0, *, rtol=1e-9, n_panels=16, n_samples=None,
                    rng=None) -> BudgetResult:
    r"""The budget :math:`\int_{\lambda_{\min}}^{\lambda_{\max}} h(\lambda)\,d\lambda` of a model.

    For a Dirac mixture this tends to :math:`H(\pi)` as the interval grows (THEORY.md section 2);
    on the interval it equals :math:`H(\lambda_{\min}) - H(\lambda_{\max})` (:func:`budget_check`
    tests that).  Adaptive Gauss--Kronrod over ``n_panels`` equal panels.  For a Monte-Carlo model
    every sample's rate is integrated on the same nodes (one fixed seed, so the same draws at every
    node), and the standard error comes from those per-sample integrals.

    Parameters
    ----------
    model : DataModel
        Any data model (``entropy_rate``; Monte-Carlo models also ``information_samples``).
    lam_min, lam_max : float
        The interval :math:`[a, b]`, ``lam_min < lam_max``.
    rtol : float
        Relative target of the integration error estimate (of the mean rate).
    n_panels : int
        Initial equal panels.
    n_samples : int, optional
        Monte-Carlo sample count (Monte-Carlo models only).
    rng : Generator, int or None
        Monte-Carlo randomness; turned into one integer seed, recorded in ``info``.

    Returns
    -------
    BudgetResult
        ``value``, ``abs_error``, ``stderr`` (0 for deterministic models), ``nfev``, ``nit``,
        ``success``, ``status``, ``message``.

    References
    ----------
    THEORY.md section 2 (budget identity).

    Examples
    --------
    >>> from noisealloc.theory.dirac import DiracMixture
    >>> b = budget_integral(DiracMixture([-1.0, 1.0]), -30.0, 30.0)
    >>> round(b.value, 9), b.success, b.stderr   # H(pi) = log 2
    (0.693147181, True, 0.0)
    """
    lo, hi = check_interval(lam_min, lam_max, "lam interval")
    seed = _fixed_seed(rng) if model.monte_carlo else None
    res, per, smp = _integrate_rate(model, lo, hi, rtol=rtol, n_panels=n_panels, n_samples=n_samples, seed=seed)
    stderr = 0.0
    info = {}
    if per is not None:
        stderr = float(smp.mean_stderr(per)[1])
        info = {"seed": seed, "n_samples": int(per.size)}
    status, message = _status(res.success)
    return BudgetResult(float(res.value[0, 0]), float(res.abs_error[0, 0]), stderr, (lo, hi), int(res.nfev),
                        bool(res.success), int(res.nit), status, message, info)


@dataclass(frozen=True)
class BudgetCheck:
    r"""The budget identity on an interval, :math:`\int_a^b h\,d\lambda = H(a) - H(b)`, with its verdict.

    As :math:`a \to -\infty`, :math:`b \to \infty` the target tends to :math:`H(\pi)` (``entropy``);
    ``entropy - target`` is what lies outside the interval.  The verdict is :data:`BUDGET_RULE`.

    Attributes
    ----------
    value : float
        :math:`\int_a^b h\,d\lambda` (nats).
    stderr : float
        Monte-Carlo standard error of ``value`` (0 for deterministic models).
    target : float
        :math:`H(a) - H(b)` from the model's own conditional entropy.
    target_stderr : float
        Its standard error.
    difference_stderr : float
        Standard error of ``value - target`` from per-sample differences (the same draws serve
        both, so this is neither the sum nor the root-sum-square of the two).
    abs_error : float
        Integration error estimate: :math:`|K_{21} - G_{10}|` plus the target's quadrature error
        (adaptive), Gregory's rule on the grid against every other level plus the target's error
        (deterministic, :func:`budget_check_on_grid`), or :math:`|\text{trapezoid} - \text{Simpson}|`
        on the grid (Monte Carlo).
    tolerance : float
        ``BUDGET_ATOL_QUAD + abs_error + MC_NSIGMA * difference_stderr``.
    holds : bool
        ``integral_holds and covers_budget`` (:data:`BUDGET_RULE`).
    integral_holds : bool
        ``|value - target| <= tolerance``: :math:`-dH/d\lambda = h` integrated over the interval.
    covers_budget : bool
        :math:`H(b) \approx 0` and :math:`H(\pi) - H(a) \le \tfrac12 e^a\,\mathrm{Var}(P)` within
        their errors: what lies outside the interval is negligible or bounded, so ``value`` is the
        budget :math:`H(\pi)` (fails for coincident atoms, whose :math:`H(\lambda)` never reaches 0).
    entropy_at_ends : tuple of float
        :math:`(H(a), H(b))`.
    entropy_at_ends_stderr : tuple of float
        Their standard errors.
    entropy_at_ends_error : float
        Quadrature error estimate of each (deterministic models; 0 otherwise).
    left_tail_bound : float
        :math:`\tfrac12 e^a\,\mathrm{Var}(P) \ge \int_{-\infty}^a h\,d\lambda`.
    z : float or None
        ``(value - target) / difference_stderr`` (``None`` when the standard error is 0).
    interval : tuple of float
        :math:`(a, b)`.
    entropy : float
        :math:`H(\pi)`.
    method : str
        How ``value`` was computed.
    rule : str
        :data:`BUDGET_RULE`.
    grid_trapezoid, grid_simpson : float or None
        The two grid rules (grid method only).
    nfev : int
        Levels at which the rate was evaluated.
    success : bool
        Whether the integration met its tolerance (always ``True`` on a grid).
    status : int
        Key of :data:`QUADRATURE_STATUS`.
    message : str
        One line: the comparison and the verdict.
    info : dict
        Seed and sample count of a Monte-Carlo check.

    References
    ----------
    THEORY.md section 2 (budget identity).
    """

    value: float
    stderr: float
    target: float
    target_stderr: float
    difference_stderr: float
    abs_error: float
    tolerance: float
    holds: bool
    z: float | None
    interval: tuple
    entropy: float
    method: str
    integral_holds: bool = True
    covers_budget: bool = True
    entropy_at_ends: tuple = (float("nan"), float("nan"))
    entropy_at_ends_stderr: tuple = (0.0, 0.0)
    entropy_at_ends_error: float = 0.0
    left_tail_bound: float = 0.0
    rule: str = BUDGET_RULE
    grid_trapezoid: float | None = None
    grid_simpson: float | None = None
    nfev: int = 0
    success: bool = True
    status: int = 0
    message: str = ""
    info: dict = field(default_factory=dict, compare=False)

    @property
    def error(self) -> float:
        """``value - target``."""
        return self.value - self.target

    @property
    def description(self) -> str:
        """What was compared with what, and the rule (one line)."""
        a, b = self.interval
        return f"{self.method} of h on [{a:g}, {b:g}] vs H({a:g}) - H({b:g}); holds iff {self.rule}"


def _budget_verdict(*, value, stderr, target, target_stderr, difference_stderr, abs_error, interval, entropy,
                    total_variance, ends, ends_stderr, ends_error, method, nfev=0, success=True, info=None,
                    **grid) -> BudgetCheck:
    """Apply :data:`BUDGET_RULE` (the only place it is applied)."""
    a, _ = interval
    tol = BUDGET_ATOL_QUAD + abs_error + MC_NSIGMA * difference_stderr
    err = value - target
    integral_holds = bool(abs(err) <= tol)
    left_bound = float(half_snr_times(a, total_variance))
    right_ok = ends[1] <= BUDGET_ATOL_QUAD + ends_error + MC_NSIGMA * ends_stderr[1]
    left_ok = entropy - ends[0] <= BUDGET_ATOL_QUAD + left_bound + ends_error + MC_NSIGMA * ends_stderr[0]
    covers = bool(right_ok and left_ok)
    holds = integral_holds and covers
    z = err / difference_stderr if difference_stderr > 0 else None
    status, _ = _status(success)
    message = (f"int h dlam = {value:.6g} vs H(a) - H(b) = {target:.6g}: |difference| {abs(err):.3g} "
               f"{'<=' if integral_holds else '>'} tolerance {tol:.3g}")
    if not right_ok:
        message += f"; H(b) = {ends[1]:.3g} has not reached 0 (coincident atoms, or b too small)"
    if not left_ok:
        message += f"; H(pi) - H(a) = {entropy - ends[0]:.3g} exceeds the left-tail bound {left_bound:.3g}"
    if not success:
        message += f"; {QUADRATURE_STATUS[status]}"
    return BudgetCheck(float(value), float(stderr), float(target), float(target_stderr), float(difference_stderr),
                       float(abs_error), float(tol), holds, None if z is None else float(z), tuple(interval),
                       float(entropy), method, integral_holds, covers, (float(ends[0]), float(ends[1])),
                       (float(ends_stderr[0]), float(ends_stderr[1])), float(ends_error), left_bound, BUDGET_RULE,
                       grid.get("grid_trapezoid"), grid.get("grid_simpson"), int(nfev), bool(success), status, message,
                       dict(info or {}))


def _require_discrete(model, what: str) -> None:
    if not model.discrete:
        raise ValueError(f"{what} needs discrete data (finite H(lambda)); model {model!r} has discrete=False "
                         "(for continuous data int_a^b h dlam = I(b) - I(a) instead)")


def budget_check(model, lam_min=-30.0, lam_max=30.0, *, rtol=1e-9, n_panels=16, n_samples=None,
                 rng=None) -> BudgetCheck:
    r"""Check :math:`\int_a^b h\,d\lambda = H(a) - H(b)` by adaptive quadrature of the model's rate.

    Deterministic models: :func:`budget_integral` against the model's :math:`H` at the ends, the
    two quadrature errors summed into ``abs_error``.  Monte-Carlo models: the per-sample integrals
    against the per-sample :math:`H(a) - H(b)` from the same draws, so the standard error of the
    difference accounts for their correlation.  Verdict: :data:`BUDGET_RULE`.

    Parameters
    ----------
    model : DiscreteDataModel
        A discrete data model (``discrete = True``).
    lam_min, lam_max : float
        The interval :math:`[a, b]`.
    rtol : float
        Relative target of the integration error estimate.
    n_panels : int
        Initial equal panels of the adaptive quadrature.
    n_samples : int, optional
        Monte-Carlo sample count (Monte-Carlo models only).
    rng : Generator, int or None
        Monte-Carlo randomness (one integer seed for every call).

    Returns
    -------
    BudgetCheck

    Raises
    ------
    ValueError
        If the model is not discrete, or the interval is empty.

    References
    ----------
    THEORY.md section 2 (budget identity).

    Examples
    --------
    >>> from noisealloc.theory.dirac import DiracMixture
    >>> chk = budget_check(DiracMixture([-1.0, 0.5, 2.0]), -30.0, 30.0)
    >>> chk.holds, abs(chk.error) < 1e-9, round(chk.entropy, 6)
    (True, True, 1.098612)
    """
    _require_discrete(model, "the budget check")
    lo, hi = check_interval(lam_min, lam_max, "lam interval")
    seed = _fixed_seed(rng) if model.monte_carlo else None
    res, per, smp = _integrate_rate(model, lo, hi, rtol=rtol, n_panels=n_panels, n_samples=n_samples, seed=seed)
    value = float(res.value[0, 0])
    status_ok = bool(res.success)
    if per is None:
        ent = model.conditional_entropy(np.array([lo, hi]))
        H = np.asarray(ent.value, dtype=np.float64)
        rel = 0.0 if ent.error_check is None else float(ent.error_check)
        h_err = rel * float(np.abs(H).max())
        return _budget_verdict(value=value, stderr=0.0, target=float(H[0] - H[1]), target_stderr=0.0,
                               difference_stderr=0.0, abs_error=float(res.abs_error[0, 0]) + 2 * h_err,
                               interval=(lo, hi), entropy=model.entropy, total_variance=model.total_variance,
                               ends=(H[0], H[1]), ends_stderr=(0.0, 0.0), ends_error=h_err,
                               method="adaptive Gauss-Kronrod", nfev=res.nfev, success=status_ok)
    ends = model.information_samples(np.array([lo, hi]), **monte_carlo_options(model, n_samples=n_samples, rng=seed))
    H, H_se = ends.mean_stderr(ends.entropy)
    per_target = ends.entropy[0] - ends.entropy[1]
    _, se_value = smp.mean_stderr(per)
    _, se_target = ends.mean_stderr(per_target)
    _, se_diff = smp.mean_stderr(per - per_target)
    return _budget_verdict(value=value, stderr=float(se_value), target=float(H[0] - H[1]),
                           target_stderr=float(se_target), difference_stderr=float(se_diff),
                           abs_error=float(res.abs_error[0, 0]), interval=(lo, hi), entropy=model.entropy,
                           total_variance=model.total_variance, ends=(H[0], H[1]), ends_stderr=(H_se[0], H_se[1]),
                           ends_error=0.0, method="adaptive Gauss-Kronrod per sample", nfev=res.nfev,
                           success=status_ok, info={"seed": seed, "n_samples": int(per.size)})


def budget_check_from_samples(samples, entropy: float, total_variance: float) -> BudgetCheck:
    r"""Check :math:`\int_a^b h\,d\lambda = H(a) - H(b)` on the grid of Monte-Carlo per-sample values.

    ``value`` is the trapezoid rule of the estimated rate :math:`\hat h = \tfrac12 e^\lambda
    \widehat{\mathrm{mmse}}` on the grid ``samples.lam`` (``a``, ``b`` its ends), ``target`` the
    estimated :math:`\hat H(a) - \hat H(b)`.  Their standard errors come from the per-sample
    integrals :math:`\sum_t w_t \tfrac12 e^{\lambda_t}\mathrm{mmse}_{ti}` and differences
    :math:`H_{ai} - H_{bi}` (common random numbers: one draw serves every level, so the per-level
    errors are correlated and are propagated through the quadrature sample by sample, never summed).
    ``abs_error`` is the trapezoid--Simpson difference.  Verdict: :data:`BUDGET_RULE`.

    Parameters
    ----------
    samples : InformationSamples
        Per-sample ``mmse`` and ``entropy`` on an increasing grid of at least 3 levels
        (``information_samples`` of a discrete Monte-Carlo model).
    entropy : float
        :math:`H(\pi)` of the model.
    total_variance : float
        :math:`\mathrm{Var}(P)` of the model (bounds the budget left of the grid).

    Returns
    -------
    BudgetCheck

    References
    ----------
    THEORY.md sections 2 (budget identity) and 3.1 (common random numbers, standard errors).
    """
    lam = np.asarray(samples.lam, dtype=np.float64)
    if lam.ndim != 1 or lam.size < 3 or np.any(np.diff(lam) <= 0):
        raise ValueError(f"samples.lam must be an increasing grid of at least 3 levels (Simpson's rule); "
                         f"got shape {lam.shape}")
    mmse, _ = samples.mean_stderr(samples.mmse)
    H, H_se = samples.mean_stderr(samples.entropy)
    h = half_snr_times(lam, mmse)
    trap, simp = grid_quadrature_weights(lam)
    per_value = trap @ half_snr_times(lam[:, None], samples.mmse)
    per_target = samples.entropy[0] - samples.entropy[-1]
    _, se_value = samples.mean_stderr(per_value)
    _, se_target = samples.mean_stderr(per_target)
    _, se_diff = samples.mean_stderr(per_value - per_target)
    t, si = float(trap @ h), float(simp @ h)
    info = {k: samples.info[k] for k in ("seed",) if k in samples.info}
    info["n_samples"] = int(samples.mmse.shape[1])
    return _budget_verdict(value=float(np.trapezoid(h, lam)), stderr=float(se_value), target=float(H[0] - H[-1]),
                           target_stderr=float(se_target), difference_stderr=float(se_diff), abs_error=abs(t - si),
                           interval=(float(lam[0]), float(lam[-1])), entropy=entropy, total_variance=total_variance,
                           ends=(H[0], H[-1]), ends_stderr=(H_se[0], H_se[-1]), ends_error=0.0,
                           method="trapezoid on the grid, per sample", nfev=int(lam.size), info=info,
                           grid_trapezoid=t, grid_simpson=si)


@dataclass(frozen=True)
class IMMSECheck:
    r"""Result of :func:`i_mmse_check` at levels ``lam``, with its verdict (:data:`I_MMSE_RULE`).

    Attributes
    ----------
    lam : ndarray
        The levels.
    fd : ndarray
        :math:`-dH/d\lambda` (discrete) or :math:`dI/d\lambda` (continuous) by a centred
        difference of step ``step``.
    rate : ndarray
        :math:`h = \tfrac12 e^\lambda\mathrm{mmse}` from the model.
    rel_error : ndarray
        ``|fd - rate| / max(|rate|, 1e-300)``.
    step : float
        The finite-difference step.
    tested : ndarray of bool
        Levels where ``rate > I_MMSE_RATE_FLOOR`` (the relative error is judged there only).
    max_rel_error : float
        Largest ``rel_error`` over the tested levels (0 when none is tested).
    tolerance : float
        ``FD_RTOL``.
    holds : bool
        At least one level tested and ``max_rel_error <= tolerance``.
    rule : str
        :data:`I_MMSE_RULE`.
    message : str
        One line: the comparison and the verdict.

    References
    ----------
    THEORY.md section 2 (I-MMSE, Guo--Shamai--Verdu).
    """

    lam: np.ndarray
    fd: np.ndarray
    rate: np.ndarray
    rel_error: np.ndarray
    step: float
    tested: np.ndarray
    max_rel_error: float
    tolerance: float
    holds: bool
    rule: str = I_MMSE_RULE
    message: str = ""


def i_mmse_check(model, lam, *, step=None, n_samples=None, rng=0):
    r"""Compare :math:`-dH/d\lambda` (or :math:`dI/d\lambda`) by centred FD with :math:`\tfrac12 e^\lambda\mathrm{mmse}`.

    .. math:: \frac{H(\lambda - s) - H(\lambda + s)}{2s} \approx \tfrac12 e^\lambda\,\mathrm{mmse}(\lambda)

    The step defaults to ``FD_REL_STEP * max(1, |lam|)`` (balances the :math:`O(s^2)` truncation
    against the :math:`O(\epsilon/s)` rounding).  Verdict: :data:`I_MMSE_RULE`.

    For a Monte-Carlo model a difference of two estimates at a step of ~1e-5 has no usable accuracy;
    the identity is then checked in integrated form on each interval between consecutive ``lam``, per
    draw of common random numbers,

    .. math:: r_i = H_i(\lambda_j) - H_i(\lambda_{j+1}) - \int_{\lambda_j}^{\lambda_{j+1}}
              \tfrac12 e^\lambda\,\mathrm{mmse}_i(\lambda)\,d\lambda, \qquad E\,r_i = 0,

    (Gauss--Legendre with :data:`I_MMSE_MC_NODES` nodes per interval), judged by
    :data:`I_MMSE_MC_RULE`: the mean residual within ``MC_NSIGMA`` of its standard error.

    Parameters
    ----------
    model : DataModel
        Deterministic (``monte_carlo = False``): :math:`H` (discrete) or :math:`I` (continuous) is
        differenced.  Monte Carlo: a discrete model (Dirac mixtures of three or more span dimensions).
    lam : array_like
        Levels (Monte Carlo: at least 2, increasing; interval ends, best at most ~1 apart).
    step : float, optional
        Finite-difference step (deterministic models).
    n_samples : int, optional
        Draws of the Monte-Carlo check (the model's default when None).
    rng : int, Generator or None, default 0
        Randomness of the Monte-Carlo check (a seed is recorded).

    Returns
    -------
    IMMSECheck or IMMSEMonteCarloCheck
        The latter for a Monte-Carlo model.

    Raises
    ------
    ValueError
        Non-finite ``lam``; for a Monte-Carlo model, a continuous model or fewer than 2 increasing levels.

    References
    ----------
    THEORY.md section 2; Guo, Shamai & Verdu (2005).

    Examples
    --------
    >>> from noisealloc.theory.gaussian import GaussianManifold
    >>> chk = i_mmse_check(GaussianManifold([0.0], [[1.0]], [2.0]), [-1.0, 0.0, 1.0])
    >>> chk.holds, bool(chk.max_rel_error < 1e-8)
    (True, True)
    """
    lam = as_float_array(lam, "lam")
    check_finite(lam, "lam")
    if model.monte_carlo:
        # a centred difference of two Monte-Carlo estimates has no usable accuracy: the identity is
        # checked in integrated form, per draw, with its standard error
        return _i_mmse_check_mc(model, lam, n_samples=n_samples, rng=rng)
    s = float(step) if step is not None else float(FD_REL_STEP * max(1.0, float(np.max(np.abs(lam))) if lam.size else 1.0))
    if model.discrete:
        hp = np.asarray(model.conditional_entropy(lam + s).value)
        hm = np.asarray(model.conditional_entropy(lam - s).value)
        fd = (hm - hp) / (2 * s)
    else:
        ip = np.asarray(model.mutual_information(lam + s).value)
        im = np.asarray(model.mutual_information(lam - s).value)
        fd = (ip - im) / (2 * s)
    rate = np.asarray(model.entropy_rate(lam).value)
    rel = np.abs(fd - rate) / np.maximum(np.abs(rate), 1e-300)
    tested = np.abs(rate) > I_MMSE_RATE_FLOOR
    worst = float(np.max(rel[tested])) if tested.any() else 0.0
    holds = bool(tested.any() and worst <= FD_RTOL)
    message = (f"max relative error {worst:.3g} over {int(tested.sum())} of {tested.size} levels with h > "
               f"{I_MMSE_RATE_FLOOR:g}: {'<=' if holds else 'not <='} FD_RTOL = {FD_RTOL:g}")
    return IMMSECheck(lam, fd, rate, rel, s, tested, worst, FD_RTOL, holds, I_MMSE_RULE, message)


@dataclass(frozen=True)
class IMMSEMonteCarloCheck:
    r"""Result of :func:`i_mmse_check` for a Monte-Carlo model: the integrated identity with standard errors.

    Attributes
    ----------
    lam : ndarray, shape (L,)
        Interval ends (increasing); the identity is checked on each ``[lam[j], lam[j+1]]``.
    difference : ndarray, shape (L-1,)
        :math:`H(\lambda_j) - H(\lambda_{j+1})` (nats), Monte Carlo.
    integral : ndarray, shape (L-1,)
        :math:`\int h\,d\lambda` over the interval, Monte Carlo (same draws).
    residual : ndarray, shape (L-1,)
        ``difference - integral`` (its expectation is 0).
    stderr : ndarray, shape (L-1,)
        Standard error of ``residual`` (per-draw residuals, stratified design).
    z : ndarray, shape (L-1,)
        ``residual / stderr``.
    tolerance : float
        ``MC_NSIGMA``.
    holds : bool
        ``|z| <= tolerance`` on every interval.
    n_samples : int
    seed : int or None
    rule : str
        :data:`I_MMSE_MC_RULE`.
    message : str

    References
    ----------
    THEORY.md section 2 (I-MMSE) and section 3.1 (Monte-Carlo estimates carry standard errors).
    """

    lam: np.ndarray
    difference: np.ndarray
    integral: np.ndarray
    residual: np.ndarray
    stderr: np.ndarray
    z: np.ndarray
    tolerance: float
    holds: bool
    n_samples: int
    seed: int | None
    rule: str = I_MMSE_MC_RULE
    message: str = ""


def _i_mmse_check_mc(model, lam, *, n_samples=None, rng=0) -> IMMSEMonteCarloCheck:
    """The integrated I-MMSE identity of a discrete Monte-Carlo model, per draw (see :func:`i_mmse_check`)."""
    if not model.discrete:
        raise ValueError(f"the Monte-Carlo I-MMSE check needs a discrete model (H is the posterior entropy of its "
                         f"atoms); {model!r} is continuous")
    ends = np.asarray(lam, dtype=np.float64).reshape(-1)
    if ends.size < 2 or not np.all(np.diff(ends) > 0):
        raise ValueError("lam must hold at least 2 strictly increasing levels for a Monte-Carlo model (the identity "
                         "is checked on the intervals between them)")
    x, w = np.polynomial.legendre.leggauss(I_MMSE_MC_NODES)
    a, b = ends[:-1], ends[1:]
    nodes = (0.5 * (a + b))[:, None] + (0.5 * (b - a))[:, None] * x[None, :]      # (J, Q)
    weights = (0.5 * (b - a))[:, None] * w[None, :]
    levels = np.concatenate([ends, nodes.ravel()])
    seed = _fixed_seed(rng)
    smp = model.information_samples(levels, n_samples=n_samples, rng=seed)
    ent = smp.entropy[: ends.size]                                                  # (L, n)
    rate = 0.5 * np.exp(nodes.ravel())[:, None] * smp.mmse[ends.size:]             # (J*Q, n)
    integral_i = np.einsum("jq,jqn->jn", weights, rate.reshape(nodes.shape + (-1,)))
    diff_i = ent[:-1] - ent[1:]
    res, se = smp.mean_stderr(diff_i - integral_i)
    diff, _ = smp.mean_stderr(diff_i)
    integral, _ = smp.mean_stderr(integral_i)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, res / se, np.where(res == 0, 0.0, np.inf))
    holds = bool(np.all(np.abs(z) <= MC_NSIGMA))
    worst = int(np.argmax(np.abs(z)))
    message = (f"max |z| = {abs(z[worst]):.3g} on [{a[worst]:g}, {b[worst]:g}] over {a.size} intervals "
               f"({smp.entropy.shape[1]} draws): {'<=' if holds else 'not <='} MC_NSIGMA = {MC_NSIGMA:g}")
    return IMMSEMonteCarloCheck(ends, diff, integral, res, se, z, MC_NSIGMA, holds, int(smp.entropy.shape[1]), seed,
                                I_MMSE_MC_RULE, message)
