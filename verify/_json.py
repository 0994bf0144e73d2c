"""One JSON convention for the verification layer and the figures above it.

Numbers are written as plain floats (``repr``-exact); non-finite floats as the strings
``"inf"``, ``"-inf"``, ``"nan"``, because JSON has no literal for them.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["to_jsonable"]


def to_jsonable(obj):
    """Convert numpy scalars/arrays, tuples and non-finite floats into JSON-safe Python objects.

    Non-finite floats become the strings ``"inf"``, ``"-inf"``, ``"nan"`` (JSON has no literal for
    them, and ``allow_nan`` output is not valid JSON).
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
