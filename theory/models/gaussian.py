r"""Gaussian manifolds and their mixtures (docs/THEORY.md sections 2 and 3.2-3.3).

A Gaussian manifold is :math:`x_0 = \mu + U z`, :math:`z \sim N(0, \mathrm{diag}(s))`,
:math:`U \in \mathbb{R}^{D\times k}` with orthonormal columns.  Observation
convention (VE/EDM scaling): :math:`x = x_0 + \sigma\varepsilon`, :math:`\sigma = e^{-\lambda/2}`;
a VP observation divided by :math:`\alpha` is the same, so everything is a
function of :math:`\lambda`.  Closed forms:

.. math::

    \mathrm{mmse}(\lambda) = \sum_i \frac{s_i}{1 + e^\lambda s_i}, \quad
    I(\lambda) = \tfrac12 \sum_i \log(1 + e^\lambda s_i), \quad
    h(\lambda) = \tfrac12 \sum_i \frac{e^\lambda s_i}{1 + e^\lambda s_i} \xrightarrow[\lambda\to\infty]{} \frac{k}{2},

evaluated as :math:`s_i\,\mathrm{expit}(-\lambda - \log s_i)`,
:math:`\tfrac12\mathrm{logaddexp}(0, \lambda + \log s_i)` and
:math:`\tfrac12\mathrm{expit}(\lambda + \log s_i)`, accurate for :math:`|\lambda| \le 700`.

A mixture :math:`\sum_j \pi_j N(\mu_j, U_j\,\mathrm{diag}(s_j)\,U_j^\top)` (a component
with :math:`k = 0` is a Dirac) has closed-form component posteriors; its
expectations over ``x`` are computed by Monte Carlo with common random numbers
across levels (:meth:`GaussianManifoldMixture.information`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

from noisealloc.theory.errors import as_float_array, as_generator, check_finite, check_weight_vector
from noisealloc.theory.models.observation import sample_observation
from noisealloc.theory.errors import check_count as _check_n, as_lam as _lam, points_and_levels
from noisealloc.theory.estimates import Estimate, InformationEstimates
from noisealloc.theory.entropy_rate import entropy_rate_from_mmse, rate_jacobian
from noisealloc.theory.posterior.asymptotics import LOW_SNR_LIMIT, refuse_complex

__all__ = ["GaussianManifold", "GaussianManifoldMixture", "ORTHONORMAL_ATOL"]

#: Largest entry of |U^T U - I| accepted for an "orthonormal" basis: a basis
#: from a QR/SVD in float64 is orthonormal to ~1e-15; 1e-10 admits user input
#: rounded to ~10 digits but rejects any genuinely non-orthonormal basis.
ORTHONORMAL_ATOL = 1e-10
# Monte-Carlo sample count of mixtures when none is given.
_DEFAULT_SAMPLES = 4096
# Mixtures: beyond this level h and the component entropy are on their plateau (distance O(e^-lam/2)),
# and sigma^2 = e^-lam leaves the normal float64 range (class docstring, "Far levels").
_MIX_LAM_CAP = 700.0




class GaussianManifold:
    r"""Gaussian law on a k-dimensional affine subspace of :math:`\mathbb{R}^D`.

    Parameters
    ----------
    mean : array_like, shape (D,)
        :math:`\mu`.
    basis : array_like, shape (D, k)
        :math:`U` with orthonormal columns (``k = 0`` gives a Dirac at ``mean``).
    variances : array_like, shape (k,)
        :math:`s_i > 0`.

    Attributes
    ----------
    dim : int
        Ambient dimension :math:`D`.
    k : int
        Intrinsic dimension (number of columns of ``basis``).
    discrete : bool
        ``False`` (a continuous law; :class:`~noisealloc.theory.models.protocol.DataModel` flag).
    monte_carlo : bool
        ``False``: every information quantity is a closed form (no ``n_samples``/``rng``).

    References
    ----------
    docs/THEORY.md sections 2 (Gaussian check) and 3.2.

    Examples
    --------
    >>> g = GaussianManifold([0.0, 0.0], [[1.0], [0.0]], [2.0])
    >>> round(float(g.mmse(0.0).value), 12)   # 2 / (1 + 2)
    0.666666666667
    """

    discrete = False
    monte_carlo = False

    def __init__(self, mean, basis, variances):
        for value, name in ((mean, "mean"), (basis, "basis"), (variances, "variances")):
            refuse_complex(value, name)
        mean = as_float_array(mean, "mean")
        if mean.ndim != 1 or mean.size < 1:
            raise ValueError(f"mean must have shape (D,) with D >= 1; got {mean.shape}")
        check_finite(mean, "mean")
        d = mean.size
        basis = as_float_array(basis, "basis")
        if basis.ndim == 1 and basis.size == d:
            basis = basis[:, None]
        if basis.ndim != 2 or basis.shape[0] != d:
            raise ValueError(f"basis must have shape (D, k) = ({d}, k) to match mean; got {basis.shape}")
        check_finite(basis, "basis")
        k = basis.shape[1]
        if k > d:
            raise ValueError(f"basis must have at most D = {d} columns; got {k}")
        gram_err = float(np.max(np.abs(basis.T @ basis - np.eye(k)))) if k else 0.0
        if gram_err > ORTHONORMAL_ATOL:
            raise ValueError(
                f"basis must have orthonormal columns (max |U^T U - I| <= {ORTHONORMAL_ATOL:g}); got {gram_err:.3g}"
            )
        variances = as_float_array(variances, "variances")
        if variances.ndim == 0:
            variances = variances[None]
        if variances.shape != (k,):
            raise ValueError(f"variances must have shape ({k},) to match basis {basis.shape}; got {variances.shape}")
        check_finite(variances, "variances")
        if np.any(variances <= 0):
            bad = int(np.flatnonzero(variances <= 0)[0])
            raise ValueError(f"variances must be > 0; entry {bad} is {variances[bad]!r}")
        self.mean = mean
        self.basis = basis
        self.variances = variances
        self.log_variances = np.log(variances)
        self.dim = d
        self.k = k

    def __repr__(self) -> str:
        return f"GaussianManifold(dim={self.dim}, k={self.k})"

    # ---------------------------------------------------------------- sampling
    def sample_x0(self, n: int, *, rng=None) -> np.ndarray:
        """Draw ``n`` points :math:`\\mu + U z`, shape (n, D)."""
        n = _check_n(n)
        gen = as_generator(rng)
        z = gen.standard_normal((n, self.k)) * np.sqrt(self.variances)
        return self.mean + z @ self.basis.T

    def sample_x(self, lam, n: int, *, rng=None):
        r"""Draw ``(x0, x)``, :math:`x = x_0 + e^{-\lambda/2}\varepsilon`; scalar ``lam``."""
        return sample_observation(self, lam, n, rng)

    # ---------------------------------------------------------------- posterior
    def _xl(self, x, lam):
        return points_and_levels(x, self.dim, lam)

    def shrinkage(self, lam) -> np.ndarray:
        r"""Per-direction gain :math:`g_i = e^\lambda s_i / (1 + e^\lambda s_i)`, shape ``lam.shape + (k,)``."""
        lam = _lam(lam)
        return expit(lam[..., None] + self.log_variances)

    def denoiser(self, x, lam) -> np.ndarray:
        r""":math:`m(x) = \mu + U\,\mathrm{diag}(g)\,U^\top (x - \mu)`, shape (n, D)."""
        x, lam = self._xl(x, lam)
        c = (x - self.mean) @ self.basis
        return self.mean + (c * self.shrinkage(lam)) @ self.basis.T

    def posterior_cov(self, x, lam) -> np.ndarray:
        r""":math:`C = U\,\mathrm{diag}(s_i/(1 + e^\lambda s_i))\,U^\top` (independent of ``x``), shape (n, D, D)."""
        x, lam = self._xl(x, lam)
        v = self.variances * expit(-(lam[:, None] + self.log_variances))
        return np.einsum("ia,na,ja->nij", self.basis, v, self.basis)

    # ---------------------------------------------------------------- information
    def mmse(self, lam) -> Estimate:
        r""":math:`\mathrm{mmse}(\lambda) = \sum_i s_i / (1 + e^\lambda s_i)` (closed form).

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.

        Returns
        -------
        Estimate
            ``'closed-form'``, of the shape of ``lam``.
        """
        lam = _lam(lam)
        v = np.sum(self.variances * expit(-(lam[..., None] + self.log_variances)), axis=-1)
        return Estimate(v, 0.0, "closed-form")

    def mutual_information(self, lam) -> Estimate:
        r""":math:`I(\lambda) = \tfrac12\sum_i \log(1 + e^\lambda s_i)` in nats (closed form).

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.

        Returns
        -------
        Estimate
            ``'closed-form'``, of the shape of ``lam``.
        """
        lam = _lam(lam)
        v = 0.5 * np.sum(np.logaddexp(0.0, lam[..., None] + self.log_variances), axis=-1)
        return Estimate(v, 0.0, "closed-form")

    def entropy_rate(self, lam, coordinate="lambda") -> Estimate:
        r""":math:`h(\lambda) = \tfrac12 \sum_i e^\lambda s_i/(1 + e^\lambda s_i)` moved to ``coordinate``.

        :math:`h_u = h\,|d\lambda/du|` at :math:`u(\lambda)`; tends to :math:`k/2` in :math:`\lambda`.

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.
        coordinate : str or Coordinate
            Coordinate of the rate.

        Returns
        -------
        Estimate
            ``'closed-form'`` rate per unit of the coordinate; ``info["coordinate"]`` names it.
        """
        lam = _lam(lam)
        h = 0.5 * np.sum(expit(lam[..., None] + self.log_variances), axis=-1)
        jac, name = rate_jacobian(lam, coordinate)
        return Estimate(h * jac, 0.0, "closed-form", None, None, {"coordinate": name})

    def information(self, lam) -> InformationEstimates:
        r"""MMSE, entropy rate (per unit :math:`\lambda`) and mutual information in closed form.

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.

        Returns
        -------
        InformationEstimates
            ``mmse``, ``entropy_rate``, ``mutual_information``.

        References
        ----------
        docs/THEORY.md section 2 (Gaussian check).
        """
        return InformationEstimates(mmse=self.mmse(lam), entropy_rate=self.entropy_rate(lam),
                                    mutual_information=self.mutual_information(lam))

    def log_marginal(self, x, lam) -> np.ndarray:
        r"""Log density of ``x`` at level ``lam``: :math:`\log N(x; \mu, UdiagU^\top + \sigma^2 I)`, shape (n,)."""
        x, lam = self._xl(x, lam)
        sig2 = np.exp(-lam)
        r = x - self.mean
        c = r @ self.basis
        perp = r - c @ self.basis.T
        quad = np.einsum("nd,nd->n", perp, perp) / sig2 + np.sum(c * c / (self.variances + sig2[:, None]), axis=1)
        logdet = (self.dim - self.k) * np.log(sig2) + np.sum(np.log(self.variances + sig2[:, None]), axis=1)
        return -0.5 * (quad + logdet + self.dim * math.log(2 * math.pi))


class GaussianManifoldMixture:
    r"""Mixture :math:`\sum_j \pi_j N(\mu_j, U_j\,\mathrm{diag}(s_j)\,U_j^\top)` of Gaussian manifolds.

    Parameters
    ----------
    components : sequence of GaussianManifold
        Same ``dim``; a component with ``k = 0`` is a Dirac mass.
    weights : array_like, shape (J,), optional
        :math:`\pi_j > 0`, normalised; uniform by default.

    Attributes
    ----------
    components : list of GaussianManifold
    weights : ndarray, shape (J,)
    dim : int
        Ambient dimension :math:`D`.
    discrete : bool
        ``True`` when every component is a Dirac (``k = 0``).
    monte_carlo : bool
        ``True``: the information quantities are Monte-Carlo estimates (take ``n_samples``, ``rng``).

    Notes
    -----
    Component posterior :math:`w_j(x) \propto \pi_j N(x; \mu_j, \Sigma_j + \sigma^2 I)`; given
    ``j`` the posterior is the component's Gaussian posterior, so
    :math:`m = \sum_j w_j m_j`, :math:`C = \sum_j w_j (C_j + (m_j - m)(m_j - m)^\top)`.
    When the component is a function of :math:`x_0` (distinct components),
    :math:`I(x_0; x) = H(\pi) - E\,\mathcal H(w(x)) + \sum_j \pi_j I_j(\lambda)`.

    Far levels (every level is finite): where :math:`e^\lambda\,\mathrm{Var}(P) \le 10^{-20}`
    (:data:`~noisealloc.theory.posterior.asymptotics.LOW_SNR_LIMIT`) the posterior is the prior to that relative
    precision: :math:`\mathrm{mmse} = \mathrm{Var}(P)`, component entropy :math:`H(\pi)`,
    :math:`h = I = \tfrac12 e^\lambda \mathrm{Var}(P)`.  Beyond :math:`\lambda = 700` the rate and the
    component entropy are those of :math:`\lambda = 700` (their plateau, reached up to
    :math:`O(\sigma)`, :math:`\sigma = e^{-350}`), :math:`\mathrm{mmse} = 2h e^{-\lambda}` and
    :math:`I` uses the closed-form :math:`I_j(\lambda)`.

    References
    ----------
    docs/THEORY.md section 3.3.
    """

    def __init__(self, components, weights=None):
        comps = list(components)
        if not comps:
            raise ValueError("components must be a non-empty sequence of GaussianManifold")
        for i, c in enumerate(comps):
            if not isinstance(c, GaussianManifold):
                raise TypeError(f"components[{i}] must be a GaussianManifold; got {type(c).__name__}")
        d = comps[0].dim
        for i, c in enumerate(comps):
            if c.dim != d:
                raise ValueError(f"components must share dim; components[0].dim = {d}, components[{i}].dim = {c.dim}")
        j = len(comps)
        weights = check_weight_vector(weights, j, of="components", positive=True, normalise=True)
        self.components = comps
        self.weights = weights
        self.log_weights = np.log(weights)
        self.dim = d
        self.discrete = all(c.k == 0 for c in comps)

    monte_carlo = True

    @property
    def entropy(self) -> float:
        """:math:`H(\\pi)` of the component weights."""
        return float(-np.sum(self.weights * self.log_weights))

    @property
    def total_variance(self) -> float:
        r""":math:`\mathrm{Var}(P) = \sum_j \pi_j (\|\mu_j - \bar\mu\|^2 + \sum_i s_{ji})`, the MMSE at :math:`\lambda \to -\infty`."""
        means = np.stack([c.mean for c in self.components])
        centred = means - self.weights @ means
        within = np.array([float(np.sum(c.variances)) for c in self.components])
        return float(self.weights @ (np.einsum("jd,jd->j", centred, centred) + within))

    def sample_x0(self, n: int, *, rng=None) -> np.ndarray:
        """Draw ``n`` points, shape (n, D).

        Parameters
        ----------
        n : int
            Number of points.
        rng : Generator, int or None
            Randomness.

        Returns
        -------
        ndarray, shape (n, D)
        """
        return self.sample_x0_with_component(n, rng=rng)[0]

    def sample_x0_with_component(self, n: int, *, rng=None) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``n`` points and the component each came from (same draws as :meth:`sample_x0`).

        Parameters
        ----------
        n : int
            Number of points.
        rng : Generator, int or None
            Randomness.

        Returns
        -------
        x0 : ndarray, shape (n, D)
        labels : ndarray, shape (n,)
            Component indices in ``0 .. J-1``.
        """
        n = _check_n(n)
        gen = as_generator(rng)
        lab = gen.choice(len(self.components), size=n, p=self.weights)
        kmax = max(c.k for c in self.components)
        z = gen.standard_normal((n, kmax))
        return self._x0_from(lab, z), lab

    def _x0_from(self, lab, z):
        x0 = np.empty((lab.size, self.dim))
        for j, c in enumerate(self.components):
            sel = lab == j
            x0[sel] = c.mean + (z[sel, : c.k] * np.sqrt(c.variances)) @ c.basis.T
        return x0

    def sample_x(self, lam, n: int, *, rng=None):
        r"""Draw ``(x0, x)`` with :math:`x = x_0 + e^{-\lambda/2}\varepsilon`; scalar ``lam``."""
        return sample_observation(self, lam, n, rng)

    def _check_x(self, x, lam):
        return self.components[0]._xl(x, lam)

    def log_posterior_weights(self, x, lam) -> np.ndarray:
        """Log component-posterior weights, shape (n, J) (log-sum-exp normalised)."""
        x, lam = self._check_x(x, lam)
        # sigma^2 = e^-lam leaves the float64 range beyond |lam| = 700; the weights there are their limits
        # (the prior at low SNR, the x0-level posterior at high SNR) to O(e^-350).
        lam = np.clip(lam, -_MIX_LAM_CAP, _MIX_LAM_CAP)
        ll = np.stack([c.log_marginal(x, lam) for c in self.components], axis=1) + self.log_weights
        mx = ll.max(axis=1, keepdims=True)
        return ll - (mx + np.log(np.sum(np.exp(ll - mx), axis=1, keepdims=True)))

    def _moments(self, x, lam):
        x, lam = self._check_x(x, lam)
        lw = self.log_posterior_weights(x, lam)
        w = np.exp(lw)
        ms = np.stack([c.denoiser(x, lam) for c in self.components], axis=1)  # (n, J, D)
        m = np.einsum("nj,njd->nd", w, ms)
        return lw, w, ms, m, lam

    def denoiser(self, x, lam) -> np.ndarray:
        r""":math:`m(x) = \sum_j w_j(x) m_j(x)`, shape (n, D)."""
        return self._moments(x, lam)[3]

    def posterior_cov(self, x, lam) -> np.ndarray:
        r""":math:`C = \sum_j w_j (C_j + (m_j - m)(m_j - m)^\top)`, shape (n, D, D)."""
        lw, w, ms, m, lam_b = self._moments(x, lam)
        dev = ms - m[:, None, :]
        out = np.einsum("nj,nja,njb->nab", w, dev, dev)
        for j, c in enumerate(self.components):
            if c.k:
                out += w[:, j, None, None] * c.posterior_cov(np.asarray(x, dtype=np.float64), lam_b)
        return out

    def _trace_and_entropy(self, x, lam):
        lw, w, ms, m, lam_b = self._moments(x, lam)
        dev = ms - m[:, None, :]
        tr = np.einsum("nj,njd,njd->n", w, dev, dev)
        for j, c in enumerate(self.components):
            if c.k:
                tr += w[:, j] * np.sum(c.variances * expit(-(lam_b[:, None] + c.log_variances)), axis=1)
        ent = np.einsum("nj,nj->n", w, -lw)
        return tr, np.maximum(ent, 0.0)

    def information_samples(self, lam, *, n_samples=None, rng=None):
        r"""Per-sample trace of the posterior covariance and component entropy, common random numbers.

        One set of draws :math:`(j, z, \varepsilon)` is reused at every level
        (:math:`x = x_0 + e^{-\lambda/2}\varepsilon`), so differences across levels are smooth.

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
            ``mmse`` (:math:`\mathrm{tr}\,C(x)` per sample) and ``entropy`` (component entropy
            :math:`\mathcal H(w(x))` per sample), shape ``(L, n)``; one stratum (i.i.d. draws).
        """
        from noisealloc.theory.posterior.common_random_numbers import CommonRandomNumbers
        from noisealloc.theory.posterior.engine import InformationSamples

        flat = _lam(lam).reshape(-1)
        n = _DEFAULT_SAMPLES if n_samples is None else _check_n(n_samples, "n_samples")
        seed = int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else None
        gen = as_generator(rng)
        x0, lab = self.sample_x0_with_component(n, rng=gen)
        eps = gen.standard_normal(x0.shape)
        tr = np.empty((flat.size, n))
        ent = np.empty((flat.size, n))
        for i, l in enumerate(flat):
            tr[i], ent[i] = self._trace_and_entropy(x0 + math.exp(-0.5 * l) * eps, float(l))
        draws = CommonRandomNumbers(lab.astype(np.int64), eps, np.zeros(n, dtype=np.int64), seed)
        return InformationSamples(flat, ent, tr, draws, {"seed": seed, "n_samples": n})

    def information_from_samples(self, samples, shape=None) -> InformationEstimates:
        r"""The estimates of :meth:`information` from :meth:`information_samples`' output.

        .. math:: I(\lambda) = H(\pi) - E\,\mathcal H(w(x)) + \sum_j \pi_j I_j(\lambda).

        Parameters
        ----------
        samples : InformationSamples
            Per-sample values at the levels ``samples.lam``.
        shape : tuple, optional
            Shape of the estimates (default ``samples.lam.shape``).

        Returns
        -------
        InformationEstimates
            ``mmse``, ``entropy_rate``, ``component_entropy`` and ``mutual_information``, each
            ``'monte-carlo'`` with ``info["seed"]``.
        """
        flat = samples.lam
        shape = flat.shape if shape is None else tuple(shape)
        n = samples.mmse.shape[1]
        info = dict(samples.info)
        tr, tr_se = samples.mean_stderr(samples.mmse)
        ent, ent_se = samples.mean_stderr(samples.entropy)
        i_comp = sum(p * c.mutual_information(flat).value for p, c in zip(self.weights, self.components))
        mi = self.entropy - ent + i_comp

        def est(v, se):
            return Estimate(v.reshape(shape), se.reshape(shape), "monte-carlo", None, n, info)

        mmse = est(tr, tr_se)
        return InformationEstimates(mmse=mmse, entropy_rate=entropy_rate_from_mmse(flat.reshape(shape), mmse),
                                    component_entropy=est(ent, ent_se), mutual_information=est(mi, ent_se))

    def information(self, lam, *, n_samples=None, rng=None) -> InformationEstimates:
        r"""Monte-Carlo MMSE, component entropy and mutual information, with common random numbers.

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
            ``mmse``, ``entropy_rate``, ``component_entropy`` and ``mutual_information``, each an
            :class:`Estimate` of the shape of ``lam`` with ``method="monte-carlo"`` and ``info["seed"]``.
        """
        lam = _lam(lam)
        low = lam <= self._low_snr_level
        cap = lam > _MIX_LAM_CAP
        if not np.any(low | cap):
            return self.information_from_samples(self.information_samples(lam, n_samples=n_samples, rng=rng),
                                                 lam.shape)
        return self._information_with_limits(lam, low, cap, n_samples=n_samples, rng=rng)

    @property
    def _low_snr_level(self) -> float:
        var = self.total_variance
        return math.log(LOW_SNR_LIMIT / var) if var > 0 else math.inf

    def _information_with_limits(self, lam, low, cap, *, n_samples, rng):
        """information() where levels take their limits (class docstring, "Far levels")."""
        mid = ~(low | cap)
        levels = np.concatenate([lam[mid], [_MIX_LAM_CAP] if np.any(cap) else []])
        tr = np.full(lam.shape, self.total_variance)
        ent = np.full(lam.shape, self.entropy)
        tr_se, ent_se = np.zeros(lam.shape), np.zeros(lam.shape)
        rate = np.zeros(lam.shape)
        info, n = {}, None
        if levels.size:
            inner = self.information_from_samples(self.information_samples(levels, n_samples=n_samples, rng=rng))
            info, n = dict(inner.mmse.info), inner.mmse.n_samples
            k = int(mid.sum())
            tr[mid], tr_se[mid] = inner.mmse.value[:k], inner.mmse.stderr[:k]
            ent[mid], ent_se[mid] = inner.component_entropy.value[:k], inner.component_entropy.stderr[:k]
            rate[mid] = inner.entropy_rate.value[:k]
            if np.any(cap):
                # h and the component entropy have reached their plateau at lam = 700 (the distance is
                # O(e^-350)); mmse = 2 h e^-lam, which underflows to 0 past lam ~ 745.
                h_top, h_top_se = inner.entropy_rate.value[-1], inner.entropy_rate.stderr[-1]
                rate[cap] = h_top
                with np.errstate(under="ignore"):
                    tr[cap] = 2.0 * h_top * np.exp(-lam[cap])
                    tr_se[cap] = 2.0 * h_top_se * np.exp(-lam[cap])
                ent[cap], ent_se[cap] = inner.component_entropy.value[-1], inner.component_entropy.stderr[-1]
        info["limit_levels"] = {"low_snr": int(low.sum()), "plateau": int(cap.sum())}
        i_comp = sum(p * c.mutual_information(lam).value for p, c in zip(self.weights, self.components))
        mi = np.where(low, 0.5 * np.exp(np.minimum(lam, 0.0)) * self.total_variance, self.entropy - ent + i_comp)
        rate = np.where(low, 0.5 * np.exp(np.minimum(lam, 0.0)) * self.total_variance, rate)
        rate_se = np.zeros(lam.shape)
        rate_se[mid] = 0.5 * np.exp(lam[mid]) * tr_se[mid]
        if np.any(cap):
            rate_se[cap] = inner.entropy_rate.stderr[-1]

        def est(v, se):
            return Estimate(v, se, "monte-carlo", None, n, info)

        return InformationEstimates(mmse=est(tr, tr_se), entropy_rate=est(rate, rate_se),
                                    component_entropy=est(ent, ent_se), mutual_information=est(mi, ent_se))

    def mmse(self, lam, *, n_samples=None, rng=None) -> Estimate:
        r"""Monte-Carlo :math:`E\,\mathrm{tr}\,C(x)` (see :meth:`information`).

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.
        n_samples, rng
            As :meth:`information`.

        Returns
        -------
        Estimate
        """
        return self.information(lam, n_samples=n_samples, rng=rng).mmse

    def mutual_information(self, lam, *, n_samples=None, rng=None) -> Estimate:
        """Monte-Carlo :math:`I(x_0; x)` (see :meth:`information`).

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.
        n_samples, rng
            As :meth:`information`.

        Returns
        -------
        Estimate
        """
        return self.information(lam, n_samples=n_samples, rng=rng).mutual_information

    def conditional_entropy(self, lam, *, n_samples=None, rng=None) -> Estimate:
        r""":math:`E\,\mathcal H(w(x))`, the conditional entropy of the component (Monte Carlo).

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.
        n_samples, rng
            As :meth:`information`.

        Returns
        -------
        Estimate
        """
        return self.information(lam, n_samples=n_samples, rng=rng).component_entropy

    def entropy_rate(self, lam, coordinate="lambda", *, n_samples=None, rng=None) -> Estimate:
        r""":math:`\tfrac12 e^\lambda\,\mathrm{mmse}` (Monte Carlo) moved to ``coordinate``.

        Parameters
        ----------
        lam : float or array_like
            Log-SNR levels.
        coordinate : str or Coordinate
            Coordinate of the rate.
        n_samples, rng
            As :meth:`information`.

        Returns
        -------
        Estimate
        """
        return entropy_rate_from_mmse(lam, self.mmse(lam, n_samples=n_samples, rng=rng), coordinate)
