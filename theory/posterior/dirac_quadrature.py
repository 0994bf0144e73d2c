r"""Deterministic quadrature of Dirac-mixture posteriors (docs/THEORY.md section 3.1).

The per-level rules behind ``DiracMixture.information(method="quadrature")``: tensor
Gauss--Hermite in the component frames where the boundary layers are resolved, the 1-D
rule split at the boundaries between atoms, the 2-D pair-frame and boundary-cut rules, and the
stable posterior kernel they share (log-sum-exp weights, trace of the posterior covariance,
entropy of the weights).
"""

from __future__ import annotations

import math

import numpy as np

from noisealloc.theory.posterior.quadrature import adaptive_gauss_kronrod, graded_breakpoints

__all__ = ['GH_MAX_ATOMS_3D', 'QUAD_HALF_WIDTH', 'QUAD_MAX_ATOMS', 'QUAD_RTOL_TARGET']


#: Half-width of the quadrature range in units of sigma beyond the atoms' hull:
#: the Gaussian tail exp(-14**2/2) ~ 3e-43 is far below any relative tolerance.
QUAD_HALF_WIDTH = 14.0
#: Largest number of atoms handled by quadrature, by span dimension (cost grows
#: with the number of pairwise boundaries: K^2 cuts in 1-D, K^4 vertices in 2-D).
QUAD_MAX_ATOMS = {0: 10**9, 1: 64, 2: 8}
#: Relative target of the conservative |K21 - G10| error per level; the Kronrod
#: value is then typically ~1e-14 accurate, well inside QUAD_RTOL = 1e-9.
QUAD_RTOL_TARGET = 1e-11
_INNER_RTOL = 1e-12
_TINY = 1e-300
# Absolute tolerance of the pair-frame integrals in their scaled units (the pair's integrand is O(1) at
# its boundary layer): far tails of 1e-270 cannot be matched to a relative tolerance in float64.  Its
# effect is added to the reported error, so a level where it matters fails its rtol test.
_PAIR_ATOL = 1e-26
# Grading of the inner (u) mesh of the pair-frame rule around a thin line's crossing: offsets
# first * width * ratio**m (G10/K21 panels).
_PAIR_FIRST = 8.0
_PAIR_RATIO = 16.0
#: A boundary line between two atoms is a cut of the 2-D boundary-cut rule only where both atoms'
#: logits are within this many nats of the largest (:func:`_near_top`); 30 nats keeps every cut where
#: the two are among the leading weights, with a wide margin around the cell vertices.
CUT_RELEVANCE_NATS = 30.0
#: Gauss--Hermite orders per axis tried in turn, by span dimension (the tensor rule of the component
#: frames, :func:`_quad_gauss_hermite`): each level takes the first order that agrees with the one
#: before it to ``rtol``.  The largest 2-D order costs 64^2 nodes per atom.
GH_ORDERS = {1: (16, 32, 64, 128, 256), 2: (8, 16, 32, 64), 3: (8, 16, 32, 48)}
#: Order n per axis resolves a boundary layer of width sigma/d (pair distance d) in the component
#: frames while d/sigma <= GH_RESOLVED_SEPARATION * sqrt(n): measured on two atoms, order 40 is
#: 3e-14 accurate at d/sigma = 1, 80 is 2e-10 at 2, 160 is 2e-10 at 3 (then the doubling test fails).
GH_RESOLVED_SEPARATION = 0.25
#: Levels whose closest pair is more than this many sigma apart go straight to the boundary-cut rule
#: (their layers are too thin for every order of GH_ORDERS).
GH_MAX_SEPARATION = 4.0
#: The layers an order does not resolve must carry at most this fraction of rtol of mmse and H.
GH_UNRESOLVED_FRACTION = 1e-2
#: Largest number of atoms whose 3-D span gets the Gauss--Hermite rule at the levels it resolves (with
#: Monte Carlo at the others, ``method="auto"``): order 48 costs ~4e4 pruned nodes x K logits per atom
#: and level, i.e. K^2 x 4e4 per level (1e7 at K = 16, about 0.4 s).
GH_MAX_ATOMS_3D = 16
#: 3-D tensor rules drop their smallest-weight nodes up to this total weight (order 32 keeps 62 % of
#: its 32^3 nodes, order 48 37 %).  Each integrand lies in [0, max(d_max^2, log K)], so the dropped
#: nodes change a value by at most this mass times that bound, which is added to the level's error.
GH_PRUNED_MASS = 1e-22
# Entries of the (levels, nodes, atoms) blocks of the Gauss--Hermite integrals in 3-D (8 bytes each,
# about six live temporaries: ~100 MB).
_GH_MAX_ENTRIES_3D = 1 << 21
def _posterior_kernel(y, sig2, mu, log_pi, *, want_mean=False):
    r"""Stable log-density, trace of C and entropy at points ``y`` (in span coordinates).

    Parameters
    ----------
    y : (N, r) points;  sig2 : (N,) noise variances;  mu : (K, r) atoms;  log_pi : (K,)

    Returns
    -------
    log_p : (N,) log density of x (restricted to the r-dim span);
    tr_c : (N,) trace of the posterior covariance;
    ent : (N,) entropy of the posterior weights (nats);
    log_w : (N, K) log posterior weights;
    m : (N, r) posterior mean (only when ``want_mean``).
    """
    n, r = y.shape
    diff = y[:, None, :] - mu[None, :, :]
    ref = np.argmin(np.einsum("nkr,nkr->nk", diff, diff), axis=1)
    yr = diff[np.arange(n), ref]  # x - mu_ref
    dmu = mu[ref][:, None, :] - mu[None, :, :]  # mu_ref - mu_j
    # q_j = (|x - mu_j|^2 - |x - mu_ref|^2) / 2 >= 0; q_j / sigma^2 is +inf when sigma^2 underflows to 0
    # (lam > 745), and 0 for q_j = 0 (the reference atom, or a tie) at every level, never 0/0.
    q = np.einsum("nkr,nr->nk", dmu, yr) + 0.5 * np.einsum("nkr,nkr->nk", dmu, dmu)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q_scaled = np.where(q == 0.0, 0.0, q / sig2[:, None])
    delta = (log_pi[None, :] - log_pi[ref][:, None]) - q_scaled
    dom = np.argmax(delta, axis=1)
    dd = delta - delta[np.arange(n), dom][:, None]
    e = np.exp(dd)
    e[np.arange(n), dom] = 0.0
    l1p = np.log1p(e.sum(axis=1))
    log_w = dd - l1p[:, None]
    w = np.exp(log_w)
    ent = np.einsum("nk,nk->n", w, -log_w)
    ent[ent < 0] = 0.0  # -log_w_dom = l1p >= 0; guard against -0.0
    mdom = mu[dom]
    rel = mu[None, :, :] - mdom[:, None, :]  # mu_j - mu_dom
    shift = np.einsum("nk,nkr->nr", w, rel)  # m - mu_dom
    dev = rel - shift[:, None, :]
    tr_c = np.einsum("nk,nkr,nkr->n", w, dev, dev)
    yr2 = np.einsum("nr,nr->n", yr, yr)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        yr2_scaled = np.where(yr2 == 0.0, 0.0, yr2 / sig2)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_p = (
            log_pi[ref]
            - 0.5 * yr2_scaled
            - 0.5 * r * np.log(2.0 * math.pi * sig2)
            + delta[np.arange(n), dom]
            + l1p
        )
    if np.any(sig2 == 0.0):  # sigma^2 underflowed: the density of x is a Dirac at the atoms
        log_p = np.where(sig2 == 0.0, np.where(yr2 == 0.0, np.inf, -np.inf), log_p)
    if want_mean:
        return log_p, tr_c, ent, log_w, mdom + shift
    return log_p, tr_c, ent, log_w


