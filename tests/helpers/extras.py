"""Tests of features behind an optional extra (setup.cfg): they run where the extra is installed (the
README installs ``[all,test]``) and are skipped, saying which extra, in a venv with ``[test]`` only."""

from __future__ import annotations

import importlib
import importlib.util

import pytest

#: Extra -> the top-level modules it installs (setup.cfg, options.extras_require).
EXTRA_MODULES = {"train": ("jax", "optax"), "sweep": ("dask", "distributed")}


def requires_extra(*extras: str):
    """``pytest.mark.skipif`` for a test that needs every one of ``extras`` installed."""
    missing = [m for e in extras for m in EXTRA_MODULES[e] if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs the extra(s) {', '.join(extras)}: {', '.join(missing)} "
                                                    "not installed")


def import_unless_extra_missing(modname: str):
    """The module ``modname``, or None when importing it raises MissingExtraError (a module of an
    optional extra that is not installed)."""
    return _unless_extra_missing(importlib.import_module, modname)


def getattr_unless_extra_missing(obj, attr: str):
    """``getattr(obj, attr)``, or None when it raises MissingExtraError (a lazily imported submodule of an
    optional extra that is not installed)."""
    return _unless_extra_missing(getattr, obj, attr)


def _unless_extra_missing(fn, *args):
    from noisealloc.theory._optional import MissingExtraError

    try:
        return fn(*args)
    except MissingExtraError:
        return None
