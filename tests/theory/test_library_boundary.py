"""Public functions refuse bad input with a ValueError naming the argument (issue 28 item 7): no
IndexError on empty input, no complex input cut to its real part, no NaN weight turned into draws, no
scalar parameter given an array or an object failing with a message that does not name it.

The table of public functions (``_public_cases``) is the fuzz suite of the library boundary: every array
argument is given a complex array, every scalar parameter a Python complex, a numpy complex of zero
imaginary part (the case ``float()`` cuts silently), an array and an object."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from noisealloc.theory.posterior.common_random_numbers import draw_common_random_numbers
from noisealloc.theory.posterior.quadrature import adaptive_gauss_kronrod


@pytest.mark.parametrize("weights, needle", [
    ([], "at least one weight"),
    ([[0.5, 0.5]], "1-d"),
    ([0.5, np.nan], "weights must be finite"),
    ([0.5 + 1j, 0.5], "weights must be real"),
    ([0.5, -0.5], "weights"),
])
def test_common_random_numbers_refuse_bad_weights(weights, needle):
    with pytest.raises(ValueError, match=needle):
        draw_common_random_numbers(weights, 8, 1, rng=0)


def test_common_random_numbers_refuse_an_array_dim():
    with pytest.raises(ValueError, match="dim must be an integer"):
        draw_common_random_numbers([0.5, 0.5], 8, np.ones(2), rng=0)


def test_common_random_numbers_draws_unchanged_for_good_weights():
    a = draw_common_random_numbers([0.2, 0.3, 0.5], 64, 2, rng=3)
    b = draw_common_random_numbers(np.array([2.0, 3.0, 5.0]), 64, 2, rng=3)
    np.testing.assert_array_equal(a.atom_index if hasattr(a, "atom_index") else a[0],
                                  b.atom_index if hasattr(b, "atom_index") else b[0])


def _f(x, pid):
    return x[None, :]


@pytest.mark.parametrize("a, b, pid, n, needle", [
    ([], [], [], 1, "equal length >= 1"),
    ([0j], [1.0], [0], 1, "a must be real"),
    ([0.0], [np.nan], [0], 1, "b must be finite"),
    ([0.0], [1.0], [0.5], 1, "pid must hold integers"),
    ([0.0], [1.0], [3], 1, "pid must lie in"),
    ([0.0], [1.0], [0], 0, "n_problems"),
])
def test_adaptive_gauss_kronrod_refuses_bad_intervals(a, b, pid, n, needle):
    with pytest.raises(ValueError, match=needle):
        adaptive_gauss_kronrod(_f, a, b, pid, n)


def test_adaptive_gauss_kronrod_refuses_a_complex_integrand():
    with pytest.raises(ValueError, match="the values of f must be real"):
        adaptive_gauss_kronrod(lambda x, pid: (x + 0.5j)[None, :], [0.0], [1.0], [0], 1)


def test_adaptive_gauss_kronrod_still_integrates():
    res = adaptive_gauss_kronrod(_f, [0.0], [1.0], [0], 1)
    assert res.value[0, 0] == pytest.approx(0.5, rel=1e-14)


def test_element_wise_functions_refuse_complex_and_pass_nan():
    """Coordinates, the entropy rate and the schedule laws no longer cut complex input to its real part;
    element-wise, a NaN passes through where numpy would pass it (or is refused with its name)."""
    from noisealloc.theory.coordinates import edm_sigma, get_coordinate, lam_from_edm_sigma, vp_alpha_sigma
    from noisealloc.theory.entropy_rate import half_snr_times

    z = np.array([0.5 + 1j])
    for call in (lambda: edm_sigma(z), lambda: lam_from_edm_sigma(z), lambda: vp_alpha_sigma(z),
                 lambda: get_coordinate("sigma").from_lam(z), lambda: half_snr_times(z, np.ones(1))):
        with pytest.raises(ValueError, match="must be real"):
            call()
    assert np.isnan(edm_sigma(np.array([np.nan]))[0])


# ----------------------------------------------------------------------------- every public function (item 7)
# Each entry: (id, the callable built from the fixtures, its real keyword arguments, the arguments that take
# arrays, the arguments that are scalar parameters).  The real call must succeed (test below), so each
# refusal comes from the argument that was changed.  Models and samples are built once, on first use.

LAM = np.array([-2.0, 0.0, 2.0])
LAMG = np.linspace(-6.0, 6.0, 9)
LAM_BUDGET = np.linspace(-20.0, 20.0, 41)
STRINGS = np.array([[0, 1, 1], [0, 1, 0], [1, 1, 0], [1, 0, 0]])


@functools.cache
def _fixtures():
    from types import SimpleNamespace

    from noisealloc.theory import information as I
    from noisealloc.theory import masked as K
    from noisealloc.theory import models as M
    from noisealloc.theory import schedules as S

    f = SimpleNamespace()
    f.dm = M.DiracMixture([[-1.0], [1.0]])
    f.gm = M.GaussianManifold(np.zeros(2), np.eye(2)[:, :1], [1.0])
    f.gm2 = M.GaussianManifold(np.ones(2), np.eye(2)[:, 1:], [0.5])
    f.gmm = M.GaussianManifoldMixture([f.gm, f.gm2], [0.5, 0.5])
    f.circle = M.Circle(1.0, 2)
    f.xs = np.random.default_rng(0).normal(size=(40, 3))
    f.sel = M.smoothed_empirical_law(f.xs, n_neighbors=8, id_neighbors=5)
    f.unif = S.uniform_lambda()
    f.normal = S.Normal(0.0, 1.0)
    f.table = S.schedule_to_dict(f.unif)
    f.prod = K.ProductLaw([[0.5, 0.5], [0.3, 0.7]])
    f.chain = K.MarkovChain([[0.9, 0.1], [0.2, 0.8]], 4)
    f.fin = K.FiniteLaw(STRINGS, 2)
    f.sm = K.SmoothedLaw(STRINGS, 2, 0.1)
    f.dm_samples = f.dm.information_samples(LAMG, n_samples=64, rng=0)
    f.prod_samples = f.prod.information_samples(LAMG, n_samples=16, rng=0)
    f.budget_H = f.dm.conditional_entropy(LAM_BUDGET).value
    f.budget_mmse = f.dm.mmse(LAM_BUDGET).value
    f.hist, f.counts = K.distance_histograms(STRINGS, 2)
    f.dist, _ = M.nearest_neighbors(f.xs, 5)
    f.profile = I.fit_mmse_profile(LAMG, 1.0 / (1.0 + np.exp(LAMG)), n_boot=4, rng=0)
    return f


def _kernel(x, pid):
    return x[None, :]


def _public_cases():
    from noisealloc.theory import coordinates as co
    from noisealloc.theory import entropy_rate as er
    from noisealloc.theory import information as I
    from noisealloc.theory import masked as K
    from noisealloc.theory import models as M
    from noisealloc.theory import posterior as P
    from noisealloc.theory import schedules as S
    from noisealloc.theory import weights as wt
    from noisealloc.theory.estimates import Estimate
    from noisealloc.theory.schedules import entropic as EN

    cases = []

    def case(id_, fn, kw, arrays=(), scalars=()):
        # fn and kw may be functions of the fixtures (built on first use)
        cases.append((id_, fn, kw, tuple(arrays), tuple(scalars)))

    X1, X2 = np.array([[0.5], [1.5]]), np.array([[0.5, 0.1], [1.5, -0.2]])
    ones = lambda u: np.ones_like(u)  # noqa: E731
    # coordinates, entropy rate, weights
    case("coordinates.to_lam", co.to_lam, dict(u=[0.5], coordinate="sigma"), ["u"])
    case("coordinates.from_lam", co.from_lam, dict(lam=LAM, coordinate="sigma"), ["lam"])
    case("coordinates.dlam_du", co.dlam_du, dict(u=[0.5], coordinate="sigma"), ["u"])
    case("coordinates.du_dlam", co.du_dlam, dict(lam=LAM, coordinate="sigma"), ["lam"])
    case("coordinates.transport_pdf_to_lam", co.transport_pdf_to_lam, dict(pdf_u=ones, lam=LAM, coordinate="sigma"),
         ["lam"])
    case("coordinates.transport_pdf_from_lam", co.transport_pdf_from_lam,
         dict(pdf_lam=ones, u=[0.5], coordinate="sigma"), ["u"])
    case("coordinates.vp_alpha_sigma", co.vp_alpha_sigma, dict(lam=LAM), ["lam"])
    case("coordinates.lam_from_alpha_sigma", co.lam_from_alpha_sigma, dict(alpha=[0.6], sigma=[0.8]),
         ["alpha", "sigma"])
    case("coordinates.edm_sigma", co.edm_sigma, dict(lam=LAM), ["lam"])
    case("coordinates.lam_from_edm_sigma", co.lam_from_edm_sigma, dict(sigma=[0.5]), ["sigma"])
    case("entropy_rate.half_snr_times", er.half_snr_times, dict(lam=LAM, values=[1.0, 1.0, 1.0]), ["lam", "values"])
    case("entropy_rate.rate_jacobian", er.rate_jacobian, dict(lam=LAM, coordinate="sigma"), ["lam"])
    case("entropy_rate.entropy_rate_from_mmse", er.entropy_rate_from_mmse, dict(lam=LAM, mmse=[1.0, 0.5, 0.1]),
         ["lam", "mmse"])
    case("estimates.Estimate", Estimate, dict(value=[1.0, 2.0], stderr=[0.1, 0.1], method="closed-form"),
         ["value", "stderr"])
    case("weights.elbo_weight", wt.elbo_weight, dict(lam=LAM), ["lam"])
    case("weights.edm_weight", wt.edm_weight, dict(lam=LAM, sigma_data=0.5, P_mean=-1.2, P_std=1.2), ["lam"],
         ["sigma_data", "P_mean", "P_std"])
    case("weights.min_snr_weight", wt.min_snr_weight, dict(lam=LAM, gamma=5.0), ["lam"], ["gamma"])
    case("weights.uniform_weight", wt.uniform_weight, dict(lam=LAM), ["lam"])
    case("weights.tabulated_weight", wt.tabulated_weight, dict(lam_knots=[-1.0, 1.0], values=[1.0, 2.0]),
         ["lam_knots", "values"])
    case("weights.Weight.__call__", lambda f: wt.tabulated_weight([-1.0, 1.0], [1.0, 2.0]), dict(lam=LAM), ["lam"])
    case("weights.get_weight", lambda f: lambda sigma_data: wt.get_weight("edm", sigma_data=sigma_data),
         dict(sigma_data=0.5), [], ["sigma_data"])
    case("weights.loss_weight", wt.loss_weight, dict(lam=LAM, kind="edm", sigma_data=1.0), ["lam"], ["sigma_data"])
    # models
    case("models.DiracMixture", M.DiracMixture, dict(atoms=[[0.0], [1.0]], weights=[0.5, 0.5]), ["atoms", "weights"])
    case("models.merge_duplicate_atoms", M.merge_duplicate_atoms,
         dict(atoms=np.array([[0.0], [0.0]]), weights=np.array([0.5, 0.5])), ["atoms", "weights"])
    case("models.GaussianManifold", M.GaussianManifold,
         dict(mean=np.zeros(2), basis=np.eye(2)[:, :1], variances=[1.0]), ["mean", "basis", "variances"])
    case("models.GaussianManifoldMixture", M.GaussianManifoldMixture,
         lambda f: dict(components=[f.gm, f.gm2], weights=[0.5, 0.5]), ["weights"])
    case("models.Circle", M.Circle, dict(radius=1.0, dim=3, center=[0.0, 0.0, 1.0], frame=np.eye(3)[:, :2]),
         ["center", "frame"], ["radius"])
    for name in ("bessel_ratio", "log_ive0", "one_minus_bessel_ratio_sq", "log_i0_minus_quadratic"):
        case(f"models.{name}", getattr(M, name), dict(kappa=[0.5, 2.0]), ["kappa"])
    case("models.sample_observation", M.sample_observation, lambda f: dict(model=f.dm, lam=1.0, n=4, rng=0), [],
         ["lam"])
    case("models.nearest_neighbors", M.nearest_neighbors, lambda f: dict(x=f.xs, k=3), ["x"])
    case("models.levina_bickel_dimension", M.levina_bickel_dimension, lambda f: dict(x=f.xs, k=5, dist=f.dist),
         ["x", "dist"])
    case("models.smoothed_empirical_law", M.smoothed_empirical_law,
         lambda f: dict(x=f.xs, n_neighbors=8, id_neighbors=5), ["x"])
    case("models.SmoothedEmpiricalLaw", M.SmoothedEmpiricalLaw,
         lambda f: dict(points=f.sel.points, bases=f.sel.bases, variances=f.sel.variances,
                        dimension=f.sel.intrinsic_dimension, n_neighbors=f.sel.n_neighbors),
         ["points", "bases", "variances"], ["n_neighbors"])
    for name, attr, x in (("DiracMixture", "dm", X1), ("GaussianManifold", "gm", X2),
                          ("GaussianManifoldMixture", "gmm", X2), ("Circle", "circle", X2),
                          ("SmoothedEmpiricalLaw", "sel", X2[:, :1].repeat(3, axis=1))):
        mc = dict(n_samples=64, rng=0) if name in ("GaussianManifoldMixture", "SmoothedEmpiricalLaw") else {}

        def method(meth, attr=attr):
            return lambda f: getattr(getattr(f, attr), meth)

        case(f"{name}.denoiser", method("denoiser"), dict(x=x, lam=1.0), ["x", "lam"])
        case(f"{name}.posterior_cov", method("posterior_cov"), dict(x=x, lam=1.0), ["x", "lam"])
        case(f"{name}.sample_x", method("sample_x"), dict(lam=1.0, n=3, rng=0), [], ["lam"])
        for meth in ("mmse", "entropy_rate", "information"):
            case(f"{name}.{meth}", method(meth), dict(lam=LAM, **mc), ["lam"])
    case("DiracMixture.log_posterior_weights", lambda f: f.dm.log_posterior_weights, dict(x=X1, lam=1.0),
         ["x", "lam"])
    case("DiracMixture.conditional_entropy", lambda f: f.dm.conditional_entropy, dict(lam=LAM, rtol=1e-10), ["lam"],
         ["rtol"])
    case("models.dirac_atoms", M.dirac_atoms, dict(K=3, D=2, sep=2.0, seed=0), [], ["K", "D", "sep", "seed"])
    case("models.gaussian_parameters", M.gaussian_parameters, dict(D=3, k=2, var=1.0, seed=0), [],
         ["D", "k", "var", "seed"])
    case("DiracMixture.information_samples", lambda f: f.dm.information_samples, dict(lam=LAM, n_samples=64, rng=0),
         ["lam"])
    case("GaussianManifold.shrinkage", lambda f: f.gm.shrinkage, dict(lam=LAM), ["lam"])
    case("GaussianManifold.log_marginal", lambda f: f.gm.log_marginal, dict(x=X2, lam=1.0), ["x", "lam"])
    case("GaussianManifoldMixture.log_posterior_weights", lambda f: f.gmm.log_posterior_weights, dict(x=X2, lam=1.0),
         ["x", "lam"])
    case("SmoothedEmpiricalLaw.information_samples", lambda f: f.sel.information_samples,
         dict(lam=LAM, n_samples=64, rng=0), ["lam"])
    # posterior
    case("posterior.draw_common_random_numbers", P.draw_common_random_numbers,
         dict(weights=[0.5, 0.5], n_samples=8, dim=1, rng=0), ["weights"])
    case("posterior.stratified_mean_stderr", P.stratified_mean_stderr,
         dict(values=np.arange(8.0), stratum=np.repeat([0, 1], 4)), ["values"])
    for name in ("information_samples", "monte_carlo_information"):
        case(f"posterior.{name}", getattr(P, name),
             dict(atoms=[[0.0], [1.0]], weights=[0.5, 0.5], lam=LAM, n_samples=64, rng=0), ["atoms", "weights", "lam"])
    case("posterior.posterior_weights_blocked", P.posterior_weights_blocked,
         dict(atoms=[[0.0], [1.0]], log_pi=np.log([0.5, 0.5]), x=X1, lam=1.0), ["atoms", "log_pi", "x", "lam"])
    case("posterior.validate_atoms", P.validate_atoms, dict(atoms=[[0.0], [1.0]]), ["atoms"])
    case("posterior.validate_weights", P.validate_weights, dict(weights=[0.5, 0.5], n_atoms=2), ["weights"],
         ["n_atoms"])
    case("posterior.adaptive_gauss_kronrod", P.adaptive_gauss_kronrod,
         dict(f=_kernel, a=[0.0], b=[1.0], pid=[0], n_problems=1, rtol=1e-11, atol=0.0), ["a", "b", "pid"],
         ["rtol", "atol"])
    case("posterior.graded_breakpoints", P.graded_breakpoints,
         dict(cuts=[[0.5]], lo=[0.0], hi=[1.0], scale=[0.1], first=8.0, ratio=16.0), ["cuts", "lo", "hi", "scale"],
         ["first", "ratio"])
    # information
    for name in ("budget_integral", "budget_check"):
        case(f"information.{name}", getattr(I, name),
             lambda f: dict(model=f.dm, lam_min=-8.0, lam_max=8.0, rtol=1e-6, n_panels=16), [],
             ["lam_min", "lam_max", "rtol", "n_panels"])
    case("information.budget_check_from_samples", I.budget_check_from_samples,
         lambda f: dict(samples=f.dm_samples, entropy=f.dm.entropy, total_variance=f.dm.total_variance), [],
         ["entropy", "total_variance"])
    case("information.budget_check_on_grid", I.budget_check_on_grid,
         lambda f: dict(lam=LAM_BUDGET, mmse=f.budget_mmse, H=f.budget_H, H_rel_error=1e-12, entropy=f.dm.entropy,
                        total_variance=f.dm.total_variance, rtol=1e-3),
         ["lam", "mmse", "H"], ["H_rel_error", "entropy", "total_variance", "rtol"])
    lam_b = np.linspace(-5.0, 5.0, 400)
    case("information.bin_losses", I.bin_losses, dict(lam=lam_b, loss=np.exp(-np.abs(lam_b)), n_bins=8, min_count=2),
         ["lam", "loss"], ["n_bins", "min_count"])
    case("information.x0_loss_from", I.x0_loss_from, dict(loss=[1.0, 0.5, 0.2], lam=LAM, parameterisation="eps"),
         ["loss", "lam"])
    case("information.fit_mmse_profile", I.fit_mmse_profile,
         dict(lam=LAMG, loss=1.0 / (1.0 + np.exp(LAMG)), stderr=np.full(9, 0.01), n_boot=4, rng=0, penalty=1e-3),
         ["lam", "loss", "stderr"], ["penalty", "n_boot"])
    case("information.fit_mmse_profile(n_basis)", I.fit_mmse_profile,
         dict(lam=LAMG, loss=1.0 / (1.0 + np.exp(LAMG)), n_basis=4, n_boot=2, rng=0), [], ["n_basis"])
    case("information.i_mmse_check", I.i_mmse_check, lambda f: dict(model=f.gm, lam=LAM, step=0.01), ["lam"],
         ["step"])
    case("information.posterior_weight_matrices", I.posterior_weight_matrices,
         lambda f: dict(model=f.dm, lam=LAM, n_nodes=8, n_mc=64), ["lam"], ["n_nodes", "n_mc"])
    case("information.gaussian_linear_matrices", I.gaussian_linear_matrices, lambda f: dict(model=f.gm, lam=LAM),
         ["lam"])
    case("information.gaussian_linear_sympy", I.gaussian_linear_sympy, dict(variances=[1.0, 2.0]), ["variances"])
    case("information.random_feature_matrices", I.random_feature_matrices,
         lambda f: dict(model=f.dm, lam=LAM, q=4, n_mc=64, freqs=2, scale=1.0), ["lam"], ["q", "n_mc", "freqs", "scale"])
    case("information.bspline_basis", I.bspline_basis, dict(lam=LAM, J=4, lam_min=-3.0, lam_max=3.0), ["lam"],
         ["J", "lam_min", "lam_max"])
    case("information.build_family_matrices", I.build_family_matrices,
         lambda f: dict(model=f.gm, family="linear", lam=LAM), ["lam"])
    case("information.information_profile", I.information_profile,
         lambda f: dict(model=f.gm, lam=LAM, budget=False, i_mmse_levels=[0.0], budget_rtol=1e-8),
         ["lam", "i_mmse_levels"], ["budget_rtol"])
    case("information.information_profile(quadrature_interval)", I.information_profile,
         lambda f: dict(model=f.dm, lam=LAM, quadrature_interval=(-8.0, 8.0)), ["quadrature_interval"])
    case("information.grid_quadrature_weights", I.grid_quadrature_weights, dict(lam=LAMG), ["lam"])
    case("information.model_entropy_rate", I.model_entropy_rate, lambda f: dict(model=f.gm, lam=LAM), ["lam"])
    case("information.gregory_weights", I.gregory_weights, dict(n=15, step=0.5), [], ["step"])
    for meth in ("log_mmse", "mmse", "entropy_rate", "band"):
        case(f"MMSEProfile.{meth}", lambda f, meth=meth: getattr(f.profile, meth), dict(lam=LAM), ["lam"])
    # schedules
    case("schedules.TruncatedSchedule", S.TruncatedSchedule, lambda f: dict(law=f.normal, lo=-3.0, hi=3.0), [],
         ["lo", "hi"])
    case("schedules.TransportedSchedule", S.TransportedSchedule,
         lambda f: dict(base=f.unif, coordinate="sigma", lam_interval=(-12.0, 12.0)), ["lam_interval"])
    case("schedules.TabulatedSchedule", S.TabulatedSchedule,
         dict(knots=[-1.0, 0.0, 1.0], pdf_values=[1.0, 2.0, 1.0]), ["knots", "pdf_values"])
    for meth, arg in (("pdf", "u"), ("cdf", "u"), ("sf", "u"), ("ppf", "q"), ("isf", "q")):
        case(f"Schedule.{meth}", lambda f, meth=meth: getattr(f.unif, meth), {arg: [0.5]}, [arg])
        case(f"Distribution.{meth}", lambda f, meth=meth: getattr(f.normal, meth), {arg: [0.5]}, [arg])
    case("Schedule.truncate", lambda f: f.unif.truncate, dict(lo=-1.0, hi=1.0), [], ["lo", "hi"])
    case("Schedule.lam_moments", lambda f: f.unif.lam_moments, dict(n_cells=16, order=8), [], ["n_cells", "order"])
    case("Schedule.sample", lambda f: f.unif.sample, dict(n=4, rng=0), [], ["n"])
    case("Distribution.sample", lambda f: f.normal.sample, dict(n=4, rng=0), [], ["n"])
    case("DiracMixture.sample_x0", lambda f: f.dm.sample_x0, dict(n=4, rng=0), [], ["n"])
    for name in ("uniform_lambda", "cosine", "linear_beta_uniform_t", "builtin_schedules"):
        case(f"schedules.{name}", getattr(S, name), dict(lam_min=-3.0, lam_max=3.0), [], ["lam_min", "lam_max"])
    case("schedules.edm_lognormal", S.edm_lognormal, dict(P_mean=-1.2, P_std=1.2, lam_min=-3.0, lam_max=3.0), [],
         ["P_mean", "P_std", "lam_min", "lam_max"])
    case("schedules.edm_lognormal_moments", S.edm_lognormal_moments, dict(P_mean=-1.2, P_std=1.2), [],
         ["P_mean", "P_std"])
    case("schedules.logit_normal_sd3", S.logit_normal_sd3, dict(m=0.0, s=1.0), [], ["m", "s"])
    case("schedules.laplace_lambda", S.laplace_lambda, dict(mu=0.0, b=0.5), [], ["mu", "b"])
    case("schedules.heuristic_shift", S.heuristic_shift, dict(s=1.0, sigma_data=0.5), [], ["s", "sigma_data"])
    case("schedules.shifted_heuristic_pdfs", S.shifted_heuristic_pdfs, dict(lam=LAM, s=1.0, sigma_data=0.5),
         ["lam"], ["s", "sigma_data"])
    case("schedules.shifted_heuristic", S.shifted_heuristic,
         dict(name="edm_lognormal", s=1.0, lam_min=-3.0, lam_max=3.0, sigma_data=0.5, knots=33), [],
         ["s", "lam_min", "lam_max", "sigma_data"])
    case("schedules.population_schedule", S.population_schedule,
         lambda f: dict(x=f.xs, lam=LAMG, n_levels=3, n_samples=16, rng=0, floor=0.1), ["x", "lam"], ["floor"])
    case("schedules.population_schedule(law)", S.population_schedule,
         lambda f: dict(x=f.xs, lam=LAMG, n_levels=3, n_samples=16, rng=0, law=f.sel), ["x"])
    for name in ("entropic_pdf_values", "entropic_schedule"):
        case(f"schedules.{name}", getattr(S, name), dict(lam=LAMG, h=np.ones(9), floor=0.1), ["lam", "h"], ["floor"])
    case("schedules.independent_learner_factor", S.independent_learner_factor,
         dict(u=LAMG, omega_c=np.ones(9), p=np.ones(9) / 12), ["u", "omega_c", "p"])
    case("schedules.schedule_from_model", S.schedule_from_model,
         lambda f: dict(model=f.gm, lam=LAMG, floor=0.1, h_floor=1e-300), ["lam"], ["floor", "h_floor"])
    case("schedules.schedule_from_rate", S.schedule_from_rate,
         dict(lam=LAMG, h=np.ones(9), h_stderr=0.0, floor=0.1, h_floor=1e-300), ["lam", "h", "h_stderr"],
         ["floor", "h_floor"])
    case("schedules.schedule_from_data", EN.schedule_from_data, lambda f: dict(model=f.gm, lam=LAMG, floor=0.1),
         ["lam"], ["floor"])
    case("schedules.schedule_loss_factor", EN.schedule_loss_factor,
         lambda f: dict(lam=LAMG, h=np.ones(9), schedule=f.unif), ["lam", "h"])
    case("schedules.schedule_from_dict", lambda f: lambda cdf, interval: S.schedule_from_dict(
        dict(f.table, cdf=cdf, interval=interval)), lambda f: dict(cdf=f.table["cdf"], interval=f.table["interval"]),
        ["cdf", "interval"])
    case("schedules.sample_from_table", S.sample_from_table, lambda f: dict(table=f.table, n=4, rng=0, u_clamp=1e-12),
         [], ["u_clamp"])
    case("schedules.Normal", S.Normal, dict(mu=0.0, sd=1.0), [], ["mu", "sd"])
    case("schedules.Laplace", S.Laplace, dict(mu=0.0, b=1.0), [], ["mu", "b"])
    case("schedules.Uniform", S.Uniform, dict(a=0.0, b=1.0), [], ["a", "b"])
    case("schedules.EntropyRateEstimator", S.EntropyRateEstimator,
         dict(lam_min=-3.0, lam_max=3.0, forgetting=0.9, floor=0.05, max_change=0.1, n_bins=8, min_bins=4, knots=33),
         [], ["lam_min", "lam_max", "forgetting", "floor", "max_change", "n_bins", "min_bins", "knots"])
    case("EntropyRateEstimator.update", lambda f: S.EntropyRateEstimator().update, dict(lam=[0.0, 1.0], loss=[1.0, 0.5]),
         ["lam", "loss"])
    case("schedules.tv_distance_piecewise_linear", S.tv_distance_piecewise_linear,
         dict(u=[0.0, 1.0], p=[1.0, 1.0], q=[0.5, 1.5]), ["u", "p", "q"])
    case("schedules.ScheduleTable", S.ScheduleTable,
         lambda f: dict(knots=f.table["knots"], pdf=f.table["pdf"], cdf=f.table["cdf"]), ["knots", "pdf", "cdf"])
    case("schedules.to_numpy", S.to_numpy, dict(x=[1.0, 2.0]), ["x"])
    case("schedules.feed_estimator", S.feed_estimator,
         lambda f: dict(estimator=S.EntropyRateEstimator(), lam=[0.0], loss=[1.0]), ["lam", "loss"])
    # masked
    case("masked.masked_profile", K.masked_profile, lambda f: dict(model=f.prod, lam=LAM, n_samples=16, rng=0),
         ["lam"])
    case("masked.FiniteLaw", K.FiniteLaw, dict(strings=STRINGS, V=2, weights=[0.25] * 4), ["strings", "weights"])
    case("masked.check_weights", K.check_weights, dict(weights=[0.5, 0.5], K=2), ["weights"], ["K"])
    case("masked.merge_duplicate_strings", K.merge_duplicate_strings,
         dict(strings=STRINGS, weights=np.full(4, 0.25)), ["strings", "weights"])
    case("masked.MaskedInformation.closed_form", K.MaskedInformation.closed_form,
         dict(lam=LAM, erasure_entropy=[1.0, 0.5, 0.1], conditional_entropy=[1.0, 0.5, 0.1]),
         ["lam", "erasure_entropy", "conditional_entropy"])
    case("masked.entropy_nats", K.entropy_nats, dict(p=[0.5, 0.5]), ["p"])
    case("masked.check_levels", K.check_levels, dict(lam=LAM), ["lam"])
    case("masked.masked_budget_check", K.masked_budget_check,
         lambda f: dict(samples=f.prod_samples, entropy=f.prod.entropy,
                        marginal_entropy_sum=float(f.prod.marginal_entropies.sum()), entropy_stderr=0.0), [],
         ["entropy", "marginal_entropy_sum", "entropy_stderr"])
    case("masked.tail_bound", K.tail_bound, dict(marginal_entropy_sum=1.0, a=-3.0, b=3.0), [],
         ["marginal_entropy_sum", "a", "b"])
    case("masked.ProductLaw", K.ProductLaw, dict(marginals=[[0.5, 0.5]]), ["marginals"])
    case("masked.MarkovChain", K.MarkovChain, dict(P=[[0.9, 0.1], [0.2, 0.8]], L=3), ["P"])
    for name, attr in (("ProductLaw", "prod"), ("MarkovChain", "chain"), ("FiniteLaw", "fin"), ("SmoothedLaw", "sm")):
        def method(meth, attr=attr):
            return lambda f: getattr(getattr(f, attr), meth)

        case(f"{name}.information", method("information"), dict(lam=LAM, n_samples=16, rng=0), ["lam"])
        case(f"{name}.information_samples", method("information_samples"), dict(lam=LAM, n_samples=16, rng=0),
             ["lam"])
        case(f"{name}.budget_check", method("budget_check"), dict(lam=LAMG, n_samples=16, rng=0), ["lam"])
        if name in ("ProductLaw", "MarkovChain"):
            case(f"{name}.exact_information", method("exact_information"), dict(lam=LAM), ["lam"])
    case("FiniteLaw.sample_values", lambda f: f.fin.sample_values,
         dict(x=STRINGS[:1], mask=np.array([[False, True, True]])), ["x", "mask"])
    case("SmoothedLaw.log_prob", lambda f: f.sm.log_prob, dict(x=STRINGS[:1]), ["x"])
    for name in ("keep_probability", "mask_rate", "log_keep_probability", "log_mask_rate", "mask_rates", "t_from_lam"):
        case(f"masked.{name}", getattr(K, name), dict(lam=LAM), ["lam"])
    case("masked.lam_from_mask_rate", K.lam_from_mask_rate, dict(eps=[0.5]), ["eps"])
    case("masked.lam_from_t", K.lam_from_t, dict(t=[0.5]), ["t"])
    case("masked.transport_pdf_to_lam", K.transport_pdf_to_lam, dict(pdf_u=ones, lam=LAM, coordinate="eps"), ["lam"])
    case("masked.transport_pdf_from_lam", K.transport_pdf_from_lam, dict(pdf_lam=ones, u=[0.5], coordinate="eps"),
         ["u"])
    case("masked.MaskedCoordinate.du_dlam", lambda f: K.get_masked_coordinate("eps").du_dlam, dict(lam=LAM), ["lam"])
    case("masked.check_tokens", K.check_tokens, dict(tokens=STRINGS, V=2), ["tokens"])
    case("masked.masks_from_uniforms", K.masks_from_uniforms, dict(u=np.full((1, 3), 0.5), lam=0.0), ["u", "lam"])
    case("masked.mask_tokens", K.mask_tokens, dict(tokens=STRINGS, lam=0.0, V=2, rng=0), ["tokens", "lam"])
    case("masked.masked_schedule_from_rate", K.masked_schedule_from_rate,
         dict(lam=LAMG, h=np.ones(9), h_stderr=np.zeros(9), floor=0.1), ["lam", "h", "h_stderr"], ["floor"])
    case("masked.masked_schedule_from_model", K.masked_schedule_from_model,
         lambda f: dict(model=f.prod, lam=LAMG, n_samples=16, rng=0, floor=0.1), ["lam"], ["floor"])
    case("masked.masked_rate_from_losses", K.masked_rate_from_losses,
         dict(lam=LAMG, loss=np.ones(9), loss_stderr=np.full(9, 0.1)), ["lam", "loss", "loss_stderr"])
    case("masked.masked_schedule_from_losses", K.masked_schedule_from_losses,
         dict(lam=LAMG, loss=np.ones(9), loss_stderr=np.full(9, 0.1), floor=0.1), ["lam", "loss", "loss_stderr"],
         ["floor"])
    for name in ("masked_linear", "masked_cosine", "maskgit_cosine", "masked_uniform_lambda", "masked_heuristics"):
        case(f"masked.{name}", getattr(K, name), dict(lam_min=-3.0, lam_max=3.0), [], ["lam_min", "lam_max"])
    case("masked.SmoothedLaw", K.SmoothedLaw, dict(strings=STRINGS, V=2, delta=0.1), ["strings"], ["delta"])
    case("masked.fit_delta", K.fit_delta, dict(strings=STRINGS, V=2, grid=16), ["strings"], ["grid"])
    case("masked.distance_histograms", K.distance_histograms, dict(strings=STRINGS, V=2), ["strings"])
    case("masked.loo_log_likelihood", K.loo_log_likelihood,
         lambda f: dict(delta=[0.1], hist=f.hist, counts=f.counts, V=2), ["delta", "hist", "counts"], ["V"])
    return cases


PUBLIC_CASES = {c[0]: c for c in _public_cases()}
ARRAY_ARGS = [(id_, a) for id_, c in PUBLIC_CASES.items() for a in c[3]]
SCALAR_ARGS = [(id_, s) for id_, c in PUBLIC_CASES.items() for s in c[4]]


def _built(value):
    """``value``, or what it builds from the fixtures when it is written ``lambda f: ...`` in the table."""
    return value(_fixtures()) if getattr(value, "__name__", "") == "<lambda>" else value


def _call(id_, **change):
    """Call the case ``id_`` with its real arguments, some replaced by ``change``."""
    _, fn, kw, _, _ = PUBLIC_CASES[id_]
    return _built(fn)(**{**_built(kw), **change})


def _real_value(id_, arg):
    return _built(PUBLIC_CASES[id_][2])[arg]


def _refusal(id_, arg, value, kinds=(ValueError,)):
    """The one-line message of the error raised with ``arg = value``; fails if none or another kind is raised."""
    with warnings.catch_warnings():
        # a real part silently taken is what is tested: numpy's ComplexWarning must not be the way out
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        try:
            _call(id_, **{arg: value})
        except kinds as exc:
            message = str(exc)
        else:
            pytest.fail(f"{id_}: {arg} = {value!r} was accepted")
    assert "\n" not in message, message
    assert arg in message, f"{id_}: the message does not name {arg!r}: {message}"
    return message


@pytest.mark.parametrize("id_", sorted(PUBLIC_CASES))
def test_boundary_cases_accept_their_real_input(id_):
    """Each case's real call succeeds, so the refusals below come from the argument that was changed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and regularisation notes of the small problems
        _call(id_)


