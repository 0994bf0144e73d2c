"""Theory layer: noise coordinates, schedules, data models, posteriors and information quantities.

Lowest layer of the toolkit: it imports nothing from :mod:`noisealloc.solvers`,
:mod:`noisealloc.verify` or :mod:`noisealloc.figures`, and never matplotlib.
Submodules are imported explicitly (``from noisealloc.theory import coordinates``)
so that importing the package stays cheap.
"""