def _integrands(y, sig2, mu, log_pi):
    """p(x) tr C(x) and p(x) H(w(x)) as a (2, N) array."""
    log_p, tr_c, ent, _ = _posterior_kernel(y, sig2, mu, log_pi)
    with np.errstate(divide="ignore"):
        out = np.vstack([np.exp(log_p + np.log(tr_c)), np.exp(log_p + np.log(ent))])
    return out



# ---------------------------------------------------------------------- Gauss-Hermite per level
def _gh_rule(n: int, r: int):
    r"""Tensor Gauss--Hermite rule of order ``n`` per axis for :math:`E\,g(z)`, :math:`z \sim N(0, I_r)`.

    Returns nodes (M, r) and weights (M,) summing to 1 (nodes of exactly zero weight dropped).  For
    :math:`r \ge 3` the nodes of smallest weight are dropped up to a total weight of
    :data:`GH_PRUNED_MASS` (the remaining weights are not rescaled).
    """
    z1, w1 = _hermite_e_rule(n)
    grids = np.meshgrid(*([z1] * r), indexing="ij")
    wts = np.meshgrid(*([w1] * r), indexing="ij")
    z = np.stack([g.ravel() for g in grids], axis=1)
    w = np.prod(np.stack([g.ravel() for g in wts], axis=1), axis=1)
    keep = w > 0
    z, w = z[keep], w[keep] / w[keep].sum()
    if r >= 3:  # prune the smallest weights up to a total of GH_PRUNED_MASS (r <= 2: every node kept)
        small = np.argsort(w, kind="stable")
        drop = small[np.cumsum(w[small]) <= GH_PRUNED_MASS]
        keep = np.ones(w.size, dtype=bool)
        keep[drop] = False
        z, w = z[keep], w[keep]
    return z, w


def _hermite_e_rule(n: int):
    r"""Nodes and weights of the ``n``-point Gauss rule of :math:`N(0, 1)` (weights summing to 1).

    The nodes of :func:`numpy.polynomial.hermite_e.hermegauss` (eigenvalues, ~1e-14) are polished by
    two Newton steps on the orthonormal Hermite polynomial :math:`p_n`, and the weights are the
    Christoffel numbers :math:`1/\sum_{k<n} p_k(z_i)^2`, with
    :math:`p_{k+1} = (z p_k - \sqrt{k}\,p_{k-1})/\sqrt{k+1}`, :math:`p_0 = 1`,
    :math:`p_n' = \sqrt{n}\,p_{n-1}` (relative accuracy ~n eps; scipy.special, whose import costs
    0.4 s of `noisealloc entropy`, agrees to 1e-14).
    """
    from numpy.polynomial.hermite_e import hermegauss

    z = hermegauss(n)[0]
    for _ in range(3):  # two Newton steps, then the recurrence once more for the weights
        prev, cur = np.zeros_like(z), np.ones_like(z)
        norm2 = np.zeros_like(z)
        for k in range(n):
            norm2 += cur * cur
            prev, cur = cur, (z * cur - math.sqrt(k) * prev) / math.sqrt(k + 1)
        if _ < 2:
            z = z - cur / (math.sqrt(n) * prev)
    return z, 1.0 / norm2


