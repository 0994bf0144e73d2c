r"""Dirac mixtures: posterior weights, denoiser, MMSE and conditional entropy (THEORY.md section 3.1).

The data law is :math:`P = \sum_k \pi_k \delta_{\mu_k}`, :math:`\mu_k \in \mathbb{R}^D`.
All quantities use the VE/EDM scaling of the observation,

.. math:: x = x_0 + \sigma \varepsilon, \qquad \sigma = e^{-\lambda/2}, \qquad \varepsilon \sim N(0, I_D),

(a VP observation :math:`\alpha x_0 + \sigma_{vp}\varepsilon` divided by
:math:`\alpha` is the same), so every posterior quantity is a function of the
log-SNR :math:`\lambda` alone.  Posterior weights, denoiser and covariance:

.. math::

    w_k(x) \propto \pi_k \exp\!\big(-\|x - \mu_k\|^2 / 2\sigma^2\big), \qquad
    m(x) = \sum_k w_k \mu_k, \qquad C(x) = \sum_k w_k (\mu_k - m)(\mu_k - m)^\top,

and per level :math:`\mathrm{mmse}(\lambda) = E\,\mathrm{tr}\,C(x)`,
:math:`H(\lambda) = E[-\sum_k w_k \log w_k]` (nats),
:math:`h(\lambda) = \tfrac12 e^\lambda\,\mathrm{mmse}(\lambda) = -dH/d\lambda`.

Numerics.  Log-weights are formed relative to the atom nearest to ``x``
(:math:`\Delta_j = \log\pi_j/\pi_r - ((\mu_r-\mu_j)\cdot(x-\mu_r) + \tfrac12\|\mu_r-\mu_j\|^2)/\sigma^2`),
which is accurate both at low SNR (``x`` far from all atoms) and at high SNR.
The trace of :math:`C` and the entropy are sums of non-negative terms formed
relative to the dominant atom (``log1p`` of the competitors' mass), so they keep
full relative accuracy when they are ~1e-300.

Expectations over ``x`` (``method="auto"`` picks the first that applies):

``quadrature`` / ``projected-quadrature``
    The atoms are expressed in their affine span (dimension :math:`r`; noise
    orthogonal to the span does not change the posterior) and
    :math:`\int p(x)\,\mathrm{tr}\,C(x)\,dx`, :math:`\int p(x)\,\mathcal H(w(x))\,dx` are
    computed by a rule chosen per level (:func:`_quad_per_level`, vectorised over levels):

    1. tensor Gauss--Hermite in each atom's frame, :math:`x = \mu_k + \sigma z`, wherever two
       consecutive orders of :data:`GH_ORDERS` agree to ``rtol`` and the boundary layers the order
       cannot resolve carry (Bhattacharyya bound) less than ``1e-2 rtol`` (low SNR: the layers are
       not thin compared with sigma);
    2. (:math:`r = 2`) the pair-frame rule :func:`_quad_2d_pairs` at the other levels: the
       integrals as sums over atom pairs, each in the rotated frame of the pair with the outer
       panels scaled to its layer, accepted when its G10/K21 estimate meets ``rtol``;
    3. the box boundary-cut rule below at any level left (and every level for :math:`r = 1`
       not taken by 1).

    The estimates' ``info`` reports per level ``rule`` (1, 2, 3 as above; 0 at the levels that take
    their low-SNR or underflow limits), ``gauss_hermite_order``
    (0 where not GH), ``abs_error`` and ``rule_counts``.  The box rule is adaptive Gauss--Kronrod quadrature (:mod:`~noisealloc.theory.quadrature`)
    on meshes cut at the atoms and at every decision boundary between two atoms
    (the hyperplane :math:`x\cdot(\mu_b-\mu_a) = (\|\mu_b\|^2-\|\mu_a\|^2)/2 + \sigma^2\log(\pi_a/\pi_b)`)
    and graded geometrically away from the cuts down to the boundary-layer width
    :math:`\delta = \min(\sigma, \sigma^2/d_{\max})`.  For :math:`r = 1` this is one
    adaptive integral per level.  For :math:`r = 2` it is an iterated integral: the
    inner integral along :math:`x_2` is cut where each boundary line crosses it,
    the outer one along :math:`x_1` at the atoms, at each line's crossing of its
    pair's midpoint and at every intersection of two lines (the Voronoi/power
    vertices).  The range is the atoms' bounding box widened by
    :data:`QUAD_HALF_WIDTH` :math:`\sigma`.  The reported ``error_check`` is the
    largest relative summed :math:`|K_{21} - G_{10}|` over the levels (a
    conservative bound on the Kronrod result).  Limits: :math:`r \le 2`
    (:data:`QUAD_MAX_ATOMS` atoms at most); beyond about :math:`\lambda = 30`
    the boundary layer (:math:`\delta \sim 10^{-13}`) approaches float64
    resolution of ``x`` and relative accuracy is lost, but every quantity there
    is below 1e-300 for atoms more than 1e-6 apart, and the result is still the
    correct limit 0.
``monte-carlo`` with Gauss--Hermite levels (:math:`r = 3`, at most :data:`GH_MAX_ATOMS_3D` atoms)
    ``method="auto"`` on atoms spanning three dimensions (:meth:`DiracMixture._information_gh_mc`):
    rule 1 above, with the orders ``GH_ORDERS[3]`` = (8, 16, 32, 48), at every level where it is
    accepted, and Monte Carlo (below) at the other levels, in one pass and one
    :class:`~noisealloc.theory.estimates.InformationEstimates`.  The acceptance tests are those of
    :math:`r \le 2`: with :math:`Q_n` the order-:math:`n` value of mmse or :math:`H` and
    :math:`s_{jk} = \|\mu_j - \mu_k\|/\sigma`,

    .. math::

        |Q_{n_i} - Q_{n_{i-1}}| \le \mathrm{rtol}\,Q_{n_i}, \qquad
        \sum_{s_{jk} > 0.25\sqrt{n_i}} 2\sqrt{\pi_j\pi_k}\,\max(d_{jk}^2, 1.24)\,e^{-s_{jk}^2/8}
        + m_{\mathrm{pr}}\max(d_{\max}^2, \log K) \le 10^{-2}\,\mathrm{rtol}\,Q_{n_i},

    where the second term is new: the :math:`n^3` tensor nodes of smallest weight, of total mass
    :math:`m_{\mathrm{pr}} \le` :data:`GH_PRUNED_MASS` = 1e-22, are dropped (order 48 keeps 37 % of
    its nodes), and the integrands lie in :math:`[0, \max(d_{\max}^2, \log K)]`.  The unresolved
    layer bound accepts a level only while every pair is resolved, :math:`s_{jk} \lesssim
    0.25\sqrt{48} = 1.73` (a few units of :math:`\lambda` below :math:`\log(3/d_{\max}^2)`), so
    the deterministic levels are the low-SNR ones; above them the layers are too thin for any
    affordable 3-D tensor order (order :math:`n` costs :math:`n^3 K^2` per level), and the Monte
    Carlo levels keep their standard error.  Why (:mod:`noisealloc.verify.bench_dirac_3d`, K = 5,
    64 levels on [-12, 12], 32 of them GH): where it is accepted the rule is 3e-12 accurate in
    ~8 ms per level, whereas importance-sampled Monte Carlo has a relative standard error up to
    4e-3 at 4096 samples there and would need ~1e22 samples (~5e17 times GH's time) for the same
    accuracy; GH costs as much as Monte Carlo with 2-3e4 samples (relative standard error
    ~2e-3), so it is the cheaper of the two for any accuracy better than about 2e-3.  The whole
    ``auto`` pass costs ~4.5 times pure Monte Carlo at 4096 samples (0.28 s against 0.06 s).

    ``info`` per level: ``rule`` (0 limit, 1 Gauss--Hermite, 4 Monte Carlo), ``gauss_hermite_order``
    (0 where not GH), ``abs_error`` (the accepted bound at GH levels, 0 at limits, NaN at Monte
    Carlo levels, whose uncertainty is ``stderr``), ``rule_counts``, ``limit_levels``.  ``stderr``
    is 0 at the deterministic levels.  The ``method`` is ``'monte-carlo'`` (with ``n_samples``,
    ``error_check`` None and the largest relative GH error in ``info["quadrature_error_check"]``) if
    any level is Monte Carlo, else ``'quadrature'`` / ``'projected-quadrature'`` as for
    :math:`r \le 2`.  ``choose_method()`` stays ``'monte-carlo'`` and ``monte_carlo`` True (some
    levels are stochastic); an explicit ``method='monte-carlo'`` and
    :meth:`DiracMixture.information_samples` are Monte Carlo at every level, as before.
``monte-carlo``
    Otherwise, :func:`noisealloc.theory.empirical.monte_carlo_information` (blocked
    GEMM kernel, common random numbers across levels, standard error per level).

References
----------
Guo, Shamai & Verdu (2005), Mutual information and minimum mean-square error in Gaussian channels.
"""

