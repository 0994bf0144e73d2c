"""Scoped BLAS thread limit for the solvers: the one definition lives in :mod:`noisealloc.theory._threads`."""

from __future__ import annotations

from noisealloc.theory._threads import single_blas_thread

__all__ = ["single_blas_thread"]