@pytest.mark.parametrize("id_, arg", ARRAY_ARGS, ids=[f"{i}-{a}" for i, a in ARRAY_ARGS])
def test_public_functions_refuse_complex_arrays_naming_the_argument(id_, arg):
    """A complex array is refused with a one-line ValueError naming the argument (not cut to its real part)."""
    value = np.asarray(_real_value(id_, arg)) + 0.5j
    message = _refusal(id_, arg, value)
    assert "real" in message or "complex" in message, message


@pytest.mark.parametrize("kind", ["python complex", "numpy complex of zero imaginary part"])
@pytest.mark.parametrize("id_, arg", SCALAR_ARGS, ids=[f"{i}-{a}" for i, a in SCALAR_ARGS])
def test_scalar_parameters_refuse_complex_naming_the_argument(id_, arg, kind):
    """``float()`` of a numpy complex drops its imaginary part with only a warning; no scalar parameter does."""
    real = _real_value(id_, arg)
    value = complex(real) + 0.5j if kind == "python complex" else np.complex128(real)
    message = _refusal(id_, arg, value)
    assert "real" in message or "complex" in message, message


@pytest.mark.parametrize("kind", ["array", "object"])
@pytest.mark.parametrize("id_, arg", SCALAR_ARGS, ids=[f"{i}-{a}" for i, a in SCALAR_ARGS])
def test_scalar_parameters_given_arrays_or_objects_name_the_argument(id_, arg, kind):
    real = _real_value(id_, arg)
    value = np.array([real, real]) if kind == "array" else object()
    _refusal(id_, arg, value, kinds=(ValueError, TypeError))


