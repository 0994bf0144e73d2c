"""Size limits of a request and the estimate of its memory, checked before anything is allocated.

A request too large for the machine (``entropy --levels 100000000`` asks for about 7 GB) would run
until ``MemoryError`` after minutes of work.  Each size a user controls has a limit here, stated in
the command-line help, and an explicit override (``--allow-large``); independently of the limits,
the estimated memory of a request is compared with the memory the operating system reports as
available, so a request that cannot fit is refused in well under a second, with one line.
"""

from __future__ import annotations

import math
import os

__all__ = [
    "MAX_LEVELS",
    "MAX_POINTS",
    "MAX_SAMPLES",
    "MAX_SWEEP_CELLS",
    "MAX_OPTIMIZE_LEVELS",
    "MAX_FEATURES",
    "available_memory",
    "check_size",
    "check_memory",
]

#: Levels of a log-SNR grid (``entropy``, ``schedule``): far beyond any figure (97-4097), small
#: enough that the per-level work of a Monte-Carlo model stays minutes, not days.
MAX_LEVELS = 1_000_000
#: Levels of an allocation problem (``optimize``): the information matrices are dense
#: ``levels x levels`` (1e4 levels = 800 MB per matrix).
MAX_OPTIMIZE_LEVELS = 10_000
#: Random features of a denoiser family (``optimize --features``): one dense ``q x q`` information
#: matrix per level.
MAX_FEATURES = 1024
#: Points of a tabulated schedule (``schedules --points``): 1e7 points are 80 MB per column.
MAX_POINTS = 10_000_000
#: Monte-Carlo samples per level.
MAX_SAMPLES = 10_000_000
#: Cells of one sweep grid: each cell is a file and a task; 1e5 is already days of work.
MAX_SWEEP_CELLS = 100_000
#: Share of the available memory a single request may plan to use (the rest is the process's
#: own overhead, temporaries of numpy expressions and the rest of the machine).
MEMORY_SHARE = 0.8


def available_memory() -> int | None:
    """Memory the operating system reports as available, in bytes (``None`` when unknown).

    ``MemAvailable`` of ``/proc/meminfo`` (Linux; counts reclaimable caches), else
    ``sysconf('SC_AVPHYS_PAGES') * sysconf('SC_PAGE_SIZE')``.

    Returns
    -------
    int or None
        Bytes available for a new allocation.

    Examples
    --------
    >>> m = available_memory()
    >>> m is None or m > 0
    True
    """
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def check_size(name: str, value, limit: int, *, minimum: int = 1, allow_large: bool = False,
               override: str = "--allow-large") -> int:
    """Refuse a size outside ``[minimum, limit]`` (the upper limit lifted by ``allow_large``).

    Parameters
    ----------
    name : str
        The argument's name, for the message (``'--levels'``).
    value : int
        The requested size.
    limit : int
        Largest value allowed without the override.
    minimum : int
        Smallest value allowed.
    allow_large : bool
        The user asked to lift ``limit`` (the memory check still applies).
    override : str
        How the user lifts the limit, for the message.

    Returns
    -------
    int
        ``value`` as an ``int``.

    Raises
    ------
    ValueError
        Naming the argument, the value and the allowed range.

    Examples
    --------
    >>> check_size("--levels", 97, MAX_LEVELS)
    97
    """
    if isinstance(value, bool) or not isinstance(value, (int,)) and not (
            isinstance(value, float) and value.is_integer()):
        raise ValueError(f"{name} must be an integer; got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    if value > limit and not allow_large:
        raise ValueError(f"{name} = {value} is above the limit {limit}; pass {override} to lift it")
    return value


def check_memory(nbytes: float, what: str, *, available: int | None = None) -> None:
    """Refuse a request whose estimated memory exceeds the available memory.

    .. math::

        \\text{refused} \\iff \\text{nbytes} > 0.8 \\times \\text{MemAvailable}

    Parameters
    ----------
    nbytes : float
        Estimated peak memory of the request in bytes (e.g. ``8 * levels * columns``).
    what : str
        The request, for the message (``'--levels 100000000'``).
    available : int, optional
        Bytes available (default :func:`available_memory`; the check is skipped when unknown).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        The estimate and the available memory, both in GB.

    Examples
    --------
    >>> check_memory(1e3, "a tiny request", available=10**9)
    """
    avail = available_memory() if available is None else available
    if avail is None or not math.isfinite(float(nbytes)):
        if not math.isfinite(float(nbytes)):
            raise ValueError(f"{what}: the memory it needs is not finite")
        return
    if nbytes > MEMORY_SHARE * avail:
        raise ValueError(f"{what} needs about {nbytes / 1e9:.3g} GB of memory but {avail / 1e9:.3g} GB are "
                         f"available; ask for less")
