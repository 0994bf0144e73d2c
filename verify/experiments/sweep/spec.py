r"""Sweep files: the TOML grid of cells, its validation and its expansion into cells.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
import importlib


__all__ = ['CELL_KINDS', 'SweepSpec', 'load_sweep', 'parse_sweep', 'expand_grid', 'cell_parameters']


#: Built-in cell functions (``name -> "module:function"``).
CELL_KINDS = {
    "coupling": "noisealloc.verify.experiments.sweep.cells:cell_coupling",
    "training": "noisealloc.verify.experiments.sweep.cells:cell_training",
    "demo": "noisealloc.verify.experiments.sweep.cells:cell_demo",
    "neural": "noisealloc.verify.experiments.neural_efficiency:cell_neural",
    # The masked-diffusion training cells of figure 7 (docs/THEORY.md §7).
    "masked": "noisealloc.verify.experiments.masked_efficiency:cell_masked",
    # The shared artifacts (entropy-rate profiles, pilot runs) of regime (iii)'s schedules, built first.
    "fig6-schedule": "noisealloc.verify.experiments.neural_efficiency:cell_schedule",
    # Figure 6's regimes (i) and (ii), one cell per data set / schedule, so that `reproduce` caches them too.
    "fig6-coupled": "noisealloc.verify.experiments.regime_cells:cell_coupled",
    "fig6-independent": "noisealloc.verify.experiments.regime_cells:cell_independent",
}


# ----------------------------------------------------------------------------- specification
@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep file.

    Attributes
    ----------
    name : str
        The sweep's name (``[sweep] name``).
    kind : str
        The cell function as ``"module:function"`` (a key of :data:`CELL_KINDS` resolved).
    fixed : dict
        Options shared by every cell (``[fixed]``).
    grid : dict of str to list
        The axes whose Cartesian product is the set of cells (``[grid]``, in file order).
    summary : dict
        The summary plot's options (``[summary]``: ``x``, ``y``, ``group``, labels).
    n_cells : int
        Number of cells (product of the axis lengths).
    """

    name: str
    kind: str
    fixed: dict
    grid: dict
    summary: dict = field(default_factory=dict)

    @property
    def n_cells(self) -> int:
        # Python integers: a numpy product of axis lengths overflows silently for huge grids.
        return math.prod(len(v) for v in self.grid.values())


#: Keys of the ``[sweep]`` table.
SWEEP_KEYS = ("name", "kind")
#: Keys of the ``[summary]`` table (the plot's options).
SUMMARY_KEYS = ("x", "y", "group", "logx", "logy", "xlabel", "ylabel", "title")
#: A sweep name: one path component, so ``sweep-<name>`` never leaves the working directory.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: Smallest value of integer cell parameters, where a smaller one cannot give a result.
_PARAM_MINIMUM = {"seed": 0, "seeds": 1, "cells": 1, "levels": 3, "J": 1, "N": 1, "q": 1, "eval_levels": 2, "eval_n": 1, "h_levels": 3,
                  "h_samples": 2, "steps": 1, "batch_size": 1, "width": 1, "depth": 1, "checkpoints": 1,
                  "online_refresh": 1, "pilot_steps": 1}


#: Largest values of size parameters (theory.request_limits), and the choices of a few others: a cell
#: must never be the first to find a bad value (it fails inside a running cluster, exit 1).
def _param_maximum() -> dict:
    from noisealloc.theory.request_limits import MAX_FEATURES, MAX_LEVELS, MAX_OPTIMIZE_LEVELS, MAX_SAMPLES

    return {"levels": MAX_OPTIMIZE_LEVELS, "J": MAX_OPTIMIZE_LEVELS, "eval_levels": MAX_LEVELS,
            "h_levels": MAX_LEVELS, "h_samples": MAX_SAMPLES, "eval_n": MAX_SAMPLES, "q": MAX_FEATURES}


def _param_choices() -> dict:
    from noisealloc.theory.weights import LOSS_WEIGHTS, MASKED_LOSS_WEIGHTS

    # either process's weights: the cell checks its own (a Gaussian cell refuses "alpha", a masked one "edm")
    return {"criterion": ("L", "sandwich"), "loss_weight": tuple(dict.fromkeys(LOSS_WEIGHTS + MASKED_LOSS_WEIGHTS))}


