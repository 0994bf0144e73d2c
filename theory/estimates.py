"""The estimate objects every information quantity returns.

An :class:`Estimate` is a value with its standard error and the method that
produced it, so that no number leaves the toolkit without saying how far to
trust it.  :class:`InformationEstimates` bundles the estimates one pass of a
data model's ``information(lam)`` produces (docs/THEORY.md section 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.errors import as_float_array

__all__ = ["Estimate", "InformationEstimates", "METHODS"]

#: Method names, one vocabulary for the whole toolkit.
METHODS = (
    "closed-form",          # exact formula (Gaussian manifolds); stderr = 0
    "quadrature",           # deterministic quadrature; stderr = 0, error_check = |Q(n) - Q(2n)|-type bound
    "projected-quadrature", # quadrature on the affine span of the atoms
    "monte-carlo",          # Monte Carlo with common random numbers across levels; stderr > 0
    "mpmath",               # high-precision reference (tests only)
)


@dataclass(frozen=True)
class Estimate:
    """A value with its uncertainty and provenance.

    Attributes
    ----------
    value : ndarray
        The estimate (float64; shape of the requested levels).
    stderr : ndarray
        Standard error, same shape; exactly 0 for closed forms and quadrature.
    method : str
        One of :data:`METHODS`.
    error_check : float or None
        For quadrature: the measured discretisation error (e.g. the largest
        difference between rules of two orders); ``None`` otherwise.
    n_samples : int or None
        Monte-Carlo sample count, ``None`` for deterministic methods.
    info : dict
        Free-form provenance (node counts, block size, seed, ...).
    """

    value: np.ndarray
    stderr: np.ndarray
    method: str
    error_check: float | None = None
    n_samples: int | None = None
    info: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        value = as_float_array(self.value, "value")
        stderr = np.broadcast_to(as_float_array(self.stderr, "stderr"), value.shape).copy()
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}; got {self.method!r}")
        if np.any(stderr < 0) or np.any(np.isnan(stderr)):
            raise ValueError("stderr must be >= 0 and not NaN")
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "stderr", stderr)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.value, dtype=dtype)

    def __len__(self) -> int:
        return len(self.value)


@dataclass(frozen=True)
class InformationEstimates:
    r"""The information quantities of a data model at a set of levels, from one pass (docs/THEORY.md section 2).

    Every field is an :class:`Estimate` of the shape of the requested levels, or ``None`` where the
    model does not define the quantity (the conditional entropy of continuous data is infinite; the
    mutual information of discrete data is :math:`H(\pi) - H(\lambda)`, left to the caller).

    Attributes
    ----------
    mmse : Estimate
        :math:`\mathrm{mmse}(\lambda) = E\|x_0 - m(x, \lambda)\|^2`, summed over coordinates.
    entropy_rate : Estimate or None
        :math:`h(\lambda) = \tfrac12 e^\lambda\,\mathrm{mmse}(\lambda)` per unit :math:`\lambda` (nats).
    conditional_entropy : Estimate or None
        :math:`H(\lambda) = H[x_0 \mid x]` in nats (discrete data).
    mutual_information : Estimate or None
        :math:`I(\lambda) = I(x_0; x)` in nats (continuous data).
    component_entropy : Estimate or None
        :math:`E\,\mathcal H(w(x))`, the conditional entropy of the mixture component
        (mixtures of Gaussian manifolds).

    References
    ----------
    docs/THEORY.md section 2 (definitions) and section 3 (the models).
    """

    mmse: Estimate
    entropy_rate: Estimate | None = None
    conditional_entropy: Estimate | None = None
    mutual_information: Estimate | None = None
    component_entropy: Estimate | None = None

    def __post_init__(self):
        for name in ("mmse", "entropy_rate", "conditional_entropy", "mutual_information", "component_entropy"):
            v = getattr(self, name)
            if v is None and name == "mmse":
                raise ValueError("mmse must be an Estimate; got None")
            if v is not None and not isinstance(v, Estimate):
                raise TypeError(f"{name} must be an Estimate or None; got {type(v).__name__}")
