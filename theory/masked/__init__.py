"""Masked (absorbing-state) diffusion (docs/THEORY.md section 7): the forward process in its log-odds
coordinate, exact information rates of finite laws by Monte Carlo with exact per-sample values, closed-form
laws (product law, stationary Markov chain), the Aitchison-Aitken smoothed law of a sample, and schedules.
"""

from noisealloc._lazy import lazy_exports

_EXPORTS = {
    'process': 'noisealloc.theory.masked.process',
    'information': 'noisealloc.theory.masked.information',
    'finite': 'noisealloc.theory.masked.finite',
    'models': 'noisealloc.theory.masked.models',
    'MASKED_COORDINATES': 'noisealloc.theory.masked.process',
    'keep_probability': 'noisealloc.theory.masked.process',
    'mask_rate': 'noisealloc.theory.masked.process',
    'log_keep_probability': 'noisealloc.theory.masked.process',
    'log_mask_rate': 'noisealloc.theory.masked.process',
    'lam_from_mask_rate': 'noisealloc.theory.masked.process',
    'lam_from_t': 'noisealloc.theory.masked.process',
    't_from_lam': 'noisealloc.theory.masked.process',
    'get_masked_coordinate': 'noisealloc.theory.masked.process',
    'transport_pdf_to_lam': 'noisealloc.theory.masked.process',
    'transport_pdf_from_lam': 'noisealloc.theory.masked.process',
    'check_tokens': 'noisealloc.theory.masked.process',
    'check_vocabulary': 'noisealloc.theory.masked.process',
    'masks_from_uniforms': 'noisealloc.theory.masked.process',
    'mask_tokens': 'noisealloc.theory.masked.process',
    'MASKED_BUDGET_RULE': 'noisealloc.theory.masked.information',
    'DEFAULT_N_SAMPLES': 'noisealloc.theory.masked.information',
    'MaskedSamples': 'noisealloc.theory.masked.information',
    'MaskedInformation': 'noisealloc.theory.masked.information',
    'MaskedBudgetCheck': 'noisealloc.theory.masked.information',
    'MaskedModel': 'noisealloc.theory.masked.information',
    'entropy_nats': 'noisealloc.theory.masked.information',
    'check_levels': 'noisealloc.theory.masked.information',
    'masked_budget_check': 'noisealloc.theory.masked.information',
    'tail_bound': 'noisealloc.theory.masked.information',
    'FiniteLaw': 'noisealloc.theory.masked.finite',
    'check_weights': 'noisealloc.theory.masked.finite',
    'merge_duplicate_strings': 'noisealloc.theory.masked.finite',
    'ProductLaw': 'noisealloc.theory.masked.models',
    'MarkovChain': 'noisealloc.theory.masked.models',
    'all_strings': 'noisealloc.theory.masked.models',
    'MAX_ENUMERATED_STRINGS': 'noisealloc.theory.masked.models',
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
