r"""The manifold-smoothed empirical law: a population entropy rate for continuous data (docs/THEORY.md §2).

A finite sample :math:`\{x_1, \dots, x_n\}` of a continuous law, taken as a Dirac mixture, has an
entropy rate that collapses to 0 once the noise is below the nearest-neighbour scale: the rate of a
model that memorises its training set.  The population law's rate instead tends to :math:`d/2` at
high SNR, :math:`d` the intrinsic dimension.  The *manifold-smoothed empirical law* replaces each
sample by a Gaussian-manifold component (§3.3),

.. math:: \hat P = \frac1n \sum_{i=1}^n N\big(x_i,\; U_i\,\mathrm{diag}(s_i)\,U_i^\top\big),

where :math:`U_i \in \mathbb R^{D\times d}` and :math:`s_i` are the top-:math:`d` principal directions
and second moments of the offsets :math:`x_j - x_i` of the ``n_neighbors`` nearest neighbours of
:math:`x_i` (a local PCA), and :math:`d` is the Levina–Bickel maximum-likelihood estimate of the
intrinsic dimension (MacKay–Ghahramani average over points), rounded.  Its :math:`h` agrees with the
empirical one where the atoms are resolved and plateaus at :math:`d/2` beyond.

:math:`h(\lambda) = \tfrac12 e^\lambda\,E\,\mathrm{tr}\,C(x, \lambda)` is computed by the Monte-Carlo
estimator of :class:`~noisealloc.theory.models.gaussian.GaussianManifoldMixture` (its
``information_from_samples``, from common random numbers drawn by its ``sample_x0_with_component``);
only the per-sample kernel is vectorised here over components of equal rank (GEMMs instead of one
Python call per component), with the same draws and the same formulas:

.. math:: w_j(x) \propto \pi_j N(x;\, \mu_j,\, \Sigma_j + \sigma^2 I), \quad
          \mathrm{tr}\,C(x) = \sum_j w_j \Big(\sum_l \frac{s_{jl}\sigma^2}{s_{jl} + \sigma^2}
          + \|m_j\|^2\Big) - \|m\|^2, \quad \sigma^2 = e^{-\lambda}.

References
----------
docs/THEORY.md §2 ("Empirical versus population entropy rate"), §3.3 (mixtures of Gaussian manifolds).
Levina, E. & Bickel, P. (2004). Maximum likelihood estimation of intrinsic dimension. NIPS 17.
MacKay, D. & Ghahramani, Z. (2005). Comments on Levina & Bickel's intrinsic-dimension MLE.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logsumexp

from noisealloc.theory.errors import as_float_array, as_generator, as_int_scalar, check_count, check_finite

__all__ = [
    "ID_NEIGHBORS",
    "PCA_NEIGHBORS",
    "VARIANCE_FLOOR_REL",
    "IntrinsicDimension",
    "nearest_neighbors",
    "levina_bickel_dimension",
    "SmoothedEmpiricalLaw",
    "smoothed_empirical_law",
    "SMOOTHED_LEVELS",
    "SMOOTHED_SAMPLES",
]

#: Neighbours of the Levina–Bickel estimate (their recommended range is 10 to 20).
ID_NEIGHBORS = 10
#: Neighbours of each local PCA: enough for a stable top-d covariance when d <= ~10, few enough to
#: stay local.
PCA_NEIGHBORS = 20
#: Variances of a local PCA are floored at this fraction of the data's mean per-coordinate variance:
#: a component needs s > 0, and duplicated points give zero offsets.
VARIANCE_FLOOR_REL = 1e-10
#: Elements of the (samples x components x rank) blocks of the vectorised kernel held at once.
_BLOCK_ELEMENTS = 2_000_000
_DEFAULT_SAMPLES = 4096
#: Levels at which the manifold-smoothed h is estimated before it is interpolated (in log h) onto the
#: schedule's grid: its h is smooth in lambda (a mixture of Gaussian-manifold rates), and each level
#: costs a pass over every component for every sample.
SMOOTHED_LEVELS = 25
#: Default Monte-Carlo samples per level of the smoothed law's h (about 1 % relative standard error
#: of h on digits).
SMOOTHED_SAMPLES = 1024


def nearest_neighbors(x, k: int, *, block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    r"""Euclidean ``k`` nearest neighbours of every row of ``x`` (the point itself excluded).

    Squared distances :math:`\|x_i\|^2 + \|x_j\|^2 - 2 x_i\cdot x_j` by blocks of ``block`` rows (a GEMM
    each), clipped at 0.

    Parameters
    ----------
    x : (n, D) array_like
        Points, n > k.
    k : int
        Number of neighbours, >= 1.
    block : int
        Rows per block.

    Returns
    -------
    dist : (n, k) ndarray
        Distances, increasing along each row.
    index : (n, k) ndarray of int
        Indices of the neighbours.

    Examples
    --------
    >>> d, i = nearest_neighbors([[0.0], [1.0], [3.0]], 1)
    >>> d.ravel().tolist(), i.ravel().tolist()
    ([1.0, 1.0, 2.0], [1, 0, 1])
    """
    x = check_finite(as_float_array(x, "x", ndim=2), "x")
    n = x.shape[0]
    k = check_count(k, "k")
    if n <= k:
        raise ValueError(f"k must be smaller than the number of points n = {n}; got {k}")
    sq = np.einsum("nd,nd->n", x, x)
    dist = np.empty((n, k))
    index = np.empty((n, k), dtype=np.int64)
    for a in range(0, n, block):
        b = min(a + block, n)
        d2 = sq[a:b, None] + sq[None, :] - 2.0 * (x[a:b] @ x.T)
        d2[np.arange(b - a), np.arange(a, b)] = np.inf
        part = np.argpartition(d2, k - 1, axis=1)[:, :k]
        dp = np.take_along_axis(d2, part, axis=1)
        order = np.argsort(dp, axis=1)
        index[a:b] = np.take_along_axis(part, order, axis=1)
        dist[a:b] = np.sqrt(np.maximum(np.take_along_axis(dp, order, axis=1), 0.0))
    return dist, index


@dataclass(frozen=True)
class IntrinsicDimension:
    r"""A Levina–Bickel intrinsic-dimension estimate.

    Attributes
    ----------
    value : float
        :math:`\hat d = \Big[\frac1n \sum_i \frac{1}{k-1}\sum_{j<k} \log\frac{T_k(x_i)}{T_j(x_i)}\Big]^{-1}`
        (MacKay–Ghahramani: the inverse of the mean of the per-point inverse estimates).
    rank : int
        :math:`\hat d` rounded, at least 1 and at most the ambient dimension.
    k : int
        Neighbours used.
    n_points : int
        Points whose estimate entered the mean (those with distinct neighbours).
    """

    value: float
    rank: int
    k: int
    n_points: int


def levina_bickel_dimension(x, k: int = ID_NEIGHBORS, *, dist=None) -> IntrinsicDimension:
    r"""Levina–Bickel maximum-likelihood intrinsic dimension (MacKay–Ghahramani average).

    .. math:: \hat d = \Big[\frac1n \sum_{i=1}^n \frac{1}{k-1}\sum_{j=1}^{k-1}
              \log\frac{T_k(x_i)}{T_j(x_i)}\Big]^{-1},

    :math:`T_j(x_i)` the distance from :math:`x_i` to its :math:`j`-th nearest neighbour.  Points with
    a zero distance among their ``k`` neighbours (duplicates) are left out.

    Parameters
    ----------
    x : (n, D) array_like
        Points.
    k : int, >= 2
        Neighbours (default :data:`ID_NEIGHBORS`).
    dist : (n, >= k) array_like, optional
        Precomputed sorted neighbour distances (:func:`nearest_neighbors`).

    Returns
    -------
    IntrinsicDimension
        The estimate, its rounded rank and the counts used.

    References
    ----------
    Levina & Bickel (2004); MacKay & Ghahramani (2005); docs/THEORY.md §2.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> plane = np.c_[rng.standard_normal((2000, 2)), np.zeros((2000, 3))]   # a 2-d plane in R^5
    >>> levina_bickel_dimension(plane).rank
    2
    """
    x = check_finite(as_float_array(x, "x", ndim=2), "x")
    k = check_count(k, "k")
    if k < 2:
        raise ValueError(f"k must be >= 2 (the estimate compares the k-th with closer neighbours); got {k}")
    if dist is None:
        dist, _ = nearest_neighbors(x, k)
    t = as_float_array(dist, "dist", ndim=2)[:, :k]
    ok = t[:, 0] > 0
    if not np.any(ok):
        raise ValueError("every point has a duplicate among its neighbours; the dimension is undefined")
    inv = np.mean(np.log(t[ok, -1:] / t[ok, :-1]), axis=1)  # per-point 1/d
    value = float(1.0 / np.mean(inv))
    rank = int(min(max(round(value), 1), x.shape[1]))
    return IntrinsicDimension(value=value, rank=rank, k=k, n_points=int(ok.sum()))


class SmoothedEmpiricalLaw:
    r"""The manifold-smoothed empirical law of a sample, a Monte-Carlo data model (docs/THEORY.md §2, §3.3).

    Built by :func:`smoothed_empirical_law`.  The law is the uniform mixture
    :attr:`mixture` (a :class:`~noisealloc.theory.models.gaussian.GaussianManifoldMixture`) of one
    rank-``rank`` Gaussian-manifold component per sample; every method of the data-model protocol
    delegates to it, except that :meth:`information_samples` evaluates its per-sample kernel
    vectorised over components (same draws, same formulas as the mixture's own).

    Parameters
    ----------
    points : (n, D) ndarray
        The sample (component means).
    bases : (n, D, d) ndarray
        Orthonormal local tangent bases.
    variances : (n, d) ndarray
        Local variances, > 0.
    dimension : IntrinsicDimension
        The intrinsic-dimension estimate behind ``d``.
    n_neighbors : int
        Neighbours of each local PCA.

    Attributes
    ----------
    dim : int
        Ambient dimension ``D``.
    rank : int
        Rank ``d`` of every component (the rounded intrinsic dimension).
    intrinsic_dimension : IntrinsicDimension
        The estimate (its ``value`` is the unrounded :math:`\hat d`).
    discrete : bool
        ``False`` (a continuous law).
    monte_carlo : bool
        ``True``: the information quantities take ``n_samples`` and ``rng``.
    """

    discrete = False
    monte_carlo = True

    def __init__(self, points, bases, variances, dimension: IntrinsicDimension, n_neighbors: int):
        self.points = as_float_array(points, "points", ndim=2)
        self.bases = as_float_array(bases, "bases", ndim=3)
        self.variances = as_float_array(variances, "variances", ndim=2)
        n, d_amb = self.points.shape
        if self.bases.shape[:2] != (n, d_amb) or self.variances.shape != (n, self.bases.shape[2]):
            raise ValueError(f"bases must have shape (n, D, d) and variances (n, d) for points {self.points.shape}; "
                             f"got {self.bases.shape} and {self.variances.shape}")
        self.dim = d_amb
        self.rank = self.bases.shape[2]
        self.intrinsic_dimension = dimension
        self.n_neighbors = as_int_scalar(n_neighbors, "n_neighbors")
        self._mixture = None

    def __repr__(self) -> str:
        return (f"SmoothedEmpiricalLaw(n={self.points.shape[0]}, D={self.dim}, rank={self.rank}, "
                f"d_hat={self.intrinsic_dimension.value:.3g})")

    @property
    def mixture(self):
        """The law as a :class:`~noisealloc.theory.models.gaussian.GaussianManifoldMixture` (built on first use)."""
        if self._mixture is None:
            from noisealloc.theory.models.gaussian import GaussianManifold, GaussianManifoldMixture

            self._mixture = GaussianManifoldMixture(
                [GaussianManifold(m, u, s) for m, u, s in zip(self.points, self.bases, self.variances)])
        return self._mixture

    # --- the data-model protocol, through the mixture ------------------------------------------
    def sample_x0(self, n: int, *, rng=None) -> np.ndarray:
        """``n`` draws of :math:`x_0`, shape (n, D) (the mixture's sampler)."""
        return self.mixture.sample_x0(n, rng=rng)

    def sample_x(self, lam, n: int, *, rng=None):
        r"""``(x0, x)`` with :math:`x = x_0 + e^{-\lambda/2}\varepsilon` (the mixture's sampler)."""
        return self.mixture.sample_x(lam, n, rng=rng)

    def denoiser(self, x, lam) -> np.ndarray:
        """Posterior mean :math:`m(x, \\lambda)`, shape (n, D)."""
        return self.mixture.denoiser(x, lam)

    def posterior_cov(self, x, lam) -> np.ndarray:
        """Posterior covariance :math:`C(x, \\lambda)`, shape (n, D, D)."""
        return self.mixture.posterior_cov(x, lam)

    def information_samples(self, lam, *, n_samples=None, rng=None):
        r"""Per-sample :math:`\mathrm{tr}\,C(x)` and component entropy at every level (common random numbers).

        The draws are those of :meth:`GaussianManifoldMixture.information_samples` (the same
        generator calls in the same order), so the result equals the mixture's to rounding.

        Parameters
        ----------
        lam : array_like
            Log-SNR levels (flattened).
        n_samples : int, optional
            Number of draws (default 4096).
        rng : Generator, int or None
            Randomness; an integer seed is recorded.

        Returns
        -------
        InformationSamples
            ``mmse`` and ``entropy``, shape ``(L, n)``.
        """
        from noisealloc.theory.posterior.common_random_numbers import CommonRandomNumbers
        from noisealloc.theory.posterior.engine import InformationSamples
        from noisealloc.theory.errors import as_lam

        flat = as_lam(lam).reshape(-1)
        n = _DEFAULT_SAMPLES if n_samples is None else check_count(n_samples, "n_samples")
        seed = int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else None
        gen = as_generator(rng)
        x0, lab = self.mixture.sample_x0_with_component(n, rng=gen)
        eps = gen.standard_normal(x0.shape)
        tr, ent = self._kernel(x0, eps, flat)
        draws = CommonRandomNumbers(lab.astype(np.int64), eps, np.zeros(n, dtype=np.int64), seed)
        return InformationSamples(flat, ent, tr, draws, {"seed": seed, "n_samples": n, "law": "smoothed"})

    def _kernel(self, x0, eps, lam):
        mu, U, S = self.points, self.bases, self.variances
        J, D, k = U.shape
        centre = mu.mean(axis=0)  # translation leaves every quantity unchanged; centring limits cancellation
        mu = mu - centre
        x0 = x0 - centre
        Ust = U.transpose(0, 2, 1).reshape(J * k, D)  # row (j, l) = U_j[:, l]
        C = np.einsum("jdl,jd->jl", U, mu)  # U_j^T mu_j
        nu = np.einsum("jd,jd->j", mu, mu)
        logS = np.log(S)
        log_pi = -math.log(J)
        n = x0.shape[0]
        tr = np.empty((lam.size, n))
        ent = np.empty((lam.size, n))
        b = max(1, _BLOCK_ELEMENTS // (J * max(k, 1)))
        for a in range(0, n, b):
            e = slice(a, min(a + b, n))
            xa, ea = x0[e], eps[e]
            P0 = (xa @ Ust.T).reshape(-1, J, k) - C
            Pe = (ea @ Ust.T).reshape(-1, J, k)
            M0, Me = xa @ mu.T, ea @ mu.T
            xx0, x0e, ee = (np.einsum("nd,nd->n", p, q) for p, q in ((xa, xa), (xa, ea), (ea, ea)))
            for t, lt in enumerate(lam):
                s2 = math.exp(-lt)
                sig = math.sqrt(s2)
                P = P0 + sig * Pe
                r2 = (xx0 + 2.0 * sig * x0e + s2 * ee)[:, None] - 2.0 * (M0 + sig * Me) + nu
                shrink = S / (S + s2)
                quad = (r2 - np.einsum("jl,njl->nj", shrink, P * P)) / s2
                logdet = D * math.log(2.0 * math.pi * s2) + np.sum(np.log1p(S / s2), axis=1)
                ll = log_pi - 0.5 * (logdet + quad)
                lw = ll - logsumexp(ll, axis=1, keepdims=True)
                w = np.exp(lw)
                A = shrink * P
                mj2 = nu + 2.0 * np.einsum("jl,njl->nj", C, A) + np.einsum("njl,njl->nj", A, A)
                m = w @ mu + (w[:, :, None] * A).reshape(-1, J * k) @ Ust
                trc = np.sum(S * expit(-(lt + logS)), axis=1)
                tr[t, e] = np.maximum(w @ trc + np.einsum("nj,nj->n", w, mj2) - np.einsum("nd,nd->n", m, m), 0.0)
                ent[t, e] = np.maximum(-np.einsum("nj,nj->n", w, lw), 0.0)
        return tr, ent

    def information_from_samples(self, samples, shape=None):
        """The mixture's estimates from :meth:`information_samples` (see ``GaussianManifoldMixture``)."""
        return self.mixture.information_from_samples(samples, shape)

    def information(self, lam, *, n_samples=None, rng=None):
        r"""Monte-Carlo MMSE, entropy rate, component entropy and mutual information (one pass).

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels (any shape).
        n_samples : int, optional
            Number of draws (default 4096).
        rng : Generator, int or None
            Randomness.

        Returns
        -------
        InformationEstimates
            As :meth:`GaussianManifoldMixture.information`, ``method="monte-carlo"``.
        """
        from noisealloc.theory.errors import as_lam

        lam = as_lam(lam)
        return self.information_from_samples(self.information_samples(lam, n_samples=n_samples, rng=rng), lam.shape)

    def mmse(self, lam, *, n_samples=None, rng=None):
        r""":math:`E\,\mathrm{tr}\,C(x, \lambda)` (Monte Carlo; see :meth:`information`)."""
        return self.information(lam, n_samples=n_samples, rng=rng).mmse

    def mutual_information(self, lam, *, n_samples=None, rng=None):
        r""":math:`I(x_0; x)` (Monte Carlo; see :meth:`information`)."""
        return self.information(lam, n_samples=n_samples, rng=rng).mutual_information

    def entropy_rate(self, lam, coordinate="lambda", *, n_samples=None, rng=None):
        r""":math:`h = \tfrac12 e^\lambda\,\mathrm{mmse}` (Monte Carlo) moved to ``coordinate``."""
        from noisealloc.theory.entropy_rate import entropy_rate_from_mmse

        return entropy_rate_from_mmse(lam, self.mmse(lam, n_samples=n_samples, rng=rng), coordinate)


def smoothed_empirical_law(x, *, rank: int | None = None, n_neighbors: int = PCA_NEIGHBORS,
                           id_neighbors: int = ID_NEIGHBORS) -> SmoothedEmpiricalLaw:
    r"""The manifold-smoothed empirical law of the sample ``x`` (one Gaussian-manifold component per point).

    For each point :math:`x_i`, with :math:`O_i` the ``n_neighbors`` offsets :math:`x_j - x_i` of its
    nearest neighbours (rows), the component is :math:`N(x_i, U_i\,\mathrm{diag}(s_i)\,U_i^\top)` with
    :math:`U_i, s_i` the top-``rank`` eigenvectors and eigenvalues of :math:`O_i^\top O_i / K`
    (from the eigen-decomposition of the small Gram matrix :math:`O_i O_i^\top`), variances floored at
    :data:`VARIANCE_FLOOR_REL` times the mean per-coordinate variance of ``x``.

    Parameters
    ----------
    x : (n, D) array_like
        The sample (at least ``n_neighbors + 1`` points).
    rank : int, optional
        Rank ``d`` of the components; default the rounded Levina–Bickel estimate
        (:func:`levina_bickel_dimension` with ``id_neighbors``), at most ``min(D, n_neighbors)``.
    n_neighbors : int
        Neighbours of each local PCA (default :data:`PCA_NEIGHBORS`).
    id_neighbors : int
        Neighbours of the dimension estimate (default :data:`ID_NEIGHBORS`).

    Returns
    -------
    SmoothedEmpiricalLaw
        The law, with its ``intrinsic_dimension``.

    References
    ----------
    docs/THEORY.md §2 ("Empirical versus population entropy rate"), §3.3.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> t = rng.uniform(0.0, 2.0 * np.pi, 400)
    >>> law = smoothed_empirical_law(np.c_[np.cos(t), np.sin(t)])   # a circle: d = 1
    >>> law.rank, round(law.intrinsic_dimension.value, 1)
    (1, 1.0)
    >>> plane = np.c_[rng.standard_normal((400, 2)), np.zeros((400, 3))]   # a 2-d plane in R^5
    >>> h = smoothed_empirical_law(plane).entropy_rate([12.0], n_samples=512, rng=0).value
    >>> round(float(h[0]), 2)   # the plateau d/2 at high SNR
    1.0

    Notes
    -----
    On a curved manifold the components are flat (tangent) pieces whose neighbours cross each
    other; near the crossings the component stays ambiguous, so :math:`h` approaches :math:`d/2`
    only once the noise is well below the gaps between neighbouring tangent pieces (for 1,000
    points of the unit circle, :math:`h(16) \approx 0.79` against 0.5).  The validation range of
    docs/THEORY.md §2 (:math:`\lambda \le 12`) is not affected at :math:`n \ge 2000`.
    """
    x = check_finite(as_float_array(x, "x", ndim=2), "x")
    n, D = x.shape
    n_neighbors = check_count(n_neighbors, "n_neighbors")
    id_neighbors = check_count(id_neighbors, "id_neighbors")
    if n <= max(n_neighbors, id_neighbors):
        raise ValueError(f"x must hold more points than n_neighbors = {n_neighbors} and id_neighbors = "
                         f"{id_neighbors}; got n = {n}")
    dist, idx = nearest_neighbors(x, max(n_neighbors, id_neighbors))
    dimension = levina_bickel_dimension(x, id_neighbors, dist=dist)
    d = dimension.rank if rank is None else check_count(rank, "rank")
    d = min(d, D, n_neighbors)
    offsets = x[idx[:, :n_neighbors]] - x[:, None, :]  # (n, K, D)
    gram = offsets @ offsets.transpose(0, 2, 1)  # (n, K, K)
    evals, evecs = np.linalg.eigh(gram)
    evals, evecs = evals[:, ::-1][:, :d], evecs[:, :, ::-1][:, :, :d]
    floor = VARIANCE_FLOOR_REL * float(np.mean(np.var(x, axis=0)))
    variances = np.maximum(evals / n_neighbors, floor)
    # Principal directions from the Gram eigenvectors: U = O^T v / sqrt(eval); re-orthonormalised by QR
    # (a direction of a tiny eigenvalue is rounding noise and QR makes it orthogonal to the rest).
    raw = offsets.transpose(0, 2, 1) @ evecs / np.sqrt(np.maximum(evals, floor))[:, None, :]
    bases, r = np.linalg.qr(raw)
    bases = bases * np.where(np.diagonal(r, axis1=1, axis2=2) < 0, -1.0, 1.0)[:, None, :]
    return SmoothedEmpiricalLaw(x, bases, variances, dimension, n_neighbors)


