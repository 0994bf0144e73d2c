"""Figure scripts, one per experiment of THEORY.md section 6.

Each module runs alone (``python -m noisealloc.figures.<name>``) and writes a PNG
plus the numbers it plots.  Top layer: may import every other layer.
"""

if __name__ != "noisealloc.figures":
    # The folder sits at the repository root, so with the root on sys.path `import figures` would
    # load a second copy of every module beside noisealloc.figures (isinstance then breaks between them).
    raise ImportError(
        f"the folder figures/ is the package noisealloc.figures; import it as `import noisealloc.figures` "
        f"(or `from noisealloc.figures import ...`), not as the top-level name {__name__!r}"
    )

