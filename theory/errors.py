"""Warnings and input checks shared by every layer.

Bad input raises ``ValueError`` (or ``TypeError``) naming the argument, the
value received and what is allowed; never an ``assert``, never a silent NaN.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

__all__ = [
    "NoiseallocWarning",
    "ConvergenceWarning",
    "RegularizationWarning",
    "as_float_array",
    "as_float_scalar",
    "as_int_scalar",
    "check_weight_vector",
    "check_finite",
    "check_choice",
    "check_interval",
    "check_positive",
    "check_nonnegative",
    "as_generator",
    "check_count",
    "as_lam",
    "scalar_lam",
    "points_and_levels",
]


class NoiseallocWarning(UserWarning):
    """Base class of the toolkit's warnings."""


class ConvergenceWarning(NoiseallocWarning):
    """An iterative method stopped before meeting its tolerance (the result says so too)."""


class RegularizationWarning(NoiseallocWarning):
    """A near-singular problem was regularised; the result records by how much."""


def _short(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def as_float_array(value, name: str, *, ndim: int | None = None, shape=None) -> np.ndarray:
    """Coerce ``value`` to a float64 array once, at a public boundary.

    Parameters
    ----------
    value : array_like
        Anything ``numpy.asarray(value, dtype=float64)`` accepts (scalars, lists, arrays).
    name : str
        Name of the argument, quoted in error messages.
    ndim : int, optional
        Required number of dimensions (not checked when None).
    shape : tuple of (int or None), optional
        Required shape; a ``None`` entry accepts any length on that axis.  Only the
        leading ``len(shape)`` axes are compared.

    Returns
    -------
    ndarray of float64
        ``value`` as a float64 array (no copy when it already is one).  NaN and
        infinities pass through: use :func:`check_finite` to refuse them.

    Raises
    ------
    TypeError
        If ``value`` is not numeric.
    ValueError
        If ``value`` is complex, or the number of dimensions or the shape differs from what is
        required.

    Examples
    --------
    >>> as_float_array([1, 2, 3], "x", ndim=1).tolist()
    [1.0, 2.0, 3.0]
    >>> as_float_array([[1.0, 2.0]], "x", shape=(2, None))
    Traceback (most recent call last):
    ...
    ValueError: x must have shape (2, None) (None = any); got (1, 2) (axis 0)
    """
    if np.iscomplexobj(value):
        # numpy would drop the imaginary part with only a ComplexWarning
        raise ValueError(f"{name} must be real; got a complex array")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of real numbers; got {_short(value)}") from exc
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s); got shape {arr.shape}")
    if shape is not None:
        for axis, (got, want) in enumerate(zip(arr.shape, shape)):
            if want is not None and got != want:
                raise ValueError(f"{name} must have shape {tuple(shape)} (None = any); got {arr.shape} (axis {axis})")
    return arr


def as_float_scalar(value, name: str) -> float:
    """Coerce a scalar parameter to one Python float, naming ``name`` if it is not one real number.

    ``float(...)`` and ``numpy.float64(...)`` would drop the imaginary part of a numpy complex with
    only a ``ComplexWarning``, return an array for an array, or raise a message that does not name
    the argument; this check does neither.

    Parameters
    ----------
    value : float or 0-d array_like
        One real number (a Python or numpy scalar, or a 0-d array).
    name : str
        Name of the argument, quoted in error messages.

    Returns
    -------
    float
        ``value`` as a float; NaN and infinities pass through (use :func:`check_finite` to refuse them).

    Raises
    ------
    TypeError
        If ``value`` is None or not numeric.
    ValueError
        If ``value`` is complex or an array (of any size, even 1).

    Examples
    --------
    >>> as_float_scalar(2, "sd")
    2.0
    >>> as_float_scalar(1 + 0j, "sd")
    Traceback (most recent call last):
    ...
    ValueError: sd must be real; got a complex number (1+0j)
    >>> as_float_scalar([0.5, 1.0], "sd")
    Traceback (most recent call last):
    ...
    ValueError: sd must be a single number; got an array of shape (2,)
    """
    if value is None:
        raise TypeError(f"{name} must be a real number; got None")
    if np.iscomplexobj(value):
        what = f"number {_short(complex(value))}" if np.ndim(value) == 0 else "array"
        raise ValueError(f"{name} must be real; got a complex {what}")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number; got {_short(value)}") from exc
    if arr.ndim != 0:
        raise ValueError(f"{name} must be a single number; got an array of shape {arr.shape}")
    return float(arr)


