"""The package tree as the tests walk it: every module of a layer, subpackages included."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The four layers, bottom to top; each imports only those before it.
LAYERS = ("theory", "solvers", "verify", "figures")


def layer_folder(layer: str) -> Path:
    """Folder of a layer (``commands`` lives under ``noisealloc/``)."""
    return REPO / "noisealloc" / layer if layer == "commands" else REPO / layer


def module_files(layer: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``noisealloc.<layer>`` (packages as their ``__init__``)."""
    folder = layer_folder(layer)
    out = {}
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(folder).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([f"noisealloc.{layer}"] + parts)] = path
    return out
