"""Packaging and layering rules.

* Importing the package and the coordinates is cheap: neither numba nor matplotlib is loaded.
* Data flows one way, theory -> solvers -> verify -> figures: a module never imports a higher
  layer (anywhere in the file), matplotlib never appears at module top of theory/, solvers/,
  verify/, numba is imported only through noisealloc.theory._numba, and imports are absolute
  (``from noisealloc.theory import x``; never ``import theory`` or relative imports).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("theory", "solvers", "verify", "figures")
HIGHER = {layer: {f"noisealloc.{h}" for h in LAYERS[i + 1:]} | {"noisealloc.cli", "noisealloc.commands"}
          for i, layer in enumerate(LAYERS)}
BARE = {"theory", "solvers", "verify", "figures"}


def _modules_after(code: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "import noisealloc, noisealloc.theory.coordinates",
    "import noisealloc.theory.schedules, noisealloc.theory.weights, noisealloc.theory.schedules.io",
    "import noisealloc.cli; noisealloc.cli.build_parser()",
])
def test_import_is_light(code):
    mods = _modules_after(code)
    heavy = {m.split(".")[0] for m in mods} & {"matplotlib", "numba", "sklearn", "dask", "torch"}
    assert not heavy, f"{code!r} imported {sorted(heavy)}"


def test_import_check_can_fail():
    """The subprocess check does see a heavy import (guards the test above)."""
    assert "matplotlib" in _modules_after("import matplotlib")


def _imports(tree: ast.AST, top_only: bool):
    nodes = ast.walk(tree) if not top_only else _top_level(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name, 0
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            yield node, base, node.level
            for alias in node.names:  # `from noisealloc import verify`
                if base:
                    yield node, f"{base}.{alias.name}", node.level


def _top_level(tree):
    # module body, including imports nested in top-level if/try blocks (but not in functions/classes)
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []) or []:
                    stack.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])


def layer_violations(layer: str, path: Path, source: str) -> list[str]:
    tree = ast.parse(source, filename=str(path))
    rel = path.relative_to(REPO)
    out = []
    flagged: set[int] = set()  # one message per import statement
    for node, name, level in _imports(tree, top_only=False):
        if id(node) in flagged:
            continue
        n_before = len(out)
        where = f"{rel}:{node.lineno}"
        if level:
            out.append(f"{where}: relative import (use absolute `noisealloc.{layer}...` imports)")
        elif name.split(".")[0] in BARE:
            out.append(f"{where}: bare import of {name!r} (use `noisealloc.{name}`)")
        elif any(name == h or name.startswith(h + ".") for h in HIGHER[layer]):
            out.append(f"{where}: {layer}/ imports the higher layer {name!r}")
        elif name.split(".")[0] == "numba" and rel.as_posix() != "theory/_numba.py":
            out.append(f"{where}: numba imported outside noisealloc.theory._numba")
        if len(out) > n_before:
            flagged.add(id(node))
    if layer != "figures":
        for node, name, _ in _imports(tree, top_only=True):
            if name.split(".")[0] == "matplotlib":
                out.append(f"{rel}:{node.lineno}: matplotlib imported at module top of {layer}/")
    return out


def test_layer_rule_checker_catches_violations():
    bad = (
        "import matplotlib.pyplot as plt\n"
        "from noisealloc.verify import checks\n"
        "from . import coordinates\n"
        "import theory.schedules\n"
        "import numba\n"
        "from noisealloc import figures\n"
        "def f():\n    from noisealloc.solvers import x\n"
    )
    msgs = layer_violations("theory", REPO / "theory" / "fake.py", bad)
    text = "\n".join(msgs)
    for needle in ("matplotlib imported at module top", "'noisealloc.verify'", "relative import",
                   "bare import of 'theory.schedules'", "numba imported outside", "'noisealloc.figures'",
                   "'noisealloc.solvers'"):
        assert needle in text, (needle, text)
    ok = "import numpy as np\nfrom noisealloc.theory import errors\ndef f():\n    import matplotlib\n"
    assert layer_violations("solvers", REPO / "solvers" / "fake.py", ok) == []


def test_layer_rule():
    problems = []
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            problems += layer_violations(layer, path, path.read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------------------- extras (issue 25)

#: Runs the command line with the optional dependencies hidden, as after `pip install noisealloc`.
_WITHOUT_EXTRAS = """
import sys, importlib.abc
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"jax", "jaxlib", "optax", "dask", "distributed"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Hide())
from noisealloc.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _run_without_extras(args, tmp_path):
    return subprocess.run([sys.executable, "-c", _WITHOUT_EXTRAS, *args], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)


def test_plain_install_computes_without_the_extras(tmp_path):
    proc = _run_without_extras(["entropy", "--data", "dirac:K=3,D=1", "--levels", "9", "--out", "e.json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "e.json").exists()


def test_a_missing_extra_is_one_line_naming_it(tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text('[sweep]\nname = "demo"\nkind = "demo"\n[grid]\na = [1.0, 2.0]\n')
    proc = _run_without_extras(["sweep", str(sweep), "--out", str(tmp_path / "o")], tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "noisealloc[sweep]" in lines[0] and "distributed" in lines[0], proc.stderr
    assert not (tmp_path / "o").exists()
    proc = _run_without_extras(["reproduce", "--quick", "--out", str(tmp_path / "r")], tmp_path)
    assert proc.returncode == 2 and "noisealloc[" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_light_imports_load_no_extra():
    mods = _modules_after("import noisealloc.theory.schedules.samplers, noisealloc.verify.experiments.sweep, "
                          "noisealloc.verify.experiments, noisealloc.cli; noisealloc.cli.build_parser()")
    assert not {m.split(".")[0] for m in mods} & {"jax", "optax", "dask", "distributed"}


def test_no_binary_file_is_tracked():
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    binary = []
    for name in filter(None, files):
        path = REPO / name.decode()
        if path.is_file() and b"\0" in path.read_bytes()[:8192]:
            binary.append(name.decode())
    assert not binary, binary