def as_int_scalar(value, name: str) -> int:
    """``int(value)`` for an integer parameter, naming ``name`` if ``value`` is not one real number.

    The conversion of real numbers is ``int()``'s own (a float is truncated, as the callers always did);
    what changes is that a complex number, an array, None or an object is refused by name instead of
    failing inside ``int()`` with a message that does not say which argument was wrong.

    Parameters
    ----------
    value : int or 0-d array_like
        The parameter.
    name : str
        Name of the argument, quoted in error messages.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        If ``value`` is None or not a number.
    ValueError
        If ``value`` is complex, an array, NaN or infinite.

    Examples
    --------
    >>> as_int_scalar(np.int64(3), "n_bins")
    3
    >>> as_int_scalar([3, 4], "n_bins")
    Traceback (most recent call last):
    ...
    ValueError: n_bins must be a single integer; got an array of shape (2,)
    """
    if value is None:
        raise TypeError(f"{name} must be an integer; got None")
    if np.iscomplexobj(value):
        raise ValueError(f"{name} must be a real integer; got a complex {'number' if np.ndim(value) == 0 else 'array'}")
    if np.ndim(value) != 0:
        raise ValueError(f"{name} must be a single integer; got an array of shape {np.shape(value)}")
    try:
        return int(value)
    except TypeError as exc:
        raise TypeError(f"{name} must be an integer; got {_short(value)}") from exc
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{name} must be an integer; got {_short(value)}") from exc


def check_weight_vector(weights, k: int, *, of: str = "atoms", positive: bool = False,
                        normalise: bool = False) -> np.ndarray:
    r"""Mixture weights as a ``(k,)`` float64 probability vector, the one check of every mixture model.

    ``None`` gives :math:`1/k` each.  Entries must be real, finite and :math:`\ge 0` (:math:`> 0` with
    ``positive``), not all zero; with ``normalise`` they are divided by their sum (any positive
    scale), otherwise the sum must be within 1e-9 of 1 (then renormalised to remove that rounding).

    Parameters
    ----------
    weights : array_like, shape (k,), or None
        The weights.
    k : int
        Number of components.
    of : str, default 'atoms'
        What the weights belong to, quoted in error messages.
    positive : bool, default False
        Refuse zero entries (a model that keeps log-weights needs them > 0).
    normalise : bool, default False
        Divide by the sum instead of requiring a sum of 1.

    Returns
    -------
    ndarray, shape (k,), float64
        :math:`w / \sum_j w_j`.

    Raises
    ------
    ValueError
        Complex, wrong shape, non-finite, negative (or zero with ``positive``), all zero, or (without
        ``normalise``) a sum further than 1e-9 from 1.

    Examples
    --------
    >>> check_weight_vector([1.0, 3.0], 2, normalise=True).tolist()
    [0.25, 0.75]
    >>> check_weight_vector([0.5, 0.6], 2)
    Traceback (most recent call last):
    ...
    ValueError: weights must sum to 1 (within 1e-9); they sum to 1.1
    """
    if weights is None:
        return np.full(k, 1.0 / k)
    w = as_float_array(weights, "weights")
    if w.shape != (k,):
        raise ValueError(f"weights must have shape ({k},) to match {of}; got {w.shape}")
    check_finite(w, "weights")
    if np.any(w < 0):
        bad = int(np.flatnonzero(w < 0)[0])
        raise ValueError(f"weights must be {'>' if positive else '>='} 0; entry {bad} is {float(w[bad])!r}")
    top = float(w.max())
    if not top > 0:
        raise ValueError("weights must not be all zero (they are normalised to sum 1)")
    if normalise:
        w = w / top  # weights of 1e308 each must not overflow their sum
    total = float(w.sum())
    if positive and np.any(w == 0):
        bad = int(np.flatnonzero(w == 0)[0])
        raise ValueError(f"weights must be > 0 (remove {of} of zero weight); entry {bad} is 0.0")
    if not normalise and abs(total - 1.0) > 1e-9:
        raise ValueError(f"weights must sum to 1 (within 1e-9); they sum to {total!r}")
    return w / total


