"""Verification layer: theorem checks, random-matrix checks and benchmarks.

Trusts no solver: every check recomputes optimality and feasibility from the
returned solution.  Imports :mod:`noisealloc.theory` and :mod:`noisealloc.solvers`.
"""
