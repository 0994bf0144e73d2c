"""Structure rules a newcomer relies on (issue 11).

* **Documented public API**: every public function and class named in the ``__all__`` of a public
  module of ``noisealloc.theory``, ``noisealloc.solvers`` and ``noisealloc.verify`` has a numpydoc
  docstring; functions carry ``Parameters`` (when they take any) and ``Returns`` (or ``Yields``)
  sections, classes ``Parameters`` or ``Attributes`` (exception and warning classes need only a
  docstring).
* **No import cycle inside a package**: the graph of imports between the modules of one package,
  counting imports inside functions (where cycles hide), is acyclic.  ``from noisealloc.pkg import
  name`` of a re-exported name is an edge to the package ``__init__``.
* **No second copy under a bare name**: ``import theory`` (etc.) from the repository root fails with
  a message naming ``noisealloc.theory``.

The checkers are tested on small hand-made inputs, so a checker that never fires is caught.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.extras import getattr_unless_extra_missing, import_unless_extra_missing
from helpers.tree import module_files

REPO = Path(__file__).resolve().parents[1]
DOC_PACKAGES = ("theory", "solvers", "verify")
ALL_PACKAGES = ("theory", "solvers", "verify", "figures")

_SECTION = r"^[ \t]*{name}[ \t]*\n[ \t]*-{{3,}}[ \t]*$"


def _has_section(doc: str, *names: str) -> bool:
    return any(re.search(_SECTION.format(name=n), doc, flags=re.MULTILINE) for n in names)


def _takes_parameters(obj) -> bool:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):  # pragma: no cover - builtins
        return False
    return any(p.name not in ("self", "cls") for p in sig.parameters.values())


def docstring_problems(name: str, obj) -> list[str]:
    """What the numpydoc rule finds missing in ``obj``'s docstring (empty when it passes)."""
    doc = inspect.getdoc(obj)
    if not doc:
        return [f"{name}: no docstring"]
    if inspect.isclass(obj):
        if issubclass(obj, BaseException):
            return []
        if not _has_section(doc, "Parameters", "Attributes"):
            return [f"{name}: class docstring has neither a Parameters nor an Attributes section"]
        return []
    out = []
    if _takes_parameters(obj) and not _has_section(doc, "Parameters"):
        out.append(f"{name}: no Parameters section")
    if not _has_section(doc, "Returns", "Yields"):
        out.append(f"{name}: no Returns section")
    return out


def _public_modules(package: str) -> list[str]:
    """Every public module of the layer, subpackages included (a name part starting with ``_`` is private)."""
    return [name for name in module_files(package)
            if not any(part.startswith("_") for part in name.split(".")[2:])]


def _public_objects(package: str):
    """``(qualified name, object)`` for every function/class in a public ``__all__`` of the package."""
    seen: set[int] = set()
    missing_all = []
    for modname in _public_modules(package):
        mod = import_unless_extra_missing(modname)
        if mod is None:
            continue  # a module of an optional extra that is not installed: documented where it is
        names = getattr(mod, "__all__", None)
        if names is None:
            missing_all.append(modname)
            continue
        for attr in names:
            obj = getattr_unless_extra_missing(mod, attr)  # a lazy submodule of an extra that is not installed
            if obj is None:
                continue
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue  # constants and tables are documented in the module docstring
            if not getattr(obj, "__module__", "").startswith("noisealloc."):
                continue
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            yield f"{modname}.{attr}", obj
    for modname in missing_all:
        yield modname, None


@pytest.mark.parametrize("package", DOC_PACKAGES)
def test_public_api_is_documented(package):
    problems = []
    for name, obj in _public_objects(package):
        if obj is None:
            problems.append(f"{name}: public module without __all__")
            continue
        problems.extend(docstring_problems(name, obj))
    assert not problems, f"{len(problems)} documentation problems:\n" + "\n".join(problems)


def test_docstring_checker_fires():
    def undocumented(x):
        return x

    def half(x):
        """Half.

        Parameters
        ----------
        x : float
        """
        return x / 2

    def full(x):
        """Full.

        Parameters
        ----------
        x : float

        Returns
        -------
        float
        """
        return x

    class Bare:
        """No sections."""

    class Good:
        """Has attributes.

        Attributes
        ----------
        a : int
        """

    assert docstring_problems("u", undocumented) == ["u: no docstring"]
    assert docstring_problems("h", half) == ["h: no Returns section"]
    assert docstring_problems("f", full) == []
    assert docstring_problems("B", Bare) != []
    assert docstring_problems("G", Good) == []
    assert docstring_problems("E", ValueError) == []


# ----------------------------------------------------------------------------- import graph


