"""Dirac mixtures whose atoms span 3 dimensions (issue 12 item 3, second half).

``method="auto"`` takes the pruned tensor Gauss--Hermite rule at the levels where its own acceptance
tests pass (doubling agreement to ``rtol``, unresolved-layer and pruned-node bounds) and importance-
sampled Monte Carlo at the others, in one ``InformationEstimates``.  Checked here against references
computed independently in this file:

* a *single-frame* Gauss--Hermite rule of order 64 (and 80, to show it has converged), built from
  :func:`scipy.special.roots_hermitenorm` in the frame of the mixture mean, :math:`x = c + \\sigma z`,
  with the mixture density carried as the likelihood ratio
  :math:`\\rho(z) = \\sum_k \\pi_k e^{z\\cdot a_k - |a_k|^2/2}`, :math:`a_k = (\\mu_k - c)/\\sigma`,
  and the posterior from :func:`scipy.special.logsumexp` (the code under test integrates in every
  atom's own frame, relative to the dominant atom, with its own nodes);
* plain Monte Carlo drawn here with numpy (no importance sampling), within its standard error;
* the library's pure Monte-Carlo method at the boundary level between the two regimes.

Accuracy claim tested: relative error <= 1e-8 at every Gauss--Hermite level where
h >= 1e-8 max h (observed ~1e-13).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.special import logsumexp, roots_hermitenorm

from noisealloc.theory.posterior.dirac_quadrature import GH_MAX_ATOMS_3D
from noisealloc.theory.models.dirac import DiracMixture

from helpers.strategies import examples

RTOL = 1e-8
H_FLOOR = 1e-8


def _mixture(seed, k, dim=3, scale=0.9):
    """``k`` atoms in general position in R^3 (pair distances ~1-2), unequal weights; embedded in R^dim."""
    rng = np.random.default_rng(seed)
    while True:
        mu = rng.normal(size=(k, 3)) * scale
        a, b = np.triu_indices(k, 1)
        d = np.linalg.norm(mu[a] - mu[b], axis=1)
        if d.min() > 0.5 and np.linalg.matrix_rank(mu[1:] - mu[0], tol=1e-3) == 3:
            break
    w = rng.uniform(0.2, 1.0, k)
    if dim > 3:
        q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
        mu = mu @ q[:3] + rng.normal(size=dim)
    return DiracMixture(mu, w / w.sum())


def _reference(atoms, weights, lam, order=64):
    """(mmse, H) by a single-frame tensor Gauss--Hermite rule (scipy nodes), written independently."""
    atoms = np.asarray(atoms, float)
    # the span's coordinates (atoms may sit in R^D, D > 3)
    c = weights @ atoms
    u, s, vt = np.linalg.svd(atoms - c, full_matrices=False)
    y = (atoms - c) @ vt[: int(np.sum(s > 1e-9 * s[0]))].T
    z1, w1 = roots_hermitenorm(order)
    w1 = w1 / w1.sum()
    g = np.meshgrid(*([z1] * y.shape[1]), indexing="ij")
    z = np.stack([a.ravel() for a in g], axis=1)
    wz = np.prod(np.stack([a.ravel() for a in np.meshgrid(*([w1] * y.shape[1]), indexing="ij")], axis=1), axis=1)
    out = []
    for lm in np.atleast_1d(lam):
        sigma = np.exp(-0.5 * lm)
        a = y / sigma
        logit = np.log(weights)[None, :] + z @ a.T - 0.5 * np.sum(a * a, axis=1)[None, :]
        log_rho = logsumexp(logit, axis=1)
        logw = logit - log_rho[:, None]
        wp = np.exp(logw)
        m = wp @ y
        trc = wp @ np.sum(y * y, axis=1) - np.sum(m * m, axis=1)
        ent = -np.sum(np.where(wp > 0, wp * logw, 0.0), axis=1)
        q = wz * np.exp(log_rho)
        out.append((q @ trc, q @ ent))
    return np.array(out).T  # (2, L)


def _plain_mc(model, lam, n, seed):
    """Plain Monte Carlo (x0 from the data law, Gaussian noise), numpy only: (mean, stderr) of (mmse, H)."""
    rng = np.random.default_rng(seed)
    atoms, pi = model.atoms, model.weights
    k = rng.choice(len(pi), size=n, p=pi)
    sigma = np.exp(-0.5 * lam)
    x = atoms[k] + sigma * rng.normal(size=(n, atoms.shape[1]))
    d2 = np.sum((x[:, None, :] - atoms[None, :, :]) ** 2, axis=2)
    logit = np.log(pi)[None, :] - d2 / (2 * sigma * sigma)
    logw = logit - logsumexp(logit, axis=1, keepdims=True)
    wp = np.exp(logw)
    m = wp @ atoms
    trc = np.sum(wp[:, :, None] * (atoms[None] - m[:, None]) ** 2, axis=(1, 2))
    ent = -np.sum(wp * logw, axis=1)
    return np.array([trc.mean(), ent.mean()]), np.array([trc.std(ddof=1), ent.std(ddof=1)]) / np.sqrt(n)


def _check_gh_levels(model, lam, info):
    rule = info.mmse.info["rule"]
    gh = rule == 1
    assert gh.any()
    ref = _reference(model.atoms, model.weights, lam[gh])
    h_ref = 0.5 * np.exp(lam[gh]) * ref[0]
    mask = h_ref >= H_FLOOR * h_ref.max()
    rel = []
    for i, est in enumerate((info.mmse, info.conditional_entropy)):
        r = np.abs(est.value[gh] / ref[i] - 1.0)
        assert np.all(r[mask] <= RTOL), f"quantity {i}: relative errors {r} at {lam[gh]}"
        # the reported bound covers the error (up to the reference's own rounding)
        assert np.all(np.abs(est.value[gh] - ref[i]) <= est.info["abs_error"][gh] + 1e-13 * ref[i])
        rel.append(r)
    h = info.entropy_rate.value[gh]
    assert np.all(np.abs(h / h_ref - 1.0)[mask] <= RTOL)
    return np.max(rel)


def test_reference_is_converged():
    model = _mixture(0, 5)
    lam = np.array([-4.0, -0.5, 0.3])
    a = _reference(model.atoms, model.weights, lam, order=64)
    b = _reference(model.atoms, model.weights, lam, order=80)
    assert np.all(np.abs(a / b - 1.0) <= 1e-12)


@pytest.mark.parametrize("seed,k", [(0, 4), pytest.param(1, 5, marks=pytest.mark.slow), pytest.param(2, 6, marks=pytest.mark.slow)])
def test_gauss_hermite_levels_against_single_frame_reference(seed, k):
    """(a) K = 4-6 atoms in general position, unequal weights: mmse, H and h at the GH levels."""
    model = _mixture(seed, k)
    lam = np.linspace(-10.0, 6.0, 33)
    info = model.information(lam, rng=1, n_samples=1024)
    worst = _check_gh_levels(model, lam, info)
    assert worst < 1e-11
    orders = info.mmse.info["gauss_hermite_order"]
    # the rule reaches past the lowest order near the boundary with the Monte-Carlo levels
    assert orders.max() >= 32


def test_gauss_hermite_levels_in_a_higher_dimensional_space():
    """Atoms in R^7 spanning a 3-D affine subspace: the span's coordinates, same numbers."""
    flat, emb = _mixture(3, 5), _mixture(3, 5, dim=7)
    lam = np.linspace(-6.0, 1.0, 8)
    a = flat.information(lam, rng=0, n_samples=512)
    b = emb.information(lam, rng=0, n_samples=512)
    gh = (a.mmse.info["rule"] == 1) & (b.mmse.info["rule"] == 1)
    assert gh.sum() >= 4
    for x, y in ((a.mmse, b.mmse), (a.conditional_entropy, b.conditional_entropy)):
        assert np.allclose(x.value[gh], y.value[gh], rtol=1e-11, atol=0)
    _check_gh_levels(emb, lam, b)