# From this many entries check_finite tries the one-pass sum first (below, the elementwise test is as fast).
_FAST_FINITE_MIN = 4096


def check_finite(arr: np.ndarray, name: str) -> np.ndarray:
    """Raise ``ValueError`` if ``arr`` holds a NaN or an infinity.

    Parameters
    ----------
    arr : array_like
        Values to check (any shape).
    name : str
        Name of the argument, quoted in the error message.

    Returns
    -------
    ndarray
        ``np.asarray(arr)``, unchanged, when every entry is finite.

    Raises
    ------
    ValueError
        Naming ``name``, the index of the first non-finite entry and its value.

    Examples
    --------
    >>> check_finite([0.0, float("nan")], "v")
    Traceback (most recent call last):
    ...
    ValueError: v must be finite; entry 1 is nan
    """
    arr = np.asarray(arr)
    # A sum is finite only if every term is (an infinity or a NaN stays non-finite through any sum):
    # one pass without a temporary.  A non-finite sum can also be an overflow of finite terms, so
    # only then are the entries themselves checked.
    if arr.dtype.kind == "f" and arr.size > _FAST_FINITE_MIN:
        with np.errstate(over="ignore", invalid="ignore"):
            total = np.sum(arr)
        if np.isfinite(total):
            return arr
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr.ravel()))[0])
        where = tuple(int(i) for i in np.unravel_index(bad, arr.shape))
        raise ValueError(f"{name} must be finite; entry {where if len(where) != 1 else where[0]} is "
                         f"{float(arr.ravel()[bad])!r}")
    return arr


def check_choice(value: str, name: str, allowed: Iterable[str]) -> str:
    """Raise ``ValueError`` unless ``value`` is one of ``allowed``.

    Parameters
    ----------
    value : str
        The choice made by the caller (a non-string is always refused).
    name : str
        Name of the argument, quoted in the error message.
    allowed : iterable of str
        The accepted values, listed in the error message in this order.

    Returns
    -------
    str
        ``value``, unchanged.

    Raises
    ------
    ValueError
        Listing every allowed value and the value received.

    Examples
    --------
    >>> check_choice("full", "tier", ("quick", "full"))
    'full'
    >>> check_choice("fast", "tier", ("quick", "full"))
    Traceback (most recent call last):
    ...
    ValueError: tier must be one of 'quick', 'full'; got 'fast'
    """
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {_short(value)}")
    return value


def check_interval(lo, hi, name: str = "interval", *, allow_infinite: bool = False) -> tuple[float, float]:
    """Validate an interval ``[lo, hi]`` with ``lo < hi`` (finite unless ``allow_infinite``).

    Parameters
    ----------
    lo, hi : float
        End points (anything ``float()`` accepts).
    name : str, default 'interval'
        Name of the argument, quoted in error messages.
    allow_infinite : bool, default False
        Accept ``-inf`` / ``inf`` end points.

    Returns
    -------
    tuple of float
        ``(float(lo), float(hi))``.

    Raises
    ------
    TypeError
        If an end point is not a real number.
    ValueError
        If an end point is complex, NaN, infinite (unless allowed), or ``lo >= hi``.

    Examples
    --------
    >>> check_interval(-1, 2)
    (-1.0, 2.0)
    >>> check_interval(3.0, 1.0, "[lam_min, lam_max]")
    Traceback (most recent call last):
    ...
    ValueError: [lam_min, lam_max] must satisfy lo < hi (a non-empty, non-inverted interval); got (3.0, 1.0)
    """
    if np.iscomplexobj(lo) or np.iscomplexobj(hi):
        # float() of a numpy complex drops the imaginary part with only a ComplexWarning
        raise ValueError(f"{name} must be two real numbers (lo, hi); got a complex end point "
                         f"({_short(lo)}, {_short(hi)})")
    try:
        lo_f, hi_f = float(lo), float(hi)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be two real numbers (lo, hi); got ({_short(lo)}, {_short(hi)})") from exc
    if np.isnan(lo_f) or np.isnan(hi_f):
        raise ValueError(f"{name} must not contain NaN; got ({lo_f}, {hi_f})")
    if not allow_infinite and not (np.isfinite(lo_f) and np.isfinite(hi_f)):
        raise ValueError(f"{name} must be finite; got ({lo_f}, {hi_f})")
    if not lo_f < hi_f:
        raise ValueError(f"{name} must satisfy lo < hi (a non-empty, non-inverted interval); got ({lo_f}, {hi_f})")
    return lo_f, hi_f


