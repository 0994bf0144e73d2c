"""Verification layer: theorem checks, random-matrix checks and benchmarks.

Trusts no solver: every check recomputes optimality and feasibility from the
returned solution.  Imports :mod:`noisealloc.theory` and :mod:`noisealloc.solvers`.
"""

if __name__ != "noisealloc.verify":
    # The folder sits at the repository root, so with the root on sys.path `import verify` would
    # load a second copy of every module beside noisealloc.verify (isinstance then breaks between them).
    raise ImportError(
        f"the folder verify/ is the package noisealloc.verify; import it as `import noisealloc.verify` "
        f"(or `from noisealloc.verify import ...`), not as the top-level name {__name__!r}"
    )

from noisealloc._lazy import lazy_exports  # noqa: E402 (after the guard above)

_EXPORTS = {
    'checks': 'noisealloc.verify.checks',
    'experiments': 'noisealloc.verify.experiments',
    'bench': 'noisealloc.verify.bench',
    'suite': 'noisealloc.verify.suite',
    'CheckReport': 'noisealloc.verify.checks.report',
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
