r"""What a data model provides: the protocol every model of docs/THEORY.md section 3 satisfies.

A *data model* is a law :math:`P` of :math:`x_0 \in \mathbb{R}^D` with the posterior quantities of
docs/THEORY.md sections 2 and 3 along the forward process :math:`x = x_0 + e^{-\lambda/2}\varepsilon`
(VE/EDM scaling; a VP observation divided by :math:`\alpha` is the same).  The models of the
toolkit (:class:`~noisealloc.theory.models.dirac.DiracMixture`,
:class:`~noisealloc.theory.models.gaussian.GaussianManifold`,
:class:`~noisealloc.theory.models.gaussian.GaussianManifoldMixture`,
:class:`~noisealloc.theory.models.manifolds.Circle`) all satisfy :class:`DataModel`; a user's own model
does too once it has the attributes and methods below.

Two declared attributes say what kind of model it is, so that no caller has to inspect signatures:

``discrete``
    ``True`` when :math:`P` is discrete (a Dirac mixture): :math:`H(\lambda) = H[x_0 \mid x]` is
    finite, the model has ``entropy`` (:math:`H(\pi)`) and ``conditional_entropy(lam)``, and the
    budget identity :math:`\int h\,d\lambda = H(\pi)` applies.  ``False`` for continuous laws, which
    have ``mutual_information(lam)`` instead.
``monte_carlo``
    ``True`` when the model's information quantities (``information``, ``mmse``,
    ``conditional_entropy``/``mutual_information``, ``entropy_rate``) are Monte-Carlo estimates:
    those methods then take the keyword options ``n_samples`` and ``rng``, and the model has
    ``information_samples(lam, *, n_samples, rng)`` returning the per-sample values
    (:class:`~noisealloc.theory.posterior.engine.InformationSamples`), from which integrals over
    :math:`\lambda` get honest standard errors.  ``False``: closed forms or deterministic quadrature,
    whose methods take no such options (an unknown option is a ``TypeError``, as in any Python call).

:func:`monte_carlo_options` is the one place that turns ``n_samples``/``rng`` into the keyword
arguments a given model takes.
"""

from __future__ import annotations

import inspect
from typing import Protocol, runtime_checkable

import numpy as np

from noisealloc.theory.estimates import Estimate, InformationEstimates

_MISSING = object()

__all__ = ["DataModel", "DiscreteDataModel", "ContinuousDataModel", "MonteCarloDataModel", "monte_carlo_options",
           "check_data_model"]


@runtime_checkable
class DataModel(Protocol):
    r"""What every data model provides (docs/THEORY.md section 3: "Each model exposes ...").

    Attributes
    ----------
    dim : int
        Ambient dimension :math:`D` of :math:`x_0`.
    discrete : bool
        :math:`P` is discrete (finite :math:`H(\pi)`; see the module docstring).
    monte_carlo : bool
        The information methods are Monte-Carlo estimates and take ``n_samples`` and ``rng``.

    Notes
    -----
    Methods (``lam`` any shape; results of that shape unless stated):

    * ``sample_x0(n, *, rng=None) -> ndarray (n, D)``; ``sample_x(lam, n, *, rng=None) -> (x0, x)``;
    * ``denoiser(x, lam) -> (n, D)``: :math:`m(x, \lambda) = E[x_0 \mid x]`;
      ``posterior_cov(x, lam) -> (n, D, D)``: :math:`C(x, \lambda)`;
    * ``information(lam, **options) -> InformationEstimates`` (one pass: MMSE, entropy rate and
      :math:`H` or :math:`I`); ``mmse(lam, **options) -> Estimate``;
      ``entropy_rate(lam, coordinate="lambda", **options) -> Estimate``, the rate per unit of the
      coordinate :math:`u`, :math:`h_u = h\,|d\lambda/du|`.

    ``options`` are ``n_samples`` and ``rng`` when ``monte_carlo`` (plus model-specific documented
    options); nothing else is accepted.

    References
    ----------
    docs/THEORY.md sections 2 and 3.
    """

    dim: int
    discrete: bool
    monte_carlo: bool

    def sample_x0(self, n: int, *, rng=None) -> np.ndarray: ...

    def sample_x(self, lam, n: int, *, rng=None) -> tuple: ...

    def denoiser(self, x, lam) -> np.ndarray: ...

    def posterior_cov(self, x, lam) -> np.ndarray: ...

    def information(self, lam, **options) -> InformationEstimates: ...

    def mmse(self, lam, **options) -> Estimate: ...

    def entropy_rate(self, lam, coordinate="lambda", **options) -> Estimate: ...


@runtime_checkable
class DiscreteDataModel(DataModel, Protocol):
    r"""A discrete data model (``discrete = True``): a Dirac mixture :math:`\sum_k \pi_k \delta_{\mu_k}`.

    Attributes
    ----------
    entropy : float
        :math:`H(\pi)` in nats, the budget :math:`\int h\,d\lambda` and the limit of
        :math:`H(\lambda)` as :math:`\lambda \to -\infty`.
    total_variance : float
        :math:`\mathrm{Var}(P) = E\|x_0 - E x_0\|^2`, the limit of :math:`\mathrm{mmse}(\lambda)` as
        :math:`\lambda \to -\infty` (it bounds the budget left of an interval:
        :math:`\int_{-\infty}^a h\,d\lambda \le \tfrac12 e^a\,\mathrm{Var}(P)`).

    Notes
    -----
    Adds ``conditional_entropy(lam, **options) -> Estimate``, :math:`H(\lambda) = H[x_0 \mid x]`.

    References
    ----------
    docs/THEORY.md section 2 (budget identity) and section 3.1.
    """

    entropy: float
    total_variance: float

    def conditional_entropy(self, lam, **options) -> Estimate: ...


