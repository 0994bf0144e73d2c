r"""Independent 30-digit mpmath references for the posterior engine's tests.

These routines share no code with :mod:`noisealloc.theory`: they integrate the
definitions directly with ``mpmath.quad`` (tanh-sinh) in a different variable
(the noise :math:`\varepsilon` for each true atom, instead of ``x``), with
break points at the decision boundaries so that the high-SNR boundary layers are
resolved, at ``mp.dps = 30``.  mpmath numbers have an unbounded exponent, so
nothing underflows.

Reference definitions (VE scaling :math:`x = x_0 + \sigma\varepsilon`, :math:`\sigma = e^{-\lambda/2}`):

.. math::

    \mathrm{mmse} = \sum_k \pi_k \int \phi(\varepsilon)\,
        \Big\|\sum_{j\ne k} w_j(x)(\mu_k - \mu_j)\Big\|^2 d\varepsilon, \qquad
    H = \sum_k \pi_k \int \phi(\varepsilon)\,\Big(-\sum_j w_j \log w_j\Big) d\varepsilon,

with :math:`x = \mu_k + \sigma\varepsilon` and :math:`\log w_k` evaluated as
``-log1p(sum_{j != k} exp(l_j - l_k))`` (the only stable form when :math:`w_k \approx 1`).
"""

from __future__ import annotations

import mpmath as mp

DPS = 30
#: Fixed break points (in units of the noise) added to the boundaries: tanh-sinh on
#: a half-line whose finite end is far from the Gaussian's bulk is inaccurate
#: without a warning, so the bulk is always covered by finite panels.
_EPS_GRID = (-40, -20, -10, -6, -3, -1, 0, 1, 3, 6, 10, 20, 40)


def _pointwise(x, k, atoms, weights, sig2):
    """(||mu_k - m(x)||^2, entropy of w(x)) at one point, with log-weights relative to the dominant atom."""
    ls = [mp.log(p) - mp.fsum((xi - ai) ** 2 for xi, ai in zip(x, a)) / (2 * sig2) for a, p in zip(atoms, weights)]
    dom = max(range(len(ls)), key=lambda j: ls[j])
    rel = [mp.exp(l - ls[dom]) if j != dom else mp.mpf(0) for j, l in enumerate(ls)]
    l1p = mp.log1p(mp.fsum(rel))
    lw = [ls[j] - ls[dom] - l1p for j in range(len(ls))]
    w = [mp.exp(v) for v in lw]
    dim = len(x)
    dev = [mp.fsum(w[j] * (atoms[k][d] - atoms[j][d]) for j in range(len(atoms)) if j != k) for d in range(dim)]
    se = mp.fsum(v * v for v in dev)
    ent = mp.fsum(-w[j] * lw[j] for j in range(len(atoms)))
    return se, ent


def dirac_1d(atoms, weights, lam, dps=DPS):
    """(mmse, H) of a 1-D Dirac mixture at ``lam`` (atoms: list of floats)."""
    with mp.workdps(dps):
        atoms = [[mp.mpf(a)] for a in atoms]
        weights = [mp.mpf(p) for p in weights]
        tot = mp.fsum(weights)
        weights = [p / tot for p in weights]
        lam = mp.mpf(lam)
        sig2 = mp.exp(-lam)
        sig = mp.sqrt(sig2)
        res = [mp.mpf(0), mp.mpf(0)]
        for k, (mk, pk) in enumerate(zip(atoms, weights)):
            # break points: the boundaries between k and every other atom, in eps units
            pts = set()
            for j, (mj, pj) in enumerate(zip(atoms, weights)):
                if j == k or mj[0] == mk[0]:
                    continue
                b = (mk[0] + mj[0]) / 2 + sig2 * mp.log(pk / pj) / (mj[0] - mk[0])
                pts.add((b - mk[0]) / sig)
            pts = sorted({p for p in pts if abs(p) < 200} | set(_EPS_GRID))
            pts = [-mp.inf] + pts + [mp.inf]
            cache = {}

            def pointwise(e, k=k, mk=mk):
                if e not in cache:
                    cache[e] = _pointwise([mk[0] + sig * e], k, atoms, weights, sig2)
                return cache[e]

            for q in range(2):
                f = lambda e, q=q: mp.npdf(e) * pointwise(e)[q]
                res[q] += pk * mp.quad(f, pts)
        return res[0], res[1]


