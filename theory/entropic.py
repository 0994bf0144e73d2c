r"""Entropic training schedules from an entropy-rate profile (THEORY.md section 4 (b)).

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

import numpy as np

from noisealloc.theory.coordinates import get_coordinate
from noisealloc.theory.errors import as_float_array, check_choice, check_finite

__all__ = [
    "RULES",
    "entropic_pdf_values",
    "entropic_schedule",
    "independent_learner_factor",
    "schedule_from_model",
]

RULES = ("sqrt-entropy", "entropy")


def _check_profile(lam, h):
    lam = check_finite(as_float_array(lam, "lam", ndim=1), "lam")
    h = check_finite(as_float_array(h, "h", ndim=1), "h")
    if lam.shape != h.shape:
        raise ValueError(f"lam and h must have the same shape; got {lam.shape} and {h.shape}")
    if lam.size < 2:
        raise ValueError(f"lam must hold at least 2 levels; got {lam.size}")
    if np.any(np.diff(lam) <= 0):
        i = int(np.flatnonzero(np.diff(lam) <= 0)[0])
        raise ValueError(f"lam must be strictly increasing; lam[{i}] = {lam[i]!r} >= lam[{i + 1}] = {lam[i + 1]!r}")
    if np.any(h < 0):
        i = int(np.flatnonzero(h < 0)[0])
        raise ValueError(f"h must be >= 0 (an entropy rate); h[{i}] = {h[i]!r}")
    return lam, h


def entropic_pdf_values(lam, h, *, rule: str = "sqrt-entropy", coordinate: str = "lambda", floor: float = 0.0):
    r"""Unnormalised-then-normalised entropic density at the knots, in coordinate ``u``.

    .. math:: p_u(u_i) \propto h_u(u_i)^{\gamma}, \quad \gamma = \tfrac12 \text{ (sqrt-entropy) or } 1
              \text{ (entropy)}, \quad h_u = h\,|d\lambda/du|,

    normalised with the trapezoid rule in ``u`` (exact for the piecewise-linear
    density that :class:`~noisealloc.theory.schedules.TabulatedSchedule` builds),
    then mixed with a uniform floor.

    Parameters
    ----------
    lam : (n,) array
        Strictly increasing log-SNR grid.
    h : (n,) array
        Entropy rate per unit :math:`\lambda` (nats), :math:`h \ge 0`.
    rule : {"sqrt-entropy", "entropy"}
    coordinate : str
        Coordinate ``u`` of the schedule (default log-SNR).
    floor : float in [0, 1)
        Weight of the uniform mixture component.

    Returns
    -------
    u : (n,) array
        Knots in ``u``, increasing.
    pdf : (n,) array
        Density per unit ``u`` at the knots, integrating to one (trapezoid).
    """
    lam, h = _check_profile(lam, h)
    check_choice(rule, "rule", RULES)
    floor = float(floor)
    if not (0.0 <= floor < 1.0):
        raise ValueError(f"floor must lie in [0, 1); got {floor!r}")
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
            f"the entropic density vanishes at u = {u[i]!r} (h = 0 there or underflow); "
            "pass floor > 0 or restrict the interval"
        )
    return u, pdf


def entropic_schedule(lam, h, *, rule: str = "sqrt-entropy", coordinate: str = "lambda", floor: float = 0.0,
                      name: str | None = None):
    r"""The (square-root) entropic schedule as a tabulated density in ``coordinate``.

    See :func:`entropic_pdf_values` for the formula; the result is a
    :class:`~noisealloc.theory.schedules.TabulatedSchedule` (piecewise-linear
    pdf, exact CDF and inverse CDF) in the coordinate ``u``.
    """
    from noisealloc.theory.schedules import TabulatedSchedule

    u, pdf = entropic_pdf_values(lam, h, rule=rule, coordinate=coordinate, floor=floor)
    if name is None:
        name = f"{rule}" + (f"+floor{floor:g}" if floor else "")
    return TabulatedSchedule(u, pdf, coordinate=coordinate, name=name)


def independent_learner_factor(u, omega_c, p):
    r"""Loss factor of an allocation in the independent-learner regime (Theorem 2).

    .. math:: F(p) = \int \frac{\omega_u c}{p_u}\,du \Big/ \Big(\int \sqrt{\omega_u c}\,du\Big)^2 \;\ge 1,

    with equality iff :math:`p_u \propto \sqrt{\omega_u c}`.  Integrals by the
    trapezoid rule on the grid ``u``.  Under decoupling with the ELBO weight,
    :math:`\omega_u c \propto h_u`.

    Parameters
    ----------
    u : (n,) array, increasing
    omega_c : (n,) array, >= 0
        Evaluation weight times per-level cost, per unit ``u``.
    p : (n,) array, > 0
        Allocation density per unit ``u`` (need not be normalised: it is
        normalised on the grid first).
    """
    u = check_finite(as_float_array(u, "u", ndim=1), "u")
    omega_c = check_finite(as_float_array(omega_c, "omega_c", shape=u.shape), "omega_c")
    p = check_finite(as_float_array(p, "p", shape=u.shape), "p")
    if np.any(np.diff(u) <= 0):
        raise ValueError("u must be strictly increasing")
    if np.any(omega_c < 0):
        raise ValueError("omega_c must be >= 0")
    if np.any(p <= 0):
        i = int(np.flatnonzero(p <= 0)[0])
        raise ValueError(f"p must be > 0 wherever the cost is counted; p[{i}] = {p[i]!r} (an allocation that "
                         "starves a level has an infinite independent-learner loss)")
    p = p / np.trapezoid(p, u)
    return float(np.trapezoid(omega_c / p, u) / np.trapezoid(np.sqrt(omega_c), u) ** 2)


def schedule_from_model(model, lam_min: float = -12.0, lam_max: float = 12.0, *, levels: int = 257,
                        rule: str = "sqrt-entropy", coordinate: str = "lambda", floor: float = 0.0,
                        rng=None, **estimate_opts):
    r"""Entropic schedule of a data model: :math:`h` from the posterior engine, then :func:`entropic_schedule`.

    Parameters
    ----------
    model
        Any data model of :mod:`noisealloc.theory` (``entropy_rate(lam)`` returning an Estimate).
    levels : int
        Number of log-SNR levels, uniform on ``[lam_min, lam_max]``.
    estimate_opts
        Passed to ``model.entropy_rate`` (e.g. ``n_samples`` for Monte Carlo).

    Returns
    -------
    schedule : TabulatedSchedule
    estimate : Estimate
        The entropy rate per unit :math:`\lambda` it was built from (with its method and stderr).
    """
    from noisealloc.theory.errors import check_interval

    lo, hi = check_interval(lam_min, lam_max, "lam interval")
    if int(levels) < 2:
        raise ValueError(f"levels must be >= 2; got {levels!r}")
    lam = np.linspace(lo, hi, int(levels))
    if rng is not None:
        estimate_opts["rng"] = rng
    est = model.entropy_rate(lam, **estimate_opts)
    return entropic_schedule(lam, est.value, rule=rule, coordinate=coordinate, floor=floor), est
