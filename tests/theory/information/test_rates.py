"""information.py helpers and the quadrature tools they rest on."""

from __future__ import annotations

import numpy as np
import pytest

from noisealloc.theory.entropy_rate import entropy_rate_from_mmse, half_snr_times
from noisealloc.theory.information.i_mmse import i_mmse_check
from noisealloc.theory.posterior.quadrature import G10_WEIGHTS, GK21_NODES, GK21_WEIGHTS
from noisealloc.theory.models.gaussian import GaussianManifold


def test_gauss_kronrod_constants_exact_on_polynomials():
    for k in range(32):
        exact = (1 - (-1) ** (k + 1)) / (k + 1)
        assert abs(GK21_WEIGHTS @ GK21_NODES**k - exact) < 1e-15
        if k < 20:
            assert abs(G10_WEIGHTS @ GK21_NODES**k - exact) < 1e-15
    assert abs(G10_WEIGHTS @ GK21_NODES**20 - 2 / 21) > 1e-8  # the Gauss rule is not exact beyond degree 19


def test_half_snr_times_extremes():
    np.testing.assert_allclose(half_snr_times(50.0, 1e-300), 0.5 * 1e-300 * np.exp(50.0), rtol=1e-13)
    assert half_snr_times(50.0, 0.0) == 0.0


def test_entropy_rate_transport_sigma():
    lam = np.array([-2.0, 1.0])
    est = entropy_rate_from_mmse(lam, np.array([0.3, 0.1]), "sigma")
    np.testing.assert_allclose(est.value, np.array([0.3, 0.1]) / np.exp(-lam / 2) ** 3, rtol=1e-13)
    with pytest.raises(ValueError, match="coordinate"):
        entropy_rate_from_mmse(lam, np.array([0.3, 0.1]), "nope")


def test_i_mmse_check_detects_a_wrong_rate():
    g = GaussianManifold([0.0], [[1.0]], [2.0])

    class Wrong(GaussianManifold):
        def entropy_rate(self, lam, coordinate="lambda", **kw):
            e = super().entropy_rate(lam, coordinate)
            return type(e)(e.value * 1.01, 0.0, "closed-form")

    assert i_mmse_check(g, np.array([0.5])).rel_error[0] < 1e-6
    w = Wrong([0.0], [[1.0]], [2.0])
    assert i_mmse_check(w, np.array([0.5])).rel_error[0] > 5e-3
