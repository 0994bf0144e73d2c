"""Shared test helpers: hypothesis strategies, mpmath references, fork helpers."""
