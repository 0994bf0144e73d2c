"""Circle: mpmath references for mmse and I, I-MMSE, plateau 1/2, extreme levels, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from noisealloc.theory.models.manifolds import Circle, one_minus_bessel_ratio_sq
from noisealloc.theory.tolerances import QUAD_RTOL

import mpmath as mp
import helpers.mpmath_refs as R


@pytest.mark.parametrize("lam", [-8.0, -2.0, 0.0, 2.0, 8.0])
def test_circle_against_mpmath(lam):
    c = Circle(0.7, dim=3)
    info = c.information(lam)
    ref_m, ref_i = R.circle(0.7, lam)
    np.testing.assert_allclose(info.mmse.value, float(ref_m), rtol=QUAD_RTOL)
    np.testing.assert_allclose(info.mutual_information.value, float(ref_i), rtol=QUAD_RTOL)


def test_bessel_ratio_against_mpmath():
    k = np.array([0.1, 5.0, 29.0, 31.0, 1e3, 1e5])
    with mp.workdps(40):
        ref = [float(1 - (mp.besseli(1, mp.mpf(x)) / mp.besseli(0, mp.mpf(x))) ** 2) for x in k]
    np.testing.assert_allclose(one_minus_bessel_ratio_sq(k), ref, rtol=1e-13)


def test_i_mmse_and_limits():
    c = Circle(1.3)
    lam = np.array([-5.0, -1.0, 0.0, 3.0, 9.0])
    s = 1e-5
    fd = (c.mutual_information(lam + s).value - c.mutual_information(lam - s).value) / (2 * s)
    np.testing.assert_allclose(fd, c.entropy_rate(lam).value, rtol=1e-6)
    ext = c.information([-50.0, 50.0])
    np.testing.assert_allclose(ext.mmse.value[0], 1.3**2, rtol=1e-12)
    np.testing.assert_allclose(ext.mutual_information.value[0], 0.5 * 1.3**2 * np.exp(-50.0), rtol=1e-9)
    np.testing.assert_allclose(c.entropy_rate(50.0).value, 0.5, rtol=1e-9)
    # high SNR: I ~ 1/2 log(2 pi r^2 e^lam) - 1/2 (entropy of the angle's Laplace approximation),
    # with a relative error O(1 / (r^2 e^lam)) ~ e^-50, far below the tolerance.
    np.testing.assert_allclose(ext.mutual_information.value[1], 0.5 * np.log(2 * np.pi * 1.69 * np.exp(50.0)) - 0.5,
                               rtol=QUAD_RTOL)


def test_denoiser_and_cov_by_angle_quadrature():
    c = Circle(0.8, dim=3, center=[0.1, -0.2, 0.3])
    x = np.array([[0.5, 0.4, 1.0], [0.0, -0.1, -2.0]])
    lam = 1.5
    th = np.linspace(0, 2 * np.pi, 4000, endpoint=False)
    pts = c.center + 0.8 * np.stack([np.cos(th), np.sin(th), 0 * th], 1)
    for i in range(2):
        lw = -((x[i] - pts) ** 2).sum(1) * np.exp(lam) / 2
        w = np.exp(lw - lw.max()); w /= w.sum()
        m = w @ pts
        np.testing.assert_allclose(c.denoiser(x[i:i + 1], lam)[0], m, atol=1e-12)
        cov = (w[:, None] * (pts - m)).T @ (pts - m)
        np.testing.assert_allclose(c.posterior_cov(x[i:i + 1], lam)[0], cov, atol=1e-12)


def test_seed():
    c = Circle(1.0, dim=4)
    np.testing.assert_array_equal(c.sample_x(0.0, 4, rng=2)[1], c.sample_x(0.0, 4, rng=2)[1])


@pytest.mark.parametrize("kw, match", [({"radius": -1.0}, "radius"), ({"dim": 1}, "dim"),
                                       ({"dim": 3, "center": [0.0, 0.0]}, "center"),
                                       ({"dim": 2, "frame": [[1.0, 1.0], [0.0, 1.0]]}, "frame")])
def test_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        Circle(**kw)