from __future__ import annotations

import contextlib
import math
from functools import cached_property

import numpy as np

from noisealloc.theory.errors import as_float_array, as_generator, check_choice, check_finite, check_weight_vector
from noisealloc.theory._observation import sample_observation
from noisealloc.theory.errors import check_count as _check_n, as_lam as _as_lam, points_and_levels
from noisealloc.theory.estimates import Estimate, InformationEstimates
from noisealloc.theory.quadrature import adaptive_gauss_kronrod, graded_breakpoints
from noisealloc.theory.tolerances import ATOM_ABS_MAX
from noisealloc.theory._threads import kernel_threads, single_blas_thread
from noisealloc.theory._limits import (LOW_SNR_LIMIT, dirac_underflow_snr, min_distance_lower_bound,
                                       refuse_complex)

__all__ = ["DiracMixture", "GH_MAX_ATOMS_3D", "LOW_SNR_LIMIT", "QUAD_HALF_WIDTH", "QUAD_MAX_ATOMS", "QUAD_RTOL_TARGET",
           "merge_duplicate_atoms"]

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
_METHODS = ("auto", "quadrature", "projected-quadrature", "monte-carlo")
# Monte-Carlo sample count when none is given.
_DEFAULT_SAMPLES = 4096
# Atoms x span dimension from which the denoiser uses the blocked GEMM engine: below it the
# per-point reference-atom kernel is as fast and handles a level per point.
_BLOCKED_MIN_SIZE = 512
# The blocked engine takes |lam| <= 700 (its e^lam stays finite); beyond, the reference-atom kernel, which
# handles sigma^2 = 0 and infinity.
_BLOCKED_LAM_MAX = 700.0




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