def check_positive(arr, name: str) -> np.ndarray:
    """Raise ``ValueError`` unless every entry is finite and > 0.

    Parameters
    ----------
    arr : array_like
        Values to check (any shape).
    name : str
        Name of the argument, quoted in the error message.

    Returns
    -------
    ndarray of float64
        ``arr`` as a float64 array.

    Raises
    ------
    TypeError
        If ``arr`` is not numeric.
    ValueError
        If ``arr`` is complex, or naming ``name``, the flat index of the first offending entry and its value.

    Examples
    --------
    >>> check_positive([1.0, 0.0], "sigma_data")
    Traceback (most recent call last):
    ...
    ValueError: sigma_data must be > 0 everywhere; entry 1 is 0.0
    """
    arr = check_finite(as_float_array(arr, name), name)
    if np.any(arr <= 0):
        bad = int(np.flatnonzero(arr.ravel() <= 0)[0])
        raise ValueError(f"{name} must be > 0 everywhere; entry {bad} is {float(arr.ravel()[bad])!r}")
    return arr


def check_nonnegative(arr, name: str) -> np.ndarray:
    """Raise ``ValueError`` unless every entry is finite and >= 0.

    Parameters
    ----------
    arr : array_like
        Values to check (any shape).
    name : str
        Name of the argument, quoted in the error message.

    Returns
    -------
    ndarray of float64
        ``arr`` as a float64 array.

    Raises
    ------
    TypeError
        If ``arr`` is not numeric.
    ValueError
        If ``arr`` is complex, or naming ``name``, the flat index of the first offending entry and its value.

    Examples
    --------
    >>> check_nonnegative([0.0, 2.0], "weights").tolist()
    [0.0, 2.0]
    """
    arr = check_finite(as_float_array(arr, name), name)
    if np.any(arr < 0):
        bad = int(np.flatnonzero(arr.ravel() < 0)[0])
        raise ValueError(f"{name} must be >= 0 everywhere; entry {bad} is {float(arr.ravel()[bad])!r}")
    return arr


