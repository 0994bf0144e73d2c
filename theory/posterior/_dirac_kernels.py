r"""Compiled kernel of the pair-frame quadrature of Dirac mixtures (:func:`noisealloc.theory.posterior.dirac_quadrature._quad_2d_pairs`).

:func:`pair_integrand` evaluates, at points :math:`x = \mu_a + \sigma(t e_1 + u e_2)` of the frame of
the pair :math:`(a, b)`, the scaled integrands

.. math:: g\,d_{ab}^2 w_b, \qquad g\,\mathcal H(w)\,w_b / Q, \qquad
          g = e^{-(t^2 - t_*^2)/2 - u^2/2}, \quad Q = \tfrac12\sum_c w_c(1 - w_c),

with the formulas of the numpy path (:func:`noisealloc.theory.posterior.dirac_quadrature._pair_kernel`): logits
relative to ``a``, then to the dominant atom, :math:`1 - w_{dom}` as the sum of the other weights.
On a ray the logits are affine in ``u``,
:math:`\Delta_j = A_j + u B_j` with :math:`A_j = \log\pi_j/\pi_a - t P_{1,j}/\sigma - D_j/2\sigma^2`,
:math:`B_j = -P_{2,j}/\sigma` (per pair :math:`P_{i,j} = e_i\cdot(\mu_a - \mu_j)`,
:math:`D_j = \|\mu_a - \mu_j\|^2`, the tables ``dlp``, ``p1``, ``p2``, ``d2`` of
:func:`noisealloc.theory.posterior.dirac_quadrature._pair_tables`), formed once per ray (the numpy path forms them with
the same operations in the same order).
It is compiled through :func:`noisealloc.theory._numba.jit` (``fastmath=False``); the caller uses
the numpy path when numba is disabled.

Point ``i`` lies on the ray ``q = ray[i]`` of the inner (``u``) integrals: ``t``, ``tstar``, ``inv_s``
and ``pair`` are per ray and ``u``, ``ray`` per point, so the kernel reads the ray's values itself
instead of the caller gathering four arrays of the points' length on every call.
"""

from __future__ import annotations

import math

import numpy as np

from noisealloc.theory._numba import jit

__all__ = ["pair_integrand"]

# Below this argument math.exp returns exactly 0.0 (the smallest subnormal is e^-744.4; round-to-nearest
# gives 0 below -745.13), so the call can be skipped without changing a bit of the result.
_EXP_UNDERFLOW = -746.0


@jit
def pair_integrand(t, u, tstar, inv_s, pair, ray, pb, dlp, p1, p2, d2, out):  # pragma: no cover - compiled
    n = u.shape[0]
    k = dlp.shape[1]
    coef_a = np.empty(k)
    coef_b = np.empty(k)
    delta = np.empty(k)
    ex = np.empty(k)
    last = -1
    p = 0
    b = 0
    gt = 0.0
    for i in range(n):
        ri = ray[i]
        if ri != last:  # the points of a ray are consecutive: its logits are affine in u, Delta_j = A_j + u B_j
            last = ri
            ti = t[ri]
            p = pair[ri]
            b = pb[p]
            s1 = inv_s[ri]
            for j in range(k):
                coef_a[j] = dlp[p, j] - ti * p1[p, j] * s1 - 0.5 * d2[p, j] * s1 * s1
                coef_b[j] = -p2[p, j] * s1
            gt = -0.5 * (ti - tstar[ri]) * (ti + tstar[ri])
        ui = u[i]
        best = -np.inf
        dom = 0
        for j in range(k):
            v = coef_a[j] + ui * coef_b[j]
            delta[j] = v
            if v > best:
                best = v
                dom = j
        rest = 0.0
        for j in range(k):
            dj = delta[j] - best
            if j == dom or dj < _EXP_UNDERFLOW:
                ex[j] = 0.0  # exp(dj) is exactly 0.0 in float64 below -745.2: skip the call, same value
            else:
                ex[j] = math.exp(dj)
                rest += ex[j]
        l1p = math.log1p(rest)
        inv = 1.0 / (1.0 + rest)
        ent = 0.0
        q = 0.0
        wb = 0.0
        for j in range(k):
            if j == dom:
                w = inv
                om = rest * inv
                ddj = 0.0
            else:
                ddj = delta[j] - best
                w = ex[j] * inv
                om = 1.0 - w
            ent += w * (l1p - ddj)
            q += w * om
            if j == b:
                wb = w
        q *= 0.5
        if ent < 0.0:
            ent = 0.0
        g = math.exp(gt - 0.5 * ui * ui)
        # same order of operations as the numpy path (products of tiny factors underflow alike)
        out[0, i] = g * (d2[p, b] * wb)
        out[1, i] = g * (ent * wb / q) if q > 0.0 else 0.0
