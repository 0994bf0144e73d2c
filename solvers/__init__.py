"""Solvers layer: allocation problems, convex and non-convex solvers, certificates.

Imports :mod:`noisealloc.theory` only.  Modules, bottom to top (each imports only those
above it in this list, never the package itself):

* :mod:`~noisealloc.solvers.criteria` -- one object per criterion (value, gradient matrices,
  Hessian, scale); the sandwich object holds the rounding-error guard;
* :mod:`~noisealloc.solvers.problem` -- :class:`Problem`, :func:`make_problem`, input checks,
  moment matrices and evaluation;
* algorithms: :mod:`~noisealloc.solvers.algorithms.frank_wolfe`, :mod:`~noisealloc.solvers.algorithms.multiplicative`,
  :mod:`~noisealloc.solvers.algorithms.rex`, :mod:`~noisealloc.solvers.algorithms.polish`,
  :mod:`~noisealloc.solvers.algorithms.support` (Caratheodory), :mod:`~noisealloc.solvers.algorithms.e_optimal`;
* :mod:`~noisealloc.solvers.certificates` -- certificates, off-grid and exact checks;
* :mod:`~noisealloc.solvers.driver` -- :func:`solve` and :func:`certify`;
* :mod:`~noisealloc.solvers.values`, :mod:`~noisealloc.solvers.refine`,
  :mod:`~noisealloc.solvers.theorem1p`, :mod:`~noisealloc.solvers.pipeline` (the optimize chain).

Public API:

* :func:`optimize_allocation` -- the optimize chain of a denoiser family in one call: build ->
  solve -> reduce -> certify -> off-grid (-> exact) (:class:`AllocationResult`);
* :func:`solve` -- optimal allocation on a grid with a certificate (:class:`SolveResult`);
* :func:`certify` -- recompute a :class:`Certificate` from ``(problem, weights)`` alone;
  :func:`offgrid_check` and :func:`exact_sensitivity_check` take the same first arguments;
* :func:`reduce_support`, :func:`merge_atoms` -- Caratheodory reduction, merging of adjacent grid atoms;
* :func:`refine` -- off-grid refinement of atom positions given ``lam -> A(lam)``;
* :func:`reduce_population` -- Theorem 1' (at most m + 1 atoms with the same population optimum);
* :func:`sandwich_value`, :func:`sandwich_gradient`, :func:`allocation_value` -- V(p), its
  gradient, and any criterion's value of an allocation;
* :func:`single_blas_thread` -- the scoped BLAS thread limit the solvers run under.
"""

if __name__ != "noisealloc.solvers":
    # The folder sits at the repository root, so with the root on sys.path `import solvers` would
    # load a second copy of every module beside noisealloc.solvers (isinstance then breaks between them).
    raise ImportError(
        f"the folder solvers/ is the package noisealloc.solvers; import it as `import noisealloc.solvers` "
        f"(or `from noisealloc.solvers import ...`), not as the top-level name {__name__!r}"
    )

from noisealloc.theory._threads import single_blas_thread
from noisealloc.solvers.certificates import exact_sensitivity_check, offgrid_check
from noisealloc.solvers.criteria import CRITERIA, SingularMomentError
from noisealloc.solvers.driver import METHODS, certify, solve
from noisealloc.solvers.pipeline import optimize_allocation
from noisealloc.solvers.problem import Problem, make_problem
from noisealloc.solvers.refine import refine
from noisealloc.solvers.result import (
    STATUS_MESSAGES,
    AllocationResult,
    Certificate,
    ExactCertificate,
    OffGridCheck,
    ReductionResult,
    RefineResult,
    SolveResult,
    Theorem1pResult,
)
from noisealloc.solvers.algorithms.support import caratheodory, merge_atoms, reduce_support
from noisealloc.solvers.theorem1p import reduce_population
from noisealloc.solvers.values import allocation_value, sandwich_gradient, sandwich_value

__all__ = [
    "optimize_allocation",
    "AllocationResult",
    "solve",
    "sandwich_value",
    "sandwich_gradient",
    "allocation_value",
    "refine",
    "caratheodory",
    "merge_atoms",
    "reduce_support",
    "reduce_population",
    "certify",
    "offgrid_check",
    "exact_sensitivity_check",
    "make_problem",
    "Problem",
    "SingularMomentError",
    "single_blas_thread",
    "CRITERIA",
    "METHODS",
    "STATUS_MESSAGES",
    "Certificate",
    "ExactCertificate",
    "OffGridCheck",
    "ReductionResult",
    "RefineResult",
    "SolveResult",
    "Theorem1pResult",
]