def merge_duplicate_atoms(atoms, weights, row_hash=None):
    r"""Merge identical rows of ``atoms``, adding their weights (the law :math:`\sum_k \pi_k\delta_{\mu_k}` is unchanged).

    Parameters
    ----------
    atoms : ndarray, shape (K, D)
        Atom positions (``-0.0`` and ``0.0`` are the same point).
    weights : ndarray, shape (K,)
        Their weights.
    row_hash : ndarray of uint64, shape (K,), optional
        The rows' hashes (equal rows, equal hashes) if already computed
        (:func:`noisealloc.theory._scan.scan_atoms`); computed here otherwise.

    Returns
    -------
    atoms : ndarray, shape (K', D)
        The distinct atoms in the order of their first occurrence (``atoms`` itself when all differ).
    weights : ndarray, shape (K',)
        :math:`\pi'_j = \sum_{k:\,\mu_k = \mu'_j} \pi_k`.
    n_merged : int
        ``K - K'``.

    Examples
    --------
    >>> a, w, n = merge_duplicate_atoms(np.array([[1.0], [0.0], [1.0]]), np.array([0.25, 0.5, 0.25]))
    >>> a.ravel().tolist(), w.tolist(), n
    ([1.0, 0.0], [0.5, 0.5], 1)
    """
    k = atoms.shape[0]
    if k < 2:
        return atoms, weights, 0
    # Equal rows have equal 64-bit row hashes, so distinct hashes prove distinct rows; rows that share a
    # hash are compared in full (np.unique over rows sorts K rows of D floats: 1 s on MNIST, against
    # a few ms here).
    if row_hash is None:
        from noisealloc.theory._scan import scan_atoms

        row_hash = scan_atoms(atoms).row_hash
    _, first, inverse = np.unique(row_hash, return_index=True, return_inverse=True)
    if first.size == k:
        return atoms, weights, 0
    key = np.ascontiguousarray(atoms + 0.0)
    if not np.array_equal(key, key[first[np.ravel(inverse)]]):  # a hash collision: the exact row sort
        _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
        if first.size == k:
            return atoms, weights, 0
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    merged = np.bincount(rank[np.ravel(inverse)], weights=weights, minlength=order.size)
    return atoms[first[order]].copy(), merged, k - int(first.size)


def _integrands(y, sig2, mu, log_pi):
    """p(x) tr C(x) and p(x) H(w(x)) as a (2, N) array."""
    log_p, tr_c, ent, _ = _posterior_kernel(y, sig2, mu, log_pi)
    with np.errstate(divide="ignore"):
        out = np.vstack([np.exp(log_p + np.log(tr_c)), np.exp(log_p + np.log(ent))])
    return out


