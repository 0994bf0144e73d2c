"""Deprecated location of the denoiser families' information matrices (kept for one release).

The builders are theory (posterior expectations over a data model) and moved to
:mod:`noisealloc.theory.information_matrices`; the unexported ``AllocationProblem`` became the
documented :class:`~noisealloc.theory.information_matrices.FamilyMatrices`.  This module only
re-exports them under their old names for callers not yet updated; new code imports
:mod:`noisealloc.theory.information_matrices`.
"""

from __future__ import annotations

from noisealloc.theory.information_matrices import (
    ENTROPY_RATE_SAMPLES,
    FAMILIES,
    FamilyMatrices,
    bspline_basis,
    build_family_matrices,
    gaussian_linear_matrices,
    gaussian_linear_sympy,
    natural_family,
    posterior_weight_matrices,
    random_feature_matrices,
    spline_matrices,
)

#: Old names (``noisealloc.solvers.problems.X``) of the builders now in ``noisealloc.theory.information_matrices``.
AllocationProblem = FamilyMatrices
posterior_weight_problem = posterior_weight_matrices
gaussian_linear_problem = gaussian_linear_matrices
random_feature_problem = random_feature_matrices
spline_problem = spline_matrices
build_problem = build_family_matrices
_natural_family = natural_family

__all__ = [
    "AllocationProblem",
    "FAMILIES",
    "ENTROPY_RATE_SAMPLES",
    "posterior_weight_problem",
    "gaussian_linear_problem",
    "gaussian_linear_sympy",
    "random_feature_problem",
    "spline_problem",
    "bspline_basis",
    "build_problem",
]