def _check_cells(source: str, fixed: dict, grid: dict, allow_large: bool) -> None:
    """Values a cell would refuse: sizes above the limits, unknown choices, bad data SPECs (each value
    once), an inverted interval in any cell (every lam_min against every lam_max)."""
    maximum, choices = _param_maximum(), _param_choices()
    values = {k: [v] for k, v in fixed.items()}
    values.update({k: list(v) for k, v in grid.items()})
    where = {k: "[fixed]" if k in fixed else "[grid]" for k in values}
    for key, vals in values.items():
        for v in vals:
            if key in maximum and not allow_large and isinstance(v, (int, float)) and not isinstance(v, bool) \
                    and v > maximum[key]:
                raise ValueError(f"{source}: {where[key]} {key} = {v!r} is above the limit {maximum[key]}; pass "
                                 "--allow-large to lift it")
            if key in choices and v not in choices[key]:
                raise ValueError(f"{source}: {where[key]} {key} = {v!r} must be one of {choices[key]}")
    if "data" in values:
        from noisealloc.theory.models.datasets import check_spec

        for spec in dict.fromkeys(v for v in values["data"] if isinstance(v, str)):
            try:
                check_spec(spec)
            except (ValueError, OSError) as exc:
                raise ValueError(f"{source}: {where['data']} data = {spec!r}: {exc}") from None
    lows, highs = values.get("lam_min"), values.get("lam_max")
    if lows is not None or highs is not None:
        for lo in lows or [None]:
            for hi in highs or [None]:
                if lo is not None and hi is not None and not lo < hi:
                    raise ValueError(f"{source}: lam_min = {lo!r} and lam_max = {hi!r} meet in a cell; every cell "
                                     "needs lam_min < lam_max")


def cell_parameters(kind: str) -> dict:
    """The parameters a registered cell kind accepts, with their type and whether they are required.

    Read from the cell function's keyword-only signature, so a kind declares its parameters once.

    Parameters
    ----------
    kind : str
        A key of :data:`CELL_KINDS`.

    Returns
    -------
    dict of str to tuple
        ``name -> (type annotation as a string, required)``.

    Raises
    ------
    ValueError
        ``kind`` is not registered.

    Examples
    --------
    >>> cell_parameters("demo")["a"]
    ('float', True)
    """
    import inspect

    if kind not in CELL_KINDS:
        raise ValueError(f"cell kind {kind!r} is not registered; allowed: {', '.join(CELL_KINDS)}")
    fn = _resolve(CELL_KINDS[kind])
    out = {}
    for name, par in inspect.signature(fn).parameters.items():
        if par.kind is par.KEYWORD_ONLY:
            ann = par.annotation if isinstance(par.annotation, str) else getattr(par.annotation, "__name__", "")
            out[name] = (str(ann), par.default is par.empty)
    return out


def _check_value(source: str, where: str, key: str, value, ann: str) -> None:
    """Refuse a cell option whose type does not match its annotation, or a non-finite number."""
    types = {t.strip() for t in ann.split("|")}
    bad = None
    if isinstance(value, bool):
        bad = "bool" not in types
    elif isinstance(value, int):
        bad = not types & {"int", "float"}
    elif isinstance(value, float):
        if "float" not in types:
            bad = True
        elif not math.isfinite(value):
            raise ValueError(f"{source}: {where} {key} = {value!r} must be a finite number")
    elif isinstance(value, str):
        bad = "str" not in types
    else:
        bad = True
    if bad and types & {"int", "float", "str", "bool"}:
        raise ValueError(f"{source}: {where} {key} = {value!r} must be of type {ann}")
    minimum = _PARAM_MINIMUM.get(key)
    if minimum is not None and isinstance(value, (int, float)) and not isinstance(value, bool) and value < minimum:
        raise ValueError(f"{source}: {where} {key} = {value!r} must be >= {minimum}")


