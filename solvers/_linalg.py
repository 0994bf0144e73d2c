"""Triangular solves and inverses through LAPACK directly, and the PSD part of a symmetric matrix (private).

``scipy.linalg.solve_triangular`` with an identity or a wide right-hand side reaches BLAS's threaded
``trsm``, whose worker threads must be woken for every call: on a busy machine a 2 x 2 inverse then
costs a scheduler time slice (~20 ms measured, against ~1 us here), which made the sandwich value of a
two-parameter problem 10^4 times slower than its arithmetic.  ``?trtri`` and ``?trtrs`` do the same
arithmetic without the threaded path.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

__all__ = ["psd_part", "triangular_inverse", "triangular_solve"]


def triangular_inverse(T: np.ndarray, *, lower: bool) -> np.ndarray:
    """Inverse of a triangular matrix (LAPACK ``dtrtri``); ``LinAlgError`` when it is exactly singular."""
    inv, info = lapack.dtrtri(np.asarray(T, dtype=np.float64), lower=int(lower))
    if info != 0:
        raise np.linalg.LinAlgError(f"triangular matrix is singular (dtrtri info {info})")
    return inv


def triangular_solve(T: np.ndarray, B: np.ndarray, *, lower: bool) -> np.ndarray:
    """``T^{-1} B`` for a triangular ``T`` (LAPACK ``dtrtrs``); ``B`` of shape (m,) or (m, k)."""
    x, info = lapack.dtrtrs(np.asarray(T, dtype=np.float64), np.asarray(B, dtype=np.float64), lower=int(lower))
    if info != 0:
        raise np.linalg.LinAlgError(f"triangular matrix is singular (dtrtrs info {info})")
    return x


def psd_part(X: np.ndarray) -> np.ndarray:
    r"""Nearest PSD matrix (Frobenius) to the symmetric part of ``X``: :math:`U \max(\Lambda, 0) U^	op` with
    :math:`U \Lambda U^	op = (X + X^	op) / 2`."""
    X = np.asarray(X, dtype=np.float64)
    w, U = np.linalg.eigh(0.5 * (X + X.T))
    return (U * np.maximum(w, 0.0)) @ U.T
