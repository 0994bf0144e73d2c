r"""Information matrices of denoiser families: per-level :math:`A(\lambda)`, :math:`G(\lambda)` (docs/THEORY.md §4).

These are posterior expectations over a data model, so they live in the theory layer; the
solvers (:mod:`noisealloc.solvers`) take the arrays of a :class:`FamilyMatrices` and optimise the
allocation.  Each builder takes a data model from :mod:`noisealloc.theory` and a
linear-in-parameters denoiser :math:`D_\theta(x, \lambda) = \Theta^\top \psi(x, \lambda)`
(one parameter vector per output coordinate, shared by every noise level: the
fully coupled regime), trained with the x0 loss
:math:`\ell = \|D_\theta(x,\lambda) - x_0\|^2`.  Because the loss separates over
output coordinates with the same features, the m x m blocks are

.. math::

    A(\lambda) = 2\,E[\psi\psi^\top], \qquad
    G(\lambda) = 4\,E[\psi\psi^\top \|r\|^2], \qquad r = x_0 - m(x, \lambda),

with :math:`m` the Bayes denoiser (for a well-specified family, :math:`\theta^*`
reproduces :math:`m` at every level, so :math:`r` is the residual at the optimum),
and the evaluation matrix :math:`A_\omega = \int \omega(\lambda) A(\lambda)\,d\lambda`
(trapezoid on the grid; ``omega`` default: the ELBO weight :math:`\tfrac12 e^\lambda`).
Then :math:`V(p) = \tfrac12 \mathrm{tr}(A_\omega A_p^{-1} G_p A_p^{-1})` (summed over
output coordinates) and the L-criterion :math:`\mathrm{tr}(A_\omega A_p^{-1})`.

Families:

``posterior-weights`` (Dirac mixtures, well specified)
    :math:`\psi_k = w_k(x, \lambda)`, the posterior weights; :math:`\Theta = (\mu_1, \dots, \mu_K)`
    reproduces :math:`m` exactly.  m = K.
``linear`` (Gaussian manifolds, well specified)
    :math:`\psi_i = \frac{s_i}{s_i + \sigma^2} u_i^\top (x - \mu)` along each principal direction
    (the Bayes shrinkage with a free gain per direction, :math:`\theta^* = 1`).  The loss gradient in
    :math:`\theta_i` is :math:`-2\psi_i r_i` with :math:`r_i = u_i^\top r`, so here
    :math:`G_{ij} = 4 E[\psi_i\psi_j r_i r_j]`.  m = k and, with
    :math:`\mathrm{snr} = e^\lambda`, :math:`A_{ii} = 2 s_i^2\,\mathrm{snr}/(1 + s_i\,\mathrm{snr})`,
    :math:`G_{ii} = 4 s_i^3\,\mathrm{snr}/(1 + s_i\,\mathrm{snr})^2`: rational in snr, so the
    sensitivity certificate can be exact.
``random-features`` (any model; lazy/kernel regime of a two-layer network)
    :math:`\psi = \tanh(W [x; \gamma(\lambda)] + b)/\sqrt q` with fixed random ``W, b`` and a
    Fourier embedding :math:`\gamma(\lambda)`; only the readout is trained.  The family is
    misspecified: ``G`` uses the Bayes residual, so ``V`` is the variance term of the excess risk.
``spline:J`` (partial coupling, docs/THEORY.md §4 (c))
    :math:`\psi \otimes B(\lambda)` with ``J`` B-splines on the interval (a partition of unity, so
    a well-specified base family stays well specified): :math:`A_J = (B B^\top) \otimes A`,
    :math:`G_J = (B B^\top) \otimes G`.  ``J = 1`` is the base family.

Expectations over :math:`x` for Dirac mixtures are taken on the atoms' affine span (noise
orthogonal to the span does not move the posterior): adaptive Gauss--Kronrod cut at the decision
boundaries on a line (the boundary-split quadrature of docs/THEORY.md section 3.1, with the range
:data:`~noisealloc.theory.posterior.dirac_quadrature.QUAD_HALF_WIDTH` of the Dirac model), Gauss--Hermite tensor
rules in the plane, Monte Carlo with common random numbers across levels otherwise.

References
----------
docs/THEORY.md section 4 (training as noise allocation; regimes (a) and (c)) and section 3.1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import numpy as np

from noisealloc.theory.posterior.dirac_quadrature import QUAD_HALF_WIDTH, _gh_rule, _posterior_kernel
from noisealloc.theory.errors import (as_float_array, as_float_scalar, as_generator, as_int_scalar, check_finite,
                                      check_interval)

__all__ = [
    "FamilyMatrices",
    "FAMILIES",
    "ENTROPY_RATE_SAMPLES",
    "posterior_weight_matrices",
    "gaussian_linear_matrices",
    "gaussian_linear_sympy",
    "random_feature_matrices",
    "spline_matrices",
    "bspline_basis",
    "build_family_matrices",
    "natural_family",
]

FAMILIES = ("posterior-weights", "linear", "random-features", "spline:J")


@dataclass(frozen=True)
class FamilyMatrices:
    r"""Information matrices of a denoiser family on a log-SNR grid (the input of the allocation solvers).

    Attributes
    ----------
    lam : ndarray, shape (n,)
        Candidate log-SNR levels (strictly increasing).
    A, G : ndarray, shape (n, m, m)
        Per-level Hessian :math:`A(\lambda) = E\nabla^2_\theta\ell` and gradient second moment
        :math:`G(\lambda) = E\nabla_\theta\ell\nabla_\theta\ell^\top` of the x0 loss at the optimum
        (see the module docstring).
    A_eval : ndarray, shape (m, m)
        :math:`A_\omega = \int \omega A\,d\lambda` (trapezoid on ``lam``).
    A_of_lam, G_of_lam : callable or None
        ``lam -> (m, m)`` at any level, for off-grid checks and refinement.
    entropy_rate : ndarray, shape (n,) or None
        :math:`h(\lambda)` of the data on the grid (for comparisons with the entropic proxy).
    family : str
        Family name (``'posterior-weights'``, ``'linear'``, ``'random-features'``,
        ``'spline:J+<base>'``).
    data : str
        Data SPEC the model came from (informational).
    info : dict
        Method of the expectations, node counts, seeds, ``m``.
    A_sympy : callable or None
        ``() -> (A_sym, snr)``: :math:`A` as a sympy matrix rational in the symbol ``snr`` (the
        ``linear`` family only), for exact sensitivity certificates.
    """

    lam: np.ndarray
    A: np.ndarray
    G: np.ndarray
    A_eval: np.ndarray
    A_of_lam: Callable | None = field(default=None, repr=False, compare=False)
    G_of_lam: Callable | None = field(default=None, repr=False, compare=False)
    entropy_rate: np.ndarray | None = field(default=None, repr=False, compare=False)
    family: str = ""
    data: str = ""
    info: dict = field(default_factory=dict, compare=False)
    A_sympy: Callable | None = field(default=None, repr=False, compare=False)

    @property
    def m(self) -> int:
        """Number of parameters (size of each matrix)."""
        return int(self.A.shape[1])


def _elbo(lam):
    return 0.5 * np.exp(lam)


def _grid(lam):
    lam = check_finite(as_float_array(lam, "lam", ndim=1), "lam")
    if lam.size < 2 or np.any(np.diff(lam) <= 0):
        raise ValueError("lam must be a strictly increasing grid of at least 2 levels")
    return lam


#: Monte-Carlo samples per level for the entropy rate stored with a problem (for comparisons with the
#: entropic proxy; large empirical mixtures such as MNIST would otherwise cost minutes per problem).
ENTROPY_RATE_SAMPLES = 512


def _entropy_rate(model, lam, rng):
    """h(lam) of the data for comparisons with the sqrt-entropic density: exact where the model is,
    Monte Carlo with a bounded sample count and a fixed seed otherwise (reproducible)."""
    from noisealloc.theory.information.rates import model_entropy_rate

    seed = rng if isinstance(rng, (int, np.integer)) else 0
    return np.asarray(model_entropy_rate(model, lam, n_samples=ENTROPY_RATE_SAMPLES, rng=seed).value)


def _eval_matrix(lam, A, omega):
    w = as_float_array(omega(lam), "omega(lam)")  # the caller's function: complex is refused, not cut
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("omega must be finite and >= 0 on the grid")
    return np.trapezoid(w[:, None, None] * A, lam, axis=0)


# ---- posterior-weight features (Dirac mixtures) ------------------------------------------


def _span(model):
    """``(center, basis)`` of the atoms' affine span, centred, with the Dirac model's rank rule.

    The dimension is the model's own (:attr:`DiracMixture.span_dim`, one rank tolerance for the
    whole toolkit).  The coordinates are centred at the atoms' mean even at full rank, where the
    model keeps the original ones: the 1-D quadrature below was validated on centred coordinates,
    and moving the origin changes its breakpoints, hence the last bits of every matrix.
    """
    atoms = np.asarray(model.atoms, dtype=np.float64)
    center = atoms.mean(axis=0)
    _, _s, vt = np.linalg.svd(atoms - center, full_matrices=False)
    return center, vt[: model.span_dim]


#: Memory of one block of the 1-D posterior-weight quadrature (values and intermediates at the
#: 21 Kronrod nodes of its intervals); levels are integrated in blocks that fit.
_QUAD_BLOCK_BYTES = 256 * 2**20


def _posterior_weights(y, mu, log_pi, sig2):
    """Posterior weights (N, K) for observations y (N, r) of atoms mu (K, r): the Dirac model's kernel."""
    _log_p, _tr_c, _ent, log_w = _posterior_kernel(y, np.full(y.shape[0], sig2), mu, log_pi)
    return np.exp(log_w)


