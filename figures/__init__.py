"""Figure scripts, one per experiment of docs/THEORY.md section 6.

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

from noisealloc._lazy import lazy_exports  # noqa: E402 (after the guard above)

_EXPORTS = {
    'fig1_entropy': 'noisealloc.figures.fig1_entropy',
    'fig2_atoms': 'noisealloc.figures.fig2_atoms',
    'fig3_coupling': 'noisealloc.figures.fig3_coupling',
    'fig4_rmt': 'noisealloc.figures.fig4_rmt',
    'fig5_efficiency': 'noisealloc.figures.fig5_efficiency',
    'fig6_training': 'noisealloc.figures.fig6_training',
    'fig7_masked': 'noisealloc.figures.fig7_masked',
    'provenance': 'noisealloc.figures.provenance',
    'report': 'noisealloc.figures.report',
    'sweep_summary': 'noisealloc.figures.sweep_summary',
    'code_hash': 'noisealloc.figures.provenance',
    'make_request': 'noisealloc.figures.provenance',
    'request_hash': 'noisealloc.figures.provenance',
    'write_provenance': 'noisealloc.figures.provenance',
    'read_provenance': 'noisealloc.figures.provenance',
    'is_current': 'noisealloc.figures.provenance',
    'mixed_runs': 'noisealloc.figures.provenance',
    'CLAIMS': 'noisealloc.figures.report',
    'num': 'noisealloc.figures.report',
    'verdict': 'noisealloc.figures.report',
    'interval_verdict': 'noisealloc.figures.report',
    'evaluate_claims': 'noisealloc.figures.report',
    'fig6_controls': 'noisealloc.figures.report',
    'write_report': 'noisealloc.figures.report',
    'plot_summary': 'noisealloc.figures.sweep_summary',
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
