r"""The information profile of a data model: one pipeline from a model and a grid to every number of docs/THEORY.md section 2.

:func:`information_profile` computes, on a grid of log-SNR levels :math:`\lambda_1 < \dots < \lambda_L`,

* :math:`\mathrm{mmse}(\lambda)`, the generative entropy rate :math:`h(\lambda) = \tfrac12 e^\lambda\,
  \mathrm{mmse}(\lambda)` (per unit :math:`\lambda`), and :math:`H(\lambda) = H[x_0 \mid x]` (discrete
  data) or :math:`I(\lambda) = I(x_0; x)` (continuous data), each an
  :class:`~noisealloc.theory.estimates.Estimate` with its standard error and method;
* for discrete data, the budget check :math:`\int_a^b h\,d\lambda = H(a) - H(b)`
  (:class:`~noisealloc.theory.information.budget.BudgetCheck`, the one rule of
  :data:`~noisealloc.theory.information.budget.BUDGET_RULE`);
* on request, the I-MMSE check at chosen levels (:class:`~noisealloc.theory.information.i_mmse.IMMSECheck`).

How each is computed is decided by the model's declared flags (:mod:`noisealloc.theory.models.protocol`):

* ``monte_carlo = False`` (closed forms, quadrature): ``model.information(lam)`` in one pass; the
  budget on the grid itself when it is uniform and resolves :math:`h`
  (:func:`~noisealloc.theory.information.budget.budget_check_on_grid`: Gregory's rule, its error estimated
  against every other level, to ``budget_rtol``), otherwise by adaptive Gauss--Kronrod of :math:`h`
  over ``quadrature_interval`` (default the grid's ends); either against the model's own :math:`H`
  at the interval's ends.
* ``monte_carlo = True``: one run of ``model.information_samples(lam, n_samples=, rng=)`` (common
  random numbers across levels) reduced by ``model.information_from_samples``; the budget by the
  trapezoid rule on the grid, its standard error propagated sample by sample
  (:func:`~noisealloc.theory.information.budget.budget_check_from_samples`).  The I-MMSE check is not
  made (a centred difference of Monte-Carlo estimates has no usable accuracy): ``i_mmse`` is
  ``None``.

The command ``noisealloc entropy``, figure 1 and :mod:`noisealloc.verify.checks` all consume this
result; none of them recomputes a rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.errors import as_float_array, as_float_scalar, check_finite, check_interval
from noisealloc.theory.estimates import Estimate
from noisealloc.theory.information.budget import BudgetCheck, budget_check, budget_check_from_samples, budget_check_on_grid
from noisealloc.theory.information.i_mmse import IMMSECheck, i_mmse_check
from noisealloc.theory.entropy_rate import rate_jacobian
from noisealloc.theory.models.protocol import check_data_model, monte_carlo_options
from noisealloc.theory.tolerances import BUDGET_RTOL

#: Initial equal panels of the adaptive budget quadrature of deterministic models: h is smooth in lam on
#: the scale of a unit, so G10/K21 on a few wide panels plus bisection where the error test asks places
#: the levels (on [-16, 8], 5 atoms in the plane, at BUDGET_RTOL: 4 panels -> 168 levels, as many as 8;
#: 16 panels -> 336 levels, all of the first round).
BUDGET_PANELS = 4

__all__ = ["InformationProfile", "information_profile"]


@dataclass(frozen=True)
class InformationProfile:
    r"""Every information quantity of a data model on a grid, with the budget and I-MMSE checks.

    Attributes
    ----------
    lam : ndarray, shape (L,)
        The increasing log-SNR grid.
    mmse : Estimate
        :math:`\mathrm{mmse}(\lambda)` (summed over coordinates).
    entropy_rate : Estimate
        :math:`h(\lambda) = \tfrac12 e^\lambda\,\mathrm{mmse}(\lambda)` per unit :math:`\lambda` (nats);
        :meth:`entropy_rate_in` moves it to another coordinate.
    conditional_entropy : Estimate or None
        :math:`H(\lambda)` in nats (discrete data; for a mixture of Gaussian manifolds the
        component's conditional entropy).
    mutual_information : Estimate or None
        :math:`I(\lambda)` in nats (continuous data).
    method : str
        Method of the estimates (``'quadrature'``, ``'closed-form'``, ``'monte-carlo'``, ...).
    discrete : bool
        The model's ``discrete`` flag.
    monte_carlo : bool
        The model's ``monte_carlo`` flag.
    entropy : float or None
        :math:`H(\pi)` of discrete data.
    budget : BudgetCheck or None
        The budget check (discrete data, when requested).
    i_mmse : IMMSECheck or None
        The I-MMSE check at ``i_mmse_levels`` (deterministic models, when requested).
    n_samples : int or None
        Monte-Carlo sample count.
    seed : int or None
        Monte-Carlo seed (drawn and recorded when none was given).
    info : dict
        Provenance: the engine's options and counters (Monte Carlo), or the quadrature's
        ``error_check`` and counters.

    References
    ----------
    docs/THEORY.md sections 2 and 3.
    """

    lam: np.ndarray
    mmse: Estimate
    entropy_rate: Estimate
    conditional_entropy: Estimate | None
    mutual_information: Estimate | None
    method: str
    discrete: bool
    monte_carlo: bool
    entropy: float | None = None
    budget: BudgetCheck | None = None
    i_mmse: IMMSECheck | None = None
    n_samples: int | None = None
    seed: int | None = None
    info: dict = field(default_factory=dict, compare=False)

    def entropy_rate_in(self, coordinate="lambda") -> Estimate:
        r"""The entropy rate per unit of ``coordinate``: :math:`h_u(u(\lambda)) = h(\lambda)\,|d\lambda/du|`.

        Parameters
        ----------
        coordinate : str or Coordinate
            ``"lambda"``, ``"sigma"``, ``"log-sigma"``, ``"t-cosine"``, ...

        Returns
        -------
        Estimate
            Of shape ``(L,)``, at the grid's levels; ``info["coordinate"]`` names the coordinate.

        References
        ----------
        docs/THEORY.md section 2 (the entropy rate in another coordinate).
        """
        jac, name = rate_jacobian(self.lam, coordinate)
        h = self.entropy_rate
        info = dict(h.info)
        info["coordinate"] = name
        return Estimate(h.value * jac, h.stderr * jac, h.method, h.error_check, h.n_samples, info)


def _grid(lam) -> np.ndarray:
    lam = check_finite(as_float_array(lam, "lam"), "lam")
    if lam.ndim != 1 or lam.size < 3 or np.any(np.diff(lam) <= 0):
        raise ValueError(f"lam must be a strictly increasing 1-D grid of at least 3 levels (the budget uses "
                         f"Simpson's rule); got shape {lam.shape}"
                         + ("" if lam.ndim != 1 or lam.size < 3 else " with a non-increasing step"))
    return lam


def information_profile(model, lam, *, n_samples=None, rng=None, budget: bool = True, i_mmse_levels=None,
                        quadrature_interval=None, budget_rtol: float = BUDGET_RTOL,
                        engine_options=None) -> InformationProfile:
    r"""MMSE, entropy rate, :math:`H` or :math:`I`, the budget and the I-MMSE checks of ``model`` on ``lam``.

    Parameters
    ----------
    model : DataModel
        Any data model (:mod:`noisealloc.theory.models.protocol`).
    lam : array_like, shape (L,)
        Strictly increasing log-SNR grid, ``L >= 3``.
    n_samples : int, optional
        Monte-Carlo sample count (Monte-Carlo models only; the model's default otherwise).
    rng : Generator, int or None
        Monte-Carlo randomness (Monte-Carlo models only); an integer seed is recorded.
    budget : bool
        Compute the budget check (discrete data only: continuous data have no finite :math:`H`).
    i_mmse_levels : array_like, optional
        Levels of the I-MMSE check (deterministic models only; see the module docstring).
    quadrature_interval : (float, float), optional
        Interval of the adaptive budget quadrature of deterministic models (default: the grid's
        ends, integrated on the grid's own levels when their estimate meets ``budget_rtol``).
        Monte-Carlo models are integrated on the grid, where their per-sample values are.
    budget_rtol : float
        Relative target of that adaptive quadrature (default
        :data:`~noisealloc.theory.tolerances.BUDGET_RTOL`; its error estimate enters the budget rule's
        tolerance), started from :data:`BUDGET_PANELS` equal panels.
    engine_options : dict, optional
        Options of a Monte-Carlo model's ``information_samples`` (for a Dirac mixture:
        ``block_size``, ``float32_distances``, ``progress``, ``stratify``).  An error for a
        deterministic model, which has no engine.

    Returns
    -------
    InformationProfile

    Raises
    ------
    TypeError
        If ``model`` is not a data model, or ``engine_options`` are given for a deterministic model.
    ValueError
        For a bad grid or interval.

    References
    ----------
    docs/THEORY.md section 2 (quantities, budget identity, I-MMSE) and section 3 (the models).

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.theory.models.dirac import DiracMixture
    >>> prof = information_profile(DiracMixture([-1.0, 1.0]), np.linspace(-12.0, 12.0, 49), i_mmse_levels=[0.0])
    >>> prof.method, prof.budget.holds, prof.i_mmse.holds
    ('quadrature', True, True)
    >>> round(prof.budget.target, 6), round(prof.entropy, 6)   # H(-12) - H(12) and H(pi) = log 2
    (0.693144, 0.693147)
    """
    check_data_model(model)
    lam = _grid(lam)
    budget_rtol = as_float_scalar(budget_rtol, "budget_rtol")
    if quadrature_interval is not None:
        if np.ndim(quadrature_interval) != 1 or np.size(quadrature_interval) != 2:
            raise ValueError(f"quadrature_interval must be a pair (lo, hi); got {quadrature_interval!r}")
        quadrature_interval = check_interval(*quadrature_interval, "quadrature_interval")
    if i_mmse_levels is not None:
        i_mmse_levels = as_float_array(i_mmse_levels, "i_mmse_levels")
    if model.monte_carlo:
        smp = model.information_samples(lam, **monte_carlo_options(model, n_samples=n_samples, rng=rng),
                                        **dict(engine_options or {}))
        est = model.information_from_samples(smp)
        info = dict(smp.info)
        seed = info.get("seed")
    else:
        if engine_options:
            raise TypeError(f"engine_options {sorted(engine_options)} apply to Monte-Carlo models; {model!r} is "
                            "deterministic (monte_carlo=False)")
        smp = None
        est = model.information(lam)
        info = {"error_check": est.mmse.error_check, **dict(est.mmse.info)}
        seed = None
    cond = est.conditional_entropy if est.conditional_entropy is not None else est.component_entropy
    entropy = float(model.entropy) if model.discrete else None
    chk = None
    if budget and model.discrete:
        if smp is not None:
            chk = budget_check_from_samples(smp, entropy, float(model.total_variance))
        else:
            if quadrature_interval is None:  # the grid's own levels, when they resolve h (no new levels)
                chk = budget_check_on_grid(lam, est.mmse.value, cond.value, cond.error_check or 0.0,
                                           entropy=entropy, total_variance=float(model.total_variance),
                                           rtol=budget_rtol)
            if chk is None:
                lo, hi = (lam[0], lam[-1]) if quadrature_interval is None else quadrature_interval
                lo, hi = check_interval(lo, hi, "quadrature_interval")
                chk = budget_check(model, lo, hi, rtol=budget_rtol, n_panels=BUDGET_PANELS)
    immse = None
    if i_mmse_levels is not None and not model.monte_carlo:
        immse = i_mmse_check(model, i_mmse_levels)
    return InformationProfile(
        lam=lam, mmse=est.mmse, entropy_rate=est.entropy_rate, conditional_entropy=cond if model.discrete else None,
        mutual_information=est.mutual_information, method=est.entropy_rate.method, discrete=bool(model.discrete),
        monte_carlo=bool(model.monte_carlo), entropy=entropy, budget=chk, i_mmse=immse,
        n_samples=est.mmse.n_samples, seed=seed, info=info,
    )
