"""Lazy public names of a package: ``from noisealloc.theory.models import DiracMixture`` imports only
the module that defines the name, on first use, so that importing a package stays cheap."""

from __future__ import annotations

import importlib

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: dict[str, str]):
    """``__getattr__`` and ``__dir__`` of a package whose public names live in its submodules.

    Parameters
    ----------
    package : str
        Dotted name of the package (its ``__name__``).
    exports : dict
        Public name -> dotted name of the module that defines it.  A name equal to the last part
        of its module's name stands for the module itself.

    Returns
    -------
    tuple
        ``(__getattr__, __dir__)`` to bind in the package's namespace.
    """

    def __getattr__(name: str):
        try:
            module = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        mod = importlib.import_module(module)
        return mod if module.rpartition(".")[2] == name else getattr(mod, name)

    def __dir__():
        return sorted(exports)

    return __getattr__, __dir__