@runtime_checkable
class ContinuousDataModel(DataModel, Protocol):
    r"""A continuous data model (``discrete = False``): :math:`H(\lambda)` is infinite, :math:`I(\lambda)` is not.

    Attributes
    ----------
    dim : int
        Ambient dimension (as :class:`DataModel`).

    Notes
    -----
    Adds ``mutual_information(lam, **options) -> Estimate``, :math:`I(\lambda) = I(x_0; x)` in nats,
    with :math:`dI/d\lambda = h(\lambda)`.

    References
    ----------
    docs/THEORY.md section 2 (I-MMSE).
    """

    def mutual_information(self, lam, **options) -> Estimate: ...


@runtime_checkable
class MonteCarloDataModel(DataModel, Protocol):
    r"""A model whose information quantities are Monte-Carlo estimates (``monte_carlo = True``).

    Attributes
    ----------
    monte_carlo : bool
        ``True``.

    Notes
    -----
    Adds ``information_samples(lam, *, n_samples=None, rng=None, ...) -> InformationSamples``: the
    per-sample values behind ``information`` (common random numbers across levels), and
    ``information_from_samples(samples) -> InformationEstimates``, the reduction ``information``
    applies to them.  A quantity linear in the per-level means (an integral over :math:`\lambda`)
    gets its standard error from the per-sample values, which accounts for the correlation that common
    random numbers induce between levels.

    References
    ----------
    docs/THEORY.md section 3.1 (Monte Carlo with common random numbers, with a standard error).
    """

    def information_samples(self, lam, *, n_samples=None, rng=None): ...

    def information_from_samples(self, samples) -> InformationEstimates: ...


def monte_carlo_options(model, *, n_samples=None, rng=None) -> dict:
    r"""The keyword options ``n_samples``/``rng`` that ``model`` takes: both (those not ``None``) or none.

    Decided by the declared attribute ``model.monte_carlo`` (module docstring), never by inspecting
    signatures: a deterministic model gets no options, so a caller can bound the cost and fix the
    seed without knowing which kind of model it holds.

    Parameters
    ----------
    model : DataModel
        The data model.
    n_samples : int, optional
        Monte-Carlo sample count.
    rng : numpy.random.Generator, int or None
        Monte-Carlo randomness.

    Returns
    -------
    dict
        ``{"n_samples": ..., "rng": ...}`` restricted to the values that are not ``None`` when
        ``model.monte_carlo``, else ``{}``.

    Examples
    --------
    >>> from noisealloc.theory.models.gaussian import GaussianManifold
    >>> monte_carlo_options(GaussianManifold([0.0], [[1.0]], [1.0]), n_samples=64, rng=0)
    {}
    """
    check_data_model(model)
    if not model.monte_carlo:
        return {}
    return {k: v for k, v in (("n_samples", n_samples), ("rng", rng)) if v is not None}


def check_data_model(model) -> None:
    """Raise ``TypeError`` naming what ``model`` lacks to be a :class:`DataModel`.

    Parameters
    ----------
    model : object
        The candidate data model.

    Returns
    -------
    None
        When ``model`` has every attribute and method of :class:`DataModel`, and of
        :class:`DiscreteDataModel`, :class:`ContinuousDataModel` or :class:`MonteCarloDataModel` as its
        ``discrete``/``monte_carlo`` attributes declare.

    Raises
    ------
    TypeError
        If an attribute or method is missing, or ``discrete``/``monte_carlo`` is not a bool.
    """
    required = ["dim", "discrete", "monte_carlo", "sample_x0", "sample_x", "denoiser", "posterior_cov",
                "information", "mmse", "entropy_rate"]

    def has(name):
        # Static lookup: a property (e.g. a Dirac mixture's total variance over 10,000 atoms) is not evaluated.
        return inspect.getattr_static(model, name, _MISSING) is not _MISSING

    missing = [name for name in required if not has(name)]
    if not missing:
        for flag in ("discrete", "monte_carlo"):
            if not isinstance(getattr(model, flag), (bool, np.bool_)):
                raise TypeError(f"{type(model).__name__}.{flag} must be a bool (a DataModel declares it); "
                                f"got {getattr(model, flag)!r}")
        if model.discrete:
            missing += [n for n in ("entropy", "total_variance", "conditional_entropy") if not has(n)]
        else:
            missing += [n for n in ("mutual_information",) if not has(n)]
        if model.monte_carlo:
            missing += [n for n in ("information_samples", "information_from_samples") if not has(n)]
    if missing:
        raise TypeError(f"{type(model).__name__} is not a data model (noisealloc.theory.models.protocol.DataModel): "
                        f"it lacks {', '.join(missing)}")
