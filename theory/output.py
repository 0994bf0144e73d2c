r"""Files the toolkit writes: one atomic writer and one JSON convention.

Every output of the library, the command-line program and the figure scripts goes through
:func:`atomic_write` (a reader sees the old file or the new one, never a half-written one) and every
JSON document through :func:`to_jsonable` / :func:`dumps_json`: numbers are plain floats written with
``repr`` (exact round trip), and a non-finite float is the string ``"inf"``, ``"-inf"`` or ``"nan"``
(JSON has no literal for them and ``allow_nan`` output is not valid JSON).  :func:`from_json_float`
reads such a number back.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["atomic_write", "output_kind", "to_jsonable", "from_json_float", "dumps_json", "write_json", "write_text", "write_figure"]


def atomic_write(path, write) -> Path:
    """Call ``write(binary_file)`` on a temporary file in ``path``'s directory, then ``os.replace`` it onto ``path``.

    A reader never sees a half-written file: either the old content or the new.
    If ``write`` raises, the temporary file is removed and the exception propagates.
    The finished file gets mode 0666 less the umask (not ``mkstemp``'s 0600), and
    temporaries of earlier writes of the same file whose process has died are
    removed first.

    Only a regular file (or a path that does not exist yet) is replaced.  A character device
    or a FIFO (``/dev/stdout``, ``/dev/null``, a named pipe; a symbolic link to one counts) is
    written straight, never replaced, and so is a path naming an open descriptor
    (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``) whatever it points to; anything else
    that is not a regular file (a folder, a block device, a socket) is refused with
    ``ValueError``.

    Parameters
    ----------
    path : str or path-like
        Destination; its directory must exist.
    write : callable
        ``write(fh)`` writes the content to the open binary file ``fh``.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = atomic_write(os.path.join(tmp, "note.txt"), lambda fh: fh.write(b"hello"))
    ...     print(out.name, out.read_text(), os.listdir(tmp))
    note.txt hello ['note.txt']
    """
    path = Path(path)
    if output_kind(path) == "stream":
        return _write_straight(path, write)
    directory = path.parent if str(path.parent) else Path(".")
    _remove_stale_temporaries(directory, path.name)
    fd, tmp = tempfile.mkstemp(prefix=f"{_temp_prefix(path.name)}{os.getpid()}-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        # mkstemp creates the file with mode 0600; a finished output gets the mode any new file
        # would get (0666 less the umask), as cp or a plain open() would give it.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:
            # a failed write (ENOSPC, EIO, EDQUOT) carries no file name: give it the destination's
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    return path


#: Marker in the names of atomic_write's temporary files: ``.NAME.noisealloc-PID-XXXXXXXX.tmp``.
_TMP_MARK = ".noisealloc-"
#: Longest NAME (in bytes) kept whole in a temporary's name; a longer one is cut and given a hash, so
#: that any name the file system takes (255 bytes on most) still has a temporary name it takes.
_TMP_NAME_BYTES = 160
#: Paths that name an open file descriptor of this process: written straight, whatever they point to.
_DESCRIPTOR_PATHS = ("/dev/stdout", "/dev/stderr")
_DESCRIPTOR_DIRS = ("/dev/fd", "/proc/self/fd")


def output_kind(path) -> str:
    """How :func:`atomic_write` treats ``path``: ``'new'``, ``'file'`` (replaced atomically) or ``'stream'``.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    str
        ``'new'`` when nothing is there, ``'file'`` for a regular file, ``'stream'`` for a character
        device, a FIFO or a path naming an open descriptor (written straight, never replaced).

    Raises
    ------
    ValueError
        When ``path`` is something else that is not a regular file: a folder, a block device, a socket.
    """
    import stat

    text = os.fspath(path)
    parent = os.path.dirname(text)
    if text in _DESCRIPTOR_PATHS or (os.path.abspath(parent) in _DESCRIPTOR_DIRS and os.path.basename(text).isdigit()):
        return "stream"
    try:
        mode = os.stat(text).st_mode
    except FileNotFoundError:
        return "new"  # a dangling symbolic link is replaced, as before
    except OSError:
        return "new"  # unreadable: the write itself reports it, naming the file
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return "stream"
    what = ("a folder" if stat.S_ISDIR(mode) else "a block device" if stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    raise ValueError(f"{text!r} is {what}; only a regular file, a character device or a FIFO can be written")


def _write_straight(path: Path, write) -> Path:
    """Write into a character device or FIFO the caller named (no temporary, nothing replaced)."""
    try:
        with open(path, "wb") as fh:
            write(fh)
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    return path


def _temp_prefix(name: str) -> str:
    """``.NAME.noisealloc-`` with NAME cut (plus a hash of the whole) when it is long."""
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) > _TMP_NAME_BYTES:
        import hashlib

        digest = hashlib.sha1(raw).hexdigest()[:12]
        name = raw[:_TMP_NAME_BYTES - 13].decode("utf-8", "ignore") + "~" + digest
    return f".{name}{_TMP_MARK}"


def _umask() -> int:
    # os.umask can only be read by setting it; set it back at once.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _remove_stale_temporaries(directory: Path, name: str) -> None:
    """Remove temporary files of earlier writes of ``name`` whose writing process no longer exists.

    A SIGKILL leaves no chance to clean up; the next write of the same file does it instead.  Only
    files of the toolkit's own pattern, whose PID is not a running process, are touched.
    """
    prefix = _temp_prefix(name)
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(prefix) and entry.endswith(".tmp")):
            continue
        pid_text = entry[len(prefix):].split("-", 1)[0]
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # still running: its write may be in progress
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # another user's live process
        try:
            os.unlink(os.path.join(directory, entry))
        except OSError:
            pass


def to_jsonable(obj):
    """Convert numpy scalars/arrays, tuples and non-finite floats into JSON-safe Python objects.

    Parameters
    ----------
    obj : object
        Dicts (keys become strings), lists, tuples, numpy arrays and scalars, floats, and anything
        else JSON takes as it is.

    Returns
    -------
    object
        The same structure with lists for arrays and tuples, Python numbers for numpy scalars, and
        the strings ``"inf"``, ``"-inf"``, ``"nan"`` for non-finite floats.
    """
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if math.isfinite(x):
            return x
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return obj


def from_json_float(x) -> float:
    """Read back a number written by :func:`to_jsonable` (a float, or ``"inf"``, ``"-inf"``, ``"nan"``).

    Parameters
    ----------
    x : float, int or str
        The JSON value.

    Returns
    -------
    float
    """
    if isinstance(x, str) and x in ("inf", "-inf", "nan"):
        return float(x)
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"not a JSON number of the toolkit's convention: {x!r}")
    return float(x)


def dumps_json(obj, *, indent: int | None = 1, sort_keys: bool = True) -> str:
    """``obj`` as JSON text in the toolkit's convention (:func:`to_jsonable`), ending with a newline.

    Parameters
    ----------
    obj : object
        Dicts, lists, tuples, numbers, numpy scalars and arrays, strings, booleans, None.
    indent : int or None
        Indentation of the JSON text.
    sort_keys : bool
        Sort object keys (deterministic output: the same numbers give the same bytes).

    Returns
    -------
    str
    """
    return json.dumps(to_jsonable(obj), indent=indent, sort_keys=sort_keys, allow_nan=False) + "\n"


def write_json(path, obj, *, indent: int | None = 1, sort_keys: bool = True) -> Path:
    """Write ``obj`` as JSON (:func:`dumps_json`) to ``path`` atomically (its folder must exist).

    Parameters
    ----------
    path : str or path-like
        Destination.
    obj : object
        What to write (see :func:`dumps_json`).
    indent, sort_keys
        As :func:`dumps_json`.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    data = dumps_json(obj, indent=indent, sort_keys=sort_keys).encode("utf-8")
    return atomic_write(path, lambda fh: fh.write(data))


def write_text(path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (its folder must exist).

    Parameters
    ----------
    path : str or path-like
        Destination.
    text : str
        Content.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    data = text.encode("utf-8")
    return atomic_write(path, lambda fh: fh.write(data))


def write_figure(fig, path, *, dpi: int = 120, **savefig_kw) -> Path:
    """Save a matplotlib figure to ``path`` atomically, in the format its suffix names (PNG by default).

    The figure is rendered to memory first, so a rendering error leaves no file, and the PNG carries no
    time stamp or software string (the same figure gives the same bytes).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure (this module never imports matplotlib itself).
    path : str or path-like
        Destination; its folder must exist.
    dpi : int
        Resolution.
    **savefig_kw
        Further options of ``Figure.savefig`` (e.g. ``bbox_inches="tight"``).

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    import io

    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    buf = io.BytesIO()
    meta = {"Software": None} if fmt == "png" else None
    fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta, **savefig_kw)
    data = buf.getvalue()
    return atomic_write(path, lambda fh: fh.write(data))