def test_plain_monte_carlo_agrees_at_low_snr():
    model = _mixture(1, 5)
    lam = -1.0
    info = model.information(np.array([lam]), rng=0, n_samples=512)
    assert info.mmse.info["rule"][0] == 1 and info.mmse.stderr[0] == 0.0
    mean, se = _plain_mc(model, lam, 200_000, seed=5)
    got = np.array([info.mmse.value[0], info.conditional_entropy.value[0]])
    assert np.all(np.abs(got - mean) <= 4.0 * se), (got, mean, se)


def test_per_level_reporting():
    """Limits (rule 0), Gauss-Hermite (1), Monte Carlo (4): values, stderr, abs_error, counts, label."""
    model = _mixture(0, 5)
    lam = np.array([-60.0, -8.0, -2.0, -1.0, 3.0, 6.0, 80.0])
    info = model.information(lam, rng=0, n_samples=2048)
    m, h = info.mmse, info.conditional_entropy
    rule = m.info["rule"]
    assert rule.tolist() == [0.0, 1.0, 1.0, 1.0, 4.0, 4.0, 0.0]
    assert m.info["rule_counts"] == {"gauss-hermite": 3, "monte-carlo": 2}
    assert m.info["limit_levels"] == {"low_snr": 1, "underflow": 1}
    assert m.info["span_dim"] == 3
    assert m.method == "monte-carlo" and m.n_samples == 2048 and m.error_check is None
    assert 0.0 < m.info["quadrature_error_check"] < 1e-10
    assert np.all(m.info["gauss_hermite_order"][1:4] > 0) and np.all(m.info["gauss_hermite_order"][[0, 4, 5, 6]] == 0)
    for est in (m, h, info.entropy_rate):
        assert np.all(est.stderr[rule != 4] == 0.0) and np.all(est.stderr[rule == 4] > 0.0)
    for est in (m, h):
        ae = est.info["abs_error"]
        assert np.all(np.isnan(ae[rule == 4])) and np.all(ae[rule == 0] == 0.0)
        assert np.all(ae[rule == 1] <= 1e-11 * est.value[rule == 1])
    assert m.value[0] == pytest.approx(model.total_variance) and h.value[0] == pytest.approx(model.entropy)
    assert m.value[-1] == 0.0 and h.value[-1] == 0.0
    # the shape of lam is kept, info arrays included
    info2 = model.information(lam[1:5].reshape(2, 2), rng=0, n_samples=256)
    assert info2.mmse.value.shape == (2, 2) and info2.mmse.info["rule"].shape == (2, 2)