def test_refusal_helper_fails_when_a_value_is_accepted_or_the_message_does_not_name_it(monkeypatch):
    """The helper behind the tests above fails on the two ways a boundary can be wrong."""
    monkeypatch.setitem(PUBLIC_CASES, "cuts", ("cuts", lambda f: np.real, {"val": [1.0]}, ("val",), ()))
    with pytest.raises(pytest.fail.Exception, match="was accepted"):
        _refusal("cuts", "val", np.array([1.0 + 0.5j]))

    def unnamed(x):
        raise ValueError("must be real")

    monkeypatch.setitem(PUBLIC_CASES, "unnamed", ("unnamed", lambda f: unnamed, {"x": [1.0]}, ("x",), ()))
    with pytest.raises(AssertionError, match="does not name 'x'"):
        _refusal("unnamed", "x", np.array([1.0 + 0.5j]))


#: Element-wise functions that pass a NaN through as numpy does (their docstrings say so).
NAN_PASSES = [
    ("coordinates.vp_alpha_sigma", "lam"), ("coordinates.lam_from_alpha_sigma", "alpha"),
    ("coordinates.edm_sigma", "lam"), ("coordinates.lam_from_edm_sigma", "sigma"),
    ("entropy_rate.half_snr_times", "values"), ("entropy_rate.entropy_rate_from_mmse", "mmse"),
    ("models.bessel_ratio", "kappa"), ("models.log_ive0", "kappa"), ("models.one_minus_bessel_ratio_sq", "kappa"),
    ("models.log_i0_minus_quadratic", "kappa"), ("information.x0_loss_from", "loss"),
    ("Distribution.pdf", "u"), ("Distribution.cdf", "u"), ("Distribution.sf", "u"), ("Distribution.ppf", "q"),
    ("Distribution.isf", "q"), ("schedules.to_numpy", "x"), ("masked.entropy_nats", "p"),
    ("masked.loo_log_likelihood", "delta"),
]


@pytest.mark.parametrize("id_, arg", NAN_PASSES, ids=[f"{i}-{a}" for i, a in NAN_PASSES])
def test_element_wise_functions_pass_nan_through_and_say_so(id_, arg):
    value = np.array(_real_value(id_, arg), dtype=np.float64)
    value.flat[0] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's own "invalid value" note comes with the NaN
        out = _call(id_, **{arg: value})
    parts = out if isinstance(out, tuple) else (getattr(out, "value", out),)
    assert any(np.isnan(np.asarray(p)).any() for p in parts), (id_, out)
    assert "NaN" in (_built(PUBLIC_CASES[id_][1]).__doc__ or ""), f"{id_}: the docstring does not say NaN passes"