def parse_sweep(doc: dict, *, source: str = "<dict>", allow_large: bool = False) -> SweepSpec:
    """Validate a sweep document (the TOML as a dict).

    Every check happens here, before any cell runs: the kind is a key of :data:`CELL_KINDS` (a
    sweep file never names a callable), the name is one path component, the keys of every table are
    known (those of ``[fixed]`` and ``[grid]`` are the kind's :func:`cell_parameters`), values have
    the parameter's type and are finite, and the grid has at most
    :data:`noisealloc.theory.request_limits.MAX_SWEEP_CELLS` cells.

    Parameters
    ----------
    doc : dict
        Tables ``sweep`` (``name``, ``kind``), and optionally ``fixed``, ``grid``, ``summary``.
    source : str
        Where the document came from, for the error messages.
    allow_large : bool
        Lift the limit on the number of cells.

    Returns
    -------
    SweepSpec

    Raises
    ------
    ValueError
        Naming the table or key that is missing, misspelt or of the wrong type.

    Examples
    --------
    >>> spec = parse_sweep({"sweep": {"name": "demo", "kind": "demo"}, "grid": {"a": [1.0, 2.0], "seed": [0, 1, 2]}})
    >>> spec.kind, spec.n_cells
    ('noisealloc.verify.experiments.sweep.cells:cell_demo', 6)
    """
    from noisealloc.theory.request_limits import MAX_SWEEP_CELLS

    if not isinstance(doc, dict) or not isinstance(doc.get("sweep"), dict):
        raise ValueError(f"{source}: a sweep file needs a [sweep] table with 'name' and 'kind'")
    head = doc["sweep"]
    unknown = sorted(set(head) - set(SWEEP_KEYS))
    if unknown:
        raise ValueError(f"{source}: unknown keys {unknown} in [sweep]; allowed: {', '.join(SWEEP_KEYS)}")
    name = head.get("name")
    kind = head.get("kind")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{source}: [sweep] name must be a non-empty string; got {name!r}")
    if not _NAME_RE.fullmatch(name):
        raise ValueError(f"{source}: [sweep] name {name!r} must be one path component: letters, digits, '.', '_', "
                         "'-', starting with a letter or digit, at most 100 characters")
    if not isinstance(kind, str) or kind not in CELL_KINDS:
        raise ValueError(f"{source}: [sweep] kind must be one of {tuple(CELL_KINDS)} (a sweep file names a "
                         f"registered kind, never a function); got {kind!r}")
    target = CELL_KINDS[kind]
    grid = doc.get("grid", {})
    if not isinstance(grid, dict):
        raise ValueError(f"{source}: [grid] must be a table of lists")
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise ValueError(f"{source}: grid axis {k!r} must be a non-empty list; got {v!r}")
    fixed = doc.get("fixed", {})
    if not isinstance(fixed, dict):
        raise ValueError(f"{source}: [fixed] must be a table")
    both = set(fixed) & set(grid)
    if both:
        raise ValueError(f"{source}: keys {sorted(both)} appear in both [fixed] and [grid]")
    extra = set(doc) - {"sweep", "grid", "fixed", "summary"}
    if extra:
        raise ValueError(f"{source}: unknown tables {sorted(extra)}; allowed: sweep, fixed, grid, summary")
    params = cell_parameters(kind)
    for table, keys in (("[fixed]", fixed), ("[grid]", grid)):
        unknown = [k for k in keys if k not in params]
        if unknown:
            raise ValueError(f"{source}: unknown keys {unknown} in {table} for kind {kind!r}; allowed: "
                             f"{', '.join(params)}")
    missing = [k for k, (_ann, required) in params.items() if required and k not in fixed and k not in grid]
    if missing:
        raise ValueError(f"{source}: kind {kind!r} needs {missing} in [fixed] or [grid]")
    for k, v in fixed.items():
        _check_value(source, "[fixed]", k, v, params[k][0])
    for k, values in grid.items():
        for v in values:
            _check_value(source, "[grid]", k, v, params[k][0])
    n_cells = math.prod(len(v) for v in grid.values())
    if n_cells > MAX_SWEEP_CELLS and not allow_large:
        raise ValueError(f"{source}: the grid has {n_cells} cells, above the limit {MAX_SWEEP_CELLS}; pass "
                         "--allow-large to lift it")
    _check_cells(source, fixed, grid, allow_large)
    if not isinstance(doc.get("summary", {}), dict):
        raise ValueError(f"{source}: [summary] must be a table")
    summary = dict(doc.get("summary", {}))
    unknown = sorted(set(summary) - set(SUMMARY_KEYS))
    if unknown:
        raise ValueError(f"{source}: unknown keys {unknown} in [summary]; allowed: {', '.join(SUMMARY_KEYS)}")
    for k in ("x", "group"):
        if k in summary and summary[k] not in grid:
            raise ValueError(f"{source}: summary.{k} = {summary[k]!r} must name a grid axis {tuple(grid)}")
    return SweepSpec(name, target, dict(fixed), {k: list(v) for k, v in grid.items()}, summary)


def load_sweep(path, *, allow_large: bool = False) -> SweepSpec:
    """Read and validate a sweep TOML file.

    Parameters
    ----------
    path : str or os.PathLike
        The TOML file (format in the module docstring).
    allow_large : bool
        Lift the limit on the number of cells (:func:`parse_sweep`).

    Returns
    -------
    SweepSpec

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not valid TOML, or not a valid sweep (see :func:`parse_sweep`).
    """
    import tomllib

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"sweep file not found: {path}")
    with open(path, "rb") as fh:
        try:
            doc = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: not valid TOML: {exc}") from None
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: not valid TOML (not UTF-8: {exc.reason})") from None
    return parse_sweep(doc, source=str(path), allow_large=allow_large)


def expand_grid(spec: SweepSpec) -> list[dict]:
    """The cells: ``fixed | point`` for each point of the Cartesian product (first axis slowest).

    Parameters
    ----------
    spec : SweepSpec

    Returns
    -------
    list of dict
        One configuration per cell, ``spec.n_cells`` of them, last grid axis varying fastest.

    Examples
    --------
    >>> spec = parse_sweep({"sweep": {"name": "d", "kind": "demo"}, "fixed": {"b": 2.0},
    ...                     "grid": {"a": [1, 2], "seed": [0, 1]}})
    >>> expand_grid(spec)[:2]
    [{'b': 2.0, 'a': 1, 'seed': 0}, {'b': 2.0, 'a': 1, 'seed': 1}]
    """
    axes = list(spec.grid)
    cells = []
    for values in itertools.product(*(spec.grid[a] for a in axes)):
        cells.append({**spec.fixed, **dict(zip(axes, values))})
    return cells


def _resolve(target: str):
    # Only registered targets are ever imported: a sweep file or a cached record cannot make a
    # worker import and call an arbitrary function.
    if target not in CELL_KINDS.values():
        raise ValueError(f"cell function {target!r} cannot be imported: not a registered kind "
                         f"({', '.join(CELL_KINDS)})")
    mod_name, fn_name = target.split(":", 1)
    try:
        mod = importlib.import_module(mod_name)
        return getattr(mod, fn_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cell function {target!r} cannot be imported: {exc}") from None
