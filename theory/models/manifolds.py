r"""Curved manifolds with a density: the uniform law on a circle (docs/THEORY.md section 3.4).

:math:`x_0 = c + r F (\cos\theta, \sin\theta)^\top`, :math:`\theta \sim U[0, 2\pi)`, with
:math:`F \in \mathbb{R}^{D\times 2}` an orthonormal 2-frame (default: the first two
coordinates).  Observation convention (VE/EDM scaling): :math:`x = x_0 + \sigma\varepsilon`,
:math:`\sigma = e^{-\lambda/2}`; a VP observation divided by :math:`\alpha` is the same.

Noise orthogonal to the plane of the circle is independent of :math:`x_0`, so the
posterior depends on :math:`y = F^\top(x - c)` only.  With :math:`\rho = |y|` and
:math:`\kappa = r\rho/\sigma^2` the posterior of :math:`\theta` is von Mises with
concentration :math:`\kappa` about the direction of :math:`y` (exact, so
:math:`m` and :math:`C` use Bessel-function ratios instead of quadrature over the angle):

.. math::

    m = c + r A(\kappa) F \frac{y}{\rho}, \quad A = \frac{I_1(\kappa)}{I_0(\kappa)}, \qquad
    \mathrm{tr}\,C = r^2 (1 - A(\kappa)^2).

:math:`\rho` is Rician (:math:`\nu = r`, scale :math:`\sigma`), so the expectations are
one-dimensional integrals over :math:`\rho`, done by adaptive Gauss--Kronrod on a mesh
cut and graded at :math:`\rho = r`:

.. math::

    \mathrm{mmse} = r^2\,E[1 - A(\kappa)^2], \qquad
    I(\lambda) = h(y) - h(y | x_0) = E\Big[\frac{(\rho - r)^2}{2\sigma^2}\Big] - 1 - E[\log(e^{-\kappa} I_0(\kappa))],

the latter for :math:`r^2 e^\lambda > 1`; for :math:`r^2 e^\lambda \le 1` the
cancellation-free form :math:`I = \tfrac12 r^2 e^\lambda - \tfrac14 r^4 e^{2\lambda} - E[g(\kappa)]`,
:math:`g(\kappa) = \log I_0(\kappa) - \kappa^2/4` (power series for :math:`\kappa < 1`), is used,
so :math:`I \sim \tfrac12 r^2 e^\lambda` keeps full relative accuracy as :math:`\lambda\to-\infty`.
:math:`1 - A^2` uses the asymptotic series of :math:`I_0 - I_1` for :math:`\kappa \ge 30`,
where the direct difference would lose :math:`\log_{10}\kappa` digits.
As :math:`\lambda \to \infty`, :math:`h \to 1/2` (intrinsic dimension 1).

Far levels take their limits, exact in float64 where the neglected relative terms
(:math:`r^2 e^\lambda`, resp. :math:`e^{-\lambda}/r^2`) are at most
:data:`~noisealloc.theory.posterior.asymptotics.LOW_SNR_LIMIT` = 1e-20: :math:`\mathrm{mmse} = r^2`,
:math:`I = \tfrac12 r^2 e^\lambda` at low SNR; :math:`\mathrm{mmse} = e^{-\lambda}`, :math:`h = 1/2`,
:math:`I = \tfrac12\lambda + \tfrac12\log(2\pi r^2/e)` (the entropy :math:`\log 2\pi r` of the
angle minus that of one tangent Gaussian coordinate) at high SNR; so every level is finite.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ive

from noisealloc.theory.errors import as_float_array, as_float_scalar, as_generator, check_finite
from noisealloc.theory.models.observation import sample_observation
from noisealloc.theory.errors import check_count as _check_n, as_lam as _lam, points_and_levels
from noisealloc.theory.estimates import Estimate, InformationEstimates
from noisealloc.theory.entropy_rate import entropy_rate_from_mmse, rate_jacobian
from noisealloc.theory.posterior.quadrature import adaptive_gauss_kronrod, graded_breakpoints
from noisealloc.theory.posterior.asymptotics import LOW_SNR_LIMIT, refuse_complex

__all__ = ["Circle", "bessel_ratio", "log_ive0", "one_minus_bessel_ratio_sq", "log_i0_minus_quadratic"]

_HALF_WIDTH = 14.0  # quadrature range r +- 14 sigma: Gaussian tail exp(-98)
_RTOL = 1e-12
_ASYMP_KAPPA = 30.0


def _asymp_coeffs(nu, n):
    a = np.empty(n)
    a[0] = 1.0
    for k in range(1, n):
        a[k] = a[k - 1] * (4 * nu * nu - (2 * k - 1) ** 2) / (k * 8.0)
    return a


_N_ASYMP = 24
_A0 = _asymp_coeffs(0, _N_ASYMP)
_A1 = _asymp_coeffs(1, _N_ASYMP)
_SIGNS = (-1.0) ** np.arange(_N_ASYMP)


def _log_i0_series(n=40):
    # log of sum_k u^k/(k!)^2 as a power series in u = kappa^2/4
    a = np.array([1.0 / math.factorial(k) ** 2 for k in range(n)])
    c = np.zeros(n)
    for k in range(1, n):
        c[k] = a[k] - sum(j * c[j] * a[k - j] for j in range(1, k)) / k
    return c


_LOGI0 = _log_i0_series()


def log_ive0(kappa):
    r""":math:`\log(e^{-\kappa} I_0(\kappa))` for all :math:`\kappa \ge 0`.

    ``scipy.special.ive`` returns NaN beyond ~1e9; the asymptotic series is used from :math:`\kappa = 30`.

    Parameters
    ----------
    kappa : array_like
        :math:`\kappa \ge 0`; element-wise, a NaN entry gives NaN as numpy does.

    Returns
    -------
    ndarray
        Of the shape of ``kappa``.

    Examples
    --------
    >>> round(float(log_ive0(0.0)), 12), bool(log_ive0(1e12) < 0)
    (0.0, True)
    """
    kappa = as_float_array(kappa, "kappa")
    out = np.empty_like(kappa)
    small = kappa < _ASYMP_KAPPA
    out[small] = np.log(ive(0, kappa[small]))
    kb = kappa[~small]
    if kb.size:
        inv = (1.0 / kb)[:, None] ** np.arange(_N_ASYMP)[None, :]
        out[~small] = -0.5 * np.log(2 * math.pi * kb) + np.log(inv @ (_SIGNS * _A0))
    return out


def bessel_ratio(kappa):
    r""":math:`A(\kappa) = I_1(\kappa)/I_0(\kappa)` for all :math:`\kappa \ge 0`.

    Parameters
    ----------
    kappa : array_like
        :math:`\kappa \ge 0`; element-wise, a NaN entry gives NaN as numpy does.

    Returns
    -------
    ndarray
        Of the shape of ``kappa``, in ``[0, 1)``.
    """
    kappa = as_float_array(kappa, "kappa")
    return 1.0 - _one_minus_a(kappa)


def _one_minus_a(kappa):
    out = np.empty_like(kappa)
    small = kappa < _ASYMP_KAPPA
    out[small] = 1.0 - ive(1, kappa[small]) / ive(0, kappa[small])
    kb = kappa[~small]
    if kb.size:
        inv = (1.0 / kb)[:, None] ** np.arange(_N_ASYMP)[None, :]
        out[~small] = (inv @ (_SIGNS * (_A0 - _A1))) / (inv @ (_SIGNS * _A0))
    return out


def one_minus_bessel_ratio_sq(kappa):
    r""":math:`1 - (I_1(\kappa)/I_0(\kappa))^2` with full relative accuracy for all :math:`\kappa \ge 0`.

    Parameters
    ----------
    kappa : array_like
        :math:`\kappa \ge 0`; element-wise, a NaN entry gives NaN as numpy does.

    Returns
    -------
    ndarray
        Of the shape of ``kappa`` (:math:`\sim 1/\kappa` for large :math:`\kappa`).
    """
    # 1 - a^2 = (1 - a)(2 - (1 - a)): the large-kappa series of 1 - a keeps the relative accuracy.
    oma = _one_minus_a(as_float_array(kappa, "kappa"))
    return oma * (2.0 - oma)


def log_i0_minus_quadratic(kappa):
    r""":math:`g(\kappa) = \log I_0(\kappa) - \kappa^2/4` (series for :math:`\kappa < 1`, else via ``ive``).

    Parameters
    ----------
    kappa : array_like
        :math:`\kappa \ge 0`; element-wise, a NaN entry gives NaN as numpy does.

    Returns
    -------
    ndarray
        Of the shape of ``kappa`` (:math:`\approx -\kappa^4/64` for small :math:`\kappa`).
    """
    kappa = as_float_array(kappa, "kappa")
    out = np.empty_like(kappa)
    small = kappa < 1.0
    u = 0.25 * kappa[small] ** 2
    out[small] = np.polynomial.polynomial.polyval(u, np.concatenate([[0.0, 0.0], _LOGI0[2:]]))
    kb = kappa[~small]
    out[~small] = log_ive0(kb) + kb - 0.25 * kb * kb
    return out


#: Radii of a :class:`Circle`: r^2 (the data's variance scale) must be a normal float64 (r = 1e300 made
#: r ** 2 overflow inside information(), an internal error; 1e150^2 = 1e300 still leaves room for the
#: factors it is multiplied by).
CIRCLE_RADIUS_RANGE = (1e-150, 1e150)

class Circle:
    r"""Uniform law on a circle of radius ``radius`` in a 2-plane of :math:`\mathbb{R}^D`.

    Parameters
    ----------
    radius : float
        :math:`r > 0`.
    dim : int
        Ambient dimension :math:`D \ge 2`.
    center : array_like, shape (D,), optional
        :math:`c` (default 0).
    frame : array_like, shape (D, 2), optional
        Orthonormal 2-frame :math:`F` of the circle's plane (default: first two axes).

    Attributes
    ----------
    radius : float
    dim : int
        Ambient dimension :math:`D`.
    discrete : bool
        ``False`` (a continuous law).
    monte_carlo : bool
        ``False``: the information quantities are deterministic quadrature (no ``n_samples``/``rng``).

    References
    ----------
    docs/THEORY.md section 3.4.

    Examples
    --------
    >>> c = Circle(1.0)
    >>> round(float(c.entropy_rate(60.0).value), 6)   # intrinsic dimension 1 -> 1/2
    0.5
    """

    discrete = False
    monte_carlo = False

    def __init__(self, radius=1.0, dim=2, center=None, frame=None):
        r = as_float_scalar(radius, "radius")
        if not (math.isfinite(r) and r > 0):
            raise ValueError(f"radius must be finite and > 0; got {radius!r}")
        if not CIRCLE_RADIUS_RANGE[0] <= r <= CIRCLE_RADIUS_RANGE[1]:
            raise ValueError(f"radius must lie in [{CIRCLE_RADIUS_RANGE[0]:g}, {CIRCLE_RADIUS_RANGE[1]:g}] (its square "
                             f"must be a normal float64); got {radius!r}")
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 2:
            raise ValueError(f"dim must be an integer >= 2; got {dim!r}")
        dim = int(dim)
        if center is None:
            center = np.zeros(dim)
        refuse_complex(center, "center")
        refuse_complex(frame, "frame")
        center = as_float_array(center, "center")
        if center.shape != (dim,):
            raise ValueError(f"center must have shape ({dim},); got {center.shape}")
        check_finite(center, "center")
        if frame is None:
            frame = np.eye(dim)[:, :2]
        frame = as_float_array(frame, "frame")
        if frame.shape != (dim, 2):
            raise ValueError(f"frame must have shape ({dim}, 2); got {frame.shape}")
        check_finite(frame, "frame")
        err = float(np.max(np.abs(frame.T @ frame - np.eye(2))))
        if err > 1e-10:
            raise ValueError(f"frame must have orthonormal columns (max |F^T F - I| <= 1e-10); got {err:.3g}")
        self.radius = r
        self.dim = dim
        self.center = center
        self.frame = frame

    def __repr__(self) -> str:
        return f"Circle(radius={self.radius}, dim={self.dim})"

    # -------------------------------------------------------------- sampling
    def sample_x0(self, n: int, *, rng=None) -> np.ndarray:
        """Draw ``n`` points uniformly on the circle, shape (n, D)."""
        n = _check_n(n)
        th = as_generator(rng).uniform(0.0, 2 * math.pi, size=n)
        return self.center + self.radius * np.stack([np.cos(th), np.sin(th)], axis=1) @ self.frame.T

    def sample_x(self, lam, n: int, *, rng=None):
        r"""Draw ``(x0, x)``, :math:`x = x_0 + e^{-\lambda/2}\varepsilon`; scalar ``lam``."""
        return sample_observation(self, lam, n, rng)

    # -------------------------------------------------------------- posterior
    def _polar(self, x, lam):
        x, lam = points_and_levels(x, self.dim, lam)
        y = (x - self.center) @ self.frame
        rho = np.hypot(y[:, 0], y[:, 1])
        with np.errstate(over="ignore", invalid="ignore"):  # kappa = inf beyond lam ~ 709: A = 1, the limit
            kappa = self.radius * rho * np.exp(np.broadcast_to(lam, rho.shape))
        kappa = np.where(rho > 0, kappa, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            e = np.where(rho[:, None] > 0, y / np.where(rho > 0, rho, 1.0)[:, None], np.array([1.0, 0.0]))
        return y, rho, kappa, e

    def denoiser(self, x, lam) -> np.ndarray:
        r""":math:`m = c + r A(\kappa) F y/|y|`, shape (n, D)."""
        _, _, kappa, e = self._polar(x, lam)
        a = bessel_ratio(kappa)
        return self.center + (self.radius * a)[:, None] * (e @ self.frame.T)

    def posterior_cov(self, x, lam) -> np.ndarray:
        r""":math:`C = r^2 F[((1+B)/2 - A^2) e e^\top + ((1-B)/2) e_\perp e_\perp^\top] F^\top`,
        :math:`B = I_2/I_0`, shape (n, D, D)."""
        _, _, kappa, e = self._polar(x, lam)
        fin = np.isfinite(kappa)  # kappa = inf (sigma^2 underflowed): the posterior is a point, C = 0
        kf = np.where(fin, kappa, 0.0)
        i0 = ive(0, kf)
        a = ive(1, kf) / i0
        b = ive(2, kf) / i0
        par = np.where(fin, self.radius ** 2 * (0.5 * (1 + b) - a * a), 0.0)
        perp = np.where(fin, self.radius ** 2 * 0.5 * (1 - b), 0.0)
        ep = np.stack([-e[:, 1], e[:, 0]], axis=1)
        ef, epf = e @ self.frame.T, ep @ self.frame.T
        return par[:, None, None] * ef[:, :, None] * ef[:, None, :] + perp[:, None, None] * epf[:, :, None] * epf[:, None, :]

    # -------------------------------------------------------------- expectations
    def _rice_expectations(self, lam):
        """E over rho of [1 - A^2, (rho-r)^2/2s2 - 1 - log ive0, g(kappa)] for each level (3, L)."""
        r = self.radius
        sig2 = np.exp(-lam)
        sigma = np.exp(-0.5 * lam)
        # Integrate in t = (rho - r) / sigma, so that (rho - r)^2 / 2 sigma^2 = t^2 / 2 is exact even when
        # sigma is far below the float64 resolution of rho (lam ~ 50: sigma ~ 1e-11); the measure is
        # p(rho) d rho = (rho / sigma) exp(-t^2/2) I0e(kappa) dt with kappa = r rho / sigma^2.
        lo = np.maximum(-r / sigma, -_HALF_WIDTH)
        hi = np.full(lam.size, _HALF_WIDTH)
        a, b, pid = graded_breakpoints(np.zeros((lam.size, 1)), lo, hi, np.minimum(1.0, r / sigma) / 4)

        def f(t, p):
            sg, s2 = sigma[p], sig2[p]
            rho = r + sg * t
            kap = r * rho / s2
            with np.errstate(divide="ignore"):
                lgi = log_ive0(kap)
                logpdf = np.log(rho / sg) - 0.5 * t * t + lgi
            pdf = np.exp(logpdf)
            return np.vstack([
                pdf * one_minus_bessel_ratio_sq(kap),
                pdf * (0.5 * t * t - 1.0 - lgi),
                pdf * log_i0_minus_quadratic(kap),
            ])

        low = self.radius ** 2 * np.exp(lam) <= 1.0
        active = np.vstack([np.ones_like(low), ~low, low])  # only the MI form used at each level
        res = adaptive_gauss_kronrod(f, a, b, pid, lam.size, n_out=3, rtol=_RTOL, atol=1e-300, active=active)
        return res.value, res.abs_error, {"n_intervals": res.n_intervals, "nfev": res.nfev, "success": res.success}

    def information(self, lam) -> InformationEstimates:
        r"""MMSE, entropy rate and mutual information at the levels ``lam`` (quadrature over :math:`\rho`).

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels (any shape).

        Returns
        -------
        InformationEstimates
            ``mmse``, ``entropy_rate`` (per unit :math:`\lambda`) and ``mutual_information`` (method
            ``"quadrature"``; ``error_check`` the largest relative :math:`|K_{21}-G_{10}|`).

        References
        ----------
        docs/THEORY.md section 3.4.
        """
        lam = _lam(lam)
        flat = lam.reshape(-1)
        r2 = self.radius ** 2
        # The limits of the module docstring where they are exact in float64 (neglected terms relative
        # r^2 e^lam, resp. e^-lam / r^2, at most LOW_SNR_LIMIT); the Rice quadrature in between.
        log_snr_r2 = flat + 2.0 * math.log(self.radius)
        far_low = log_snr_r2 <= math.log(LOW_SNR_LIMIT)
        far_high = log_snr_r2 >= -math.log(LOW_SNR_LIMIT)
        mid = ~(far_low | far_high)
        val, err = np.zeros((3, flat.size)), np.zeros((3, flat.size))
        info = {"n_intervals": 0, "nfev": 0, "success": True}
        if np.any(mid):
            val[:, mid], err[:, mid], info = self._rice_expectations(flat[mid])
        info["limit_levels"] = {"low_snr": int(far_low.sum()), "high_snr": int(far_high.sum())}
        with np.errstate(over="ignore"):
            snr_r2 = r2 * np.exp(np.minimum(flat, 0.0))  # used only where r^2 e^lam <= 1
        low = log_snr_r2 <= 0.0
        mmse = r2 * val[0]
        mmse_err = r2 * err[0]
        mi = np.where(low, 0.5 * snr_r2 - 0.25 * snr_r2 ** 2 - val[2], val[1])
        mi_err = np.where(low, err[2], err[1])
        mmse = np.where(far_low, r2, mmse)
        with np.errstate(under="ignore"):
            mmse = np.where(far_high, np.exp(-np.where(far_high, flat, 0.0)), mmse)
        mi = np.where(far_low, 0.5 * snr_r2,
                      np.where(far_high, 0.5 * flat + 0.5 * math.log(2.0 * math.pi * r2 / math.e), mi))
        with np.errstate(divide="ignore", invalid="ignore"):
            rel_m = np.max(np.where(mmse > 0, mmse_err / mmse, 0.0))
            rel_i = np.max(np.where(mi > 0, mi_err / mi, 0.0))
        mmse_est = Estimate(mmse.reshape(lam.shape), 0.0, "quadrature", float(rel_m), None, dict(info))
        rate = entropy_rate_from_mmse(lam, mmse_est)
        # h = 1/2 e^lam mmse -> 1/2 where mmse = e^-lam underflows (lam > 745): set the limit directly.
        rate = Estimate(np.where(far_high.reshape(lam.shape), 0.5, rate.value), rate.stderr, rate.method,
                        rate.error_check, rate.n_samples, rate.info)
        return InformationEstimates(
            mmse=mmse_est,
            entropy_rate=rate,
            mutual_information=Estimate(np.maximum(mi, 0.0).reshape(lam.shape), 0.0, "quadrature", float(rel_i),
                                        None, dict(info)),
        )

    def mmse(self, lam) -> Estimate:
        r""":math:`\mathrm{mmse}(\lambda) = r^2 E[1 - A(\kappa)^2]` (quadrature).

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.

        Returns
        -------
        Estimate
        """
        return self.information(lam).mmse

    def mutual_information(self, lam) -> Estimate:
        r""":math:`I(\lambda) = I(x_0; x)` in nats (quadrature; see module docstring).

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.

        Returns
        -------
        Estimate
        """
        return self.information(lam).mutual_information

    def entropy_rate(self, lam, coordinate="lambda") -> Estimate:
        r""":math:`h = \tfrac12 e^\lambda\,\mathrm{mmse}` moved to ``coordinate``; tends to 1/2.

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.
        coordinate : str or Coordinate
            Coordinate of the rate.

        Returns
        -------
        Estimate
        """
        lam = _lam(lam)
        rate = self.information(lam).entropy_rate
        jac, name = rate_jacobian(lam, coordinate)
        return Estimate(rate.value * jac, rate.stderr * jac, rate.method, rate.error_check, None,
                        dict(rate.info, coordinate=name))