def import_edges(package: str, sources: dict[str, str]) -> dict[str, set[str]]:
    """Edges ``module -> module`` inside ``noisealloc.<package>`` from the modules' sources.

    ``sources`` maps a module's name relative to the package (``'criteria'``, ``'models.dirac'``;
    ``'__init__'`` for the package itself, ``'models'`` for a subpackage's ``__init__``) to its
    source.  Every import anywhere in the file counts, including inside functions.  An import of
    ``a.b.c`` is an edge to the deepest module it names, and to nothing else: importing a submodule
    does run its parents' ``__init__``, but the subpackages' ``__init__`` load their names lazily.
    ``from noisealloc.pkg.sub import name`` is an edge to ``sub.name`` when that is a module, else to
    ``sub`` (its ``__init__``).
    """
    prefix = f"noisealloc.{package}"
    modules = set(sources)
    edges: dict[str, set[str]] = {m: set() for m in modules}

    def target(dotted: str):
        if dotted == prefix:
            return "__init__"
        if dotted.startswith(prefix + "."):
            parts = dotted[len(prefix) + 1:].split(".")
            for k in range(len(parts), 0, -1):
                name = ".".join(parts[:k])
                if name in modules:
                    return name
        return None

    for mod, src in sources.items():
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    t = target(alias.name)
                    if t is not None:
                        edges[mod].add(t)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                base = target(node.module)
                if base is None:
                    continue
                for alias in node.names:  # a submodule, or a name defined by the (sub)package
                    sub = alias.name if base == "__init__" else f"{base}.{alias.name}"
                    edges[mod].add(sub if sub in modules else base)
    for mod in edges:
        edges[mod].discard(mod)
    return edges


def find_cycle(edges: dict[str, set[str]]):
    """One cycle of the directed graph as a list of nodes (first node repeated at the end), or None."""
    colour = {n: 0 for n in edges}  # 0 new, 1 on the stack, 2 done
    stack: list[str] = []

    def visit(n):
        colour[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if colour.get(m, 2) == 1:
                return stack[stack.index(m):] + [m]
            if colour.get(m, 2) == 0:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        colour[n] = 2
        return None

    for n in sorted(edges):
        if colour[n] == 0:
            found = visit(n)
            if found:
                return found
    return None


def _package_sources(package: str) -> dict[str, str]:
    prefix = f"noisealloc.{package}"
    return {("__init__" if name == prefix else name[len(prefix) + 1:]): path.read_text(encoding="utf-8")
            for name, path in module_files(package).items()}


def subpackage_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between the top-level parts of a layer (its subpackages and top modules)."""
    out: dict[str, set[str]] = {}
    for mod, targets in edges.items():
        head = mod.split(".")[0]
        out.setdefault(head, set())
        for t in targets:
            if t.split(".")[0] != head and t != "__init__" and head != "__init__":
                out[head].add(t.split(".")[0])
    return out


@pytest.mark.parametrize("package", ALL_PACKAGES)
def test_subpackages_import_one_way(package):
    """Inside a layer, subpackages depend on each other without cycles (e.g. models -> posterior, never back)."""
    graph = subpackage_edges(import_edges(package, _package_sources(package)))
    cycle = find_cycle(graph)
    assert cycle is None, f"subpackages of noisealloc.{package} import each other in a cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("package", ALL_PACKAGES + ("commands",))
def test_import_graph_has_no_cycle(package):
    edges = import_edges(package, _package_sources(package))
    cycle = find_cycle(edges)
    assert cycle is None, f"import cycle inside noisealloc.{package}: " + " -> ".join(cycle)


def test_cycle_finder_fires_across_subpackages():
    sources = {
        "__init__": "",
        "models": "",
        "models.dirac": "from noisealloc.theory.posterior.quad import q\n",
        "posterior": "",
        "posterior.quad": "def q():\n    from noisealloc.theory.models import dirac\n",
    }
    edges = import_edges("theory", sources)
    assert edges["models.dirac"] == {"posterior.quad"} and edges["posterior.quad"] == {"models.dirac"}
    assert find_cycle(edges) == ["models.dirac", "posterior.quad", "models.dirac"]
    assert find_cycle(subpackage_edges(edges)) == ["models", "posterior", "models"]


def test_cycle_finder_fires():
    sources = {
        "__init__": "from noisealloc.solvers.a import f\n",
        "a": "def f():\n    from noisealloc.solvers import b\n    return b\n",
        "b": "import numpy\nfrom noisealloc.solvers.c import g\n",
        "c": "def g():\n    from noisealloc.solvers.a import f\n",
    }
    edges = import_edges("solvers", sources)
    assert edges["a"] == {"b"} and edges["b"] == {"c"} and edges["c"] == {"a"}
    assert find_cycle(edges) == ["a", "b", "c", "a"]
    # a re-exported name imported from the package is an edge to __init__
    edges = import_edges("solvers", {"__init__": "from noisealloc.solvers.a import f\n",
                                     "a": "def h():\n    from noisealloc.solvers import f\n"})
    assert find_cycle(edges) == ["__init__", "a", "__init__"]
    assert find_cycle({"x": {"y"}, "y": set()}) is None


# ----------------------------------------------------------------------------- bare-name trap


@pytest.mark.parametrize("package", ALL_PACKAGES)
def test_bare_folder_import_fails_clearly(package):
    proc = subprocess.run([sys.executable, "-c", f"import {package}"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError:") and f"import noisealloc.{package}" in last, last
