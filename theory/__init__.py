"""Theory layer: noise coordinates, schedules, data models, posteriors and information quantities.

Lowest layer of the toolkit: it imports nothing from :mod:`noisealloc.solvers`,
:mod:`noisealloc.verify` or :mod:`noisealloc.figures`, and never matplotlib.
Submodules are imported explicitly (``from noisealloc.theory import coordinates``)
so that importing the package stays cheap.
"""

if __name__ != "noisealloc.theory":
    # The folder sits at the repository root, so with the root on sys.path `import theory` would
    # load a second copy of every module beside noisealloc.theory (isinstance then breaks between them).
    raise ImportError(
        f"the folder theory/ is the package noisealloc.theory; import it as `import noisealloc.theory` "
        f"(or `from noisealloc.theory import ...`), not as the top-level name {__name__!r}"
    )

