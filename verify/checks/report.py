r"""The result of every theorem check (:class:`CheckReport`) and the default models the checks use.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from noisealloc.theory.errors import as_generator

from noisealloc.theory.output import to_jsonable

__all__ = ['CheckReport', 'default_dirac', 'default_gaussian']


@dataclass(frozen=True)
class CheckReport:
    r"""Outcome of one numerical check.

    Attributes
    ----------
    name : str
        Short identifier (``'theorem1'``, ``'rmt.ols'``, ...).
    holds : bool
        Whether the conclusion was confirmed within ``tolerance``.
    measured : dict
        The measured numbers (floats and arrays a figure can plot); ``measured[headline]`` is
        the number compared with ``tolerance``.
    tolerance : float
        The bound the headline number was compared with (its meaning is in ``message``).
    assumptions : tuple of str
        Assumptions of the theorem that were checked on the instance.
    data : str
        Description of the instance (model, grid, seeds).
    seconds : float
        Wall time of the check.
    headline : str
        Key of ``measured`` shown in tables.
    message : str
        One line: what was compared with what.
    """

    name: str
    holds: bool
    measured: dict
    tolerance: float
    assumptions: tuple = ()
    data: str = ""
    seconds: float = 0.0
    headline: str = ""
    message: str = ""

    @property
    def value(self) -> float:
        """The headline measured number (NaN if there is none)."""
        v = self.measured.get(self.headline, np.nan)
        try:
            return float(v)
        except (TypeError, ValueError):
            return float("nan")

    def to_dict(self) -> dict:
        """Plain-JSON form (arrays become lists, non-finite floats strings)."""
        return to_jsonable({
            "name": self.name, "holds": bool(self.holds), "value": self.value, "headline": self.headline,
            "tolerance": self.tolerance, "message": self.message, "assumptions": list(self.assumptions),
            "data": self.data, "seconds": self.seconds, "measured": self.measured,
        })


class _Timer:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        return False


# ------------------------------------------------------------------------------- default data


def default_dirac():
    """The 1-D, four-atom Dirac mixture used by the quick checks (unequal weights and gaps).

    Returns
    -------
    DiracMixture
        Atoms (-2, 0, 1.5, 4) with weights (0.1, 0.4, 0.3, 0.2).
    """
    from noisealloc.theory.models.dirac import DiracMixture

    return DiracMixture(np.array([[-2.0], [0.0], [1.5], [4.0]]), np.array([0.1, 0.4, 0.3, 0.2]))


def default_gaussian(D: int = 5, variances=(2.0, 0.3), rng=0):
    """A Gaussian manifold in R^D with a random orthonormal basis (closed-form posteriors).

    Parameters
    ----------
    D : int
        Ambient dimension.
    variances : sequence of float
        Variances along the basis directions (k = their number).
    rng : Generator, int or None
        Randomness of the basis.

    Returns
    -------
    GaussianManifold
        Mean ``(1, ..., 1)``, orthonormal basis from the QR of a Gaussian matrix.
    """
    from noisealloc.theory.models.gaussian import GaussianManifold

    s = np.asarray(variances, dtype=np.float64)
    basis, _ = np.linalg.qr(as_generator(rng).standard_normal((int(D), s.size)))
    return GaussianManifold(np.ones(int(D)), basis, s)


# ------------------------------------------------------------------------------- section 2