def as_generator(rng=None) -> np.random.Generator:
    """Turn ``rng`` (``Generator``, integer seed or ``None``) into a ``numpy.random.Generator``.

    ``None`` gives a fresh, OS-seeded generator; pass a seed for reproducible output.

    Parameters
    ----------
    rng : numpy.random.Generator, int or None
        A generator (returned as is, so its stream continues), a non-negative
        seed for ``numpy.random.default_rng``, or None.

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    TypeError
        For any other type, including ``bool`` and the legacy ``RandomState``.
    ValueError
        For a negative seed.

    Examples
    --------
    >>> a = as_generator(42).random(3)
    >>> bool((a == as_generator(42).random(3)).all())   # same seed, same stream
    True
    >>> as_generator(1.5)
    Traceback (most recent call last):
    ...
    TypeError: rng must be a numpy.random.Generator, an int seed or None; got float
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, bool):
        raise TypeError(f"rng must be a numpy.random.Generator, an int seed or None; got the bool {rng!r}")
    if rng is None or isinstance(rng, (int, np.integer)):
        if rng is not None and int(rng) < 0:
            raise ValueError(f"rng seed must be a non-negative integer; got {rng}")
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be a numpy.random.Generator, an int seed or None; got {type(rng).__name__}")


def check_count(n, name: str = "n") -> int:
    """A positive integer count (``TypeError`` for non-integers and bools, ``ValueError`` for complex or below 1).

    Parameters
    ----------
    n : int
        The count (Python or numpy integer).
    name : str, default 'n'
        Name of the argument, quoted in error messages.

    Returns
    -------
    int
        ``int(n)``.

    Examples
    --------
    >>> check_count(3)
    3
    >>> check_count(0, "reps")
    Traceback (most recent call last):
    ...
    ValueError: reps must be >= 1; got 0
    """
    if np.iscomplexobj(n):  # complex input is a ValueError everywhere in the toolkit
        raise ValueError(f"{name} must be a real integer; got {n!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{name} must be a positive integer; got {n!r}")
    if n < 1:
        raise ValueError(f"{name} must be >= 1; got {n}")
    return int(n)


def as_lam(lam) -> np.ndarray:
    """Log-SNR levels as a finite float64 array of any shape.

    Parameters
    ----------
    lam : array_like
        Log-SNR values :math:`\\lambda = \\log(\\alpha^2/\\sigma^2)` (docs/THEORY.md section 1).

    Returns
    -------
    ndarray of float64
        Same shape as ``lam``.

    Raises
    ------
    ValueError
        If an entry is NaN or infinite (message names ``lam``).
    """
    lam = as_float_array(lam, "lam")
    check_finite(lam, "lam")
    return lam


def scalar_lam(lam) -> float:
    """One finite log-SNR level (``ValueError`` for arrays).

    Parameters
    ----------
    lam : float or 0-d array_like
        A log-SNR value.

    Returns
    -------
    float

    Examples
    --------
    >>> scalar_lam(2)
    2.0
    >>> scalar_lam([1.0, 2.0])
    Traceback (most recent call last):
    ...
    ValueError: lam must be a scalar here; got shape (2,)
    """
    arr = as_lam(lam)
    if arr.ndim != 0:
        raise ValueError(f"lam must be a scalar here; got shape {arr.shape}")
    return float(arr)


def points_and_levels(x, dim: int, lam, *, allow_1d: bool = False):
    """Observations ``x`` of shape (n, dim) and levels ``lam`` (scalar or (n,)) broadcast to (n,).

    With ``allow_1d`` and ``dim == 1``, a 1-D ``x`` is read as n points on the line.

    Parameters
    ----------
    x : array_like, shape (n, dim)
        Noisy observations (finite).
    dim : int
        Data dimension D the model expects.
    lam : float or array_like, shape (n,)
        Log-SNR of every observation (one level for all, or one per row).
    allow_1d : bool, default False
        Accept a 1-D ``x`` of shape (n,) when ``dim == 1``.

    Returns
    -------
    x : ndarray of float64, shape (n, dim)
    lam : ndarray of float64, shape (n,)
        A read-only broadcast view when a scalar level was given.

    Raises
    ------
    ValueError
        On a wrong shape of ``x`` or ``lam``, or a non-finite entry.

    Examples
    --------
    >>> x, lam = points_and_levels([0.5, -1.0], 1, 3.0, allow_1d=True)
    >>> x.shape, lam.tolist()
    ((2, 1), [3.0, 3.0])
    """
    x = as_float_array(x, "x")
    if allow_1d and x.ndim == 1 and dim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] != dim:
        raise ValueError(f"x must have shape (n, {dim}); got {x.shape}")
    check_finite(x, "x")
    lam = as_lam(lam)
    if lam.ndim > 1 or (lam.ndim == 1 and lam.shape[0] != x.shape[0]):
        raise ValueError(f"lam must be a scalar or have shape ({x.shape[0]},); got {lam.shape}")
    return x, np.broadcast_to(lam, (x.shape[0],))
