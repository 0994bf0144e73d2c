"""noisealloc: optimal noise allocation for diffusion training.

The toolkit is organised in four layers, imported one way only::

    noisealloc.theory   -> noisealloc.solvers -> noisealloc.verify -> noisealloc.figures

with the command-line program (``noisealloc ...``, :mod:`noisealloc.cli`) a thin
layer on top.  Importing :mod:`noisealloc` itself is cheap: subpackages are
loaded on first use.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
