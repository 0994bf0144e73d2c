"""Data models of docs/THEORY.md section 3 and their loaders: what a model provides (``protocol``), Dirac
mixtures, Gaussian manifolds and their mixtures, curved manifolds, the manifold-smoothed law of a
sample (``smoothed``), the forward-process observation, and the data sets with the data SPEC grammar
(``datasets``).
"""

from noisealloc._lazy import lazy_exports

_EXPORTS = {
    'datasets': 'noisealloc.theory.models.datasets',
    'dirac': 'noisealloc.theory.models.dirac',
    'gaussian': 'noisealloc.theory.models.gaussian',
    'manifolds': 'noisealloc.theory.models.manifolds',
    'observation': 'noisealloc.theory.models.observation',
    'protocol': 'noisealloc.theory.models.protocol',
    'smoothed': 'noisealloc.theory.models.smoothed',
    'MNIST_ENV_VAR': 'noisealloc.theory.models.datasets',
    'MNIST_FILES': 'noisealloc.theory.models.datasets',
    'SPEC_FORMS': 'noisealloc.theory.models.datasets',
    'DataSpec': 'noisealloc.theory.models.datasets',
    'load_mnist': 'noisealloc.theory.models.datasets',
    'load_digits': 'noisealloc.theory.models.datasets',
    'parse_spec': 'noisealloc.theory.models.datasets',
    'load_data': 'noisealloc.theory.models.datasets',
    'dirac_atoms': 'noisealloc.theory.models.datasets',
    'gaussian_parameters': 'noisealloc.theory.models.datasets',
    'DiracMixture': 'noisealloc.theory.models.dirac',
    'merge_duplicate_atoms': 'noisealloc.theory.models.dirac',
    'GaussianManifold': 'noisealloc.theory.models.gaussian',
    'GaussianManifoldMixture': 'noisealloc.theory.models.gaussian',
    'ORTHONORMAL_ATOL': 'noisealloc.theory.models.gaussian',
    'Circle': 'noisealloc.theory.models.manifolds',
    'bessel_ratio': 'noisealloc.theory.models.manifolds',
    'log_ive0': 'noisealloc.theory.models.manifolds',
    'one_minus_bessel_ratio_sq': 'noisealloc.theory.models.manifolds',
    'log_i0_minus_quadratic': 'noisealloc.theory.models.manifolds',
    'sample_observation': 'noisealloc.theory.models.observation',
    'DataModel': 'noisealloc.theory.models.protocol',
    'DiscreteDataModel': 'noisealloc.theory.models.protocol',
    'ContinuousDataModel': 'noisealloc.theory.models.protocol',
    'MonteCarloDataModel': 'noisealloc.theory.models.protocol',
    'monte_carlo_options': 'noisealloc.theory.models.protocol',
    'check_data_model': 'noisealloc.theory.models.protocol',
    'ID_NEIGHBORS': 'noisealloc.theory.models.smoothed',
    'PCA_NEIGHBORS': 'noisealloc.theory.models.smoothed',
    'VARIANCE_FLOOR_REL': 'noisealloc.theory.models.smoothed',
    'IntrinsicDimension': 'noisealloc.theory.models.smoothed',
    'nearest_neighbors': 'noisealloc.theory.models.smoothed',
    'levina_bickel_dimension': 'noisealloc.theory.models.smoothed',
    'SmoothedEmpiricalLaw': 'noisealloc.theory.models.smoothed',
    'smoothed_empirical_law': 'noisealloc.theory.models.smoothed',
    'SMOOTHED_LEVELS': 'noisealloc.theory.models.smoothed',
    'SMOOTHED_SAMPLES': 'noisealloc.theory.models.smoothed',
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