def _gl(n):
    xs, ws = mp.gauss_quadrature(n, "legendre")
    return [xs[i] for i in range(n)], [ws[i] for i in range(n)]


def _gl_segments(f, breaks, nodes):
    """Sum of Gauss-Legendre rules (given nodes on [-1, 1]) over consecutive break points."""
    xs, ws = nodes
    tot = mp.mpf(0)
    for a, b in zip(breaks[:-1], breaks[1:]):
        h, c = (b - a) / 2, (a + b) / 2
        tot += h * mp.fsum(w * f(c + h * x) for x, w in zip(xs, ws))
    return tot


def dirac_2d(atoms, weights, lam, dps=DPS, n_nodes=(20, 12), max_angle=0.8, r_max=40):
    r"""(mmse, H, err) of a 2-D Dirac mixture at ``lam`` (atoms: list of pairs).

    For each true atom ``k`` the plane of :math:`\varepsilon` is integrated in
    polar coordinates around :math:`\mu_k` by product Gauss--Legendre rules at
    ``dps`` digits: the angle is cut at the directions of the boundary lines'
    closest points and of their intersections (and into pieces of at most
    ``max_angle``), the radius where the ray crosses each boundary line and at
    fixed radii up to ``r_max`` (the Gaussian tail beyond is below 1e-340).
    The rule with ``n_nodes[0]`` nodes per piece is the value; ``err`` is its
    largest relative difference from the rule with ``n_nodes[1]`` nodes.
    (``mp.quad``'s nested tanh-sinh needs ~1e6 evaluations here and is too slow.)
    """
    with mp.workdps(dps):
        atoms = [[mp.mpf(c) for c in a] for a in atoms]
        weights = [mp.mpf(p) for p in weights]
        tot = mp.fsum(weights)
        weights = [p / tot for p in weights]
        lam = mp.mpf(lam)
        sig2 = mp.exp(-lam)
        sig = mp.sqrt(sig2)
        rules = [_gl(n) for n in n_nodes]
        res = [[mp.mpf(0), mp.mpf(0)] for _ in rules]
        for k, (mk, pk) in enumerate(zip(atoms, weights)):
            lines = []  # (unit normal u, distance t) with boundary {eps: u.eps = t}
            for j, (mj, pj) in enumerate(zip(atoms, weights)):
                if j == k:
                    continue
                n = [mj[0] - mk[0], mj[1] - mk[1]]
                d = mp.sqrt(n[0] ** 2 + n[1] ** 2)
                if d == 0:
                    continue
                u = [n[0] / d, n[1] / d]
                t = (d / 2 + sig2 * mp.log(pk / pj) / d) / sig
                lines.append((u, t))
            angs = set()
            for u, t in lines:
                a0 = mp.atan2(u[1], u[0])
                angs.add(a0 if t >= 0 else a0 + mp.pi)
            for i1 in range(len(lines)):
                for i2 in range(i1 + 1, len(lines)):
                    (u1, t1), (u2, t2) = lines[i1], lines[i2]
                    det = u1[0] * u2[1] - u1[1] * u2[0]
                    if abs(det) < mp.mpf(10) ** -20:
                        continue
                    e0 = (t1 * u2[1] - t2 * u1[1]) / det
                    e1 = (u1[0] * t2 - u2[0] * t1) / det
                    angs.add(mp.atan2(e1, e0))
            angs = sorted({mp.mpf(a) % (2 * mp.pi) for a in angs} | {mp.mpf(0)})
            angs.append(2 * mp.pi)
            breaks = [angs[0]]
            for a0, a1 in zip(angs[:-1], angs[1:]):
                m = int(mp.ceil((a1 - a0) / max_angle))
                breaks += [a0 + (a1 - a0) * i / m for i in range(1, m + 1)]
            for ir, rule in enumerate(rules):
                cache = {}
                for q in range(2):
                    def radial(theta, q=q, rule=rule, cache=cache):
                        c, s = mp.cos(theta), mp.sin(theta)
                        rpts = {mp.mpf(v) for v in (0, 1, 2, 3, 4.5, 6, 8, 10, 14, 20, r_max)}
                        for u, t in lines:
                            proj = u[0] * c + u[1] * s
                            if proj > 0 and 0 < t / proj < r_max:
                                rpts.add(t / proj)
                        rpts = sorted(rpts)

                        def g(rho):
                            key = (theta, rho)
                            if key not in cache:
                                x = [mk[0] + sig * rho * c, mk[1] + sig * rho * s]
                                cache[key] = _pointwise(x, k, atoms, weights, sig2)
                            return rho * mp.exp(-rho * rho / 2) / (2 * mp.pi) * cache[key][q]

                        return _gl_segments(g, rpts, rule)

                    res[ir][q] += pk * _gl_segments(radial, breaks, rule)
        err = max(abs(res[0][q] - res[1][q]) / abs(res[0][q]) for q in range(2))
        return res[0][0], res[0][1], err


