"""Theory layer: noise coordinates, schedules, data models, posteriors and information quantities.

Lowest layer of the toolkit: it imports nothing from :mod:`noisealloc.solvers`,
:mod:`noisealloc.verify` or :mod:`noisealloc.figures`, and never matplotlib.
Public names load lazily on first use (``from noisealloc.theory import load_data`` imports only
the module that defines it), so that importing the package stays cheap.
"""

if __name__ != "noisealloc.theory":
    # The folder sits at the repository root, so with the root on sys.path `import theory` would
    # load a second copy of every module beside noisealloc.theory (isinstance then breaks between them).
    raise ImportError(
        f"the folder theory/ is the package noisealloc.theory; import it as `import noisealloc.theory` "
        f"(or `from noisealloc.theory import ...`), not as the top-level name {__name__!r}"
    )

from noisealloc._lazy import lazy_exports  # noqa: E402 (after the guard above)

_EXPORTS = {
    'coordinates': 'noisealloc.theory.coordinates',
    'weights': 'noisealloc.theory.weights',
    'tolerances': 'noisealloc.theory.tolerances',
    'errors': 'noisealloc.theory.errors',
    'output': 'noisealloc.theory.output',
    'estimates': 'noisealloc.theory.estimates',
    'entropy_rate': 'noisealloc.theory.entropy_rate',
    'request_limits': 'noisealloc.theory.request_limits',
    'models': 'noisealloc.theory.models',
    'posterior': 'noisealloc.theory.posterior',
    'information': 'noisealloc.theory.information',
    'schedules': 'noisealloc.theory.schedules',
    'load_data': 'noisealloc.theory.models.datasets',
    'parse_spec': 'noisealloc.theory.models.datasets',
    'information_profile': 'noisealloc.theory.information.profile',
    'schedule_from_model': 'noisealloc.theory.schedules.entropic',
    'builtin_schedules': 'noisealloc.theory.schedules.builtin',
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
