r"""Export and import of schedules: versioned JSON and ``.npz``.

Schema ``noisealloc.schedule`` version 1 (one schedule; JSON object or npz arrays):

=================  ==========================================================================
key                meaning
=================  ==========================================================================
``format``         ``"noisealloc.schedule"``
``version``        ``1``
``name``           schedule name
``coordinate``     coordinate name (:data:`noisealloc.theory.coordinates.COORDINATES`)
``interval``       ``[lo, hi]`` in that coordinate (= first and last knot)
``knots``          K strictly increasing knots :math:`x_i`
``pdf``            normalised density :math:`f_i > 0` at the knots; the density is
                   piecewise linear between knots
``cdf``            :math:`F(x_i)`, ``cdf[0] = 0``, ``cdf[-1] = 1`` up to rounding
``inverse_cdf``    ``{"q": levels, "u": values}``: exact quantiles :math:`u_j = F^{-1}(q_j)` at
                   equally spaced levels, for readers that only want ``np.interp``
``meta``           free-form JSON object (provenance: parameters, lam interval, tool version)
=================  ==========================================================================

In ``.npz`` the same keys are arrays (``interval`` shape (2,), ``inverse_cdf_q`` and
``inverse_cdf_u`` instead of the nested object, ``meta`` a JSON string), all readable
with ``allow_pickle=False``.

A file of several schedules (``noisealloc schedules --out``) is the JSON object
``{"format": "noisealloc.schedules", "version": 1, "schedules": [<schedule>, ...], "meta": {...}}``.

Parametric schedules are exported by tabulating them (:meth:`Schedule.tabulate`);
a :class:`TabulatedSchedule` round-trips to ``tolerances.EXPORT_ROUNDTRIP_RTOL``
(JSON stores floats with ``repr``, which is exact; the loader re-normalises,
which can move the last bit).  Files are written atomically (temporary file in
the same directory, then ``os.replace``).

:func:`sample_from_table` samples a loaded schedule with numpy only, by the exact
inverse of the piecewise-quadratic CDF.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from noisealloc.theory import tolerances
from noisealloc.theory.output import atomic_write, write_json
from noisealloc.theory.schedules._inverse_cdf import check_table, draw_piecewise_linear
from noisealloc.theory.schedules.base import Schedule, TabulatedSchedule

__all__ = [
    "FORMAT",
    "COLLECTION_FORMAT",
    "VERSION",
    "schedule_to_dict",
    "schedule_from_dict",
    "save_json",
    "load_json",
    "save_npz",
    "load_npz",
    "save_schedules_json",
    "load_schedules_json",
    "sample_from_table",
]

FORMAT = "noisealloc.schedule"
COLLECTION_FORMAT = "noisealloc.schedules"
VERSION = 1
#: Number of equally spaced levels in the exported inverse-CDF table.
N_INVERSE_CDF = 1025


def _as_tabulated(schedule: Schedule, n: int, spacing: str) -> TabulatedSchedule:
    if isinstance(schedule, TabulatedSchedule):
        return schedule
    if not isinstance(schedule, Schedule):
        raise TypeError(f"schedule must be a Schedule; got {type(schedule).__name__}")
    return schedule.tabulate(n, spacing)


def schedule_to_dict(schedule: Schedule, *, n: int = 513, spacing: str = "both", meta: dict | None = None) -> dict:
    """Schema-v1 dictionary of ``schedule`` (tabulated with ``n`` knots unless already tabulated).

    Parameters
    ----------
    schedule : Schedule
        Any schedule of :mod:`noisealloc.theory.schedules`.
    n : int, default 513
        Knots of the tabulation of a parametric schedule (:meth:`Schedule.tabulate`;
        duplicates are removed, so the file can hold a few fewer).  Ignored for a
        :class:`~noisealloc.theory.schedules.base.TabulatedSchedule`, which is written as is.
    spacing : {'uniform', 'quantile', 'both'}, default 'both'
        Knot placement of that tabulation.
    meta : dict, optional
        JSON-serialisable provenance; ``lam_interval`` and ``source`` are added
        unless given.

    Returns
    -------
    dict
        Keys ``format``, ``version``, ``name``, ``coordinate``, ``interval``, ``knots``,
        ``pdf``, ``cdf``, ``inverse_cdf`` (``{"q", "u"}``, 1025 levels) and ``meta``
        (see the module docstring); arrays as lists of floats.

    Examples
    --------
    >>> from noisealloc.theory.schedules import TabulatedSchedule
    >>> d = schedule_to_dict(TabulatedSchedule([0.0, 1.0, 2.0], [1.0, 2.0, 1.0]))
    >>> d["format"], d["version"], d["cdf"]
    ('noisealloc.schedule', 1, [0.0, 0.5, 1.0])
    >>> [round(v, 6) for v in d["pdf"]]                 # normalised
    [0.333333, 0.666667, 0.333333]
    """
    tab = _as_tabulated(schedule, n, spacing)
    q = np.linspace(0.0, 1.0, N_INVERSE_CDF)
    meta = dict(meta or {})
    meta.setdefault("lam_interval", list(schedule.lam_interval))
    meta.setdefault("source", type(schedule).__name__)
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": tab.name,
        "coordinate": tab.coordinate.name,
        "interval": [float(v) for v in tab.interval],
        "knots": tab.knots.tolist(),
        "pdf": tab.pdf_values.tolist(),
        "cdf": tab.cdf_values.tolist(),
        "inverse_cdf": {"q": q.tolist(), "u": np.asarray(tab.ppf(q), dtype=np.float64).tolist()},
        "meta": meta,
    }


def read_json(fh):
    """``json.load(fh)``, with a document nested too deeply for the parser (a RecursionError) refused as
    a ValueError naming the file."""
    try:
        return json.load(fh)
    except RecursionError:
        raise ValueError(f"{getattr(fh, 'name', 'JSON input')}: JSON nested too deeply to read") from None


def _npz_int(a, key: str, path) -> int:
    a = np.asarray(a)
    if a.shape != () or a.dtype.kind not in "iu":
        raise ValueError(f"{os.fspath(path)}: {key} must be an integer scalar; got dtype {a.dtype}, shape {a.shape}")
    return int(a)


def _check_header(d, fmt: str) -> None:
    if not isinstance(d, dict):
        raise ValueError(f"expected a JSON object with format {fmt!r}; got {type(d).__name__}")
    if d.get("format") != fmt:
        raise ValueError(f"format must be {fmt!r}; got {d.get('format')!r}")
    version = d.get("version")
    if type(version) is not int or version != VERSION:  # JSON true == 1 in Python: not a version
        raise ValueError(f"version must be {VERSION} (supported versions: {VERSION}); got {d.get('version')!r}")


def schedule_from_dict(d: dict) -> TabulatedSchedule:
    """Inverse of :func:`schedule_to_dict`; checks the stored CDF and interval against the knots and pdf.

    Parameters
    ----------
    d : dict
        A schema-v1 entry (``inverse_cdf`` and ``meta`` are optional and not read).

    Returns
    -------
    TabulatedSchedule
        Built from ``knots``, ``pdf``, ``coordinate`` and ``name``.

    Raises
    ------
    ValueError
        Wrong ``format`` or ``version``, missing keys, a stored ``cdf`` that differs
        from the one implied by ``knots`` and ``pdf`` by more than
        ``tolerances.EXPORT_ROUNDTRIP_RTOL``, or an ``interval`` other than the end knots.

    Examples
    --------
    >>> from noisealloc.theory.schedules import TabulatedSchedule
    >>> d = schedule_to_dict(TabulatedSchedule([0.0, 1.0, 2.0], [1.0, 2.0, 1.0]))
    >>> schedule_from_dict(d).cdf_values.tolist()
    [0.0, 0.5, 1.0]
    >>> schedule_from_dict(dict(d, cdf=[0.0, 0.4, 1.0]))
    Traceback (most recent call last):
    ...
    ValueError: cdf of schedule 'tabulated' does not match its knots and pdf (corrupt file?)
    """
    _check_header(d, FORMAT)
    missing = [k for k in ("name", "coordinate", "interval", "knots", "pdf", "cdf") if k not in d]
    if missing:
        raise ValueError(f"schedule entry lacks the keys {missing}")
    tab = TabulatedSchedule(d["knots"], d["pdf"], coordinate=d["coordinate"], name=str(d["name"]))
    for key in ("cdf", "interval"):  # a Python dict may hold complex arrays: never cut to the real part
        if np.iscomplexobj(d[key]):
            raise ValueError(f"{key} of schedule {d['name']!r} must be real; got a complex array")
    stored_cdf = np.asarray(d["cdf"], dtype=np.float64)
    if stored_cdf.shape != tab.cdf_values.shape or not np.allclose(
        stored_cdf, tab.cdf_values, rtol=tolerances.EXPORT_ROUNDTRIP_RTOL, atol=tolerances.EXPORT_ROUNDTRIP_RTOL
    ):
        raise ValueError(f"cdf of schedule {d['name']!r} does not match its knots and pdf (corrupt file?)")
    interval = np.asarray(d["interval"], dtype=np.float64)
    if interval.shape != (2,) or not np.array_equal(interval, np.asarray(tab.interval)):
        raise ValueError(f"interval of schedule {d['name']!r} must equal the first and last knot; got {d['interval']!r}")
    return tab


def save_json(schedule: Schedule, path, *, n: int = 513, spacing: str = "both", meta: dict | None = None) -> Path:
    """Write one schedule as schema-v1 JSON (atomically).

    Parameters
    ----------
    schedule : Schedule
        The schedule to export.
    path : str or path-like
        Destination file.
    n : int, default 513
        Knots of the tabulation of a parametric schedule (:meth:`Schedule.tabulate`;
        duplicates are removed, so the file can hold a few fewer).  Ignored for a
        :class:`~noisealloc.theory.schedules.base.TabulatedSchedule`, which is written as is.
    spacing : {'uniform', 'quantile', 'both'}, default 'both'
        Knot placement of that tabulation.
    meta : dict, optional
        Provenance stored under ``meta``.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> import os, tempfile
    >>> from noisealloc.theory.schedules import edm_lognormal
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     back = load_json(save_json(edm_lognormal(), os.path.join(tmp, "edm.json"), n=257))
    >>> back.name, back.coordinate.name, back.knots.size
    ('edm_lognormal', 'lambda', 255)
    """
    d = schedule_to_dict(schedule, n=n, spacing=spacing, meta=meta)
    return write_json(path, d, sort_keys=False)


def load_json(path) -> TabulatedSchedule:
    """Read one schedule written by :func:`save_json`.

    Parameters
    ----------
    path : str or path-like
        A schema-v1 JSON file.

    Returns
    -------
    TabulatedSchedule

    Raises
    ------
    ValueError
        If the content is not a valid schema-v1 schedule (see :func:`schedule_from_dict`).
    """
    with open(path, encoding="utf-8") as fh:
        return schedule_from_dict(read_json(fh))


def save_npz(schedule: Schedule, path, *, n: int = 513, spacing: str = "both", meta: dict | None = None) -> Path:
    """Write one schedule as ``.npz`` (no object arrays; load with ``allow_pickle=False``), atomically.

    Parameters
    ----------
    schedule : Schedule
        The schedule to export.
    path : str or path-like
        Destination file (give it the ``.npz`` suffix; nothing is appended).
    n : int, default 513
        Knots of the tabulation of a parametric schedule (:meth:`Schedule.tabulate`;
        duplicates are removed, so the file can hold a few fewer).  Ignored for a
        :class:`~noisealloc.theory.schedules.base.TabulatedSchedule`, which is written as is.
    spacing : {'uniform', 'quantile', 'both'}, default 'both'
        Knot placement of that tabulation.
    meta : dict, optional
        Provenance, stored as a JSON string in the ``meta`` array.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> import os, tempfile
    >>> from noisealloc.theory.schedules import TabulatedSchedule
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     back = load_npz(save_npz(TabulatedSchedule([0.0, 1.0, 2.0], [1.0, 2.0, 1.0]), os.path.join(tmp, "s.npz")))
    >>> back.cdf_values.tolist()
    [0.0, 0.5, 1.0]
    """
    d = schedule_to_dict(schedule, n=n, spacing=spacing, meta=meta)
    arrays = {
        "format": np.array(d["format"]),
        "version": np.array(d["version"]),
        "name": np.array(d["name"]),
        "coordinate": np.array(d["coordinate"]),
        "interval": np.array(d["interval"], dtype=np.float64),
        "knots": np.array(d["knots"], dtype=np.float64),
        "pdf": np.array(d["pdf"], dtype=np.float64),
        "cdf": np.array(d["cdf"], dtype=np.float64),
        "inverse_cdf_q": np.array(d["inverse_cdf"]["q"], dtype=np.float64),
        "inverse_cdf_u": np.array(d["inverse_cdf"]["u"], dtype=np.float64),
        "meta": np.array(json.dumps(d["meta"])),
    }
    return atomic_write(path, lambda fh: np.savez(fh, **arrays))


def load_npz(path) -> TabulatedSchedule:
    """Read one schedule written by :func:`save_npz` (``allow_pickle=False``).

    Parameters
    ----------
    path : str or path-like
        An ``.npz`` file with the schema-v1 arrays.

    Returns
    -------
    TabulatedSchedule

    Raises
    ------
    ValueError
        If the arrays are not a valid schema-v1 schedule (see :func:`schedule_from_dict`).
    """
    with np.load(path, allow_pickle=False) as z:
        missing = [k for k in ("format", "version", "name", "coordinate", "interval", "knots", "pdf", "cdf")
                   if k not in z.files]
        if missing:
            raise ValueError(f"{os.fspath(path)}: not a noisealloc schedule npz (missing arrays: {', '.join(missing)})")
        d = {
            "format": str(z["format"]),
            "version": _npz_int(z["version"], "version", path),
            "name": str(z["name"]),
            "coordinate": str(z["coordinate"]),
            "interval": z["interval"],
            "knots": z["knots"],
            "pdf": z["pdf"],
            "cdf": z["cdf"],
        }
    return schedule_from_dict(d)


def save_schedules_json(schedules, path, *, n: int = 513, spacing: str = "both", meta: dict | None = None) -> Path:
    """Write several schedules (a mapping name -> Schedule, or a sequence) to one JSON file, atomically.

    Each entry is stored under its own ``Schedule.name`` (a mapping's keys are not used).

    Parameters
    ----------
    schedules : dict of str -> Schedule, or sequence of Schedule
        Schedules with distinct names.
    path : str or path-like
        Destination file.
    n : int, default 513
        Knots of the tabulation of a parametric schedule (:meth:`Schedule.tabulate`;
        duplicates are removed, so the file can hold a few fewer).  Ignored for a
        :class:`~noisealloc.theory.schedules.base.TabulatedSchedule`, which is written as is.
    spacing : {'uniform', 'quantile', 'both'}, default 'both'
        Knot placement of that tabulation.
    meta : dict, optional
        Provenance of the whole collection.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    ValueError
        If two schedules share a name.

    Examples
    --------
    >>> import os, tempfile
    >>> from noisealloc.theory.schedules import cosine, edm_lognormal
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = save_schedules_json([edm_lognormal(), cosine()], os.path.join(tmp, "schedules.json"))
    ...     loaded = load_schedules_json(path)
    >>> list(loaded)
    ['edm_lognormal', 'cosine']
    >>> round(float(loaded["edm_lognormal"].cdf(2.4)), 4)   # the median of N(2.4, 2.4^2) survives the round trip
    0.5
    """
    items = list(schedules.values()) if isinstance(schedules, dict) else list(schedules)
    names = [s.name for s in items]
    if len(set(names)) != len(names):
        raise ValueError(f"schedule names must be unique; got {names}")
    doc = {
        "format": COLLECTION_FORMAT,
        "version": VERSION,
        "schedules": [schedule_to_dict(s, n=n, spacing=spacing) for s in items],
        "meta": dict(meta or {}),
    }
    return write_json(path, doc, sort_keys=False)


def load_schedules_json(path) -> dict[str, TabulatedSchedule]:
    """Read a file written by :func:`save_schedules_json`: ``{name: TabulatedSchedule}`` in file order.

    Parameters
    ----------
    path : str or path-like
        A ``noisealloc.schedules`` version-1 JSON file.

    Returns
    -------
    dict of str -> TabulatedSchedule
        In file order.

    Raises
    ------
    ValueError
        Wrong format or version, a malformed entry, or a duplicate name.
    """
    with open(path, encoding="utf-8") as fh:
        doc = read_json(fh)
    _check_header(doc, COLLECTION_FORMAT)
    if not isinstance(doc.get("schedules"), list):
        raise ValueError("'schedules' must be a list of schedule entries")
    out: dict[str, TabulatedSchedule] = {}
    for entry in doc["schedules"]:
        tab = schedule_from_dict(entry)
        if tab.name in out:
            raise ValueError(f"duplicate schedule name {tab.name!r} in {path}")
        out[tab.name] = tab
    return out


def sample_from_table(table, n: int, rng=None, *, u_clamp: float = tolerances.U_CLAMP) -> np.ndarray:
    r"""Draw ``n`` samples from an exported table with numpy only (exact inverse CDF).

    ``table`` is a mapping with ``knots``, ``pdf`` and ``cdf`` (a schema-v1 entry,
    or the arrays of an ``.npz``).  In the cell :math:`[x_i, x_{i+1}]` holding the
    level :math:`q`, with :math:`r = q - F_i` and :math:`h = x_{i+1} - x_i`,

    .. math:: u = x_i + \frac{2r}{f_i + \sqrt{f_i^2 + 2 (f_{i+1} - f_i) r / h}} .

    The body uses numpy alone, so it can be copied into a training script.

    Parameters
    ----------
    table : mapping
        Holds ``knots``, ``pdf`` and ``cdf``: 1-D, equal length >= 2.  The density may be 0 on
        runs of knots (a schedule with zero-density tails or gaps): no draw then falls strictly
        inside such a run, and every draw lies in ``[knots[0], knots[-1]]``.
    n : int
        Number of draws, >= 0.
    rng : numpy.random.Generator, int or None
        Source of randomness (a seed gives reproducible draws).
    u_clamp : float
        Levels are clamped to ``[u_clamp, 1 - u_clamp]`` (as in :meth:`Schedule.sample`).

    Returns
    -------
    ndarray, shape (n,)
        Samples in the table's coordinate.

    Examples
    --------
    The same seed gives the same draws as the schedule's own sampler:

    >>> from noisealloc.theory.schedules import TabulatedSchedule
    >>> tab = TabulatedSchedule([0.0, 1.0, 2.0], [1.0, 2.0, 1.0])
    >>> sample_from_table(schedule_to_dict(tab), 4, rng=0).round(6).tolist()
    [1.217241, 0.618246, 0.116173, 0.048411]
    >>> tab.sample(4, rng=0).round(6).tolist()
    [1.217241, 0.618246, 0.116173, 0.048411]
    """
    missing = [k for k in ("knots", "pdf", "cdf") if k not in table]
    if missing:
        raise ValueError(f"table must hold 'knots', 'pdf' and 'cdf'; {missing} missing")
    x, f, C = check_table(table["knots"], table["pdf"], table["cdf"], "table")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be a non-negative integer; got {n!r}")
    # numpy only (no toolkit helper): complex, arrays and NaN are refused by name, never cut or broadcast
    if np.iscomplexobj(u_clamp) or np.ndim(u_clamp) != 0:
        raise ValueError(f"u_clamp must be a real number; got {u_clamp!r}")
    try:
        u_clamp = float(u_clamp)
    except (TypeError, ValueError):
        raise TypeError(f"u_clamp must be a real number; got {u_clamp!r}") from None
    if not 0.0 <= u_clamp < 0.5:  # NaN too
        raise ValueError(f"u_clamp must lie in [0, 0.5); got {u_clamp!r}")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return draw_piecewise_linear(x, f, C, np.clip(rng.random(int(n)), u_clamp, 1.0 - u_clamp))

