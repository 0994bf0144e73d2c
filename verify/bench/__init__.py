"""Benchmarks that print a figure and a ratio against a baseline measured in the same run: the
posterior engine, the solvers (and the two-parameter sandwich's global proofs), the training stack, and Gauss--Hermite against Monte Carlo in 3-D.
"""

from noisealloc._lazy import lazy_exports

_EXPORTS = {
    'dirac_3d': 'noisealloc.verify.bench.dirac_3d',
    'posterior': 'noisealloc.verify.bench.posterior',
    'sandwich': 'noisealloc.verify.bench.sandwich',
    'solver': 'noisealloc.verify.bench.solver',
    'training': 'noisealloc.verify.bench.training',
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
