r"""Dirac mixtures: posterior weights, denoiser, MMSE and conditional entropy (docs/THEORY.md section 3.1).

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
    (0 where not GH), ``abs_error`` and ``rule_counts``.  The box rule is adaptive Gauss--Kronrod quadrature (:mod:`~noisealloc.theory.posterior.quadrature`)
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
    Carlo levels keep their standard error.  Why (:mod:`noisealloc.verify.bench.dirac_3d`, K = 5,
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
    Otherwise, :func:`noisealloc.theory.posterior.engine.monte_carlo_information` (blocked
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

from noisealloc.theory.errors import (as_float_array, as_float_scalar, as_generator, check_choice, check_finite,
                                      check_weight_vector)
from noisealloc.theory.models.observation import sample_observation
from noisealloc.theory.errors import check_count as _check_n, as_lam as _as_lam, points_and_levels
from noisealloc.theory.estimates import Estimate, InformationEstimates
from noisealloc.theory.tolerances import ATOM_ABS_MAX
from noisealloc.theory._threads import kernel_threads, single_blas_thread
from noisealloc.theory.posterior.asymptotics import (LOW_SNR_LIMIT, dirac_underflow_snr, min_distance_lower_bound,
                                       refuse_complex)
from noisealloc.theory.posterior.dirac_quadrature import (GH_MAX_ATOMS_3D, QUAD_MAX_ATOMS, QUAD_RTOL_TARGET, _posterior_kernel,
    _quad_gauss_hermite, _quad_per_level)

__all__ = ['DiracMixture', 'merge_duplicate_atoms']


_METHODS = ("auto", "quadrature", "projected-quadrature", "monte-carlo")
# Monte-Carlo sample count when none is given.
_DEFAULT_SAMPLES = 4096
# Atoms x span dimension from which the denoiser uses the blocked GEMM engine: below it the
# per-point reference-atom kernel is as fast and handles a level per point.
_BLOCKED_MIN_SIZE = 512
# The blocked engine takes |lam| <= 700 (its e^lam stays finite); beyond, the reference-atom kernel, which
# handles sigma^2 = 0 and infinity.
_BLOCKED_LAM_MAX = 700.0
#: Atoms arrays larger than this (entries) take their SVD on a helper thread (theory._threads.interruptible;
#: measured: 64 MNIST images took a second on a busy machine):
#: a LAPACK call of seconds would otherwise hold off an interrupt until it ends.
_INTERRUPTIBLE_SIZE = 4096




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
        (:func:`noisealloc.theory.posterior._scan.scan_atoms`); computed here otherwise.

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
    refuse_complex(atoms, "atoms")
    refuse_complex(weights, "weights")
    k = atoms.shape[0]
    if k < 2:
        return atoms, weights, 0
    # Equal rows have equal 64-bit row hashes, so distinct hashes prove distinct rows; rows that share a
    # hash are compared in full (np.unique over rows sorts K rows of D floats: 1 s on MNIST, against
    # a few ms here).
    if row_hash is None:
        from noisealloc.theory.posterior._scan import scan_atoms

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


class DiracMixture:
    r"""Mixture of Dirac masses :math:`P = \sum_k \pi_k \delta_{\mu_k}` in :math:`\mathbb{R}^D`.

    Parameters
    ----------
    atoms : array_like, shape (K, D) or (K,)
        Atom positions :math:`\mu_k` (a 1-D array is K atoms on the line).
    weights : array_like, shape (K,), optional
        Mixture weights :math:`\pi_k > 0` (normalised to sum 1); uniform by default.
    sample_of_continuous_law : bool, keyword-only
        True when the atoms are a sample of a continuous law (images), so that an entropic schedule
        comes by default from the manifold-smoothed law of the sample (docs/THEORY.md section 2); the
        loaders of ``digits`` and ``mnist`` set it.

    Attributes
    ----------
    atoms : ndarray (K, D);  weights : ndarray (K,);  log_weights : ndarray (K,)
    dim : int (D);  n_atoms : int (K, distinct atoms);  discrete : bool (True)
    n_merged : int
        Number of input rows that repeated an earlier atom and were merged into it (weights added;
        :func:`merge_duplicate_atoms`).
    monte_carlo : bool
        Whether ``method="auto"`` is Monte Carlo (:class:`~noisealloc.theory.models.protocol.DataModel` flag);
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
    docs/THEORY.md sections 2 and 3.1.

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

    #: Whether the atoms are a sample of a continuous law (images) rather than a law that is discrete by
    #: construction; set by the data loaders, read by the law rule of the entropic schedules
    #: (:func:`noisealloc.theory.schedules.entropic.resolve_law`).
    sample_of_continuous_law: bool = False

    def __init__(self, atoms, weights=None, *, sample_of_continuous_law: bool = False):
        if not isinstance(sample_of_continuous_law, (bool, np.bool_)):
            raise TypeError(f"sample_of_continuous_law must be a bool; got {sample_of_continuous_law!r}")
        self.sample_of_continuous_law = bool(sample_of_continuous_law)
        refuse_complex(atoms, "atoms")
        refuse_complex(weights, "weights")
        atoms = as_float_array(atoms, "atoms")
        if atoms.ndim == 1:
            atoms = atoms[:, None]
        if atoms.ndim != 2 or atoms.shape[0] < 1 or atoms.shape[1] < 1:
            raise ValueError(f"atoms must have shape (K, D) with K >= 1, D >= 1 (or (K,)); got shape {atoms.shape}")
        from noisealloc.theory.posterior._scan import scan_atoms

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
        :func:`noisealloc.theory.posterior._scan.centred_sq_norms`), shared by :attr:`total_variance` and
        :attr:`_low_snr_level`."""
        from noisealloc.theory.posterior._scan import centred_sq_norms

        return centred_sq_norms(self.atoms, self._centre)

    @cached_property
    def _centre(self) -> np.ndarray:
        r"""The mean :math:`\bar\mu = \sum_k \pi_k \mu_k`."""
        from noisealloc.theory.posterior._scan import weighted_mean

        return weighted_mean(self.atoms, self.weights)

    # ------------------------------------------------------------------ span
    @cached_property
    def _span(self):
        """(center (D,), basis (r, D) orthonormal rows, coords (K, r)) of the atoms' affine span."""
        center = self.atoms.mean(axis=0)
        cen = self.atoms - center
        if self.n_atoms == 1:
            return center, np.zeros((0, self.dim)), np.zeros((1, 0))
        if cen.size > _INTERRUPTIBLE_SIZE:  # seconds for MNIST: an interrupt must not wait for it
            from noisealloc.theory._threads import interruptible

            _, s, vt = interruptible(np.linalg.svd, cen, full_matrices=False)
        else:
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
        use the blocked GEMM engine :func:`noisealloc.theory.posterior.engine.posterior_weights_blocked`
        (same accuracy contract, ~50x faster for MNIST); otherwise the reference-atom kernel.
        """
        xs, lams = points_and_levels(x, self.dim, lam, allow_1d=True)
        center, basis, coords = self._span
        if (coords.size >= _BLOCKED_MIN_SIZE and xs.shape[0] > 0 and np.all(lams == lams[0])
                and abs(float(lams[0])) <= _BLOCKED_LAM_MAX):
            from noisealloc.theory.posterior.engine import posterior_weights_blocked

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
        """Whether ``method="auto"`` is Monte Carlo (the :class:`~noisealloc.theory.models.protocol.DataModel` flag).

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
            (:func:`noisealloc.theory.posterior.engine.information_samples`); ``importance`` (default)
            draws from the defensive midpoint proposal that covers the boundary layers at every
            level (:mod:`noisealloc.theory.posterior.importance`), ``False`` plainly from the data law.

        Returns
        -------
        InformationEstimates
            ``mmse``, ``conditional_entropy`` (nats) and ``entropy_rate`` (per unit :math:`\lambda`).

        References
        ----------
        docs/THEORY.md sections 2 and 3.1.
        """
        check_choice(method, "method", _METHODS)
        lam = _as_lam(lam)
        rtol = as_float_scalar(rtol, "rtol")
        if method == "auto":
            method = self.choose_method()
            if method == "monte-carlo" and self._gauss_hermite_3d:
                return self._information_gh_mc(lam, rtol=rtol, n_samples=n_samples, rng=rng,
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
            mmse, ent = self._quadrature(lam, rtol=rtol, label=label)
        else:
            flat = lam.reshape(-1)
            smp = self.information_samples(flat, n_samples=n_samples, rng=rng, block_size=block_size,
                                           float32_distances=float32_distances, progress=progress,
                                           stratify=stratify, importance=importance)
            est = self.information_from_samples(smp)
            mmse, ent = (Estimate(np.asarray(e.value).reshape(lam.shape), np.asarray(e.stderr).reshape(lam.shape),
                                  e.method, e.error_check, e.n_samples, dict(e.info))
                         for e in (est.mmse, est.conditional_entropy))
        from noisealloc.theory.entropy_rate import entropy_rate_from_mmse

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
        from noisealloc.theory.entropy_rate import entropy_rate_from_mmse

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
        docs/THEORY.md section 2 (limits of :math:`H`).
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
        from noisealloc.theory.entropy_rate import entropy_rate_from_mmse

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
            Engine options (:func:`noisealloc.theory.posterior.engine.information_samples`); importance
            sampling (default) covers the boundary layers at high SNR.

        Returns
        -------
        InformationSamples
            ``entropy`` and ``mmse`` of shape ``(L, n)``; their means are :math:`H(\lambda)` and
            :math:`\mathrm{mmse}(\lambda)`, ``mean_stderr`` gives stratified standard errors.
        """
        from noisealloc.theory.posterior.engine import InformationSamples, information_samples

        n = _DEFAULT_SAMPLES if n_samples is None else _check_n(n_samples, "n_samples")
        flat = _as_lam(lam).reshape(-1)
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
        from noisealloc.theory.posterior.engine import estimates_from_samples

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
        from noisealloc.theory.entropy_rate import entropy_rate_from_mmse

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
