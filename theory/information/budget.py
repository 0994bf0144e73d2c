r"""The budget identity of docs/THEORY.md section 2: :math:`\int h\,d\lambda = H(\lambda_{min}) -
H(\lambda_{max})` (and :math:`H(\pi)` over the whole line), with its one pass rule
(:data:`BUDGET_RULE`) and the verdict every caller reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.errors import as_float_array, as_float_scalar, as_generator, as_int_scalar, check_interval
from noisealloc.theory.models.protocol import monte_carlo_options
from noisealloc.theory.posterior.quadrature import adaptive_gauss_kronrod
from noisealloc.theory.tolerances import (
    BUDGET_ATOL_QUAD,
    BUDGET_LEFT_TAIL_RTOL,
    GRID_UNIFORM_RTOL,
    MC_NSIGMA,
)
from noisealloc.theory.information.rates import GREGORY_ORDER, gregory_weights, grid_quadrature_weights
from noisealloc.theory.entropy_rate import half_snr_times

__all__ = ['BudgetResult', 'budget_integral', 'BUDGET_RULE', 'BudgetCheck', 'budget_check', 'budget_check_from_samples', 'budget_check_on_grid', 'QUADRATURE_STATUS']


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
               "H(pi) - H(a) <= BUDGET_ATOL_QUAD + min(1/2 e^a Var(P), BUDGET_LEFT_TAIL_RTOL * H(pi)) + H_error "
               "+ MC_NSIGMA * SE(H(a))")
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
    lam = as_float_array(lam, "lam")
    mmse, H = as_float_array(mmse, "mmse"), as_float_array(H, "H")
    H_rel_error = as_float_scalar(H_rel_error, "H_rel_error")
    entropy, total_variance = as_float_scalar(entropy, "entropy"), as_float_scalar(total_variance, "total_variance")
    rtol = as_float_scalar(rtol, "rtol")
    n = lam.size
    if n % 2 == 0 or (n + 1) // 2 < 2 * (GREGORY_ORDER + 1):
        return None
    steps = np.diff(lam)
    step = (lam[-1] - lam[0]) / (n - 1)
    if np.max(np.abs(steps - step)) > GRID_UNIFORM_RTOL * step:
        return None
    h = half_snr_times(lam, mmse)
    fine = float(gregory_weights(n, step) @ h)
    coarse = float(gregory_weights((n + 1) // 2, 2.0 * step) @ h[::2])
    est = abs(fine - coarse)
    if not (np.isfinite(fine) and est <= rtol * abs(fine)):
        return None
    h_err = H_rel_error * float(np.abs(H).max())
    return _budget_verdict(value=fine, stderr=0.0, target=float(H[0] - H[-1]), target_stderr=0.0,
                           difference_stderr=0.0, abs_error=est + 2 * h_err, interval=(float(lam[0]), float(lam[-1])),
                           entropy=entropy, total_variance=total_variance, ends=(H[0], H[-1]), ends_stderr=(0.0, 0.0),
                           ends_error=h_err, method=f"Gregory order {GREGORY_ORDER} on the grid (vs every other level)",
                           nfev=n, success=True)


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
    n_panels = as_int_scalar(n_panels, "n_panels")
    edges = np.linspace(lo, hi, n_panels + 1)
    pids = np.zeros(n_panels, dtype=np.intp)
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

    For a Dirac mixture this tends to :math:`H(\pi)` as the interval grows (docs/THEORY.md section 2);
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
    docs/THEORY.md section 2 (budget identity).

    Examples
    --------
    >>> from noisealloc.theory.models.dirac import DiracMixture
    >>> b = budget_integral(DiracMixture([-1.0, 1.0]), -30.0, 30.0)
    >>> round(b.value, 9), b.success, b.stderr   # H(pi) = log 2
    (0.693147181, True, 0.0)
    """
    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
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
        :math:`H(b) \approx 0` and :math:`H(\pi) - H(a) \le \min(\tfrac12 e^a\,\mathrm{Var}(P),
        0.1\,H(\pi))` within their errors: what lies outside the interval is negligible or bounded, so ``value`` is the
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
    docs/THEORY.md section 2 (budget identity).
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
    # The tail bound holds for every a, but only a small one makes the tail negligible: capped at a
    # share of the budget, else [700, 800] (int h = 0) would "cover" any H(pi).
    left_allowance = min(left_bound, BUDGET_LEFT_TAIL_RTOL * abs(entropy))
    right_ok = ends[1] <= BUDGET_ATOL_QUAD + ends_error + MC_NSIGMA * ends_stderr[1]
    left_ok = entropy - ends[0] <= BUDGET_ATOL_QUAD + left_allowance + ends_error + MC_NSIGMA * ends_stderr[0]
    covers = bool(right_ok and left_ok)
    holds = integral_holds and covers
    z = err / difference_stderr if difference_stderr > 0 else None
    status, _ = _status(success)
    message = (f"int h dlam = {value:.6g} vs H(a) - H(b) = {target:.6g}: |difference| {abs(err):.3g} "
               f"{'<=' if integral_holds else '>'} tolerance {tol:.3g}")
    if not right_ok:
        message += f"; H(b) = {ends[1]:.3g} has not reached 0 (coincident atoms, or b too small)"
    if not left_ok:
        message += (f"; H(pi) - H(a) = {entropy - ends[0]:.3g} exceeds the left-tail allowance {left_allowance:.3g} "
                    "(the interval does not cover the budget: lower a)")
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
    docs/THEORY.md section 2 (budget identity).

    Examples
    --------
    >>> from noisealloc.theory.models.dirac import DiracMixture
    >>> chk = budget_check(DiracMixture([-1.0, 0.5, 2.0]), -30.0, 30.0)
    >>> chk.holds, abs(chk.error) < 1e-9, round(chk.entropy, 6)
    (True, True, 1.098612)
    """
    _require_discrete(model, "the budget check")
    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
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
    docs/THEORY.md sections 2 (budget identity) and 3.1 (common random numbers, standard errors).
    """
    entropy, total_variance = as_float_scalar(entropy, "entropy"), as_float_scalar(total_variance, "total_variance")
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