def circle(radius, lam, dps=DPS):
    r"""(mmse, I) for the uniform law on a circle of radius ``radius`` (in its plane).

    With :math:`\rho = |y|` Rician (:math:`\nu = r`, scale :math:`\sigma`) and
    :math:`\kappa = r\rho/\sigma^2` the posterior of the angle is von Mises, so
    :math:`\mathrm{tr}\,C = r^2(1 - (I_1(\kappa)/I_0(\kappa))^2)`, and
    :math:`I = h(y) - h(y|x_0)` with the mixture density
    :math:`p(y) = (2\pi\sigma^2)^{-1} e^{-(\rho^2+r^2)/2\sigma^2} I_0(\kappa)`.
    """
    with mp.workdps(dps):
        r = mp.mpf(radius)
        lam = mp.mpf(lam)
        sig2 = mp.exp(-lam)
        sig = mp.sqrt(sig2)

        def rice(rho):
            return rho / sig2 * mp.exp(-(rho * rho + r * r) / (2 * sig2)) * mp.besseli(0, r * rho / sig2)

        def trc(rho):
            kap = r * rho / sig2
            a = mp.besseli(1, kap) / mp.besseli(0, kap)
            return r * r * (1 - a * a)

        def logp(rho):
            kap = r * rho / sig2
            return -mp.log(2 * mp.pi * sig2) - (rho * rho + r * r) / (2 * sig2) + mp.log(mp.besseli(0, kap))

        pts = {mp.mpf(0), r} | {r + j * sig for j in (-20, -8, -3, -1, 1, 3, 8, 20, 40)}
        pts = sorted(p for p in pts if p >= 0) + [mp.inf]
        mm = mp.quad(lambda rho: rice(rho) * trc(rho), pts)
        hy = -mp.quad(lambda rho: rice(rho) * logp(rho), pts)
        mi = hy - mp.log(2 * mp.pi * mp.e * sig2)
        return mm, mi


def second_differences(f, p, idx, h="1e-12"):
    """Centred second differences :math:`\\partial^2 f / \\partial p_j \\partial p_k` for ``j, k`` in ``idx``,
    at ``p`` converted to mpmath numbers (the caller sets ``mp.mp.dps``; ``h`` must be far above its
    precision): ``(f(+,+) - f(+,-) - f(-,+) + f(-,-)) / (4 h^2)``, error O(h^2).  Returns a float array."""
    import numpy as np

    h = mp.mpf(h)
    base = [mp.mpf(float(x)) for x in p]
    out = np.empty((len(idx), len(idx)))
    for a, j in enumerate(idx):
        for b, k in enumerate(idx):
            def at(sj, sk, j=j, k=k):
                q = list(base)
                q[j] += sj * h
                q[k] += sk * h
                return f(q)
            out[a, b] = float((at(1, 1) - at(1, -1) - at(-1, 1) + at(-1, -1)) / (4 * h * h))
    return out