def _gh_integrals(mu, log_pi, lam, n, *, max_entries=1 << 22):
    r"""(2, L) Gauss--Hermite values of :math:`E\,\mathrm{tr}\,C` and :math:`E\,\mathcal H(w)` at the levels ``lam``.

    Component ``k`` is integrated in its own frame, :math:`x = \mu_k + \sigma z`, so that
    :math:`E f(x) = \sum_k \pi_k E_z f(\mu_k + \sigma z)` with the tensor rule :func:`_gh_rule`;
    the logits relative to atom ``k``,
    :math:`\Delta_j = \log\pi_j/\pi_k - z\cdot(\mu_k - \mu_j)/\sigma - \|\mu_k - \mu_j\|^2/2\sigma^2`,
    are one small GEMM per component (level-independent) scaled per level.  The trace and the
    entropy are formed relative to the dominant atom as in :func:`_posterior_kernel`.
    """
    k_atoms, r = mu.shape
    z, w = _gh_rule(n, r)
    m_nodes = z.shape[0]
    sigma = np.exp(-0.5 * lam)
    inv_s = 1.0 / sigma
    inv_2s2 = 0.5 * inv_s * inv_s
    d2 = np.einsum("kjr,kjr->kj", mu[:, None, :] - mu[None, :, :], mu[:, None, :] - mu[None, :, :])
    out = np.zeros((2, lam.size))
    step = max(1, max_entries // max(1, m_nodes * k_atoms))
    for k in range(k_atoms):
        a = z @ (mu[k][None, :] - mu).T  # (M, K): z . (mu_k - mu_j)
        c0 = log_pi - log_pi[k]
        for s in range(0, lam.size, step):
            sl = slice(s, s + step)
            delta = (c0[None, None, :] - a[None, :, :] * inv_s[sl, None, None]
                     - d2[k][None, None, :] * inv_2s2[sl, None, None])  # (l, M, K)
            dom = np.argmax(delta, axis=2)
            dd = delta - np.take_along_axis(delta, dom[..., None], axis=2)
            e = np.exp(dd)
            np.put_along_axis(e, dom[..., None], 0.0, axis=2)
            l1p = np.log1p(e.sum(axis=2))
            log_w = dd - l1p[..., None]
            wt = np.exp(log_w)
            ent = np.maximum(np.einsum("lmk,lmk->lm", wt, -log_w), 0.0)
            s1 = np.einsum("lmk,lmk->lm", wt, d2[dom])  # sum_j w_j |mu_j - mu_dom|^2
            sh2 = np.zeros(s1.shape)
            for q in range(r):  # |m - mu_dom|^2, each coordinate relative to the dominant atom
                sh = np.einsum("lmk,lmk->lm", wt, mu[None, None, :, q] - mu[dom, q][..., None])
                sh2 += sh * sh
            trc = np.maximum(s1 - sh2, 0.0)
            out[0, sl] += math.exp(log_pi[k]) * (trc @ w)
            out[1, sl] += math.exp(log_pi[k]) * (ent @ w)
    return out


def _gh_unresolved_bound(mu, log_pi, lam, n):
    r"""(L,) bound on the part of mmse and H carried by boundary layers too thin for order ``n``.

    A pair :math:`(j, k)` at distance :math:`d` has a layer of width :math:`\sigma/d` in the
    component frames; the order-``n`` rule resolves it while :math:`s = d/\sigma \le`
    :data:`GH_RESOLVED_SEPARATION` :math:`\sqrt{n}`.  The layers of the other pairs carry at most
    :math:`2\sqrt{\pi_j\pi_k}\max(d^2, 1.24)\,e^{-s^2/8}` of mmse or H (the Bhattacharyya bounds of
    :func:`noisealloc.theory.posterior.asymptotics.dirac_underflow_snr`, per pair).
    """
    a, b = np.triu_indices(mu.shape[0], 1)
    d2 = np.einsum("pr,pr->p", mu[a] - mu[b], mu[a] - mu[b])
    s2 = d2[None, :] * np.exp(lam)[:, None]
    thin = s2 > GH_RESOLVED_SEPARATION ** 2 * n
    pref = 2.0 * np.exp(0.5 * (log_pi[a] + log_pi[b])) * np.maximum(d2, 1.24)
    return np.sum(np.where(thin, pref[None, :] * np.exp(-s2 / 8.0), 0.0), axis=1)


def _quad_gauss_hermite(mu, log_pi, lam, rtol):
    r"""Per-level tensor Gauss--Hermite with a doubling error estimate.

    Orders :data:`GH_ORDERS` ``[r]`` are tried in turn on the levels not yet accepted; a level is
    accepted at order :math:`n_{i+1}` when :math:`|Q_{n_i} - Q_{n_{i+1}}| \le \mathrm{rtol}\,|Q_{n_{i+1}}|`
    for mmse and H, and the layers the order does not resolve carry less than
    :data:`GH_UNRESOLVED_FRACTION` ``* rtol`` of both (:func:`_gh_unresolved_bound`).  Levels whose
    smallest pair separation exceeds :data:`GH_MAX_SEPARATION` sigma, or whose unresolved bound at the
    highest order exceeds that fraction of :math:`2\min(\mathrm{Var}(P), H(\pi))` (upper bounds of
    mmse and H, so every order would fail), are not tried.  For :math:`r = 3` the tensor rule is
    pruned (:func:`_gh_rule`) and :data:`GH_PRUNED_MASS` :math:`\max(d_{\max}^2, \log K)` is added to
    the unresolved bound (and so to the acceptance test and the reported error); the integrals run
    in smaller blocks (``_GH_MAX_ENTRIES_3D``).

    Returns
    -------
    value, abs_error : (2, L), with NaN where not accepted;  order : (L,) int, 0 where not accepted.
    """
    r = mu.shape[1]
    orders = GH_ORDERS[r]
    value = np.full((2, lam.size), np.nan)
    err = np.full((2, lam.size), np.nan)
    order = np.zeros(lam.size, dtype=int)
    a, b = np.triu_indices(mu.shape[0], 1)
    dmin2 = float(np.min(np.einsum("pr,pr->p", mu[a] - mu[b], mu[a] - mu[b])))
    # A level is accepted only if the unresolved layers carry <= GH_UNRESOLVED_FRACTION * rtol of mmse and
    # of H, which are at most Var(P) and H(pi): where the bound at the highest order exceeds twice that of
    # the smaller, every order fails (the bound does not grow with n), so those levels are not tried.
    pi = np.exp(log_pi)
    mean = pi @ mu
    cap = 2.0 * GH_UNRESOLVED_FRACTION * rtol * min(float(pi @ np.sum((mu - mean) ** 2, axis=1)),
                                                     float(-(pi @ log_pi)))
    todo = np.flatnonzero((dmin2 * np.exp(lam) <= GH_MAX_SEPARATION ** 2)
                          & (_gh_unresolved_bound(mu, log_pi, lam, orders[-1]) <= cap))
    # 3-D: smaller blocks (memory), and the pruned nodes' bound (GH_PRUNED_MASS times the integrands' range)
    opts = {"max_entries": _GH_MAX_ENTRIES_3D} if r >= 3 else {}
    pruned = 0.0
    if r >= 3:
        dmax2 = float(np.max(np.einsum("pr,pr->p", mu[a] - mu[b], mu[a] - mu[b])))
        pruned = GH_PRUNED_MASS * max(dmax2, math.log(mu.shape[0]))
    prev = _gh_integrals(mu, log_pi, lam[todo], orders[0], **opts) if todo.size else None
    for n in orders[1:]:
        if todo.size == 0:
            break
        cur = _gh_integrals(mu, log_pi, lam[todo], n, **opts)
        diff = np.abs(cur - prev)
        tiny = _gh_unresolved_bound(mu, log_pi, lam[todo], n)
        if r >= 3:
            tiny = tiny + pruned
        ok = (np.all(diff <= rtol * np.abs(cur), axis=0) & np.all(cur > 0, axis=0)
              & np.all(tiny[None, :] <= GH_UNRESOLVED_FRACTION * rtol * cur, axis=0))
        idx = todo[ok]
        value[:, idx], err[:, idx], order[idx] = cur[:, ok], diff[:, ok] + tiny[None, ok], n
        todo, prev = todo[~ok], cur[:, ~ok]
    return value, err, order


# ---------------------------------------------------------------------- quadrature drivers
def _pair_kernel(delta, d2ab, b):
    r"""Scaled pair integrands from the logits: :math:`d_{ab}^2 w_b` and :math:`\mathcal H(w)\,w_b/Q`.

    ``delta`` (N, K) logits relative to atom ``a`` (:func:`_pair_integrand`), ``d2ab`` (N,)
    :math:`d_{ab}^2`, ``b`` (N,) the pair's second atom.  The logits are taken relative to the
    dominant atom (one ``exp`` per atom and point, one ``log1p`` per point);
    :math:`Q = \sum_{c<d} w_c w_d = \tfrac12\sum_c w_c(1 - w_c)`, formed with :math:`1 - w_{dom}` as the
    sum of the other weights (no cancellation).
    """
    n = delta.shape[0]
    rows = np.arange(n)
    dom = np.argmax(delta, axis=1)
    dd = delta - delta[rows, dom][:, None]
    e = np.exp(dd)
    e[rows, dom] = 0.0
    rest = e.sum(axis=1)
    l1p = np.log1p(rest)
    inv = 1.0 / (1.0 + rest)
    w = e * inv[:, None]
    w[rows, dom] = inv
    # -log w_j = l1p - dd_j (dd_dom = 0)
    ent = np.maximum(np.einsum("nk,nk->n", w, l1p[:, None] - dd), 0.0)
    one_minus = 1.0 - w
    one_minus[rows, dom] = rest * inv
    q = 0.5 * np.einsum("nk,nk->n", w, one_minus)
    wb = w[rows, b]
    with np.errstate(divide="ignore", invalid="ignore"):
        h_part = np.where(q > 0, ent * wb / np.where(q > 0, q, 1.0), 0.0)
    return d2ab * wb, h_part


def _pair_tables(mu, log_pi, pa, e1, e2):
    r"""Per-pair tables of the logits relative to atom ``a``, each (P, K).

    :math:`\log\pi_j/\pi_a`, :math:`P_{1,j} = e_1\cdot(\mu_a - \mu_j)`, :math:`P_{2,j} = e_2\cdot(\mu_a - \mu_j)`
    and :math:`D_j = \|\mu_a - \mu_j\|^2`, so that at :math:`z = t e_1 + u e_2` the logit is
    :math:`\Delta_j = A_j + u B_j`, :math:`A_j = \log\pi_j/\pi_a - t P_{1,j}/\sigma - D_j/2\sigma^2`,
    :math:`B_j = -P_{2,j}/\sigma`.
    """
    dmu = mu[pa][:, None, :] - mu[None, :, :]  # (P, K, 2): mu_a - mu_j per pair
    return (log_pi[None, :] - log_pi[pa][:, None], np.einsum("pr,pkr->pk", e1, dmu),
            np.einsum("pr,pkr->pk", e2, dmu), np.einsum("pkr,pkr->pk", dmu, dmu))


def _pair_integrand(t, u, tstar, inv_s, pair, pa, pb, e1, e2, mu, log_pi, ray=None):
    """(2, N) scaled pair integrands (:mod:`noisealloc.theory.posterior._dirac_kernels`; numpy path without numba).

    ``u`` (N,) per point; ``t``, ``tstar``, ``inv_s``, ``pair`` per ray, point ``i`` on ray ``ray[i]``
    (default: one ray per point, all five arrays of length N).  Both paths form the logits as
    :math:`A_j + u B_j` (:func:`_pair_tables`) with the same operations in the same order.
    """
    from noisealloc.theory._numba import HAVE_NUMBA

    if ray is None:
        ray = np.arange(np.size(u))
    dlp, p1, p2, d2 = _pair_tables(mu, log_pi, pa, e1, e2)
    if HAVE_NUMBA:
        from noisealloc.theory.posterior._dirac_kernels import pair_integrand

        out = np.empty((2, np.size(u)))
        pair_integrand(np.ascontiguousarray(t, dtype=np.float64), np.ascontiguousarray(u, dtype=np.float64),
                       np.ascontiguousarray(tstar, dtype=np.float64), np.ascontiguousarray(inv_s, dtype=np.float64),
                       np.ascontiguousarray(pair, dtype=np.int64), np.ascontiguousarray(ray, dtype=np.int64),
                       pb.astype(np.int64), dlp, p1, p2, d2, out)
        return out
    t, tstar, s1, pair = t[ray], tstar[ray], inv_s[ray][:, None], pair[ray]
    coef_a = dlp[pair] - t[:, None] * p1[pair] * s1 - 0.5 * d2[pair] * s1 * s1
    coef_b = -p2[pair] * s1
    b = pb[pair]
    f1, f2 = _pair_kernel(coef_a + u[:, None] * coef_b, d2[pair, b], b)
    g = np.exp(-0.5 * (t - tstar) * (t + tstar) - 0.5 * u * u)
    return np.vstack([g * f1, g * f2])


def _quad_2d_pairs(mu, log_pi, lam, rtol):
    r"""2-D rule in the frames of atom pairs; (value, abs_error) (2, L), accepted (L,) bool, info.

    With :math:`\mathrm{tr}\,C = \sum_{a<b} w_a w_b d_{ab}^2` and the partition of unity
    :math:`\psi_{ab} = w_a w_b / Q` of the entropy, and :math:`p\,w_a = \pi_a N(x; \mu_a, \sigma^2 I)`,

    .. math:: \mathrm{mmse} = \sum_{a<b} \pi_a E_z[d_{ab}^2 w_b], \qquad
              H = \sum_{a<b} \pi_a E_z[\mathcal H(w)\, w_b / Q], \qquad x = \mu_a + \sigma z .

    Each term's mass sits in the boundary layer of the pair: in rotated coordinates
    :math:`z = t e_1 + u e_2` (:math:`e_1` towards :math:`\mu_b`) at :math:`t_0 = s/2 + \log(\pi_a/\pi_b)/s`,
    :math:`s = d_{ab}/\sigma`, decaying on the scale :math:`h = \min(1, 2/s)` on both sides.  The
    outer integral over ``t`` starts from panels at :math:`t_0 + h\tau` (fixed :math:`\tau`) and is
    adaptive (G10/K21); the inner one over ``u`` is adaptive, cut and graded
    where the boundary lines whose atoms are near the top cross it.  Pairs whose whole layer carries,
    by the Bhattacharyya bound, less than ``e^-60`` of the largest pair's bound are skipped; a level is
    accepted when the error estimate meets ``rtol``, the skipped pairs' bounds are below
    ``1e-2 rtol`` of the value and every inner integral of the level met its own tolerance (a miss
    rejects that level only).
    """
    k = mu.shape[0]
    n_lev = lam.size
    sigma = np.exp(-0.5 * lam)
    sig2 = sigma * sigma
    pa, pb = np.triu_indices(k, 1)
    dvec = mu[pb] - mu[pa]
    dist = np.sqrt(np.einsum("pr,pr->p", dvec, dvec))
    e1 = dvec / dist[:, None]
    e2 = np.stack([-e1[:, 1], e1[:, 0]], axis=1)
    s = dist[None, :] / sigma[:, None]  # (L, P)
    t0 = 0.5 * s + (log_pi[pa] - log_pi[pb])[None, :] / s
    s2o8 = s * s / 8.0
    log_bound = (math.log(2.0) + 0.5 * (log_pi[pa] + log_pi[pb])[None, :]
                 + np.log(np.maximum(dist[None, :] ** 2, 1.24 + s2o8 + math.log(k))) - s2o8)
    keep = log_bound >= log_bound.max(axis=1, keepdims=True) - 60.0
    pl, pp = np.nonzero(keep)
    n_prob = pl.size
    h = np.minimum(1.0, 2.0 / s[pl, pp])
    tc = t0[pl, pp]
    tstar = np.maximum(tc, 0.0)
    log_scale = log_pi[pa[pp]] - math.log(2.0 * math.pi) - 0.5 * tstar * tstar
    t_lo = np.minimum(tc, 0.0) - 13.0
    t_hi = tstar + 13.0
    # boundary lines n.x = c (x in span coordinates) of every pair, per level
    a_all, b_all, n_all = _pairs(k, mu)
    c_all = _planes(mu, log_pi, a_all, b_all, n_all, sig2)  # (L, P)
    nn = np.sqrt(np.einsum("pr,pr->p", n_all, n_all))
    # The outer panels are not cut at the cell vertices (the kinks of the inner integral where three
    # atoms tie): every outer panel costs 21 full inner integrals, and the G10/K21 test refines around a
    # vertex where it matters.  Measured on 7 random planar mixtures (K = 3..8) at 8 levels in [-3, 8]:
    # 2.7e8 -> 4.4e7 evaluations (the 5-atom mixture of `noisealloc entropy`: 1.2e7 -> 5.7e6 on 10 levels),
    # the same levels accepted, values equal to 2e-15.
    taus = np.array([-40.0, -20.0, -9.0, -4.0, -1.5, 0.0, 1.5, 4.0, 9.0, 20.0, 40.0])
    pts = np.concatenate([t_lo[:, None], t_hi[:, None], tc[:, None] + h[:, None] * taus[None, :]], axis=1)
    pts = np.where(np.isfinite(pts), pts, t_lo[:, None])
    pts = np.clip(pts, t_lo[:, None], t_hi[:, None])
    pts.sort(axis=1)
    ia, ib = pts[:, :-1], pts[:, 1:]
    good = ib > ia
    ipid = np.broadcast_to(np.arange(n_prob)[:, None], ia.shape)[good]
    ia, ib = ia[good], ib[good]
    # Base panels of the inner integrals, for the Gaussian factor e^{-u^2/2} alone: |K21 - G10| summed over
    # [0, 2.5, 6, 13] is 4.2e-13 of its integral (each half), so a ray with no cut meets _INNER_RTOL on
    # them; [0, 3, 7, 13] left 7.0e-13 per half, 1.4e-12 in all, and every ray took a refinement round
    # (5-atom plane, 73 pair-frame levels: 38.9M -> 35.5M evaluations, values equal to 1e-15).
    u_base = np.array([-13.0, -6.0, -2.5, 0.0, 2.5, 6.0, 13.0])
    ne2 = n_all @ e2.T  # (P_lines, P_pairs): n . e2
    ne1 = n_all @ e1.T
    stats = {"inner_nfev": 0, "inner_success": True}
    inner_missed = np.zeros(n_lev, dtype=bool)  # levels with an inner integral that missed its tolerance

    def inner(t, q, chunk=512):
        out = np.empty((2, t.size))
        for st in range(0, t.size, chunk):
            tt, qq = t[st:st + chunk], q[st:st + chunk]
            lv, pr = pl[qq], pp[qq]
            sg = sigma[lv]
            # crossing of every boundary line with this ray x = mu_a + sigma (t e1 + u e2)
            cn = c_all[lv] - mu[pa[pr]] @ n_all.T - sg[:, None] * tt[:, None] * ne1[:, pr].T  # (n, lines)
            den = sg[:, None] * ne2[:, pr].T
            okc = np.abs(ne2[:, pr].T) > 1e-12 * nn[None, :]
            with np.errstate(divide="ignore", invalid="ignore"):
                uc = np.where(okc, cn / den, np.nan)
                width = np.where(okc, sg[:, None] / np.abs(den) * sg[:, None], np.inf)  # sigma / |n.e2| in z units
            xc = (mu[pa[pr]][:, None, :] + sg[:, None, None] * (tt[:, None, None] * e1[pr][:, None, :]
                                                                  + np.nan_to_num(uc)[:, :, None] * e2[pr][:, None, :]))
            # A crossing where the line's atoms trail the leading one by `gap` nats is a feature of relative
            # size e^-gap spread over ~max(gap, 1) layer widths (the nearest complex zero of the
            # log-sum-exp).  Cut where that is narrower than 1 in u (wider features are resolved by the
            # G10/K21 panels and their error test), and never beyond CUT_RELEVANCE_NATS (below 1e-13).
            gap = _top_gap(xc, sig2[lv][:, None], mu, log_pi, (a_all, b_all))
            rel = (gap <= CUT_RELEVANCE_NATS) & (np.abs(uc) < 13.0) & (width * np.maximum(gap, 1.0) < 1.0)
            uc = np.where(rel, uc, np.nan)
            scale = np.minimum(1.0, np.min(np.where(rel, width, np.inf), axis=1))
            m_terms = 6
            offs = scale[:, None] * _PAIR_FIRST * _PAIR_RATIO ** np.arange(m_terms)[None, :]
            # Lines not cut get no breakpoints: they sit at -13 - 1, outside the range, with their
            # graded offsets (placing them at -13 put -13 + offsets, e.g. u = -5, into every ray's mesh).
            cc = np.where(np.isfinite(uc), uc, -14.0)
            fine = np.where(np.isfinite(uc)[:, :, None], offs[:, None, :], 0.0)
            allp = np.concatenate([np.broadcast_to(u_base, (tt.size, u_base.size)), cc,
                                   (cc[:, :, None] - fine).reshape(tt.size, -1),
                                   (cc[:, :, None] + fine).reshape(tt.size, -1)], axis=1)
            allp = np.clip(allp, -13.0, 13.0)
            allp.sort(axis=1)
            ja, jb = allp[:, :-1], allp[:, 1:]
            gd = jb > ja
            jp = np.broadcast_to(np.arange(tt.size)[:, None], ja.shape)[gd]
            ja, jb = ja[gd], jb[gd]

            # per-ray values, read by the kernel through the ray index (no per-point gathers)
            ray_tstar, ray_inv_s, ray_pair = tstar[qq], 1.0 / sg, pp[qq]

            def f(u, r, tt=tt, ray_tstar=ray_tstar, ray_inv_s=ray_inv_s, ray_pair=ray_pair):
                return _pair_integrand(tt, u, ray_tstar, ray_inv_s, ray_pair, pa, pb, e1, e2, mu, log_pi, ray=r)

            res = adaptive_gauss_kronrod(f, ja, jb, jp, tt.size, n_out=2, rtol=_INNER_RTOL, atol=_PAIR_ATOL, warn=False,
                                         max_rounds=30, max_intervals=200 * tt.size)
            stats["inner_nfev"] += res.nfev
            stats["inner_success"] &= res.success
            if not res.success:  # reject the levels of the rays that missed (the adaptive rule's own test)
                missed = np.any(res.abs_error > np.maximum(_INNER_RTOL * np.abs(res.value), _PAIR_ATOL), axis=0)
                inner_missed[lv[missed] if missed.any() else lv] = True
            out[:, st:st + chunk] = res.value
        return out

    res = adaptive_gauss_kronrod(inner, ia, ib, ipid, n_prob, n_out=2, rtol=rtol, atol=100 * _PAIR_ATOL, warn=False,
                                 max_rounds=30, max_intervals=40 * n_prob + 100_000)
    with np.errstate(under="ignore"):
        fac = np.exp(log_scale)
    val = np.zeros((2, n_lev))
    err = np.zeros((2, n_lev))
    for o in range(2):
        val[o] = np.bincount(pl, weights=fac * res.value[o], minlength=n_lev)
        # + the inner absolute tolerance over the t range (at most 26 + 80 h wide)
        err[o] = np.bincount(pl, weights=fac * (res.abs_error[o] + 120.0 * _PAIR_ATOL), minlength=n_lev)
    with np.errstate(under="ignore"):
        skipped = np.sum(np.where(keep, 0.0, np.exp(log_bound)), axis=1)
    ok = (np.all(err <= rtol * val, axis=0) & np.all(val > 0, axis=0)
          & np.all(skipped[None, :] <= GH_UNRESOLVED_FRACTION * rtol * val, axis=0))
    if not res.success:
        bad_lev = np.unique(pl[np.any(res.abs_error > np.maximum(rtol * np.abs(res.value), 100 * _PAIR_ATOL), axis=0)])
        ok[bad_lev] = False
    # An inner integral's error is not part of the outer estimate: a level with one that missed its
    # tolerance is not trusted (the others of the call are: every ray belongs to one level).
    ok &= ~inner_missed
    err = err + skipped[None, :]
    info = {"pair_problems": int(n_prob), "nfev": int(res.nfev + stats["inner_nfev"]), "outer_nfev": int(res.nfev),
            "outer_nit": int(res.nit), "outer_intervals": int(res.n_intervals), "initial_intervals": int(ia.size),
            "success": bool(res.success and stats["inner_success"])}
    return val, err, ok, info


def _quad_per_level(mu, log_pi, lam, rtol):
    r"""(value, abs_error, info) of :math:`E\,\mathrm{tr}\,C` and :math:`E\,\mathcal H(w)` with the rule chosen per level.

    Tensor Gauss--Hermite in the component frames (:func:`_quad_gauss_hermite`) at every level where
    its doubling estimate and the unresolved-layer bound meet ``rtol``; the boundary-cut rule
    (:func:`_quad_1d` / :func:`_quad_2d`) at the others, in one vectorised call.  ``info`` holds
    ``gauss_hermite_order`` (per level; 0 where the boundary-cut rule was used) and ``rule_counts``.
    """
    r = mu.shape[1]
    val, err, order = _quad_gauss_hermite(mu, log_pi, lam, rtol)
    rule = np.where(order > 0, 1.0, 0.0)  # 1 GH, 2 pair frames, 3 boundary-cut box
    rest = order == 0
    info = {"n_intervals": 0, "nfev": 0, "nit": 0, "success": True}
    n_pairs = 0
    if np.any(rest) and r == 2:
        idx = np.flatnonzero(rest)
        v, e, ok, pinfo = _quad_2d_pairs(mu, log_pi, lam[idx], rtol)
        val[:, idx[ok]], err[:, idx[ok]] = v[:, ok], e[:, ok]
        rule[idx[ok]] = 2.0
        rest[idx[ok]] = False
        n_pairs = int(ok.sum())
        info["pair_nfev"] = pinfo["nfev"]
    if np.any(rest):
        if r == 1:
            v, e, info1 = _quad_1d(mu[:, 0], log_pi, lam[rest], rtol)
        else:
            v, e, info1 = _quad_2d(mu, log_pi, lam[rest], rtol)
        info.update(info1)
        val[:, rest], err[:, rest] = v, e
        rule[rest] = 3.0
    info["gauss_hermite_order"] = order.astype(np.float64)
    info["rule"] = rule
    info["rule_counts"] = {"gauss-hermite": int(np.sum(order > 0)), "pair-frame": n_pairs,
                           "boundary-cut": int(np.sum(rest))}
    return val, err, info


def _pairs(k, mu, *, all_pairs=True):
    if all_pairs:
        a, b = np.triu_indices(k, 1)
    else:  # 1-D: neighbours in sorted order
        order = np.argsort(mu[:, 0], kind="stable")
        a, b = order[:-1], order[1:]
    n = mu[b] - mu[a]
    keep = np.einsum("pr,pr->p", n, n) > 0
    return a[keep], b[keep], n[keep]


def _planes(mu, log_pi, a, b, n, sig2):
    r"""Offsets c (L, P) of the boundary hyperplanes :math:`n_{ab}\cdot x = c_{ab}` for each level."""
    base = 0.5 * (np.einsum("pr,pr->p", mu[b], mu[b]) - np.einsum("pr,pr->p", mu[a], mu[a]))
    return base[None, :] + sig2[:, None] * (log_pi[a] - log_pi[b])[None, :]


def _scales(mu, lam):
    sigma = np.exp(-0.5 * lam)
    d = mu[:, None, :] - mu[None, :, :]
    dmax = float(np.sqrt(np.max(np.einsum("ijr,ijr->ij", d, d))))
    sig2 = sigma * sigma
    delta = np.minimum(sigma, sig2 / max(dmax, 1e-300))
    return sigma, sig2, delta


def _quad_1d(mu1, log_pi, lam, rtol):
    mu = mu1[:, None]
    k = mu.shape[0]
    sigma, sig2, delta = _scales(mu, lam)
    a, b, n = _pairs(k, mu, all_pairs=k <= 64)
    c = _planes(mu, log_pi, a, b, n, sig2)  # (L, P)
    cuts = np.concatenate([c / n[None, :, 0], np.broadcast_to(mu1, (lam.size, k))], axis=1)
    lo = mu1.min() - QUAD_HALF_WIDTH * sigma
    hi = mu1.max() + QUAD_HALF_WIDTH * sigma
    ia, ib, ip = graded_breakpoints(cuts, lo, hi, delta)

    def f(x, p):
        return _integrands(x[:, None], sig2[p], mu, log_pi)

    res = adaptive_gauss_kronrod(f, ia, ib, ip, lam.size, n_out=2, rtol=rtol, atol=_TINY)
    return res.value, res.abs_error, {"n_intervals": res.n_intervals, "nfev": res.nfev, "nit": res.nit,
                                      "success": res.success}


def _top_gap(points, sig2, mu, log_pi, atoms):
    """Largest logit minus the smallest logit of ``atoms`` at ``points`` (inf at NaN points)."""
    d = points[..., None, :] - mu
    logit = log_pi - np.einsum("...kr,...kr->...k", d, d) / (2.0 * sig2[..., None])
    top = logit.max(axis=-1)
    low = np.full(top.shape, np.inf)
    for idx in atoms:
        low = np.minimum(low, np.take_along_axis(logit, np.broadcast_to(idx, top.shape)[..., None], axis=-1)[..., 0])
    gap = top - low
    return np.where(np.isfinite(gap), gap, np.inf)


def _near_top(points, sig2, mu, log_pi, atoms, margin=None):
    r"""Whether every atom of ``atoms`` is within :data:`CUT_RELEVANCE_NATS` of the largest logit at ``points``.

    ``points`` (..., 2), ``sig2`` broadcastable to ``points.shape[:-1]``, ``atoms`` a tuple of integer
    arrays broadcastable likewise.  NaN points are not relevant.  A boundary line between ``a`` and
    ``b`` makes the integrand non-smooth only where ``a`` and ``b`` are the two largest posterior
    weights (elsewhere the log-sum-exp is dominated by a third atom and is analytic across it), so a
    cut there is needed only near the top; the margin keeps every cut near a cell vertex.
    """
    margin = CUT_RELEVANCE_NATS if margin is None else margin
    d = points[..., None, :] - mu
    logit = log_pi - np.einsum("...kr,...kr->...k", d, d) / (2.0 * sig2[..., None])
    top = logit.max(axis=-1)
    ok = np.isfinite(top)
    for idx in atoms:
        ok &= np.take_along_axis(logit, np.broadcast_to(idx, top.shape)[..., None], axis=-1)[..., 0] \
            >= top - margin
    return ok


def _quad_2d(mu, log_pi, lam, rtol, chunk=256, prune=True):
    k = mu.shape[0]
    sigma, sig2, delta = _scales(mu, lam)
    a, b, n = _pairs(k, mu)
    c = _planes(mu, log_pi, a, b, n, sig2)  # (L, P)
    mid = 0.5 * (mu[a] + mu[b])
    nn = np.sqrt(np.einsum("pr,pr->p", n, n))
    lo0 = mu[:, 0].min() - QUAD_HALF_WIDTH * sigma
    hi0 = mu[:, 0].max() + QUAD_HALF_WIDTH * sigma
    lo1 = mu[:, 1].min() - QUAD_HALF_WIDTH * sigma
    hi1 = mu[:, 1].max() + QUAD_HALF_WIDTH * sigma
    ok0 = np.abs(n[:, 0]) > 1e-12 * nn
    ok1 = np.abs(n[:, 1]) > 1e-12 * nn
    with np.errstate(divide="ignore", invalid="ignore"):
        # Outer cuts: each line where it crosses x2 = its pair's midpoint, and line intersections.
        x_line = np.where(ok0[None, :], (c - n[None, :, 1] * mid[None, :, 1]) / n[None, :, 0], np.nan)
        i1, i2 = np.triu_indices(n.shape[0], 1)
        det = n[i1, 0] * n[i2, 1] - n[i1, 1] * n[i2, 0]
        okd = np.abs(det) > 1e-12 * nn[i1] * nn[i2]
        x_vert = np.where(okd[None, :], (c[:, i1] * n[None, i2, 1] - c[:, i2] * n[None, i1, 1]) / det[None, :], np.nan)
        if prune:  # only the cuts where the pair's atoms are (near) the two most probable ones
            y_vert = (n[None, i1, 0] * c[:, i2] - n[None, i2, 0] * c[:, i1]) / det[None, :]
            pv = np.stack([x_vert, y_vert], axis=-1)
            keep_v = _near_top(pv, sig2[:, None], mu, log_pi, (a[i1], b[i1], a[i2], b[i2]))
            x_vert = np.where(keep_v, x_vert, np.nan)
            pl = np.stack([x_line, np.broadcast_to(mid[None, :, 1], x_line.shape)], axis=-1)
            x_line = np.where(_near_top(pl, sig2[:, None], mu, log_pi, (a, b)), x_line, np.nan)
    cuts0 = np.concatenate([np.broadcast_to(mu[:, 0], (lam.size, k)), x_line, x_vert], axis=1)
    ia, ib, ip = graded_breakpoints(cuts0, lo0, hi0, delta)
    stats = {"inner_intervals": 0, "inner_nfev": 0, "inner_success": True}

    def inner(x0, p):
        out = np.empty((2, x0.size))
        for s in range(0, x0.size, chunk):
            xs, ps = x0[s:s + chunk], p[s:s + chunk]
            with np.errstate(divide="ignore", invalid="ignore"):
                cr = np.where(ok1[None, :], (c[ps] - n[None, :, 0] * xs[:, None]) / n[None, :, 1], np.nan)
                if prune:
                    pc = np.stack([np.broadcast_to(xs[:, None], cr.shape), cr], axis=-1)
                    cr = np.where(_near_top(pc, sig2[ps][:, None], mu, log_pi, (a, b)), cr, np.nan)
            cuts1 = np.concatenate([np.broadcast_to(mu[:, 1], (xs.size, k)), cr], axis=1)
            ja, jb, jp = graded_breakpoints(cuts1, lo1[ps], hi1[ps], delta[ps])

            def f(x1, q, xs=xs, ps=ps):
                return _integrands(np.stack([xs[q], x1], axis=1), sig2[ps[q]], mu, log_pi)

            res = adaptive_gauss_kronrod(f, ja, jb, jp, xs.size, n_out=2, rtol=_INNER_RTOL, atol=_TINY, warn=False)
            stats["inner_intervals"] += res.n_intervals
            stats["inner_nfev"] += res.nfev
            stats["inner_success"] &= res.success
            out[:, s:s + chunk] = res.value
        return out

    res = adaptive_gauss_kronrod(inner, ia, ib, ip, lam.size, n_out=2, rtol=rtol, atol=_TINY)
    info = {"n_intervals": res.n_intervals, "nfev": res.nfev + stats["inner_nfev"], "nit": res.nit,
            "success": res.success and stats["inner_success"], "inner_intervals": stats["inner_intervals"]}
    return res.value, res.abs_error, info
