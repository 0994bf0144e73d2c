"""Ablation sweeps on ``dask.distributed``: a TOML grid of cells (``spec``), cached on disk and
resumable (``cache``), run by ``engine``; the built-in cells in ``cells``.
"""

from noisealloc._lazy import lazy_exports

_EXPORTS = {
    'cache': 'noisealloc.verify.experiments.sweep.cache',
    'code_version': 'noisealloc.verify.experiments.sweep.cache',
    'cell_key': 'noisealloc.verify.experiments.sweep.cache',
    'read_cell': 'noisealloc.verify.experiments.sweep.cache',
    'run_cell': 'noisealloc.verify.experiments.sweep.cache',
    'shared_artifact': 'noisealloc.verify.experiments.sweep.cache',
    'cells': 'noisealloc.verify.experiments.sweep.cells',
    'cell_coupling': 'noisealloc.verify.experiments.sweep.cells',
    'cell_training': 'noisealloc.verify.experiments.sweep.cells',
    'cell_demo': 'noisealloc.verify.experiments.sweep.cells',
    'engine': 'noisealloc.verify.experiments.sweep.engine',
    'SweepResult': 'noisealloc.verify.experiments.sweep.engine',
    'SweepLock': 'noisealloc.verify.experiments.sweep.engine',
    'run_sweep': 'noisealloc.verify.experiments.sweep.engine',
    'run_counts': 'noisealloc.verify.experiments.sweep.engine',
    'summary_rows': 'noisealloc.verify.experiments.sweep.engine',
    'write_summary_csv': 'noisealloc.verify.experiments.sweep.engine',
    'spec': 'noisealloc.verify.experiments.sweep.spec',
    'CELL_KINDS': 'noisealloc.verify.experiments.sweep.spec',
    'SweepSpec': 'noisealloc.verify.experiments.sweep.spec',
    'load_sweep': 'noisealloc.verify.experiments.sweep.spec',
    'parse_sweep': 'noisealloc.verify.experiments.sweep.spec',
    'expand_grid': 'noisealloc.verify.experiments.sweep.spec',
    'cell_parameters': 'noisealloc.verify.experiments.sweep.spec',
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
