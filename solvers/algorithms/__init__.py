"""Algorithms of the allocation solvers: Frank--Wolfe (away/pairwise), the multiplicative algorithm,
randomised exchange, projected Newton polish, support reduction (Caratheodory) and the E-optimal
interior-point method, and Elfving's dual barrier (the start of 'c').
"""

from noisealloc._lazy import lazy_exports

_EXPORTS = {
    'e_optimal': 'noisealloc.solvers.algorithms.e_optimal',
    'elfving': 'noisealloc.solvers.algorithms.elfving',
    'frank_wolfe': 'noisealloc.solvers.algorithms.frank_wolfe',
    'multiplicative': 'noisealloc.solvers.algorithms.multiplicative',
    'polish': 'noisealloc.solvers.algorithms.polish',
    'rex': 'noisealloc.solvers.algorithms.rex',
    'support': 'noisealloc.solvers.algorithms.support',
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