class DiracMixture:
    r"""Mixture of Dirac masses :math:`P = \sum_k \pi_k \delta_{\mu_k}` in :math:`\mathbb{R}^D`.

    Parameters
    ----------
    atoms : array_like, shape (K, D) or (K,)
        Atom positions :math:`\mu_k` (a 1-D array is K atoms on the line).
    weights : array_like, shape (K,), optional
        Mixture weights :math:`\pi_k > 0` (normalised to sum 1); uniform by default.

    Attributes
    ----------
    atoms : ndarray (K, D);  weights : ndarray (K,);  log_weights : ndarray (K,)
    dim : int (D);  n_atoms : int (K, distinct atoms);  discrete : bool (True)
    n_merged : int
        Number of input rows that repeated an earlier atom and were merged into it (weights added;
        :func:`merge_duplicate_atoms`).
    monte_carlo : bool
        Whether ``method="auto"`` is Monte Carlo (:class:`~noisealloc.theory.protocol.DataModel` flag);
        True for a 3-D span of at most :data:`GH_MAX_ATOMS_3D` atoms too, whose ``information`` is
        deterministic (Gauss--Hermite) only at the low-SNR levels (module docstring).
    total_variance : float
        :math:`\sum_k \pi_k \|\mu_k - \bar\mu\|^2` (the MMSE at :math:`\lambda \to -\infty`).
    entropy : float
        :math:`H(\pi) = -\sum_k \pi_k \log \pi_k`, the limit of :math:`H(\lambda)` as
        :math:`\lambda \to -\infty` and the budget :math:`\int h\,d\lambda`.

    Notes
    -----
    Observation convention: :math:`x = x_0 + e^{-\lambda/2}\varepsilon` (module docstring).
    Identical atoms are one point of the law, so they are merged and their weights added (three
    copies of one atom are :math:`\delta_\mu`, with :math:`H(\pi) = 0`); complex input is refused.
    Every level is finite: beyond the levels where the quadrature or sampling applies, the
    information quantities take their asymptotic forms (:data:`LOW_SNR_LIMIT`,
    :meth:`underflow_level`).

    References
    ----------
    THEORY.md sections 2 and 3.1.

    Examples
    --------
    >>> m = DiracMixture([[-1.0], [1.0]])
    >>> float(m.conditional_entropy(-40.0).value)  # doctest: +ELLIPSIS
    0.693147...
    >>> info = m.information([0.0, 4.0])             # one pass: mmse, H and h = 1/2 e^lam mmse
    >>> info.mmse.method, m.monte_carlo, bool(info.entropy_rate.value[0] > info.entropy_rate.value[1])
    ('quadrature', False, True)
    """

    discrete = True

    def __init__(self, atoms, weights=None):
        refuse_complex(atoms, "atoms")
        refuse_complex(weights, "weights")
        atoms = as_float_array(atoms, "atoms")
        if atoms.ndim == 1:
            atoms = atoms[:, None]
        if atoms.ndim != 2 or atoms.shape[0] < 1 or atoms.shape[1] < 1:
            raise ValueError(f"atoms must have shape (K, D) with K >= 1, D >= 1 (or (K,)); got shape {atoms.shape}")
        from noisealloc.theory._scan import scan_atoms

        # One pass (all cores): the extremes, the row hashes of the duplicate merge, the live coordinates.
        scan = scan_atoms(atoms)
        hi, lo = float(scan.col_max.max()), float(scan.col_min.min())
        if not (math.isfinite(hi) and math.isfinite(lo)):  # max and min propagate NaN: finite extremes, finite atoms
            check_finite(atoms, "atoms")
        big = max(hi, -lo)
        if big > ATOM_ABS_MAX:
            raise ValueError(
                f"atoms must have |coordinate| <= ATOM_ABS_MAX = {ATOM_ABS_MAX:g} (squared distances overflow beyond); "
                f"got {big:.3g}. Rescale the data: atoms c*mu at log-SNR lam equal atoms mu at lam + 2 log c")
        k = atoms.shape[0]
        weights = check_weight_vector(weights, k, positive=True, normalise=True)
        atoms, weights, self.n_merged = merge_duplicate_atoms(atoms, weights, scan.row_hash)
        if self.n_merged:
            weights = weights / weights.sum()  # sums of rounded weights: one atom gets exactly 1
        k = atoms.shape[0]
        self.atoms = atoms
        self._abs_max = big  # max |mu_kd| (merging keeps a subset of the rows)
        self._live = scan.live  # and the same values in every column
        self.weights = weights
        self.log_weights = np.log(weights)
        self.dim = atoms.shape[1]
        self.n_atoms = k

    def __repr__(self) -> str:
        return f"DiracMixture(n_atoms={self.n_atoms}, dim={self.dim})"

    @property
    def entropy(self) -> float:
        """Entropy of the mixture weights, :math:`H(\\pi)` (nats)."""
        return float(-np.sum(self.weights * self.log_weights)) + 0.0  # + 0.0: one atom gives 0.0, not -0.0

    @cached_property
    def total_variance(self) -> float:
        r""":math:`\mathrm{Var}(P) = \sum_k \pi_k \|\mu_k - \bar\mu\|^2`, the limit of :math:`\mathrm{mmse}(\lambda)` as :math:`\lambda \to -\infty`."""
        return float(self.weights @ self._centred_sq_norms)

    @cached_property
    def _centred_sq_norms(self) -> np.ndarray:
        r""":math:`\|\mu_k - \bar\mu\|^2` per atom (one parallel pass over the atoms,
        :func:`noisealloc.theory._scan.centred_sq_norms`), shared by :attr:`total_variance` and
        :attr:`_low_snr_level`."""
        from noisealloc.theory._scan import centred_sq_norms

        return centred_sq_norms(self.atoms, self._centre)

    @cached_property
    def _centre(self) -> np.ndarray:
        r"""The mean :math:`\bar\mu = \sum_k \pi_k \mu_k`."""
        from noisealloc.theory._scan import weighted_mean

        return weighted_mean(self.atoms, self.weights)

    # ------------------------------------------------------------------ span
    @cached_property
    def _span(self):
        """(center (D,), basis (r, D) orthonormal rows, coords (K, r)) of the atoms' affine span."""
        center = self.atoms.mean(axis=0)
        cen = self.atoms - center
        if self.n_atoms == 1:
            return center, np.zeros((0, self.dim)), np.zeros((1, 0))
        _, s, vt = np.linalg.svd(cen, full_matrices=False)
        scale = max(float(s[0]), float(np.max(np.abs(self.atoms))), 1e-300)
        r = int(np.sum(s > 1e-12 * scale))
        basis = vt[:r]
        if r == self.dim:
            # Full rank: keep the original coordinates (no rounding from a rotation).
            return np.zeros(self.dim), np.eye(self.dim), self.atoms.copy()
        return center, basis, cen @ basis.T

    @property
    def span_dim(self) -> int:
        """Dimension :math:`r` of the affine span of the atoms."""
        return self._span[1].shape[0]

    def _to_span(self, x):
        center, basis, _ = self._span
        return (x - center) @ basis.T

    # ------------------------------------------------------------------ sampling
    def sample_x0(self, n: int, *, rng=None) -> np.ndarray:
        """Draw ``n`` atoms, shape (n, D)."""
        n = _check_n(n)
        gen = as_generator(rng)
        idx = gen.choice(self.n_atoms, size=n, p=self.weights)
        return self.atoms[idx].copy()

    def sample_x(self, lam, n: int, *, rng=None):
        r"""Draw ``(x0, x)`` with :math:`x = x_0 + e^{-\lambda/2}\varepsilon`; scalar ``lam``; shapes (n, D)."""
        return sample_observation(self, lam, n, rng)

    # ------------------------------------------------------------------ posterior
    def _posterior(self, x, lam, want_mean=True):
        x, lam = points_and_levels(x, self.dim, lam, allow_1d=True)
        with np.errstate(over="ignore"):  # sigma^2 = inf below lam ~ -709: the posterior is the prior
            sig2 = np.exp(-lam)
        _, _, coords = self._span
        if coords.shape[1] == 0:
            n = x.shape[0]
            log_w = np.broadcast_to(self.log_weights, (n, self.n_atoms)).copy()
            return log_w, np.broadcast_to(self.atoms[0], (n, self.dim)).copy()
        y = self._to_span(x)
        out = []
        step = max(1, 2_000_000 // max(1, self.n_atoms * coords.shape[1]))
        for i in range(0, x.shape[0], step):
            out.append(_posterior_kernel(y[i:i + step], sig2[i:i + step], coords, self.log_weights, want_mean=True))
        log_w = np.concatenate([o[3] for o in out]) if out else np.zeros((0, self.n_atoms))
        m_span = np.concatenate([o[4] for o in out]) if out else np.zeros((0, coords.shape[1]))
        center, basis, _ = self._span
        return log_w, center + m_span @ basis

    def log_posterior_weights(self, x, lam) -> np.ndarray:
        r"""Log posterior weights :math:`\log w_k(x)`, shape (n, K) (log-sum-exp normalised).

        Parameters
        ----------
        x : array_like, shape (n, D)
        lam : float or array_like, shape (n,)
        """
        return self._posterior(x, lam)[0]

    def denoiser(self, x, lam) -> np.ndarray:
        r"""Posterior mean :math:`m(x, \lambda) = \sum_k w_k(x)\mu_k`, shape (n, D).

        Large mixtures (``K r >= 512`` with ``r`` the span dimension) at one level for all points
        use the blocked GEMM engine :func:`noisealloc.theory.empirical.posterior_weights_blocked`
        (same accuracy contract, ~50x faster for MNIST); otherwise the reference-atom kernel.
        """
        xs, lams = points_and_levels(x, self.dim, lam, allow_1d=True)
        center, basis, coords = self._span
        if (coords.size >= _BLOCKED_MIN_SIZE and xs.shape[0] > 0 and np.all(lams == lams[0])
                and abs(float(lams[0])) <= _BLOCKED_LAM_MAX):
            from noisealloc.theory.empirical import posterior_weights_blocked

            den, _, _ = posterior_weights_blocked(coords, self.log_weights, self._to_span(xs), float(lams[0]))
            return center + den @ basis
        return self._posterior(xs, lams)[1]

    def posterior_cov(self, x, lam) -> np.ndarray:
        r"""Posterior covariance :math:`C = \sum_k w_k (\mu_k - m)(\mu_k - m)^\top`, shape (n, D, D)."""
        log_w, m = self._posterior(x, lam)
        w = np.exp(log_w)
        dev = self.atoms[None, :, :] - m[:, None, :]
        return np.einsum("nk,nki,nkj->nij", w, dev, dev)

    # ------------------------------------------------------------------ expectations
    def choose_method(self) -> str:
        """The method ``method="auto"`` uses: quadrature on the span when it is small, else Monte Carlo.

        Returns
        -------
        str
            ``'quadrature'``, ``'projected-quadrature'`` or ``'monte-carlo'``.  For a 3-D span of at most
            :data:`GH_MAX_ATOMS_3D` atoms it is ``'monte-carlo'`` (some levels are stochastic), and
            :meth:`information` takes Gauss--Hermite at the levels it resolves (module docstring).
        """
        if self.n_atoms == 1:
            return "quadrature"
        if self.n_atoms * self.dim > 2_000_000:
            return "monte-carlo"
        r = self.span_dim
        if r in QUAD_MAX_ATOMS and self.n_atoms <= QUAD_MAX_ATOMS[r]:
            return "quadrature" if r == self.dim else "projected-quadrature"
        return "monte-carlo"

    @property
    def monte_carlo(self) -> bool:
        """Whether ``method="auto"`` is Monte Carlo (the :class:`~noisealloc.theory.protocol.DataModel` flag).

        The information methods always accept ``n_samples``, ``rng`` and the engine options; they are
        used only by the Monte-Carlo method.
        """
        return self.choose_method() == "monte-carlo"

    def information(self, lam, *, method: str = "auto", n_samples=None, rng=None, rtol=QUAD_RTOL_TARGET,
                    block_size=None, float32_distances: bool = False, progress: bool = False,
                    stratify: bool = True, importance: bool = True) -> InformationEstimates:
        r"""MMSE, conditional entropy and entropy rate at the levels ``lam`` in one pass.

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels (any shape; results have the same shape).
        method : {'auto', 'quadrature', 'projected-quadrature', 'monte-carlo'}
            'quadrature' and 'projected-quadrature' are the same rule on the atoms'
            span (the name reports whether the span is smaller than ``D``).  'auto' on a 3-D
            span of at most :data:`GH_MAX_ATOMS_3D` atoms: Gauss--Hermite at the levels where it
            is accepted, Monte Carlo at the others (per-level ``info["rule"]``; module docstring).
        n_samples : int, optional
            Monte-Carlo sample count (default 4096).
        rng : Generator, int or None
            Monte-Carlo randomness (keyword-only).
        rtol : float
            Quadrature target for the conservative error estimate (also of the 3-D Gauss--Hermite levels).
        block_size, float32_distances, progress, stratify, importance
            Options of the Monte-Carlo engine
            (:func:`noisealloc.theory.empirical.information_samples`); ``importance`` (default)
            draws from the defensive midpoint proposal that covers the boundary layers at every
            level (:mod:`noisealloc.theory._importance`), ``False`` plainly from the data law.

        Returns
        -------
        InformationEstimates
            ``mmse``, ``conditional_entropy`` (nats) and ``entropy_rate`` (per unit :math:`\lambda`).

        References
        ----------
        THEORY.md sections 2 and 3.1.
        """
        check_choice(method, "method", _METHODS)
        lam = _as_lam(lam)
        if method == "auto":
            method = self.choose_method()
            if method == "monte-carlo" and self._gauss_hermite_3d:
                return self._information_gh_mc(lam, rtol=float(rtol), n_samples=n_samples, rng=rng,
                                               block_size=block_size, float32_distances=float32_distances,
                                               progress=progress, stratify=stratify, importance=importance)
        low, high = self._limit_levels(lam)
        if np.any(low | high) and method != "monte-carlo":  # Monte Carlo: information_samples fills them
            return self._information_with_limits(lam, low, high, method=method, n_samples=n_samples, rng=rng,
                                                 rtol=rtol, block_size=block_size,
                                                 float32_distances=float32_distances, progress=progress,
                                                 stratify=stratify)
        if method in ("quadrature", "projected-quadrature"):
            r = self.span_dim
            if r > 2:
                raise ValueError(
                    f"method={method!r} needs atoms in an affine subspace of dimension <= 2; their span has "
                    f"dimension {r} (use method='monte-carlo', or 'auto': Gauss-Hermite at the levels it "
                    f"resolves when r = 3 and K <= {GH_MAX_ATOMS_3D}, Monte Carlo at the others)"
                )
            label = "quadrature" if r == self.dim else "projected-quadrature"
            mmse, ent = self._quadrature(lam, rtol=float(rtol), label=label)
        else:
            flat = lam.reshape(-1)
            smp = self.information_samples(flat, n_samples=n_samples, rng=rng, block_size=block_size,
                                           float32_distances=float32_distances, progress=progress,
                                           stratify=stratify, importance=importance)
            est = self.information_from_samples(smp)
            mmse, ent = (Estimate(np.asarray(e.value).reshape(lam.shape), np.asarray(e.stderr).reshape(lam.shape),
                                  e.method, e.error_check, e.n_samples, dict(e.info))
                         for e in (est.mmse, est.conditional_entropy))
        from noisealloc.theory.information import entropy_rate_from_mmse

        return InformationEstimates(mmse=mmse, entropy_rate=entropy_rate_from_mmse(lam, mmse),
                                    conditional_entropy=ent)

    @cached_property
    def _gauss_hermite_3d(self) -> bool:
        """Whether ``method="auto"`` takes Gauss--Hermite at the levels it resolves (3-D span, few atoms)."""
        return (self.span_dim == 3 and 2 <= self.n_atoms <= GH_MAX_ATOMS_3D
                and self.n_atoms * self.dim <= 2_000_000)

    def _information_gh_mc(self, lam, *, rtol, n_samples, rng, **engine_options):
        r"""information() for a 3-D span: tensor Gauss--Hermite where accepted, Monte Carlo elsewhere.

        The levels that take their low-SNR or underflow limits are exact (rule 0); of the others, those
        where :func:`_quad_gauss_hermite` accepts an order (doubling agreement to ``rtol`` and the
        unresolved-layer and pruned-node bounds below ``GH_UNRESOLVED_FRACTION * rtol``) are
        deterministic (rule 1, ``stderr`` 0, ``abs_error`` its bound); the rest go, together, to
        :meth:`information_samples` (rule 4, ``stderr`` the stratified standard error, ``abs_error``
        NaN).  ``method`` is ``'monte-carlo'`` if any level is (``error_check`` None, the largest
        relative GH error in ``info["quadrature_error_check"]``), else (projected-)quadrature.
        """
        from noisealloc.theory.information import entropy_rate_from_mmse

        flat = lam.reshape(-1)
        n_lev = flat.size
        low, high = self._limit_levels(flat)
        mid = np.flatnonzero(~(low | high))
        val = np.zeros((2, n_lev))
        val[0, low], val[1, low] = self.total_variance, self.entropy
        se = np.zeros((2, n_lev))
        err = np.zeros((2, n_lev))
        order = np.zeros(n_lev)
        rule = np.zeros(n_lev)  # 0 limit, 1 Gauss-Hermite, 4 Monte Carlo
        mc = mid[:0]
        if mid.size:
            coords = self._span[2]
            coords = coords - coords.mean(axis=0)  # as _quadrature: nodes about the atoms' mean
            v, e, o = _quad_gauss_hermite(coords, self.log_weights, flat[mid], rtol)
            ok = o > 0
            gh = mid[ok]
            val[:, gh], err[:, gh], order[gh], rule[gh] = v[:, ok], e[:, ok], o[ok], 1.0
            mc = mid[~ok]
        info = {}
        n_used = None
        if mc.size:
            smp = self.information_samples(flat[mc], n_samples=n_samples, rng=rng, **engine_options)
            est = self.information_from_samples(smp)
            info = dict(est.mmse.info)
            n_used = est.mmse.n_samples
            val[0, mc], se[0, mc] = est.mmse.value, est.mmse.stderr
            val[1, mc], se[1, mc] = est.conditional_entropy.value, est.conditional_entropy.stderr
            err[:, mc] = np.nan
            rule[mc] = 4.0
        is_gh = rule == 1.0
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(is_gh[None, :] & (val > 0), err / np.where(val > 0, val, 1.0), 0.0)
        info.update(span_dim=3, rule=rule.reshape(lam.shape), gauss_hermite_order=order.reshape(lam.shape),
                    rule_counts={"gauss-hermite": int(is_gh.sum()), "monte-carlo": int(mc.size)},
                    limit_levels={"low_snr": int(low.sum()), "underflow": int(high.sum())})
        label = "quadrature" if self.dim == 3 else "projected-quadrature"
        out = []
        for i in range(2):
            info_k = dict(info, abs_error=err[i].reshape(lam.shape))
            check = float(rel[i].max()) if n_lev else 0.0
            if mc.size:
                info_k["quadrature_error_check"] = check
                out.append(Estimate(val[i].reshape(lam.shape), se[i].reshape(lam.shape), "monte-carlo", None,
                                    n_used, info_k))
            else:
                out.append(Estimate(val[i].reshape(lam.shape), 0.0, label, check, None, info_k))
        return InformationEstimates(mmse=out[0], entropy_rate=entropy_rate_from_mmse(lam, out[0]),
                                    conditional_entropy=out[1])

    @cached_property
    def _low_snr_level(self) -> float:
        """Largest lam at which e^lam R^2 <= LOW_SNR_LIMIT (R: largest distance of an atom from the mean)."""
        r2 = float(np.max(self._centred_sq_norms))
        return math.log(LOW_SNR_LIMIT / r2) if r2 > 0 else math.inf

    def underflow_level(self) -> float:
        r"""Log-SNR from which mmse, :math:`H(\lambda)` and :math:`h(\lambda)` are exactly 0 in float64.

        From the Bhattacharyya bound of the pairwise confusions,
        :math:`\mathrm{mmse} \le \tfrac12 K d_{\min}^2 e^{-E}`, :math:`h \le 2KEe^{-E}`,
        :math:`H \le 1.24\,K e^{-E}` with :math:`E = d_{\min}^2 e^\lambda/8`: the level where these
        fall below the smallest float64 subnormal (``d_min`` a rounding-safe lower bound).  One
        atom has mmse = H = 0 at every level (``-inf``).

        Returns
        -------
        float
            :math:`\log(8E/d_{\min}^2)` (``inf`` if two atoms are closer than the rounding of their distance).

        References
        ----------
        THEORY.md section 2 (limits of :math:`H`).
        """
        if self.n_atoms == 1:
            return -math.inf
        return self._underflow_level

    @cached_property
    def _underflow_level(self) -> float:
        # max |mu_kd| from construction: the projection bound's rounding term without a pass over the atoms.
        snr = dirac_underflow_snr(self.n_atoms, min_distance_lower_bound(self.atoms, abs_max=self._abs_max))
        return math.log(snr) if snr > 0 else -math.inf

    def _limit_levels(self, lam):
        """Masks (low, high) of the levels where the low-SNR limits and the exact-zero limits apply."""
        if self.n_atoms == 1:
            return np.zeros(lam.shape, bool), np.zeros(lam.shape, bool)
        bottom = float(lam.min()) if lam.size else math.inf
        # R >= |mu_0 - mu_1| / 2 (the mean is within R of both), so below this cheap level no level is
        # a low-SNR level, and R itself (a pass over all atoms) is not needed.
        d01 = math.hypot(*(self.atoms[0] - self.atoms[1]))  # scaled: no underflow of the squares
        above_low = d01 > 0 and bottom > math.log(LOW_SNR_LIMIT) - 2.0 * math.log(0.5 * d01)  # logs: d01 may be tiny
        low = np.zeros(lam.shape, bool) if above_low else lam <= self._low_snr_level
        top = float(lam.max()) if lam.size else -math.inf
        # |mu_0 - mu_1| >= d_min and the level falls as d_min grows: below this cheap level no level
        # can be an underflow level, and the exact d_min (a blocked GEMM over all pairs) is not needed.
        cheap = math.log(dirac_underflow_snr(self.n_atoms, d01))
        high = (lam >= self.underflow_level()) if top >= cheap else np.zeros(lam.shape, bool)
        return low, high

    def _information_with_limits(self, lam, low, high, *, method, **options):
        """information() where some levels take their limits; the others by ``method``."""
        from noisealloc.theory.information import entropy_rate_from_mmse

        mid = ~(low | high)
        mmse = np.where(low, self.total_variance, 0.0)
        ent = np.where(low, self.entropy, 0.0)
        m_se, h_se = np.zeros(lam.shape), np.zeros(lam.shape)
        label = {"auto": self.choose_method()}.get(method, method)
        if label in ("quadrature", "projected-quadrature"):
            label = "quadrature" if self.span_dim == self.dim else "projected-quadrature"
        ests = {"mmse": None, "ent": None}
        if np.any(mid):
            inner = self.information(lam[mid], method=method, **options)
            ests = {"mmse": inner.mmse, "ent": inner.conditional_entropy}
            mmse[mid], m_se[mid] = inner.mmse.value, inner.mmse.stderr
            ent[mid], h_se[mid] = inner.conditional_entropy.value, inner.conditional_entropy.stderr

        def pack(value, stderr, est):
            info = {} if est is None else dict(est.info)
            for key, v in list(info.items()):
                if isinstance(v, np.ndarray) and v.shape == (int(mid.sum()),):
                    full = np.zeros(lam.shape)
                    full[mid] = v
                    info[key] = full
            info["limit_levels"] = {"low_snr": int(low.sum()), "underflow": int(high.sum())}
            if est is None:
                n = options.get("n_samples") if label == "monte-carlo" else None
                return Estimate(value, stderr, label, 0.0 if label != "monte-carlo" else None, n, info)
            return Estimate(value, stderr, est.method, est.error_check, est.n_samples, info)

        m_est = pack(mmse, m_se, ests["mmse"])
        return InformationEstimates(mmse=m_est, entropy_rate=entropy_rate_from_mmse(lam, m_est),
                                    conditional_entropy=pack(ent, h_se, ests["ent"]))

    def information_samples(self, lam, *, n_samples=None, rng=None, block_size=None,
                            float32_distances: bool = False, progress: bool = False, stratify: bool = True,
                            importance: bool = True):
        r"""Per-sample posterior entropy and MMSE at every level, from one set of common random numbers.

        Parameters
        ----------
        lam : array_like
            Log-SNR levels (flattened).
        n_samples : int, optional
            Number of draws (default 4096).
        rng : Generator, int or None
            Randomness; an integer seed is recorded in ``info``.
        block_size, float32_distances, progress, stratify, importance
            Engine options (:func:`noisealloc.theory.empirical.information_samples`); importance
            sampling (default) covers the boundary layers at high SNR.

        Returns
        -------
        InformationSamples
            ``entropy`` and ``mmse`` of shape ``(L, n)``; their means are :math:`H(\lambda)` and
            :math:`\mathrm{mmse}(\lambda)`, ``mean_stderr`` gives stratified standard errors.
        """
        from noisealloc.theory.empirical import InformationSamples, information_samples

        n = _DEFAULT_SAMPLES if n_samples is None else _check_n(n_samples, "n_samples")
        flat = np.asarray(lam, dtype=np.float64).reshape(-1)
        # The plain engine runs its GEMMs on its own worker threads; a threaded BLAS call just before
        # (the limits' GEMVs) would leave BLAS threads polling on the cores they need (theory._threads).
        with contextlib.nullcontext() if importance or kernel_threads() == 1 else single_blas_thread():
            low, high = self._limit_levels(flat)
            mid = ~(low | high)
            # The engine runs on the levels between the limits only (so they also shape the proposal);
            # the limit levels get per-sample values equal to their exact limits (mean exact, stderr 0).
            smp = information_samples(self.atoms, self.weights, flat[mid] if np.any(mid) else np.zeros(1),
                                      n_samples=n, rng=rng, block_size=block_size,
                                      float32_distances=float32_distances, progress=progress, stratify=stratify,
                                      importance=importance, centre=self._centre, live=self._live)
        if np.all(mid):
            return smp
        n_draws = smp.mmse.shape[1]
        ent = np.zeros((flat.size, n_draws))
        mm = np.zeros((flat.size, n_draws))
        ent[low], mm[low] = self.entropy, self.total_variance
        if np.any(mid):
            ent[mid], mm[mid] = smp.entropy, smp.mmse
        info = dict(smp.info, limit_levels={"low_snr": int(low.sum()), "underflow": int(high.sum())})
        return InformationSamples(flat, ent, mm, smp.draws, info)

    def information_from_samples(self, samples) -> InformationEstimates:
        r"""The Monte-Carlo estimates of :meth:`information` from :meth:`information_samples`' output.

        Parameters
        ----------
        samples : InformationSamples
            Per-sample values at the levels ``samples.lam``.

        Returns
        -------
        InformationEstimates
            ``mmse``, ``conditional_entropy`` and ``entropy_rate`` (per unit :math:`\lambda`), each a
            ``'monte-carlo'`` :class:`Estimate` of shape ``(L,)`` with its stratified standard error.
        """
        from noisealloc.theory.empirical import estimates_from_samples

        return estimates_from_samples(samples)

    def mmse(self, lam, *, method: str = "auto", n_samples=None, rng=None, rtol=QUAD_RTOL_TARGET,
             **engine_options) -> Estimate:
        r""":math:`\mathrm{mmse}(\lambda) = E\|x_0 - m(x,\lambda)\|^2` (summed over coordinates).

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.
        method, n_samples, rng, rtol, **engine_options
            As :meth:`information` (an option it does not take is a ``TypeError``).

        Returns
        -------
        Estimate
            Of the shape of ``lam``.
        """
        return self.information(lam, method=method, n_samples=n_samples, rng=rng, rtol=rtol, **engine_options).mmse

    def conditional_entropy(self, lam, *, method: str = "auto", n_samples=None, rng=None, rtol=QUAD_RTOL_TARGET,
                            **engine_options) -> Estimate:
        r""":math:`H(\lambda) = E[-\sum_k w_k(x)\log w_k(x)]` in nats.

        Tends to :math:`H(\pi)` as :math:`\lambda\to-\infty` and to 0 as :math:`\lambda\to\infty`
        (distinct atoms).

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.
        method, n_samples, rng, rtol, **engine_options
            As :meth:`information`.

        Returns
        -------
        Estimate
            Of the shape of ``lam``.
        """
        return self.information(lam, method=method, n_samples=n_samples, rng=rng, rtol=rtol,
                                **engine_options).conditional_entropy

    def entropy_rate(self, lam, coordinate="lambda", *, method: str = "auto", n_samples=None, rng=None,
                     rtol=QUAD_RTOL_TARGET, **engine_options) -> Estimate:
        r"""Generative entropy rate :math:`h(\lambda) = \tfrac12 e^\lambda \mathrm{mmse}(\lambda) = -dH/d\lambda`,
        moved to ``coordinate`` as :math:`h_u = h\,|d\lambda/du|` at :math:`u(\lambda)`.

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.
        coordinate : str or Coordinate
            Coordinate of the rate (``"lambda"``, ``"sigma"``, ...).
        method, n_samples, rng, rtol, **engine_options
            As :meth:`information`.

        Returns
        -------
        Estimate
            Rate per unit of the coordinate, of the shape of ``lam``.
        """
        from noisealloc.theory.information import entropy_rate_from_mmse

        est = self.mmse(lam, method=method, n_samples=n_samples, rng=rng, rtol=rtol, **engine_options)
        return entropy_rate_from_mmse(lam, est, coordinate)

    # ------------------------------------------------------------------ kernels
    def _quadrature(self, lam, *, rtol, label):
        """(mmse, conditional entropy) Estimates by quadrature on the atoms' span."""
        flat = lam.reshape(-1)
        _, _, coords = self._span
        # Integrate about the atoms' mean: far from the origin (atoms near 1000) the nodes' rounding
        # would otherwise blur boundary layers narrower than |x| eps.
        coords = coords - coords.mean(axis=0)
        r = coords.shape[1]
        if r == 0:
            z = np.zeros(lam.shape)
            ent = np.full(lam.shape, self.entropy)
            info = {"span_dim": 0}
            return Estimate(z, 0.0, label, 0.0, None, info), Estimate(ent, 0.0, label, 0.0, None, info)
        val, err, info = _quad_per_level(coords, self.log_weights, flat, rtol)
        info["span_dim"] = r
        out = []
        for i in range(2):
            v = val[i]
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = np.where(v > 0, err[i] / np.where(v > 0, v, 1.0), 0.0)
            info_k = dict(info)
            info_k["abs_error"] = err[i].reshape(lam.shape)
            out.append(Estimate(v.reshape(lam.shape), 0.0, label, float(rel.max()) if rel.size else 0.0, None, info_k))
        return tuple(out)


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
    :func:`noisealloc.theory._limits.dirac_underflow_snr`, per pair).
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
    """(2, N) scaled pair integrands (:mod:`noisealloc.theory._dirac_kernels`; numpy path without numba).

    ``u`` (N,) per point; ``t``, ``tstar``, ``inv_s``, ``pair`` per ray, point ``i`` on ray ``ray[i]``
    (default: one ray per point, all five arrays of length N).  Both paths form the logits as
    :math:`A_j + u B_j` (:func:`_pair_tables`) with the same operations in the same order.
    """
    from noisealloc.theory._numba import HAVE_NUMBA

    if ray is None:
        ray = np.arange(np.size(u))
    dlp, p1, p2, d2 = _pair_tables(mu, log_pi, pa, e1, e2)
    if HAVE_NUMBA:
        from noisealloc.theory._dirac_kernels import pair_integrand

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