def _dirac_moments(model, lam_value, nodes, gh_weights, r_dim, coords, basis_rows, n_mc, gen_state):
    """E[w w^T] and E[w w^T |r|^2] at one level (quadrature on the span, or Monte Carlo)."""
    sig = np.exp(-0.5 * lam_value)
    K = model.n_atoms
    S = np.zeros((K, K))
    T = np.zeros((K, K))
    if nodes is not None:
        for k in range(K):
            y = coords[k][None, :] + sig * nodes
            w = _posterior_weights(y, coords, model.log_weights, sig * sig)
            r2 = np.sum((coords[k][None, :] - w @ coords) ** 2, axis=1)
            ww = w * gh_weights[:, None]
            S += model.weights[k] * (ww.T @ w)
            T += model.weights[k] * ((ww * r2[:, None]).T @ w)
        return S, T
    k_idx, eps = gen_state
    y = coords[k_idx] + sig * eps
    w = _posterior_weights(y, coords, model.log_weights, sig * sig)
    r2 = np.sum((coords[k_idx] - w @ coords) ** 2, axis=1)
    return (w.T @ w) / n_mc, ((w * r2[:, None]).T @ w) / n_mc


def _moments_1d_adaptive(coords, log_pi, pi, lam):
    r"""E[w w^T] and E[w w^T |r|^2] at every level for atoms on a line, by adaptive Gauss--Kronrod.

    .. math:: S = \int p(y)\, w w^\top dy, \qquad
              T = \int \sum_k \pi_k \varphi_\sigma(y - \mu_k)\, (\mu_k - m(y))^2\, w w^\top dy,

    with breakpoints at the atoms and at every decision boundary between two atoms,
    graded down to the boundary-layer width :math:`\min(\sigma, \sigma^2/d_{\max})`: at high SNR
    the integrands live in thin layers around the boundaries, where fixed Gauss--Hermite nodes
    lose all relative accuracy (docs/THEORY.md section 3.1).
    """
    from noisealloc.theory.posterior.quadrature import adaptive_gauss_kronrod, graded_breakpoints

    mu = coords[:, 0]
    K = mu.size
    sig2 = np.exp(-lam)
    sigma = np.sqrt(sig2)
    d_max = float(np.ptp(mu)) if K > 1 else 1.0
    ia, ib = np.triu_indices(K, 1)
    # boundary between a and b: y = (mu_a + mu_b)/2 + sigma^2 log(pi_a/pi_b) / (mu_b - mu_a)
    cuts = 0.5 * (mu[ia] + mu[ib])[None, :] + sig2[:, None] * ((log_pi[ia] - log_pi[ib]) / (mu[ib] - mu[ia]))[None, :]
    cuts = np.concatenate([cuts, np.broadcast_to(mu, (lam.size, K))], axis=1)
    lo = mu.min() - QUAD_HALF_WIDTH * sigma
    hi = mu.max() + QUAD_HALF_WIDTH * sigma
    a, b, pid = graded_breakpoints(cuts, lo, hi, np.minimum(sigma, sig2 / max(d_max, 1e-300)))
    iu = np.triu_indices(K)

    def f(y, p):
        s2 = sig2[p][:, None]
        logphi = -((y[:, None] - mu[None, :]) ** 2) / (2 * s2) - 0.5 * np.log(2 * np.pi * s2)
        joint = log_pi[None, :] + logphi  # log pi_k phi(y - mu_k)
        top = joint.max(axis=1, keepdims=True)
        e = np.exp(joint - top)
        w = e / e.sum(axis=1, keepdims=True)
        dens = np.exp(top[:, 0]) * e.sum(axis=1)  # p(y)
        m = w @ mu
        rk = (mu[None, :] - m[:, None]) ** 2  # (mu_k - m)^2
        tw = np.exp(top[:, 0]) * np.sum(e * rk, axis=1)  # sum_k pi_k phi_k (mu_k - m)^2
        ww = w[:, iu[0]] * w[:, iu[1]]
        return np.vstack([(dens[:, None] * ww).T, (tw[:, None] * ww).T])

    n_out = 2 * iu[0].size
    half = iu[0].size
    S = np.zeros((lam.size, K, K))
    T = np.zeros((lam.size, K, K))
    ok = True
    # Blocks of levels: the quadrature holds n_out values at 21 nodes of every interval of the levels
    # it integrates at once (K = 16 atoms on 97 levels: ~2e5 intervals x 272 outputs, 8 GB at once).
    per_level = np.bincount(pid, minlength=lam.size)
    budget = max(1, _QUAD_BLOCK_BYTES // (8 * 21 * (n_out + 4 * K)))  # intervals per block
    start = 0
    while start < lam.size:
        stop = start + 1
        while stop < lam.size and per_level[start:stop + 1].sum() <= budget:
            stop += 1
        sel = (pid >= start) & (pid < stop)
        offset = start

        def f_block(y, p, offset=offset):
            return f(y, p + offset)

        res = adaptive_gauss_kronrod(f_block, a[sel], b[sel], pid[sel] - start, stop - start, n_out=n_out,
                                     rtol=1e-10, atol=1e-300, warn=False)
        S[start:stop, iu[0], iu[1]] = res.value[:half].T
        T[start:stop, iu[0], iu[1]] = res.value[half:].T
        ok = ok and bool(np.all(res.success))
        start = stop
    S = S + np.triu(S, 1).transpose(0, 2, 1)
    T = T + np.triu(T, 1).transpose(0, 2, 1)
    return S, T, ok


def posterior_weight_matrices(model, lam, *, omega: Callable = _elbo, n_nodes: int = 64, n_mc: int = 20000,
                             rng=0, data: str = "") -> FamilyMatrices:
    r"""Posterior-weight features :math:`\psi_k = w_k(x,\lambda)` of a Dirac mixture (well specified).

    :math:`A = 2 E[w w^\top]`, :math:`G = 4 E[w w^\top \|x_0 - m(x, \lambda)\|^2]` (m = K).

    Parameters
    ----------
    model : DiracMixture
    lam : array_like, shape (n,)
        Strictly increasing candidate levels (at least 2).
    omega : callable
        Evaluation weight per unit log-SNR (default ELBO :math:`\tfrac12 e^\lambda`).
    n_nodes : int
        Gauss--Hermite nodes per span dimension (span dimension 2, or 1 with more than 64 atoms).
    n_mc : int
        Monte-Carlo samples (common random numbers across levels) when the span is larger.
    rng : numpy.random.Generator or int or None
        Randomness of the Monte-Carlo path (and the seed of the stored entropy rate).
    data : str
        Data SPEC recorded in the result.

    Returns
    -------
    FamilyMatrices
        ``family = 'posterior-weights'``; ``info`` holds the quadrature method and span dimension.

    References
    ----------
    docs/THEORY.md sections 3.1 (posterior weights, boundary-split quadrature) and 4 (a).

    Notes
    -----
    Span dimension 1: adaptive Gauss--Kronrod cut at the decision boundaries (relative 1e-10);
    2: Gauss--Hermite tensor rule per atom (accurate at moderate SNR only: the boundary layers
    are not resolved at high SNR); larger: Monte Carlo.
    """
    lam = _grid(lam)
    n_nodes, n_mc = as_int_scalar(n_nodes, "n_nodes"), as_int_scalar(n_mc, "n_mc")
    atoms = np.asarray(model.atoms, dtype=np.float64)
    center, basis = _span(model)
    coords = (atoms - center) @ basis.T if basis.shape[0] else np.zeros((atoms.shape[0], 1))
    r_dim = coords.shape[1]
    nodes = gw = gen_state = None
    if r_dim == 1 and model.n_atoms <= 64:
        method = "adaptive Gauss-Kronrod on the span, cut at the decision boundaries (rtol 1e-10)"
    elif r_dim <= 2:
        nodes, gw = _gh_rule(int(n_nodes), r_dim)
        method = f"gauss-hermite ({int(n_nodes)}^{r_dim} nodes per atom on the span)"
    else:
        gen = as_generator(rng)
        k_idx = gen.choice(model.n_atoms, size=int(n_mc), p=model.weights)
        gen_state = (k_idx, gen.standard_normal((int(n_mc), r_dim)))
        method = f"monte-carlo ({int(n_mc)} common random numbers)"

    def moments(l):
        if nodes is None and gen_state is None:
            S1, T1, _ = _moments_1d_adaptive(coords, model.log_weights, model.weights, np.array([float(l)]))
            return S1[0], T1[0]
        return _dirac_moments(model, float(l), nodes, gw, r_dim, coords, basis, int(n_mc), gen_state)

    if nodes is None and gen_state is None:
        S, T, ok = _moments_1d_adaptive(coords, model.log_weights, model.weights, lam)
        if not ok:
            method += " (did not reach rtol at some level)"
    else:
        S = np.empty((lam.size, model.n_atoms, model.n_atoms))
        T = np.empty_like(S)
        for i, l in enumerate(lam):
            S[i], T[i] = moments(l)
    A = 2.0 * S
    G = 4.0 * T
    A = 0.5 * (A + A.transpose(0, 2, 1))
    G = 0.5 * (G + G.transpose(0, 2, 1))
    h = _entropy_rate(model, lam, rng)
    return FamilyMatrices(
        lam=lam, A=A, G=G, A_eval=_eval_matrix(lam, A, omega),
        A_of_lam=lambda l: 2.0 * moments(l)[0], G_of_lam=lambda l: 4.0 * moments(l)[1],
        entropy_rate=h, family="posterior-weights", data=data,
        info={"method": method, "span_dim": r_dim, "m": model.n_atoms},
    )


# ---- linear shrinkage features (Gaussian manifolds) -----------------------------------------


def _gaussian_blocks(s, lam):
    snr = np.exp(np.asarray(lam, dtype=np.float64))[..., None]
    a = 2.0 * s * s * snr / (1.0 + s * snr)
    g = 4.0 * s**3 * snr / (1.0 + s * snr) ** 2
    return a, g


def gaussian_linear_matrices(model, lam, *, omega: Callable = _elbo, data: str = "") -> FamilyMatrices:
    r"""Per-direction Bayes shrinkage features of a Gaussian manifold (well specified, closed form).

    :math:`A_{ii} = 2 s_i^2 \mathrm{snr}/(1 + s_i \mathrm{snr})`,
    :math:`G_{ii} = 4 s_i^3 \mathrm{snr}/(1 + s_i \mathrm{snr})^2` (derivation in the module docstring:
    :math:`\psi_i = \frac{s_i}{s_i+\sigma^2} z_i`, :math:`z_i \sim N(0, s_i + \sigma^2)`, and the
    Gaussian residual is independent of :math:`x`).

    Parameters
    ----------
    model : GaussianManifold
        Its ``variances`` :math:`s_i` enter.
    lam : array_like, shape (n,)
        Strictly increasing candidate levels (at least 2).
    omega : callable
        Evaluation weight per unit log-SNR (default ELBO :math:`\tfrac12 e^\lambda`).
    data : str
        Data SPEC recorded in the result.

    Returns
    -------
    FamilyMatrices
        ``family = 'linear'``, m = k; ``A_sympy`` gives :math:`A(\mathrm{snr})` exactly
        (:func:`gaussian_linear_sympy`).

    References
    ----------
    docs/THEORY.md sections 2 (Gaussian check) and 4 (a) (exact certificates for Gaussian manifolds).

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.theory.models.gaussian import GaussianManifold
    >>> from noisealloc.theory.information.matrices import gaussian_linear_matrices
    >>> fm = gaussian_linear_matrices(GaussianManifold(np.zeros(2), np.eye(2)[:, :1], [2.0]), [0.0, 1.0])
    >>> float(fm.A[0, 0, 0]), float(fm.G[0, 0, 0])  # 2 s^2/(1+s), 4 s^3/(1+s)^2 at snr = 1
    (2.6666666666666665, 3.5555555555555554)
    """
    lam = _grid(lam)
    s = np.asarray(model.variances, dtype=np.float64)
    a, g = _gaussian_blocks(s, lam)
    A = np.einsum("ni,ij->nij", a, np.eye(s.size))
    G = np.einsum("ni,ij->nij", g, np.eye(s.size))

    def A_of(l):
        return np.diag(_gaussian_blocks(s, l)[0])

    def G_of(l):
        return np.diag(_gaussian_blocks(s, l)[1])

    return FamilyMatrices(
        lam=lam, A=A, G=G, A_eval=_eval_matrix(lam, A, omega), A_of_lam=A_of, G_of_lam=G_of,
        entropy_rate=_entropy_rate(model, lam, 0), family="linear", data=data,
        info={"method": "closed-form", "m": int(s.size), "variances": s.tolist()},
        A_sympy=partial(gaussian_linear_sympy, s.tolist()),
    )


def gaussian_linear_sympy(variances):
    r"""The ``linear`` family's :math:`A(\mathrm{snr})` as a sympy matrix (for exact certificates).

    Parameters
    ----------
    variances : sequence of float
        :math:`s_i`, converted to exact rationals.

    Returns
    -------
    A_sym : sympy.Matrix, shape (k, k)
        :math:`\operatorname{diag}(2 s_i^2 \mathrm{snr}/(1 + s_i \mathrm{snr}))`.
    snr : sympy.Symbol
        The positive symbol ``snr`` (:math:`= e^\lambda`).

    Examples
    --------
    >>> from noisealloc.theory.information.matrices import gaussian_linear_sympy
    >>> import sympy as sp
    >>> A, snr = gaussian_linear_sympy([0.5])
    >>> sp.simplify(A[0, 0] - snr / (snr + 2))  # 2 s^2 snr / (1 + s snr) with s = 1/2
    0
    """
    import sympy as sp

    snr = sp.Symbol("snr", positive=True)
    s = [sp.nsimplify(float(v), rational=True) for v in as_float_array(variances, "variances", ndim=1)]
    return sp.diag(*[2 * si**2 * snr / (1 + si * snr) for si in s]), snr


# ---- random features (lazy regime) ------------------------------------------------------------


def random_feature_matrices(model, lam, *, q: int = 32, n_mc: int = 4096, freqs: int = 4, scale: float = 1.0,
                           omega: Callable = _elbo, rng=0, data: str = "") -> FamilyMatrices:
    r"""Random-feature two-layer denoiser with a trained readout (lazy regime).

    :math:`\psi(x, \lambda) = \tanh(W_x x / \sqrt{D} + W_\lambda \gamma(\lambda) + b)/\sqrt q` with
    :math:`\gamma(\lambda) = (\cos(f_j \lambda / 12), \sin(f_j \lambda / 12))_{j \le F}`, fixed Gaussian
    ``W``, ``b``.  Expectations by Monte Carlo with the same ``n_mc`` draws of :math:`(x_0, \varepsilon)`
    at every level; the residual uses the model's Bayes denoiser.

    Parameters
    ----------
    model : data model
        Any model with ``dim``, ``sample_x0`` and ``denoiser``.
    lam : array_like, shape (n,)
        Strictly increasing candidate levels (at least 2).
    q : int
        Number of random features (m = q).
    n_mc : int
        Monte-Carlo draws of :math:`(x_0, \varepsilon)`, shared by every level.
    freqs : int
        Number of Fourier frequencies of the noise embedding.
    scale : float
        Scale of the random first-layer weights.
    omega : callable
        Evaluation weight per unit log-SNR (default ELBO).
    rng : numpy.random.Generator or int or None
        Randomness of the features and of the Monte-Carlo draws.
    data : str
        Data SPEC recorded in the result.

    Returns
    -------
    FamilyMatrices
        ``family = 'random-features'`` (misspecified: ``G`` uses the Bayes residual).
    """
    lam = _grid(lam)
    gen = as_generator(rng)
    D = int(model.dim)
    q, n_mc, freqs = as_int_scalar(q, "q"), as_int_scalar(n_mc, "n_mc"), as_int_scalar(freqs, "freqs")
    scale = as_float_scalar(scale, "scale")
    Wx = gen.standard_normal((D, q)) * scale / np.sqrt(D)
    Wl = gen.standard_normal((2 * int(freqs), q)) * scale
    b = gen.standard_normal(q) * 0.5
    f = np.arange(1, int(freqs) + 1, dtype=np.float64)
    x0 = model.sample_x0(int(n_mc), rng=gen)
    eps = gen.standard_normal(x0.shape)

    last = {}  # the off-grid check asks A(l) then G(l) at the same l: one Monte-Carlo pass for both

    def moments(l):
        l = float(l)
        if last.get("l") == l:
            return last["AG"]
        x = x0 + np.exp(-0.5 * l) * eps
        emb = np.concatenate([np.cos(f * l / 12.0), np.sin(f * l / 12.0)])
        psi = np.tanh(x @ Wx + emb @ Wl + b) / np.sqrt(q)
        r2 = np.sum((x0 - model.denoiser(x, l)) ** 2, axis=1)
        AG = 2.0 * (psi.T @ psi) / x0.shape[0], 4.0 * ((psi * r2[:, None]).T @ psi) / x0.shape[0]
        for X in AG:
            X.flags.writeable = False  # shared with the cache: a caller must not change it
        last["l"], last["AG"] = l, AG
        return AG

    A = np.empty((lam.size, q, q))
    G = np.empty_like(A)
    for i, l in enumerate(lam):
        A[i], G[i] = moments(l)
    return FamilyMatrices(
        lam=lam, A=A, G=G, A_eval=_eval_matrix(lam, A, omega),
        A_of_lam=lambda l: moments(l)[0], G_of_lam=lambda l: moments(l)[1],
        entropy_rate=_entropy_rate(model, lam, rng), family="random-features", data=data,
        info={"method": f"monte-carlo ({int(n_mc)} common random numbers)", "m": q, "freqs": int(freqs),
              "seed": rng if isinstance(rng, int) else None},
    )


# ---- B-spline partial coupling ------------------------------------------------------------------


def bspline_basis(lam, J: int, lam_min: float, lam_max: float):
    r"""``J`` B-splines of degree ``min(3, J - 1)`` on ``[lam_min, lam_max]`` with uniform knots, shape (n, J).

    They form a partition of unity (:math:`\sum_j B_j(\lambda) = 1`).  ``J = 1`` gives the constant 1.

    Parameters
    ----------
    lam : array_like
        Levels (clipped to the interval).
    J : int
        Number of basis functions (>= 1).
    lam_min, lam_max : float
        The interval.

    Returns
    -------
    ndarray, shape (n, J)

    References
    ----------
    docs/THEORY.md section 4 (c): partial coupling through B-splines in the noise coordinate.

    Examples
    --------
    >>> from noisealloc.theory.information.matrices import bspline_basis
    >>> bspline_basis([0.0, 0.5, 1.0], 2, 0.0, 1.0).tolist()
    [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]]
    """
    from scipy.interpolate import BSpline

    J = as_int_scalar(J, "J")
    if J < 1:
        raise ValueError(f"J must be >= 1; got {J}")
    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
    lam = np.clip(np.atleast_1d(as_float_array(lam, "lam")), lo, hi)
    if J == 1:
        return np.ones((lam.size, 1))
    k = min(3, J - 1)
    inner = np.linspace(lo, hi, J - k + 1)
    t = np.concatenate([[lo] * k, inner, [hi] * k])
    out = BSpline.design_matrix(lam, t, k).toarray()
    return out


def spline_matrices(base: FamilyMatrices, J: int, *, omega: Callable = _elbo) -> FamilyMatrices:
    r"""Partial coupling through ``J`` B-splines in log-SNR: :math:`A_J = (B B^\top) \otimes A` per level.

    Parameters
    ----------
    base : FamilyMatrices
        The base family (shared by every basis function).
    J : int
        Number of B-splines on the grid's interval.
    omega : callable
        Evaluation weight per unit log-SNR (default ELBO).

    Returns
    -------
    FamilyMatrices
        m = J x base m, ``family = 'spline:J+<base family>'``.

    References
    ----------
    docs/THEORY.md section 4 (c).
    """
    lam = base.lam
    lo, hi = float(lam[0]), float(lam[-1])
    B = bspline_basis(lam, J, lo, hi)
    BB = np.einsum("ni,nj->nij", B, B)
    A = np.einsum("nij,nkl->nikjl", BB, base.A).reshape(lam.size, J * base.m, J * base.m)
    G = np.einsum("nij,nkl->nikjl", BB, base.G).reshape(lam.size, J * base.m, J * base.m)

    def lift(F):
        if F is None:
            return None

        def f(l):
            b = bspline_basis(l, J, lo, hi)[0]
            return np.kron(np.outer(b, b), F(l))

        return f

    return FamilyMatrices(
        lam=lam, A=A, G=G, A_eval=_eval_matrix(lam, A, omega), A_of_lam=lift(base.A_of_lam),
        G_of_lam=lift(base.G_of_lam), entropy_rate=base.entropy_rate, family=f"spline:{J}+{base.family}",
        data=base.data, info={**base.info, "J": int(J), "m": J * base.m},
    )


def build_family_matrices(model, family: str, lam, *, data: str = "", rng=0, **opts) -> FamilyMatrices:
    """Dispatch on the family name: ``posterior-weights``, ``linear``, ``random-features`` or ``spline:J``.

    ``spline:J`` couples the natural base family of the model (posterior weights for a Dirac
    mixture, linear shrinkage for a Gaussian manifold, random features otherwise).

    Parameters
    ----------
    model : data model
    family : str
        One of :data:`FAMILIES` (``spline:J`` with an integer ``J >= 1``).
    lam : array_like, shape (n,)
        Strictly increasing candidate levels.
    data : str
        Data SPEC recorded in the result.
    rng : numpy.random.Generator or int or None
        Randomness of the Monte-Carlo builders.
    **opts
        Options of the family's builder (e.g. ``q``, ``n_mc`` of random features).

    Returns
    -------
    FamilyMatrices

    Raises
    ------
    ValueError
        Unknown family, or a family that does not fit the model.
    """
    if not isinstance(family, str):
        raise TypeError(f"family must be a string; got {type(family).__name__}")
    if family.startswith("spline:"):
        try:
            J = int(family.split(":", 1)[1])
        except ValueError:
            raise ValueError(f"family 'spline:J' needs an integer J >= 1; got {family!r}") from None
        base_name = natural_family(model)
        return spline_matrices(build_family_matrices(model, base_name, lam, data=data, rng=rng, **opts), J)
    if family == "posterior-weights":
        if not hasattr(model, "n_atoms"):
            raise ValueError("family 'posterior-weights' needs a Dirac mixture (dirac:..., digits, mnist, npz atoms)")
        return posterior_weight_matrices(model, lam, data=data, rng=rng, **opts)
    if family == "linear":
        if not hasattr(model, "variances"):
            raise ValueError("family 'linear' needs a Gaussian manifold (gaussian:..., npz mean/basis/variances)")
        return gaussian_linear_matrices(model, lam, data=data, **opts)
    if family == "random-features":
        return random_feature_matrices(model, lam, data=data, rng=rng, **opts)
    raise ValueError(f"family must be one of {FAMILIES}; got {family!r}")


def natural_family(model) -> str:
    """The model's natural (well-specified where possible) base family.

    Parameters
    ----------
    model : data model

    Returns
    -------
    str
        ``'posterior-weights'`` for Dirac mixtures of at most 64 atoms, ``'linear'`` for Gaussian
        manifolds, ``'random-features'`` otherwise.
    """
    if hasattr(model, "n_atoms") and model.n_atoms <= 64:
        return "posterior-weights"
    if hasattr(model, "variances"):
        return "linear"
    return "random-features"
