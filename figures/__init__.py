"""Figure scripts, one per experiment of THEORY.md section 6.

Each module runs alone (``python -m noisealloc.figures.<name>``) and writes a PNG
plus the numbers it plots.  Top layer: may import every other layer.
"""
