"""Public functions refuse bad input with a ValueError naming the argument (issue 28 item 7): no
IndexError on empty input, no complex input cut to its real part, no NaN weight turned into draws."""

from __future__ import annotations

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
