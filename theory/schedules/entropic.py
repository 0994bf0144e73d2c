r"""Entropic training schedules from an entropy-rate profile (docs/THEORY.md section 4 (b)).

Under feature-noise decoupling and the ELBO evaluation weight, the optimal
independent-learner allocation in the learners' own coordinate :math:`u` is

.. math:: p_u(u) \propto \sqrt{h_u(u)}, \qquad h_u(u) = h(\lambda(u))\,|d\lambda/du|,
          \qquad h(\lambda) = \tfrac12 e^{\lambda}\,\mathrm{mmse}(\lambda),

(rule ``"sqrt-entropy"``); the *entropic* schedule :math:`p_u \propto h_u`
(rule ``"entropy"``) is uniform in entropic time.  The square-root law is not
invariant under a change of coordinate: moving it from ``u`` to ``lambda``
multiplies it by :math:`|du/d\lambda|^{1/2}`, so every function here takes the
coordinate explicitly.

A uniform floor mixes in robustness against a badly estimated profile:
:math:`p \leftarrow (1 - \varepsilon) p + \varepsilon / |U|` on the interval
:math:`U` in the coordinate ``u``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.coordinates import get_coordinate
from noisealloc.theory.errors import as_float_array, as_float_scalar, check_choice, check_finite

from noisealloc.theory.errors import check_count
from noisealloc.theory.models.smoothed import SMOOTHED_LEVELS, SMOOTHED_SAMPLES, SmoothedEmpiricalLaw, smoothed_empirical_law

__all__ = [
    "LAWS",
    "LawChoice",
    "resolve_law",
    "DataSchedule",
    "schedule_from_data",
    "LossFactor",
    "schedule_loss_factor",
    "PopulationSchedule",
    "population_schedule",
    "RULES",
    "H_FLOOR",
    "EntropicScheduleResult",
    "entropic_pdf_values",
    "entropic_schedule",
    "independent_learner_factor",
    "schedule_from_model",
    "schedule_from_rate",
]

#: Exponent rules: ``"sqrt-entropy"`` is :math:`p_u \propto h_u^{1/2}` (Theorem 2), ``"entropy"`` is
#: :math:`p_u \propto h_u` (uniform in entropic time).
RULES = ("sqrt-entropy", "entropy")

#: Floor raised under a computed entropy rate before its entropic density is formed.  :math:`h > 0` at
#: every finite :math:`\lambda`, but :math:`\tfrac12 e^\lambda\,\mathrm{mmse}` underflows to 0 at high
#: SNR for well-separated atoms (and a Monte-Carlo estimate can be exactly 0), and a zero would make the
#: density vanish there, which a tabulated schedule cannot hold.  1e-300 sits just above the smallest
#: normal double (2.2e-308), and its square root, 1e-150, stays far from underflow relative to any
#: maximum of order one: floored levels get a density about 1e-150 of the peak, i.e. are never sampled.
H_FLOOR = 1e-300


def _check_lam(lam) -> np.ndarray:
    lam = check_finite(as_float_array(lam, "lam", ndim=1), "lam")
    if lam.size < 2:
        raise ValueError(f"lam must hold at least 2 levels; got {lam.size}")
    if np.any(np.diff(lam) <= 0):
        i = int(np.flatnonzero(np.diff(lam) <= 0)[0])
        raise ValueError(f"lam must be strictly increasing; lam[{i}] = {float(lam[i])!r} >= lam[{i + 1}] = {float(lam[i + 1])!r}")
    return lam


def _check_profile(lam, h):
    lam = _check_lam(lam)
    h = check_finite(as_float_array(h, "h", ndim=1), "h")
    if lam.shape != h.shape:
        raise ValueError(f"lam and h must have the same shape; got {lam.shape} and {h.shape}")
    if np.any(h < 0):
        i = int(np.flatnonzero(h < 0)[0])
        raise ValueError(f"h must be >= 0 (an entropy rate); h[{i}] = {float(h[i])!r}")
    return lam, h


def entropic_pdf_values(lam, h, *, rule: str = "sqrt-entropy", coordinate: str = "lambda", floor: float = 0.0):
    r"""The entropic density at the knots of a profile, normalised, in coordinate ``u``.

    .. math:: p_u(u_i) \propto h_u(u_i)^{\gamma}, \quad \gamma = \tfrac12 \text{ (sqrt-entropy) or } 1
              \text{ (entropy)}, \quad h_u = h\,|d\lambda/du|,

    normalised with the trapezoid rule in ``u`` (exact for the piecewise-linear
    density that :class:`~noisealloc.theory.schedules.base.TabulatedSchedule` builds),
    then mixed with a uniform floor :math:`p \leftarrow (1-\varepsilon)p + \varepsilon/|U|`.
    ``h`` is used as given: zeros raise (see :func:`schedule_from_rate`, which floors it first).

    Parameters
    ----------
    lam : (n,) array_like
        Strictly increasing log-SNR grid, n >= 2.
    h : (n,) array_like
        Entropy rate per unit :math:`\lambda` (nats), :math:`h \ge 0`.
    rule : {"sqrt-entropy", "entropy"}
        Exponent :math:`\gamma` = 1/2 or 1.
    coordinate : str
        Coordinate ``u`` of the schedule (default log-SNR).
    floor : float in [0, 1)
        Weight :math:`\varepsilon` of the uniform mixture component.

    Returns
    -------
    u : (n,) ndarray
        Knots in ``u``, increasing.
    pdf : (n,) ndarray
        Density per unit ``u`` at the knots, > 0, integrating to one (trapezoid).

    References
    ----------
    docs/THEORY.md §4 (b) (Theorem 2 and feature-noise decoupling); §5 (entropic schedules).

    Examples
    --------
    >>> import numpy as np
    >>> u, p = entropic_pdf_values([0.0, 1.0, 2.0], [1.0, 4.0, 1.0])  # sqrt(h) = 1, 2, 1; mass 3
    >>> p.round(6)
    array([0.333333, 0.666667, 0.333333])
    """
    lam, h = _check_profile(lam, h)
    check_choice(rule, "rule", RULES)
    floor = as_float_scalar(floor, "floor")
    if not (0.0 <= floor < 1.0):
        raise ValueError(f"floor must lie in [0, 1); got {floor!r}")
    if not np.any(h > 0):
        raise ValueError("h must be positive somewhere on the grid; the entropic density has zero mass")
    c = get_coordinate(coordinate)
    u = c.from_lam(lam)
    jac = np.abs(c.dlam_du(u))
    h_u = h * jac
    # Work with ratios to the maximum so that profiles spanning hundreds of
    # orders of magnitude (h ~ e^{-50} at lam = -50) neither underflow nor overflow.
    gamma = 0.5 if rule == "sqrt-entropy" else 1.0
    with np.errstate(divide="ignore"):
        log_q = gamma * np.log(h_u)
    log_q -= np.max(log_q)
    q = np.exp(log_q)
    order = np.argsort(u)
    u, q = u[order], q[order]
    mass = np.trapezoid(q, u)
    if not np.isfinite(mass) or mass <= 0:
        raise ValueError("h must be positive somewhere on the grid; the entropic density has zero mass")
    pdf = q / mass
    if floor > 0:
        pdf = (1.0 - floor) * pdf + floor / (u[-1] - u[0])
    if np.any(pdf <= 0):
        i = int(np.flatnonzero(pdf <= 0)[0])
        raise ValueError(
            f"the entropic density vanishes at u = {float(u[i])!r} (h = 0 there or underflow); "
            "pass floor > 0 or restrict the interval"
        )
    return u, pdf


def entropic_schedule(lam, h, *, rule: str = "sqrt-entropy", coordinate: str = "lambda", floor: float = 0.0,
                      name: str | None = None):
    r"""The (square-root) entropic schedule of a profile as a tabulated density in ``coordinate``.

    The density of :func:`entropic_pdf_values`,
    :math:`p_u \propto h_u^{\gamma}` mixed with the uniform floor, as a
    :class:`~noisealloc.theory.schedules.base.TabulatedSchedule` (piecewise-linear
    pdf, exact CDF and inverse CDF) on the knots :math:`u(\lambda_i)`.

    Parameters
    ----------
    lam : (n,) array_like
        Strictly increasing log-SNR grid, n >= 2.
    h : (n,) array_like
        Entropy rate per unit :math:`\lambda` (nats), :math:`h \ge 0`, positive somewhere.
    rule : {"sqrt-entropy", "entropy"}
        Exponent 1/2 or 1.
    coordinate : str
        Coordinate ``u`` of the learners and of the schedule.
    floor : float in [0, 1)
        Uniform mixture weight.
    name : str, optional
        Schedule name (default the rule, with ``+floor<eps>`` when ``floor > 0``).

    Returns
    -------
    TabulatedSchedule
        In ``coordinate``, on the knots :math:`u(\lambda_i)`.

    References
    ----------
    docs/THEORY.md §4 (b); §5.

    Examples
    --------
    >>> sch = entropic_schedule([0.0, 1.0, 2.0], [1.0, 4.0, 1.0])
    >>> sch.name, float(sch.cdf(1.0))  # symmetric density: half the mass below the middle knot
    ('sqrt-entropy', 0.5)
    """
    from noisealloc.theory.schedules.base import TabulatedSchedule

    u, pdf = entropic_pdf_values(lam, h, rule=rule, coordinate=coordinate, floor=floor)
    return TabulatedSchedule(u, pdf, coordinate=coordinate, name=_default_name(rule, floor) if name is None else name)


def _default_name(rule: str, floor: float) -> str:
    return f"{rule}" + (f"+floor{floor:g}" if floor else "")


def independent_learner_factor(u, omega_c, p):
    r"""Loss factor of an allocation in the independent-learner regime (Theorem 2).

    .. math:: F(p) = \int \frac{\omega_u c}{p_u}\,du \Big/ \Big(\int \sqrt{\omega_u c}\,du\Big)^2 \;\ge 1,

    with equality iff :math:`p_u \propto \sqrt{\omega_u c}`.  Integrals by the
    trapezoid rule on the grid ``u``.  Under decoupling with the ELBO weight,
    :math:`\omega_u c \propto h_u`.

    Parameters
    ----------
    u : (n,) array_like
        Strictly increasing grid in the learners' coordinate.
    omega_c : (n,) array_like, >= 0
        Evaluation weight times per-level cost, per unit ``u``.
    p : (n,) array_like, >= 0
        Allocation density per unit ``u`` (need not be normalised: it is
        normalised on the grid first).

    Returns
    -------
    float
        :math:`F(p) \ge 1` (up to the trapezoid rule): the factor by which the
        allocation's first-order excess risk exceeds the optimum; ``math.inf`` when ``p = 0`` at a
        grid point where ``omega_c > 0`` (a starved learner), while points where both are 0 count 0.

    References
    ----------
    docs/THEORY.md §4 (b), Theorem 2 (square-root law).

    Examples
    --------
    >>> u = [0.0, 1.0, 2.0]
    >>> independent_learner_factor(u, [1.0, 4.0, 1.0], [1.0, 2.0, 1.0])  # p = sqrt(omega c)
    1.0
    """
    u = check_finite(as_float_array(u, "u", ndim=1), "u")
    omega_c = check_finite(as_float_array(omega_c, "omega_c", shape=u.shape), "omega_c")
    p = check_finite(as_float_array(p, "p", shape=u.shape), "p")
    if np.any(np.diff(u) <= 0):
        raise ValueError("u must be strictly increasing")
    if np.any(omega_c < 0):
        raise ValueError("omega_c must be >= 0")
    if np.any(p < 0):
        i = int(np.flatnonzero(p < 0)[0])
        raise ValueError(f"p must be >= 0; p[{i}] = {float(p[i])!r}")
    norm = np.trapezoid(p, u)
    if not norm > 0:
        raise ValueError("p must have positive mass on the grid u")
    root = np.trapezoid(np.sqrt(omega_c), u)
    if not root > 0:
        raise ValueError("omega_c must be positive somewhere on the grid u (no cost, no factor)")
    if np.any((p == 0) & (omega_c > 0)):
        return math.inf  # a starved level with a cost: its learner never trains (the one convention)
    p = p / norm
    ratio = np.divide(omega_c, p, out=np.zeros_like(p), where=p > 0)  # 0/0 := 0: no cost, no samples
    return float(np.trapezoid(ratio, u) / root**2)


@dataclass(frozen=True)
class EntropicScheduleResult:
    r"""An entropic schedule with the entropy-rate profile it was built from.

    Returned by :func:`schedule_from_model` and :func:`schedule_from_rate`: the schedule
    :math:`p_u \propto (h_u)^\gamma` (mixed with the uniform ``floor``) built from
    :math:`\max(h, h_{floor})`, and everything needed to judge it (the estimate of ``h`` with its
    standard error and method, and the floors used).

    Attributes
    ----------
    schedule : TabulatedSchedule
        The schedule, in ``coordinate``, on the knots ``u``.
    u : (n,) ndarray
        Knots :math:`u(\lambda_i)` in ``coordinate``, increasing.
    pdf : (n,) ndarray
        Density per unit ``u`` at the knots (normalised by the trapezoid rule).
    lam : (n,) ndarray
        The log-SNR grid of the profile, increasing.
    h : (n,) ndarray
        Entropy rate per unit :math:`\lambda` (nats) as estimated, before the floor.
    h_stderr : (n,) ndarray
        Its standard error (0 for closed forms and quadrature).
    method : str
        How ``h`` was obtained (``"closed-form"``, ``"quadrature"``, ``"monte-carlo"``, ... or
        ``"given"`` for :func:`schedule_from_rate`).
    h_floor : float
        Floor raised under ``h`` before the density was formed (:data:`H_FLOOR` by default).
    rule : str
        ``"sqrt-entropy"`` or ``"entropy"``.
    coordinate : str
        Name of the schedule's coordinate.
    floor : float
        Uniform mixture weight of the schedule.
    estimate : Estimate or None
        The model's estimate of ``h`` (with its provenance), ``None`` when ``h`` was given.
    """

    schedule: object
    u: np.ndarray
    pdf: np.ndarray
    lam: np.ndarray
    h: np.ndarray
    h_stderr: np.ndarray
    method: str
    h_floor: float
    rule: str
    coordinate: str
    floor: float
    estimate: object = field(default=None, repr=False, compare=False)

    @property
    def h_floored(self) -> np.ndarray:
        r""":math:`\max(h, h_{floor})`, the profile the density was built from (per unit :math:`\lambda`)."""
        return np.maximum(self.h, self.h_floor)

    def with_rule(self, rule: str | None = None, *, coordinate: str | None = None, floor: float | None = None,
                  name: str | None = None) -> "EntropicScheduleResult":
        r"""The schedule of the same profile under another rule, coordinate or floor (no new estimate of ``h``).

        Parameters
        ----------
        rule, coordinate, floor : optional
            Replace this result's value; ``None`` keeps it.
        name : str, optional
            Name of the new schedule (default as in :func:`entropic_schedule`).

        Returns
        -------
        EntropicScheduleResult
            Same ``lam``, ``h``, ``h_stderr``, ``method``, ``h_floor`` and ``estimate``.
        """
        return _build(self.lam, self.h, self.h_stderr, self.method, self.estimate,
                      rule=self.rule if rule is None else rule,
                      coordinate=self.coordinate if coordinate is None else coordinate,
                      floor=self.floor if floor is None else floor, h_floor=self.h_floor, name=name)


def _check_options(rule, coordinate, floor, h_floor) -> tuple[str, float, float]:
    check_choice(rule, "rule", RULES)
    name = get_coordinate(coordinate).name
    floor = as_float_scalar(floor, "floor")
    if not (0.0 <= floor < 1.0):
        raise ValueError(f"floor must lie in [0, 1); got {floor!r}")
    h_floor = as_float_scalar(h_floor, "h_floor")
    if not (np.isfinite(h_floor) and h_floor >= 0.0):
        raise ValueError(f"h_floor must be a finite number >= 0; got {h_floor!r}")
    return name, floor, h_floor


def _build(lam, h, h_stderr, method, estimate, *, rule, coordinate, floor, h_floor, name):
    from noisealloc.theory.schedules.base import TabulatedSchedule

    coord_name, floor, h_floor = _check_options(rule, coordinate, floor, h_floor)
    # np.maximum also lifts a tiny negative rounding of a quadrature h to the floor; NaN stays NaN and is
    # refused by entropic_pdf_values.
    u, pdf = entropic_pdf_values(lam, np.maximum(h, h_floor), rule=rule, coordinate=coordinate, floor=floor)
    name = _default_name(rule, floor) if name is None else name
    schedule = TabulatedSchedule(u, pdf, coordinate=coordinate, name=name)
    return EntropicScheduleResult(schedule, u, pdf, lam, h, h_stderr, method, h_floor, rule, coord_name, floor,
                                  estimate)


def schedule_from_rate(lam, h, *, h_stderr=0.0, rule: str = "sqrt-entropy", coordinate: str = "lambda",
                       floor: float = 0.0, h_floor: float = H_FLOOR, name: str | None = None,
                       method: str = "given") -> EntropicScheduleResult:
    r"""Entropic schedule of a given entropy-rate profile, floored at ``h_floor`` first.

    .. math:: p_u(u_i) \propto \big(\max(h(\lambda_i), h_{floor})\,|d\lambda/du|\big)^{\gamma},
              \qquad \gamma = \tfrac12 \text{ (sqrt-entropy) or } 1 \text{ (entropy)},

    normalised by the trapezoid rule in ``u`` and mixed with the uniform ``floor``
    (:func:`entropic_pdf_values`).  Use it when ``h`` comes from elsewhere (an allocation
    problem, a fitted loss profile); :func:`schedule_from_model` estimates ``h`` first.

    Parameters
    ----------
    lam : (n,) array_like
        Strictly increasing log-SNR grid, n >= 2.
    h : (n,) array_like
        Entropy rate per unit :math:`\lambda` (nats).
    h_stderr : float or (n,) array_like
        Its standard error, recorded in the result (default 0).
    rule : {"sqrt-entropy", "entropy"}
        Exponent 1/2 or 1.
    coordinate : str
        Coordinate ``u`` of the learners and of the schedule (default log-SNR).
    floor : float in [0, 1)
        Uniform mixture weight.
    h_floor : float >= 0
        Floor under ``h`` (default :data:`H_FLOOR`; 0 keeps ``h`` as given, and a zero then raises).
    name : str, optional
        Schedule name (default the rule, with ``+floor<eps>`` when ``floor > 0``).
    method : str
        Recorded as the result's ``method``.

    Returns
    -------
    EntropicScheduleResult
        The schedule with the profile (``estimate`` is ``None``).

    References
    ----------
    docs/THEORY.md §4 (b) (square-root law); §5.

    Examples
    --------
    >>> res = schedule_from_rate([0.0, 1.0, 2.0], [1.0, 4.0, 0.0])  # h underflowed to 0 at the last level
    >>> res.pdf[:2].round(6)  # sqrt(h) = 1, 2, 1e-150: mass 2.5
    array([0.4, 0.8])
    >>> bool(0 < res.pdf[-1] < 1e-149), res.schedule.name
    (True, 'sqrt-entropy')
    """
    lam = _check_lam(lam)
    h = check_finite(as_float_array(h, "h", shape=lam.shape), "h")
    se = np.broadcast_to(check_finite(as_float_array(h_stderr, "h_stderr"), "h_stderr"), lam.shape).copy()
    return _build(lam, h, se, str(method), None, rule=rule, coordinate=coordinate, floor=floor, h_floor=h_floor,
                  name=name)


def schedule_from_model(model, lam, *, rule: str = "sqrt-entropy", coordinate: str = "lambda", floor: float = 0.0,
                        n_samples: int | None = None, rng=None, h_floor: float = H_FLOOR,
                        name: str | None = None) -> EntropicScheduleResult:
    r"""Entropic schedule of a data model: estimate :math:`h(\lambda)`, floor it, build the schedule.

    The one pipeline from a data model to its (square-root) entropic schedule:

    1. :math:`h(\lambda_i) = \tfrac12 e^{\lambda_i}\,\mathrm{mmse}(\lambda_i)` per unit :math:`\lambda`
       from the model's posterior engine through
       :func:`noisealloc.theory.information.rates.model_entropy_rate`, which gives ``n_samples`` and
       ``rng`` to the models that estimate by Monte Carlo (and only to them): closed forms and
       quadrature are exact and ignore both;
    2. :math:`h \leftarrow \max(h, h_{floor})` (:data:`H_FLOOR`: :math:`h` underflows to 0 at high SNR);
    3. :math:`p_u \propto (h\,|d\lambda/du|)^\gamma` in ``coordinate`` with the uniform ``floor``
       (:func:`schedule_from_rate`).

    Parameters
    ----------
    model
        A data model of :mod:`noisealloc.theory` (``entropy_rate(lam, coordinate)`` returning an
        :class:`~noisealloc.theory.estimates.Estimate`).
    lam : (n,) array_like
        Strictly increasing log-SNR grid, n >= 2 (the knots of the schedule in :math:`\lambda`).
    rule : {"sqrt-entropy", "entropy"}
        Exponent 1/2 (Theorem 2) or 1 (uniform in entropic time).
    coordinate : str
        Coordinate ``u`` of the learners and of the schedule (default log-SNR).
    floor : float in [0, 1)
        Uniform mixture weight.
    n_samples : int, optional
        Monte-Carlo sample count per level (the model's default when ``None``).
    rng : numpy.random.Generator, int or None
        Monte-Carlo randomness (keyword-only); pass a seed for a reproducible schedule.
    h_floor : float >= 0
        Floor under ``h`` (default :data:`H_FLOOR`).
    name : str, optional
        Schedule name (default the rule, with ``+floor<eps>`` when ``floor > 0``).

    Returns
    -------
    EntropicScheduleResult
        The schedule, its knots and density, and ``h`` with its standard error, method and the
        model's full :class:`~noisealloc.theory.estimates.Estimate`.

    References
    ----------
    docs/THEORY.md §2 (entropy rate), §4 (b) (square-root law, its coordinate dependence), §5.

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.theory.models.dirac import DiracMixture
    >>> model = DiracMixture(np.array([[-1.0], [1.0]]))
    >>> res = schedule_from_model(model, np.linspace(-8.0, 8.0, 33))
    >>> res.method, res.schedule.name, res.schedule.coordinate.name
    ('quadrature', 'sqrt-entropy', 'lambda')
    >>> round(float(np.trapezoid(res.h, res.lam)), 3)  # close to H(pi) = log 2 = 0.693 on [-8, 8]
    0.693
    """
    from noisealloc.theory.information.rates import model_entropy_rate

    lam = _check_lam(lam)
    _check_options(rule, coordinate, floor, h_floor)  # refuse bad options before the (costly) estimate
    est = model_entropy_rate(model, lam, coordinate="lambda", n_samples=n_samples, rng=rng)
    h = np.asarray(est.value, dtype=np.float64)
    if h.shape != lam.shape:
        raise ValueError(f"model.entropy_rate returned shape {h.shape} for lam of shape {lam.shape}")
    h_se = np.broadcast_to(np.asarray(est.stderr, dtype=np.float64), h.shape).copy()
    return _build(lam, h, h_se, est.method, est, rule=rule, coordinate=coordinate, floor=floor, h_floor=h_floor,
                  name=name)


@dataclass(frozen=True)
class PopulationSchedule:
    """An entropic schedule of the population (manifold-smoothed) law of a sample.

    Attributes
    ----------
    result : EntropicScheduleResult
        The schedule with its h profile on the requested grid (``result.schedule``, ``result.h``,
        ``result.h_stderr``, ``result.method``).
    law : SmoothedEmpiricalLaw
        The smoothed law whose h was estimated.
    n_levels, n_samples : int
        Levels at which h was estimated and Monte-Carlo samples per level.
    """

    result: object
    law: SmoothedEmpiricalLaw
    n_levels: int
    n_samples: int

    @property
    def plateau(self) -> float:
        """The high-SNR plateau ``d/2`` of the law's h (nats per unit log-SNR)."""
        return self.law.rank / 2.0


def population_schedule(x, lam, *, rule: str = "sqrt-entropy", coordinate: str = "lambda", floor: float = 0.0,
                        n_levels: int = SMOOTHED_LEVELS, n_samples: int = SMOOTHED_SAMPLES, rng=None,
                        name: str | None = None, law: SmoothedEmpiricalLaw | None = None) -> PopulationSchedule:
    r"""Entropic schedule of the manifold-smoothed law of a sample (its population entropy rate).

    The law is :func:`smoothed_empirical_law` of ``x``; its :math:`h` is estimated by Monte Carlo
    at ``min(n_levels, len(lam))`` uniform levels spanning ``lam`` and interpolated linearly in
    :math:`\log h` onto ``lam`` (h is positive, smooth, and varies over decades at low SNR); the
    schedule is then :func:`~noisealloc.theory.schedules.entropic.schedule_from_rate`,
    :math:`p(\lambda) \propto h(\lambda)^{\gamma}` with :math:`\gamma = 1/2` (sqrt-entropy)
    or 1 (entropy), in the coordinate ``coordinate``.

    Parameters
    ----------
    x : (n, D) array_like
        The sample (equally weighted points), e.g. a training split of images.
    lam : (L,) array_like
        Strictly increasing log-SNR grid of the schedule, L >= 2.
    rule : {"sqrt-entropy", "entropy"}
    coordinate : str
        Coordinate of the schedule (default log-SNR).
    floor : float in [0, 1)
        Uniform mixture weight.
    n_levels : int
        Most levels at which h is estimated (default :data:`SMOOTHED_LEVELS`).
    n_samples : int
        Monte-Carlo samples per level (default :data:`SMOOTHED_SAMPLES`).
    rng : numpy.random.Generator, int or None
        Randomness of the Monte-Carlo h.
    name : str, optional
        Schedule name (default the rule's).
    law : SmoothedEmpiricalLaw, optional
        A law already built from ``x`` (skips the neighbour search and local PCAs).

    Returns
    -------
    PopulationSchedule

    References
    ----------
    docs/THEORY.md §2 ("Empirical versus population entropy rate"), §4 (b), §5.
    """
    from noisealloc.theory.schedules.entropic import schedule_from_rate
    from noisealloc.theory.information.rates import model_entropy_rate

    lam = check_finite(as_float_array(lam, "lam", ndim=1), "lam")
    if lam.size < 2 or not np.all(np.diff(lam) > 0):
        raise ValueError(f"lam must be a strictly increasing grid of at least 2 levels; got {lam.size} levels")
    n_levels = check_count(n_levels, "n_levels")
    n_samples = check_count(n_samples, "n_samples")
    if n_levels < 2:
        raise ValueError(f"n_levels must be >= 2; got {n_levels}")
    _check_options(rule, coordinate, floor, 0.0)  # before the Monte-Carlo work
    if law is not None and np.iscomplexobj(x):  # x is not read when its law is given, but never silently cut
        raise ValueError("x must be real; got a complex array")
    pop = smoothed_empirical_law(x) if law is None else law
    n_lev = min(n_levels, lam.size)
    coarse = np.linspace(lam[0], lam[-1], n_lev)
    est = model_entropy_rate(pop, coarse, n_samples=n_samples, rng=rng)
    log_h = np.interp(lam, coarse, np.log(np.maximum(est.value, 1e-300)))
    h_se = np.interp(lam, coarse, est.stderr)
    method = f"monte-carlo, manifold-smoothed law ({n_lev} levels x {n_samples} samples, log-interpolated)"
    res = schedule_from_rate(lam, np.exp(log_h), h_stderr=h_se, rule=rule, coordinate=coordinate, floor=floor,
                             method=method, name=name)
    return PopulationSchedule(result=res, law=pop, n_levels=n_lev, n_samples=n_samples)


# ----------------------------------------------------------------------------- which law a schedule comes from

#: Choices of the law of a data set's schedule (docs/THEORY.md section 2, "Empirical versus population").
LAWS = ("auto", "empirical", "smoothed")
#: Monte-Carlo samples per level of the empirical law's h when none are asked for.
EMPIRICAL_SAMPLES = 4096
#: Relative spread of the weights below which atoms count as equally weighted (a sample).
EQUAL_WEIGHTS_RTOL = 1e-12


@dataclass(frozen=True)
class LawChoice:
    """The law an entropic schedule comes from, and why.

    Attributes
    ----------
    law : str
        ``"empirical"`` (the atoms as a Dirac mixture: the rate of a model that memorises them),
        ``"smoothed"`` (the manifold-smoothed law of the sample: a population rate that plateaus at
        d/2) or ``"exact"`` (the model is a population law already: Gaussian manifold, circle).
    reason : str
        One line saying why (printed by the command line and stored in its JSON).
    """

    law: str
    reason: str


def resolve_law(model, law: str = "auto") -> LawChoice:
    """The one rule that picks the law of a data model's entropic schedule.

    ``"auto"`` reads the model: a finite sample of a continuous law (``model.sample_of_continuous_law``,
    set by the ``digits`` and ``mnist`` loaders) gets the smoothed law, a mixture that is discrete
    by construction (``dirac:``, the atoms of an npz file) the empirical law, and a model that is not
    a finite sample is its own population law (``"exact"``).  The smoothed law needs equally weighted
    atoms (a sample).

    Parameters
    ----------
    model : DataModel
        A data model of :mod:`noisealloc.theory.models`.
    law : {"auto", "empirical", "smoothed"}
        The choice; an explicit choice applies to finite samples (models with ``atoms``) only.

    Returns
    -------
    LawChoice

    Raises
    ------
    ValueError
        For an unknown choice, an explicit choice on a population law, or ``"smoothed"`` on atoms
        with unequal weights.

    References
    ----------
    docs/THEORY.md section 2 ("Empirical versus population entropy rate") and section 5.

    Examples
    --------
    >>> from noisealloc.theory.models.datasets import load_data
    >>> resolve_law(load_data("dirac:K=3,D=1,sep=2")).law, resolve_law(load_data("gaussian:D=4,k=2")).law
    ('empirical', 'exact')
    """
    law = check_choice(law, "law", LAWS)
    if not hasattr(model, "atoms"):
        if law != "auto":
            raise ValueError(f"law={law!r} applies to a finite sample (atoms); this {type(model).__name__} is a "
                             "population law already, so its h is exact (use law='auto')")
        return LawChoice("exact", "the model is a population law")
    if law == "auto":
        if getattr(model, "sample_of_continuous_law", False):
            law, reason = "smoothed", "a sample of a continuous law (images)"
        else:
            law, reason = "empirical", "atoms that are discrete by construction"
    else:
        reason = f"law={law!r} asked for"
    if law == "smoothed":
        w = np.asarray(model.weights, dtype=np.float64)
        if np.ptp(w) > EQUAL_WEIGHTS_RTOL * w.max():
            raise ValueError("law='smoothed' needs equally weighted atoms (a sample); these atoms have unequal "
                             "weights (repeated rows are merged into one atom of larger weight)")
    return LawChoice(law, reason)


@dataclass(frozen=True)
class DataSchedule:
    """The entropic schedule of a data set under the law :func:`resolve_law` picked.

    Attributes
    ----------
    result : EntropicScheduleResult
        The schedule and the h profile on the requested grid.
    law : LawChoice
        Which law, and why.
    n_samples : int or None
        Monte-Carlo samples per level (None for exact rules).
    n_levels : int
        Levels at which h was estimated (the smoothed law's h is estimated on a coarser grid and
        interpolated).
    smoothed : SmoothedEmpiricalLaw or None
        The smoothed law (for ``law.law == "smoothed"``): its intrinsic dimension and rank.
    """

    result: EntropicScheduleResult
    law: LawChoice
    n_samples: int | None
    n_levels: int
    smoothed: SmoothedEmpiricalLaw | None = None

    @property
    def plateau(self) -> float | None:
        """The high-SNR plateau d/2 of the smoothed law's h (None for the other laws)."""
        return None if self.smoothed is None else self.smoothed.rank / 2.0


def schedule_from_data(model, lam, *, law: str = "auto", rule: str = "sqrt-entropy", coordinate: str = "lambda",
                       floor: float = 0.0, n_samples: int | None = None, rng=None) -> DataSchedule:
    r"""The entropic schedule of a data set: the one pipeline behind ``noisealloc schedule --from-data``.

    Picks the law (:func:`resolve_law`), then builds :math:`p_u \propto h_u^\gamma` from the
    empirical or exact law (:func:`schedule_from_model`) or from the manifold-smoothed law of the
    sample (:func:`population_schedule`, h at :data:`SMOOTHED_LEVELS` levels interpolated to ``lam``).

    Parameters
    ----------
    model : DataModel
        The data (e.g. ``load_data("digits")``).
    lam : (n,) array_like
        Strictly increasing log-SNR grid of the schedule's knots.
    law : {"auto", "empirical", "smoothed"}
        Which law (:func:`resolve_law`).
    rule, coordinate, floor
        As :func:`schedule_from_model`.
    n_samples : int, optional
        Monte-Carlo samples per level (default :data:`EMPIRICAL_SAMPLES`, or :data:`SMOOTHED_SAMPLES`
        for the smoothed law).
    rng : numpy.random.Generator, int or None
        Monte-Carlo randomness (keyword-only).

    Returns
    -------
    DataSchedule

    References
    ----------
    docs/THEORY.md section 2 (the laws), section 4 (b) (the square-root law).
    """
    choice = resolve_law(model, law)
    if choice.law == "smoothed":
        pop = smoothed_empirical_law(model.atoms)
        n = SMOOTHED_SAMPLES if n_samples is None else n_samples
        ps = population_schedule(model.atoms, lam, rule=rule, coordinate=coordinate, floor=floor,
                                 n_levels=SMOOTHED_LEVELS, n_samples=n, rng=rng, law=pop)
        return DataSchedule(ps.result, choice, ps.n_samples, ps.n_levels, pop)
    n = EMPIRICAL_SAMPLES if n_samples is None else n_samples
    res = schedule_from_model(model, lam, rule=rule, coordinate=coordinate, floor=floor, n_samples=n, rng=rng)
    return DataSchedule(res, choice, n if getattr(model, "monte_carlo", False) else None, len(res.lam))


# ----------------------------------------------------------------------------- loss factor of any schedule

#: Points of the grid on which the loss factor of a schedule is integrated (h interpolated linearly).
LOSS_FACTOR_GRID = 4001


@dataclass(frozen=True)
class LossFactor:
    r"""The independent-learner loss factor of a schedule against an entropy-rate profile (Theorem 2).

    Attributes
    ----------
    factor : float
        :math:`F(p) \ge 1`; ``math.inf`` when the schedule puts no mass on a level where
        :math:`h > 0` (that level's learner never trains).
    covered : float
        Fraction of the profile's h-mass (in the coordinate) inside the schedule's interval.
    efficiency : float
        :math:`1/F(p) \in [0, 1]` (0 for a schedule that starves a level).
    coordinate : str
        The learners' coordinate.
    """

    factor: float
    covered: float
    efficiency: float
    coordinate: str


def schedule_loss_factor(lam, h, schedule, *, coordinate: str = "lambda") -> LossFactor:
    r"""Independent-learner loss factor of ``schedule`` on the profile ``h(lam)``: the one rule.

    Under decoupling with the ELBO weight, :math:`\omega_u c \propto h_u = h\,|d\lambda/du|`, so
    (:func:`independent_learner_factor`)

    .. math:: F(p) = \int \frac{h_u}{p_u}\,du \Big/ \Big(\int \sqrt{h_u}\,du\Big)^2,

    on :data:`LOSS_FACTOR_GRID` points of the profile's interval (h interpolated linearly in
    :math:`\lambda`), with the schedule's density zero outside its own interval.

    Parameters
    ----------
    lam : (n,) array_like
        Increasing log-SNR grid of the profile.
    h : (n,) array_like
        Entropy rate per unit :math:`\lambda` (>= 0).
    schedule : Schedule
        Any schedule (moved to ``coordinate`` exactly).
    coordinate : str
        The learners' coordinate.

    Returns
    -------
    LossFactor

    References
    ----------
    docs/THEORY.md section 4 (b), Theorem 2.
    """
    lam = check_finite(as_float_array(lam, "lam", ndim=1), "lam")
    h = check_finite(as_float_array(h, "h", shape=lam.shape), "h")
    if lam.size < 2 or np.any(np.diff(lam) <= 0):
        raise ValueError("lam must be strictly increasing with at least 2 points")
    if np.any(h < 0):
        raise ValueError("h must be >= 0")
    c = get_coordinate(coordinate)
    fine = np.linspace(lam[0], lam[-1], LOSS_FACTOR_GRID)
    h_fine = np.interp(fine, lam, h)
    u = c.from_lam(fine)
    order = np.argsort(u)
    u, h_fine, fine = u[order], h_fine[order], fine[order]
    h_u = h_fine * np.abs(c.dlam_du(u))
    s_u = schedule.to(c.name)
    lo, hi = s_u.interval
    inside = (u >= lo) & (u <= hi)
    p = np.zeros_like(u)
    p[inside] = s_u.pdf(u[inside])
    total = float(np.trapezoid(h_u, u))
    covered = float(np.trapezoid(np.where(inside, h_u, 0.0), u) / total) if total > 0 else 0.0
    factor = independent_learner_factor(u, h_u, p)
    return LossFactor(factor, covered, 0.0 if math.isinf(factor) else 1.0 / factor, c.name)
