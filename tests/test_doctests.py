"""Run the ``Examples`` sections of the library's docstrings (doctest), one test per module.

pytest's ``--doctest-modules`` would import ``theory/coordinates.py`` under the bare name
``theory.coordinates``, which the packages refuse (a second copy of every module); this collector
imports each module under its installed name, ``noisealloc.theory.coordinates``, and runs the same
doctest machinery on it.  Examples compare printed numbers, so they are written with ``round`` or a
formatted string wherever the last digits depend on the BLAS.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import numpy as np
import pytest
from helpers.extras import import_unless_extra_missing
from helpers.tree import module_files

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("theory", "solvers", "verify", "figures")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
#: At least this many modules must carry runnable examples (it was three before issue 11).
MIN_MODULES_WITH_EXAMPLES = 12


def _module_names() -> list[str]:
    out = []
    for pkg in PACKAGES:
        out.extend(module_files(pkg))
    out.append("noisealloc.commands")
    return out


def _doctests(modname: str):
    mod = import_unless_extra_missing(modname)
    if mod is None:
        return []  # a module of an optional extra that is not installed ([test] without [train]): no examples to run
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [t for t in finder.find(mod, modname) if t.examples]


def _modules_with_examples() -> list[str]:
    return [m for m in _module_names() if _doctests(m)]


@pytest.mark.parametrize("modname", _modules_with_examples())
def test_docstring_examples(modname):
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    # legacy="1.25": scalars print as 1.5, not np.float64(1.5), on every numpy 2.x
    with np.printoptions(precision=8, suppress=True, legacy="1.25"):
        for test in _doctests(modname):
            runner.run(test)
    res = runner.summarize(verbose=False)
    assert res.failed == 0, f"{res.failed} of {res.attempted} doctest examples failed in {modname} (output above)"


def test_enough_modules_have_examples():
    mods = _modules_with_examples()
    assert len(mods) >= MIN_MODULES_WITH_EXAMPLES, f"only {len(mods)} modules have examples: {mods}"
