"""Solvers layer: allocation problems, convex and non-convex solvers, certificates.

Imports :mod:`noisealloc.theory` only.
"""
