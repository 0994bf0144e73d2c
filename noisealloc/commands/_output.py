"""Atomic output for the command-line program: files appear complete or not at all."""

from __future__ import annotations

import json
from pathlib import Path


def savefig_atomic(fig, path, *, dpi: int = 120) -> Path:
    """Save a matplotlib figure to ``path`` through a temporary file in the same folder, then rename."""
    from noisealloc.theory.schedule_io import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, lambda fh: fig.savefig(fh, format=path.suffix.lstrip(".") or "png", dpi=dpi))


def write_json_atomic(path, obj, *, indent: int | None = 1) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically."""
    from noisealloc.theory.schedule_io import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, lambda fh: fh.write(json.dumps(obj, indent=indent).encode()))