def test_all_levels_deterministic_is_quadrature():
    model, emb = _mixture(0, 4), _mixture(0, 4, dim=5)
    lam = np.array([-9.0, -5.0, -2.0])
    for mod, label in ((model, "quadrature"), (emb, "projected-quadrature")):
        m = mod.information(lam).mmse
        assert m.method == label and m.n_samples is None and m.error_check < 1e-10
        assert m.info["rule_counts"] == {"gauss-hermite": 3, "monte-carlo": 0}


def test_other_methods_and_limits_unchanged():
    model = _mixture(0, 5)
    lam = np.array([-3.0, 2.0])
    assert model.choose_method() == "monte-carlo" and model.monte_carlo
    mc = model.information(lam, method="monte-carlo", rng=0, n_samples=512)
    assert "rule" not in mc.mmse.info and np.all(mc.mmse.stderr > 0)
    with pytest.raises(ValueError, match="dimension <= 2"):
        model.information(lam, method="quadrature")
    rng = np.random.default_rng(0)
    big = DiracMixture(rng.normal(size=(GH_MAX_ATOMS_3D + 1, 3)))
    est = big.information(lam, rng=0, n_samples=256).mmse
    assert est.method == "monte-carlo" and "rule" not in est.info


@settings(max_examples=examples(12), deadline=None)
@given(seed=st.integers(0, 2**16), k=st.integers(4, 7),
       lam=st.lists(st.floats(-8.0, 6.0), min_size=4, max_size=8, unique=True))
def test_random_3d_mixtures(seed, k, lam):
    """(b) finite; mmse non-increasing in lam (GH levels exactly, MC levels within their noise); at the
    boundary between the regimes, the last GH level agrees with Monte Carlo there within its stderr."""
    model = _mixture(seed, k)
    # levels on both sides of the boundary (every pair within 0.25 sqrt(48) sigma: lam = log(3 / d_max^2))
    a, b = np.triu_indices(k, 1)
    edge = np.log(3.0 / np.max(np.sum((model.atoms[a] - model.atoms[b]) ** 2, axis=1)))
    lam = np.unique(np.concatenate([lam, [edge - 1.5, edge + 0.4]]))
    info = model.information(lam, rng=seed, n_samples=2048)
    m, h = info.mmse, info.conditional_entropy
    assert np.all(np.isfinite(m.value)) and np.all(np.isfinite(h.value))
    assert np.all(np.isfinite(m.stderr)) and np.all(m.value >= 0) and np.all(h.value >= 0)
    assert np.all(m.value <= model.total_variance * (1 + 1e-12)) and np.all(h.value <= model.entropy * (1 + 1e-12))
    slack = 4.0 * (m.stderr[1:] + m.stderr[:-1]) + 1e-12 * m.value[:-1]
    assert np.all(np.diff(m.value) <= slack), (lam, m.value, m.stderr)
    hs = 4.0 * (h.stderr[1:] + h.stderr[:-1]) + 1e-12 * h.value[:-1]
    assert np.all(np.diff(h.value) <= hs)
    rule = m.info["rule"]
    gh = np.flatnonzero(rule == 1)
    assert gh.size and np.any(rule == 4)  # both regimes present
    if gh.size:
        last = gh[-1]
        mc = model.information(lam[last:last + 1], method="monte-carlo", rng=seed + 1, n_samples=4096)
        for est, ref in ((m, mc.mmse), (h, mc.conditional_entropy)):
            assert abs(est.value[last] - ref.value[0]) <= 5.0 * ref.stderr[0], (lam[last], est.value[last], ref)
        # and the first Monte-Carlo level after it lies below it (within its noise)
        nxt = np.flatnonzero(rule[last:] == 4)
        if nxt.size:
            j = last + nxt[0]
            assert m.value[j] <= m.value[last] + 4.0 * m.stderr[j]


@pytest.mark.slow
@pytest.mark.parametrize("seed,k", [(4, 8), (5, 12), (6, 16)])
def test_gauss_hermite_levels_up_to_sixteen_atoms(seed, k):
    model = _mixture(seed, k, scale=1.2)
    lam = np.linspace(-10.0, 4.0, 15)
    info = model.information(lam, rng=1, n_samples=512)
    _check_gh_levels(model, lam, info)
