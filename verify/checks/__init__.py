"""Numerical checks of the theorems of docs/THEORY.md, as library functions returning :class:`CheckReport`:
I--MMSE and budget, Theorems 1, 1' and 2, feature--noise decoupling, the sandwich against simulated
training, coordinate covariance, the random-matrix checks and the loss-recovery check.
"""

from noisealloc._lazy import lazy_exports

_EXPORTS = {
    'coordinates': 'noisealloc.verify.checks.coordinates',
    'check_coordinate_covariance': 'noisealloc.verify.checks.coordinates',
    'information': 'noisealloc.verify.checks.information',
    'check_i_mmse': 'noisealloc.verify.checks.information',
    'check_i_mmse_monte_carlo': 'noisealloc.verify.checks.information',
    'check_budget': 'noisealloc.verify.checks.information',
    'loss_recovery': 'noisealloc.verify.checks.loss_recovery',
    'synthetic_losses': 'noisealloc.verify.checks.loss_recovery',
    'w1_lambda': 'noisealloc.verify.checks.loss_recovery',
    'LossRecoveryReport': 'noisealloc.verify.checks.loss_recovery',
    'report': 'noisealloc.verify.checks.report',
    'CheckReport': 'noisealloc.verify.checks.report',
    'default_dirac': 'noisealloc.verify.checks.report',
    'default_gaussian': 'noisealloc.verify.checks.report',
    'rmt': 'noisealloc.verify.checks.rmt',
    'ols_excess_exact': 'noisealloc.verify.checks.rmt',
    'ridge_kappa': 'noisealloc.verify.checks.rmt',
    'ridge_variance_de': 'noisealloc.verify.checks.rmt',
    'simulate_ols': 'noisealloc.verify.checks.rmt',
    'simulate_ridge': 'noisealloc.verify.checks.rmt',
    'finite_n_allocation': 'noisealloc.verify.checks.rmt',
    'numerical_finite_n_allocation': 'noisealloc.verify.checks.rmt',
    'sqrt_law_allocation': 'noisealloc.verify.checks.rmt',
    'rmt_checks': 'noisealloc.verify.checks.rmt',
    'RMT_DE_RTOL': 'noisealloc.verify.checks.rmt',
    'CONVERGENCE_SLOPE_ATOL': 'noisealloc.verify.checks.rmt',
    'sandwich': 'noisealloc.verify.checks.sandwich',
    'simulate_sandwich': 'noisealloc.verify.checks.sandwich',
    'check_sandwich_simulation': 'noisealloc.verify.checks.sandwich',
    'theorem1': 'noisealloc.verify.checks.theorem1',
    'check_theorem1': 'noisealloc.verify.checks.theorem1',
    'check_theorem1p': 'noisealloc.verify.checks.theorem1',
    'theorem2': 'noisealloc.verify.checks.theorem2',
    'check_theorem2': 'noisealloc.verify.checks.theorem2',
    'closed_form_sqrt_allocation': 'noisealloc.verify.checks.theorem2',
    'numerical_min_allocation': 'noisealloc.verify.checks.theorem2',
    'feature_cost_ratio': 'noisealloc.verify.checks.theorem2',
    'check_decoupling': 'noisealloc.verify.checks.theorem2',
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
