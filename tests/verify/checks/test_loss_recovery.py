"""Issue 7, acceptance 1: an entropic schedule recovered from finite held-out losses of the exact denoiser
converges to the exact square-root entropic schedule as the held-out set grows."""

from __future__ import annotations

import numpy as np
import pytest

from noisealloc.verify.checks.loss_recovery import loss_recovery, synthetic_losses, w1_lambda


def _dirac():
    from noisealloc.theory.models.dirac import DiracMixture

    return DiracMixture(np.array([[-2.0], [0.0], [1.5], [4.0]]))


def _gaussian():
    from noisealloc.theory.models.gaussian import GaussianManifold

    rng = np.random.default_rng(0)
    basis, _ = np.linalg.qr(rng.standard_normal((6, 3)))
    return GaussianManifold(np.zeros(6), basis, np.array([2.0, 0.5, 0.05]))


def test_synthetic_losses_are_unbiased_for_the_mmse():
    model = _gaussian()
    lam = np.array([-2.0, 0.0, 3.0])
    loss, se = synthetic_losses(model, lam, 20_000, rng=1)
    exact = model.mmse(lam).value
    assert np.all(np.abs(loss - exact) < 4 * se), (loss, exact, se)


@pytest.mark.parametrize("make, lam_max", [(_dirac, 4.0), (_gaussian, 8.0)], ids=["dirac", "gaussian"])
def test_recovered_schedule_converges(make, lam_max):
    r = loss_recovery(make(), sizes=(300, 30_000), lam_min=-8.0, lam_max=lam_max, levels=33, n_seeds=3, rng=0)
    print("\n" + r.table())
    assert r.holds, r.table()


@pytest.mark.slow
@pytest.mark.parametrize("make, lam_max", [(_dirac, 4.0), (_gaussian, 8.0)], ids=["dirac", "gaussian"])
def test_recovered_schedule_convergence_table(make, lam_max):
    r = loss_recovery(make(), sizes=(100, 1000, 10_000, 100_000), lam_min=-8.0, lam_max=lam_max, levels=33,
                      n_seeds=4, rng=0)
    print("\n" + r.table())
    assert r.holds, r.table()
    assert all(np.diff(r.h_rel_error) < 0), r.table()


def test_w1_is_zero_for_identical_and_positive_for_shifted():
    from noisealloc.theory.schedules.builtin import uniform_lambda

    a = uniform_lambda(lam_min=-1, lam_max=1)
    b = uniform_lambda(lam_min=-0.5, lam_max=1.5)
    assert w1_lambda(a, a) == 0.0
    # Two uniform laws of equal width shifted by 0.5 are 0.5 apart in W1.
    assert abs(w1_lambda(a, b) - 0.5) < 1e-6
