"""The estimate object every information quantity returns.

An :class:`Estimate` is a value with its standard error and the method that
produced it, so that no number leaves the toolkit without saying how far to
trust it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Estimate", "METHODS"]

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
        value = np.asarray(self.value, dtype=np.float64)
        stderr = np.broadcast_to(np.asarray(self.stderr, dtype=np.float64), value.shape).copy()
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
