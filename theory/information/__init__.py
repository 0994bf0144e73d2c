r"""Information quantities along the forward process (docs/THEORY.md section 2).

* :mod:`~noisealloc.theory.information.profile`: the one pipeline from a model and a grid to every
  number below (:func:`information_profile`);
* :func:`budget_integral`: :math:`\int_{a}^{b} h\,d\lambda` with its integration error and, for
  Monte-Carlo models, its standard error (adaptive Gauss--Kronrod of the per-sample rates);
* the **budget check** (:func:`budget_check`, :func:`budget_check_from_samples`, both returning
  :class:`BudgetCheck`): on any interval :math:`[a, b]` the identity :math:`-dH/d\lambda = h` gives
  :math:`\int_a^b h\,d\lambda = H(a) - H(b)`, which tends to the budget :math:`H(\pi)` as the
  interval grows.  One pass rule (:data:`BUDGET_RULE`):
  :math:`|\int_a^b h - (H(a) - H(b))| \le` ``BUDGET_ATOL_QUAD`` + integration error +
  ``MC_NSIGMA`` standard errors of the difference, the latter from per-sample values (common random
  numbers make the levels' errors correlated, so per-level standard errors are never summed);
* the **I-MMSE check** (:func:`i_mmse_check` returning :class:`IMMSECheck`): :math:`-dH/d\lambda`
  (or :math:`dI/d\lambda`) by a centred finite difference against :math:`\tfrac12 e^\lambda\,\mathrm{mmse}`;
  one pass rule (:data:`I_MMSE_RULE`): relative error at most ``FD_RTOL`` wherever
  :math:`h >` ``I_MMSE_RATE_FLOOR``.

Convention: :math:`x = x_0 + e^{-\lambda/2}\varepsilon` (VE/EDM scaling; a VP
observation divided by :math:`\alpha` is the same), so everything is a function
of :math:`\lambda`.

Also here: :mod:`~noisealloc.theory.information.from_losses` (h from measured per-level losses) and
:mod:`~noisealloc.theory.information.matrices` (information matrices of denoiser families, section 4).
The formula :math:`h = \tfrac12 e^\lambda\,\mathrm{mmse}` in any coordinate is
:mod:`noisealloc.theory.entropy_rate`, below the models.
"""

from noisealloc._lazy import lazy_exports

_EXPORTS = {
    'budget': 'noisealloc.theory.information.budget',
    'from_losses': 'noisealloc.theory.information.from_losses',
    'i_mmse': 'noisealloc.theory.information.i_mmse',
    'matrices': 'noisealloc.theory.information.matrices',
    'profile': 'noisealloc.theory.information.profile',
    'rates': 'noisealloc.theory.information.rates',
    'BudgetResult': 'noisealloc.theory.information.budget',
    'budget_integral': 'noisealloc.theory.information.budget',
    'BUDGET_RULE': 'noisealloc.theory.information.budget',
    'BudgetCheck': 'noisealloc.theory.information.budget',
    'budget_check': 'noisealloc.theory.information.budget',
    'budget_check_from_samples': 'noisealloc.theory.information.budget',
    'budget_check_on_grid': 'noisealloc.theory.information.budget',
    'QUADRATURE_STATUS': 'noisealloc.theory.information.budget',
    'PARAMETERISATIONS': 'noisealloc.theory.information.from_losses',
    'LossTable': 'noisealloc.theory.information.from_losses',
    'MMSEProfile': 'noisealloc.theory.information.from_losses',
    'read_loss_csv': 'noisealloc.theory.information.from_losses',
    'bin_losses': 'noisealloc.theory.information.from_losses',
    'loss_profile_warnings': 'noisealloc.theory.information.from_losses',
    'PER_LEVEL_MAX_ROWS': 'noisealloc.theory.information.from_losses',
    'DEFAULT_LOSS_BINS': 'noisealloc.theory.information.from_losses',
    'POOR_FIT_REDUCED_CHI2': 'noisealloc.theory.information.from_losses',
    'POOR_FIT_LOG_RMS': 'noisealloc.theory.information.from_losses',
    'x0_loss_from': 'noisealloc.theory.information.from_losses',
    'fit_mmse_profile': 'noisealloc.theory.information.from_losses',
    'I_MMSE_RULE': 'noisealloc.theory.information.i_mmse',
    'IMMSECheck': 'noisealloc.theory.information.i_mmse',
    'i_mmse_check': 'noisealloc.theory.information.i_mmse',
    'IMMSEMonteCarloCheck': 'noisealloc.theory.information.i_mmse',
    'FamilyMatrices': 'noisealloc.theory.information.matrices',
    'FAMILIES': 'noisealloc.theory.information.matrices',
    'ENTROPY_RATE_SAMPLES': 'noisealloc.theory.information.matrices',
    'posterior_weight_matrices': 'noisealloc.theory.information.matrices',
    'gaussian_linear_matrices': 'noisealloc.theory.information.matrices',
    'gaussian_linear_sympy': 'noisealloc.theory.information.matrices',
    'random_feature_matrices': 'noisealloc.theory.information.matrices',
    'spline_matrices': 'noisealloc.theory.information.matrices',
    'bspline_basis': 'noisealloc.theory.information.matrices',
    'build_family_matrices': 'noisealloc.theory.information.matrices',
    'natural_family': 'noisealloc.theory.information.matrices',
    'InformationProfile': 'noisealloc.theory.information.profile',
    'information_profile': 'noisealloc.theory.information.profile',
    'grid_quadrature_weights': 'noisealloc.theory.information.rates',
    'model_entropy_rate': 'noisealloc.theory.information.rates',
    'gregory_weights': 'noisealloc.theory.information.rates',
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
