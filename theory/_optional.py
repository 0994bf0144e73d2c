"""Optional dependencies: one gateway that imports them on first use or names the extra that installs them.

JAX with optax (the training experiments, ``JaxSampler``) and Dask (sweeps, figure 6's cells) are
extras of the package (``pip install 'noisealloc[train]'``, ``[sweep]``, ``[all]``): a plain install
computes every information quantity, schedule and certificate without them.
"""

from __future__ import annotations

import importlib

__all__ = ["EXTRAS", "MissingExtraError", "require", "require_all"]

#: Extra of each optional top-level module (the ``[options.extras_require]`` of setup.cfg).
EXTRAS = {"jax": "train", "optax": "train", "dask": "sweep", "distributed": "sweep"}


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""


def require(module: str, feature: str):
    """Import ``module`` (a dotted name), or raise :class:`MissingExtraError` naming its extra.

    Parameters
    ----------
    module : str
        Dotted module name, e.g. ``"jax.numpy"`` or ``"distributed"``.
    feature : str
        What needs it, for the message (e.g. ``"noisealloc sweep"``).

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    MissingExtraError
        One line: ``<feature> needs <top> (pip install 'noisealloc[<extra>]')``, or ``pip install
        <top>`` for a module that is no extra of the package (PyTorch for ``TorchSampler``).
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        if getattr(exc, "name", None) not in (None, top, module) and not str(getattr(exc, "name", "")).startswith(top):
            raise  # the module is there but something inside it failed: not a missing extra
        extra = EXTRAS.get(top)
        how = f"pip install 'noisealloc[{extra}]'" if extra else f"pip install {top}"
        raise MissingExtraError(f"{feature} needs the optional dependency {top}, which is not installed "
                                f"({how})") from None


def require_all(modules, feature: str) -> None:
    """Check that every module of ``modules`` imports; one :class:`MissingExtraError` names all the missing.

    Parameters
    ----------
    modules : iterable of str
        Dotted module names.
    feature : str
        What needs them, for the message.

    Returns
    -------
    None

    Raises
    ------
    MissingExtraError
        One line naming the missing modules and the extras that install them (``[all]`` when more than
        one extra is missing).
    """
    missing = []
    for module in modules:
        try:
            require(module, feature)
        except MissingExtraError:
            missing.append(module.split(".")[0])
    if missing:
        extras = sorted({EXTRAS.get(m, m) for m in missing})
        how = f"noisealloc[{extras[0]}]" if len(extras) == 1 else "noisealloc[all]"
        raise MissingExtraError(f"{feature} needs the optional dependencies {', '.join(missing)}, which are not "
                                f"installed (pip install '{how}')")
