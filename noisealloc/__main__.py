"""``python -m noisealloc`` is the same program as the ``noisealloc`` console script."""

from noisealloc.cli import main

if __name__ == "__main__":  # pragma: no cover - exercised through subprocess tests
    raise SystemExit(main())
