"""Provenance of the figures' numbers: what request produced them, so a rerun can reuse them and a
report never mixes runs.

For every figure that ``noisealloc reproduce`` computes it writes ``NAME.provenance.json`` beside the
numbers: the request (figure, mode, seed, MNIST directory, toolkit version and a hash of the
toolkit's source code), the request's hash and the SHA-256 of the numbers file.  A later run with the
same request finds the numbers *current* (the hash matches and the numbers file is the one that was
written) and skips the figure; REPORT.md lists the provenance of every figure it reads and refuses to
combine numbers of different requests.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

__all__ = ["code_hash", "make_request", "request_hash", "write_provenance", "read_provenance", "is_current",
           "mixed_runs"]

#: Fields of a request that must agree between every figure of one REPORT.md.
SHARED_FIELDS = ("mode", "seed", "mnist", "version", "code_hash")
_PACKAGES = ("noisealloc", "noisealloc.theory", "noisealloc.solvers", "noisealloc.verify", "noisealloc.figures")


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def code_hash() -> str:
    """SHA-256 over the toolkit's Python sources (every module of its five packages).

    Returns
    -------
    str
        Hex digest; it changes whenever any source file of the toolkit changes, so numbers computed
        by other code are never reused.
    """
    import importlib

    h = hashlib.sha256()
    for pkg in _PACKAGES:
        folder = Path(importlib.import_module(pkg).__file__).parent
        for path in sorted(folder.rglob("*.py")):
            h.update(f"{pkg}/{path.relative_to(folder).as_posix()}\0".encode())
            h.update(path.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def make_request(figure: str, *, quick: bool, seed: int, mnist, code: str | None = None) -> dict:
    """The request that determines a figure's numbers.

    Parameters
    ----------
    figure : str
        Figure module name (``'fig1_entropy'``).
    quick : bool
        Quick or full sizes.
    seed : int
        Seed of the figure.
    mnist : str or None
        MNIST directory used, or None.
    code : str, optional
        :func:`code_hash` (computed when not given).

    Returns
    -------
    dict
        ``figure``, ``mode`` ('--quick' or '--full'), ``seed``, ``mnist``, ``version``, ``code_hash``.
    """
    from noisealloc import __version__

    return {"figure": str(figure), "mode": "--quick" if quick else "--full", "seed": int(seed),
            "mnist": None if mnist is None else str(Path(mnist).resolve()), "version": __version__,
            "code_hash": code if code is not None else code_hash()}


def request_hash(request: dict) -> str:
    """SHA-256 of a request's canonical JSON (sorted keys).

    Parameters
    ----------
    request : dict
        From :func:`make_request`.

    Returns
    -------
    str
        Hex digest.
    """
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


def write_provenance(out_dir, request: dict) -> Path:
    """Write ``NAME.provenance.json`` for the numbers file ``NAME.json`` just written.

    Parameters
    ----------
    out_dir : path-like
        Folder of the figure's outputs.
    request : dict
        The request that produced them.

    Returns
    -------
    pathlib.Path
        The provenance file.
    """
    from noisealloc.figures import _common as C

    out = Path(out_dir)
    name = request["figure"]
    doc = {"request": request, "request_hash": request_hash(request),
           "numbers_sha256": _sha256_file(out / f"{name}.json")}
    return C.write_json(out / f"{name}.provenance.json", doc)


def read_provenance(out_dir, figure: str):
    """The provenance record of ``figure`` in ``out_dir``, or None when missing or unreadable.

    Parameters
    ----------
    out_dir : path-like
    figure : str

    Returns
    -------
    dict or None
    """
    path = Path(out_dir) / f"{figure}.provenance.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("request"), dict) else None


def is_current(out_dir, request: dict) -> bool:
    """Whether the numbers and PNG in ``out_dir`` were produced by exactly this request.

    Parameters
    ----------
    out_dir : path-like
    request : dict

    Returns
    -------
    bool
        True when the provenance record's request hash equals this request's, and the numbers file
        is the one recorded (same SHA-256) and the PNG exists.
    """
    out = Path(out_dir)
    name = request["figure"]
    prov = read_provenance(out, name)
    numbers = out / f"{name}.json"
    if prov is None or prov.get("request_hash") != request_hash(request):
        return False
    if not numbers.is_file() or not (out / f"{name}.png").is_file():
        return False
    return _sha256_file(numbers) == prov.get("numbers_sha256")


def mixed_runs(out_dir, figures, reference: dict | None = None) -> list[str]:
    """Reasons why the numbers files of ``figures`` in ``out_dir`` do not come from one request.

    Parameters
    ----------
    out_dir : path-like
    figures : iterable of str
        Figures whose numbers files, where present, will be read together.
    reference : dict, optional
        A request (:func:`make_request`) every record must agree with in :data:`SHARED_FIELDS`
        (used before a partial run, so that it refuses before computing anything).

    Returns
    -------
    list of str
        Empty when every present numbers file has a provenance record, matches it, and all
        records agree in :data:`SHARED_FIELDS`; otherwise one line per problem.
    """
    out = Path(out_dir)
    problems, first = [], None
    if reference is not None:
        first = ("this run", {k: reference.get(k) for k in SHARED_FIELDS})
    for name in figures:
        if not (out / f"{name}.json").is_file():
            continue
        prov = read_provenance(out, name)
        if prov is None:
            problems.append(f"{name}.json has no provenance record (written outside noisealloc reproduce?)")
            continue
        if _sha256_file(out / f"{name}.json") != prov.get("numbers_sha256"):
            problems.append(f"{name}.json was changed after its provenance record was written")
            continue
        shared = {k: prov["request"].get(k) for k in SHARED_FIELDS}
        if first is None:
            first = (name, shared)
        elif shared != first[1]:
            diff = ", ".join(f"{k} {first[1][k]!r} vs {shared[k]!r}" for k in SHARED_FIELDS if first[1][k] != shared[k])
            problems.append(f"{name} and {first[0]} come from different requests ({diff})")
    return problems
