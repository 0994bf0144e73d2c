"""An independent importance-sampled reference of Dirac-mixture (mmse, H), and the 3-D test mixture."""

from __future__ import annotations

import numpy as np


def _three_d_mixture():
    # K = 5 in R^3, weights proportional to 1..5, closest pair 1.8 apart (the test case).
    rng = np.random.default_rng(3)
    mu = rng.normal(size=(5, 3)) * 1.6
    d = np.sqrt(((mu[:, None] - mu[None]) ** 2).sum(-1))
    d[np.diag_indices(5)] = np.inf
    return mu * (1.8 / d.min()), np.arange(1, 6) / 15.0


def _logsumexp(a):
    top = a.max(axis=1)
    return top + np.log(np.exp(a - top[:, None]).sum(axis=1))


def reference(mu, w, lam, n, seed, n_neighbours=8):
    """An independent estimate of (mmse, H) with its standard error, per level.

    Built differently from the library's sampler: x-only (no true atom, no trace identity), one
    proposal per level (no common random numbers), q(x) = 1/2 p(x) + 1/2 sum_p rho_p N(x; m_p, s^2 I)
    over pairs found by explicit distances, rho_p ~ sqrt(pi_a pi_b) exp(-d^2 e^lam / 8) + a floor,
    weight p(x)/q(x) from both densities in full (log-sum-exp over all atoms and pairs), and
    tr C(x) = sum_j w_j |mu_j - m(x)|^2 about the dominant atom.
    """
    rng = np.random.default_rng(seed)
    K, D = mu.shape
    diff = mu[:, None, :] - mu[None, :, :]
    d2 = np.einsum("ijd,ijd->ij", diff, diff)
    np.fill_diagonal(d2, np.inf)
    nb = np.argsort(d2, axis=1)[:, :min(n_neighbours, K - 1)]
    pairs = np.unique(np.sort(np.stack([np.repeat(np.arange(K), nb.shape[1]), nb.ravel()], 1), axis=1), axis=0)
    a, b = pairs[:, 0], pairs[:, 1]
    mid = 0.5 * (mu[a] + mu[b])
    pd2 = d2[a, b]
    mu_sq = np.einsum("kd,kd->k", mu, mu)
    mid_sq = np.einsum("pd,pd->p", mid, mid)
    out = []
    for lv in np.atleast_1d(lam):
        s2 = np.exp(-lv)
        ls = 0.5 * np.log(w[a] * w[b]) - pd2 * np.exp(lv) / 8
        rho = np.exp(ls - ls.max())
        rho = 0.9 * rho / rho.sum() + 0.1 / len(rho)
        plain = rng.random(n) < 0.5
        centre = np.where(plain[:, None], mu[rng.choice(K, n, p=w)], mid[rng.choice(len(rho), n, p=rho)])
        x = centre + np.sqrt(s2) * rng.standard_normal((n, D))
        vals = np.empty((2, n))
        for c in range(0, n, 2000):
            xc = x[c:c + 2000]
            x_sq = np.einsum("nd,nd->n", xc, xc)
            dist_a = np.maximum(x_sq[:, None] - 2 * xc @ mu.T + mu_sq[None, :], 0.0)
            dist_m = np.maximum(x_sq[:, None] - 2 * xc @ mid.T + mid_sq[None, :], 0.0)
            la = np.log(w)[None, :] - dist_a / (2 * s2)  # log pi_j phi_s(x - mu_j) up to a common constant
            lq = np.log(rho)[None, :] - dist_m / (2 * s2)
            lp, lg = _logsumexp(la), _logsumexp(lq)
            omega = 2.0 * np.exp(-np.logaddexp(0.0, lg - lp))
            lw = la - lp[:, None]
            wt = np.exp(lw)
            dom = np.argmax(lw, axis=1)
            rows = np.arange(len(dom))
            rest = wt.copy()
            rest[rows, dom] = 0.0
            v = rest @ mu - rest.sum(axis=1)[:, None] * mu[dom]  # m(x) - mu_dom without cancellation
            dd = np.maximum(mu_sq[dom][:, None] - 2 * mu[dom] @ mu.T + mu_sq[None, :], 0.0)
            dd[rows, dom] = 0.0
            tr = np.maximum(np.einsum("nk,nk->n", rest, dd) - np.einsum("nd,nd->n", v, v), 0.0)
            ent = np.maximum(-(wt * lw).sum(axis=1), 0.0)
            vals[:, c:c + 2000] = omega * tr, omega * ent
        out.append([(f.mean(), f.std(ddof=1) / np.sqrt(n)) for f in vals])
    return np.array(out)  # (L, 2 quantities, 2: value, stderr)
