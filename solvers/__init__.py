"""Solvers layer: allocation problems, convex and non-convex solvers, certificates.

Imports :mod:`noisealloc.theory` only.  Public API:

* :func:`solve` -- optimal allocation on a grid with a certificate (:class:`SolveResult`);
* :func:`certify` -- recompute a :class:`Certificate` from ``(A, weights)`` alone;
* :func:`reduce_support`, :func:`merge_atoms` -- Caratheodory reduction, merging of adjacent grid atoms;
* :func:`refine` -- off-grid refinement of atom positions given ``lam -> A(lam)``;
* :func:`reduce_population` -- Theorem 1' (at most m + 1 atoms with the same population optimum);
* :func:`sandwich_value`, :func:`sandwich_gradient` -- the sandwich V(p) and its gradient.
"""

if __name__ != "noisealloc.solvers":
    # The folder sits at the repository root, so with the root on sys.path `import solvers` would
    # load a second copy of every module beside noisealloc.solvers (isinstance then breaks between them).
    raise ImportError(
        f"the folder solvers/ is the package noisealloc.solvers; import it as `import noisealloc.solvers` "
        f"(or `from noisealloc.solvers import ...`), not as the top-level name {__name__!r}"
    )


from noisealloc.solvers.certificates import certify, exact_sensitivity_check, offgrid_check
from noisealloc.solvers.criteria import CRITERIA, METHODS, Problem, make_problem, sandwich_gradient, sandwich_value, solve
from noisealloc.solvers.refine import refine
from noisealloc.solvers.support import caratheodory, merge_atoms, reduce_support
from noisealloc.solvers.theorem1p import reduce_population
from noisealloc.solvers.result import (
    STATUS_MESSAGES,
    Certificate,
    ExactCertificate,
    OffGridCheck,
    ReductionResult,
    RefineResult,
    SolveResult,
    Theorem1pResult,
)

__all__ = [
    "solve",
    "sandwich_value",
    "sandwich_gradient",
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
