"""Posterior computations behind the models: adaptive quadrature rules, the Dirac-mixture quadrature,
the blocked Monte-Carlo engine with its common random numbers and importance sampler, asymptotic
limits of the information quantities, and their compiled kernels.
"""

from noisealloc._lazy import lazy_exports

_EXPORTS = {
    'asymptotics': 'noisealloc.theory.posterior.asymptotics',
    'common_random_numbers': 'noisealloc.theory.posterior.common_random_numbers',
    'dirac_quadrature': 'noisealloc.theory.posterior.dirac_quadrature',
    'engine': 'noisealloc.theory.posterior.engine',
    'importance': 'noisealloc.theory.posterior.importance',
    'quadrature': 'noisealloc.theory.posterior.quadrature',
    'CommonRandomNumbers': 'noisealloc.theory.posterior.common_random_numbers',
    'draw_common_random_numbers': 'noisealloc.theory.posterior.common_random_numbers',
    'stratified_mean_stderr': 'noisealloc.theory.posterior.common_random_numbers',
    'GH_MAX_ATOMS_3D': 'noisealloc.theory.posterior.dirac_quadrature',
    'QUAD_HALF_WIDTH': 'noisealloc.theory.posterior.dirac_quadrature',
    'QUAD_MAX_ATOMS': 'noisealloc.theory.posterior.dirac_quadrature',
    'QUAD_RTOL_TARGET': 'noisealloc.theory.posterior.dirac_quadrature',
    'LAM_ABS_MAX': 'noisealloc.theory.posterior.engine',
    'InformationSamples': 'noisealloc.theory.posterior.engine',
    'information_samples': 'noisealloc.theory.posterior.engine',
    'monte_carlo_information': 'noisealloc.theory.posterior.engine',
    'estimates_from_samples': 'noisealloc.theory.posterior.engine',
    'posterior_weights_blocked': 'noisealloc.theory.posterior.engine',
    'default_block_size': 'noisealloc.theory.posterior.engine',
    'validate_atoms': 'noisealloc.theory.posterior.engine',
    'validate_weights': 'noisealloc.theory.posterior.engine',
    'GK21_NODES': 'noisealloc.theory.posterior.quadrature',
    'GK21_WEIGHTS': 'noisealloc.theory.posterior.quadrature',
    'G10_WEIGHTS': 'noisealloc.theory.posterior.quadrature',
    'QuadratureResult': 'noisealloc.theory.posterior.quadrature',
    'adaptive_gauss_kronrod': 'noisealloc.theory.posterior.quadrature',
    'graded_breakpoints': 'noisealloc.theory.posterior.quadrature',
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
