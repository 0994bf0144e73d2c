r"""The Aitchison--Aitken smoothed law of a sample of token strings (docs/THEORY.md section 7.5).

Under the empirical law of a training set the masked rate :math:`h` drops to zero as soon as a few
visible tokens identify the string (memorisation).  The population stand-in replaces every training
string :math:`s_k` by a product law that keeps each token with probability :math:`1 - \delta` and
otherwise takes one of the other :math:`V - 1` values uniformly,

.. math:: \pi_\delta(x) = \frac1K \sum_k \prod_{l=1}^L \kappa_\delta(x^l, s_k^l), \qquad
          \kappa_\delta(a, b) = (1 - \delta)[a = b] + \frac{\delta}{V - 1}[a \ne b],

with :math:`\delta \in (0, (V-1)/V]` maximising the leave-one-out log-likelihood
:math:`\sum_i \log \frac{1}{K-1}\sum_{k \ne i} (1-\delta)^{L - d_{ik}} (\delta/(V-1))^{d_{ik}}`
(:math:`d_{ik}` the Hamming distance), found on a grid and refined by golden-section search
(:func:`fit_delta`).  The objective depends on the data only through each string's histogram of
distances to the others, computed once by the GEMM of the one-hot strings.

Per-sample values stay exact (:meth:`SmoothedLaw.sample_values`): given the visible tokens the
posterior weight of component :math:`k` is :math:`w_k r^{m_k}` with :math:`r = \delta / ((V-1)(1-\delta))`
and :math:`m_k` the visible mismatches; leaving token :math:`l` out divides the weight of the
components that mismatch there by :math:`r`; and token :math:`l`'s posterior is the weighted mixture of
the kernels :math:`\kappa_\delta(\cdot, s_k^l)`.  The posterior over whole strings is a mixture of product
laws whose entropy has no closed form, so :math:`H(X \mid z)` is not provided (``conditional_entropy`` is
``None``); :math:`H(\pi_\delta)` itself is a Monte-Carlo estimate of :math:`-E\log\pi_\delta(X)` with its
standard error.

References
----------
J. Aitchison, C. G. G. Aitken (1976). Multivariate binary discrimination by the kernel method.
*Biometrika* 63(3).  docs/THEORY.md section 7.5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.errors import as_float_array, as_float_scalar, as_generator, as_int_scalar, check_count
from noisealloc.theory.estimates import Estimate
from noisealloc.theory.masked.finite import FiniteLaw
from noisealloc.theory.masked.information import MaskedModel, entropy_nats
from noisealloc.theory.masked.process import check_tokens, check_vocabulary

__all__ = ["DeltaFit", "SmoothedLaw", "fit_delta", "distance_histograms", "loo_log_likelihood",
           "DELTA_MIN", "DELTA_GRID", "DELTA_XTOL", "ENTROPY_SAMPLES", "ENTROPY_SEED"]

#: Smallest smoothing considered (a smaller one is the empirical law for every practical purpose).
DELTA_MIN = 1e-8
#: Grid points (logit-spaced on [DELTA_MIN, (V-1)/V]) before the golden-section refinement.
DELTA_GRID = 64
#: Golden-section stopping width, relative to delta.
DELTA_XTOL = 1e-6
#: Draws and seed of the default Monte-Carlo estimate of H(pi_delta) (:attr:`SmoothedLaw.entropy`).
ENTROPY_SAMPLES = 4096
ENTROPY_SEED = 0
#: Rows per block of the distance histogram.
_HIST_ROWS = 512

_STATUS = {0: "converged: golden-section bracket below DELTA_XTOL",
           1: "boundary: the leave-one-out optimum is at the end of the delta range"}


@dataclass(frozen=True)
class DeltaFit:
    r"""The leave-one-out choice of the smoothing :math:`\delta`.

    Attributes
    ----------
    delta : float
        The maximiser.
    loo_log_likelihood : float
        Its leave-one-out log-likelihood (nats, summed over the sample).
    grid, grid_values : ndarray
        The grid of :math:`\delta` and the objective on it.
    nit : int
        Golden-section iterations.
    success : bool
        ``status == 0``.
    status : int
        0 converged inside the range, 1 optimum at a boundary of :math:`[\mathrm{DELTA\_MIN}, (V-1)/V]`.
    message : str
        The status message.
    """

    delta: float
    loo_log_likelihood: float
    grid: np.ndarray = field(repr=False)
    grid_values: np.ndarray = field(repr=False)
    nit: int
    success: bool
    status: int
    message: str


def distance_histograms(strings, V: int) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct string's histogram of Hamming distances to the other rows of the sample.

    Parameters
    ----------
    strings : array_like, shape (K, L)
        The sample (rows may repeat).
    V : int
        Vocabulary size.

    Returns
    -------
    hist : ndarray, shape (K', L + 1)
        ``hist[i, d]``: number of rows other than one copy of distinct string ``i`` at distance ``d``.
    counts : ndarray of int64, shape (K',)
        Copies of each distinct string.
    """
    law = FiniteLaw(strings, V)
    counts = np.asarray(law._counts if law._counts is not None else np.round(law.weights * len(strings)),
                        dtype=np.int64)
    K, L = law.K, law.L
    hist = np.zeros((K, L + 1))
    vis = np.ones((1, L), dtype=bool)
    for lo in range(0, K, _HIST_ROWS):
        hi = min(K, lo + _HIST_ROWS)
        d = law._mismatches(law.strings[lo:hi], np.broadcast_to(vis, (hi - lo, L))).astype(np.int64)
        idx = (np.arange(hi - lo)[:, None] * (L + 1) + d).ravel()
        hist[lo:hi] = np.bincount(idx, weights=np.broadcast_to(counts, d.shape).ravel(),
                                  minlength=(hi - lo) * (L + 1)).reshape(hi - lo, L + 1)
    hist[:, 0] -= 1.0  # the row itself
    return hist, counts


def loo_log_likelihood(delta, hist, counts, V: int) -> np.ndarray:
    r"""Leave-one-out log-likelihood of :math:`\delta` from the distance histograms (vectorised over ``delta``).

    .. math:: \ell(\delta) = \sum_i c_i \Big[L\log(1-\delta) + \log\sum_d \mathrm{hist}_{id}\,r^d\Big] - K\log(K-1),
              \qquad r = \frac{\delta}{(V-1)(1-\delta)}.

    Parameters
    ----------
    delta : array_like
        Smoothing values in :math:`(0, 1)`; element-wise, a NaN entry gives NaN, as numpy does.
    hist, counts : ndarray
        From :func:`distance_histograms`.
    V : int
        Vocabulary size.

    Returns
    -------
    ndarray
        :math:`\ell(\delta)`, the shape of ``delta``.
    """
    from scipy.special import logsumexp

    delta = as_float_array(delta, "delta")
    hist, counts = as_float_array(hist, "hist", ndim=2), as_float_array(counts, "counts", ndim=1)
    as_int_scalar(V, "V")  # a named error for an array or an object; V itself is used as given
    L = hist.shape[1] - 1
    K = float(counts.sum())
    d = np.arange(L + 1)
    with np.errstate(divide="ignore"):
        loghist = np.log(hist)
    out = np.empty(delta.shape)
    for idx, dl in np.ndenumerate(delta):
        logr = math.log(dl) - math.log(V - 1) - math.log1p(-dl)
        per = L * math.log1p(-dl) + logsumexp(loghist + d * logr, axis=1)
        out[idx] = float(counts @ per) - K * math.log(K - 1.0)
    return out


def fit_delta(strings, V: int, *, grid: int = DELTA_GRID) -> DeltaFit:
    r"""The smoothing :math:`\delta` of maximal leave-one-out likelihood: a grid, then golden section.

    Parameters
    ----------
    strings : array_like, shape (K, L)
        The sample, :math:`K \ge 2` rows.
    V : int
        Vocabulary size.
    grid : int
        Grid points, logit-spaced on :math:`[\mathrm{DELTA\_MIN}, (V-1)/V]`.

    Returns
    -------
    DeltaFit
    """
    V = check_vocabulary(V)
    x = check_tokens(strings, V, "strings")
    if x.shape[0] < 2:
        raise ValueError(f"strings must have at least 2 rows to choose delta by leave-one-out; got {x.shape[0]}")
    grid = check_count(grid, "grid")
    hist, counts = distance_histograms(x, V)
    hi = (V - 1) / V
    g = 1.0 / (1.0 + np.exp(-np.linspace(math.log(DELTA_MIN / (1 - DELTA_MIN)), math.log(hi / (1 - hi)), grid)))
    g[-1] = hi
    vals = loo_log_likelihood(g, hist, counts, V)
    j = int(np.argmax(vals))
    if j == 0 or j == g.size - 1:
        return DeltaFit(float(g[j]), float(vals[j]), g, vals, 0, False, 1, _STATUS[1])
    # golden section on logit(delta) inside the bracket of the best grid point's neighbours
    f = lambda t: -float(loo_log_likelihood(1.0 / (1.0 + math.exp(-t)), hist, counts, V))  # noqa: E731
    a, b = math.log(g[j - 1] / (1 - g[j - 1])), math.log(g[j + 1] / (1 - g[j + 1]))
    invphi = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = b - invphi * (b - a), a + invphi * (b - a)
    fc, fd = f(c), f(d)
    nit = 0
    while b - a > DELTA_XTOL:
        nit += 1
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - invphi * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + invphi * (b - a)
            fd = f(d)
    t = (a + b) / 2.0
    delta = 1.0 / (1.0 + math.exp(-t))
    return DeltaFit(delta, -f(t), g, vals, nit, True, 0, _STATUS[0])


class SmoothedLaw(MaskedModel):
    r"""The Aitchison--Aitken smoothed law of a sample (module docstring), with exact per-sample rates.

    Parameters
    ----------
    strings : array_like, shape (K, L)
        The training sample (equal weights; repeated rows count as often as they occur).
    V : int
        Vocabulary size.
    delta : float, optional
        The smoothing; default :func:`fit_delta` (leave-one-out).

    Attributes
    ----------
    delta : float
        The smoothing used.
    fit : DeltaFit or None
        The leave-one-out fit when ``delta`` was not given.
    support : FiniteLaw
        The empirical law of the sample (its distinct strings and weights).
    V, L : int
    """

    has_conditional_entropy = False

    def __init__(self, strings, V: int, delta: float | None = None):
        V = check_vocabulary(V)
        self.support = FiniteLaw(strings, V)
        self.V, self.L = V, self.support.L
        if delta is None:
            self.fit = fit_delta(strings, V)
            delta = self.fit.delta
        else:
            self.fit = None
            delta = as_float_scalar(delta, "delta")
            if not (DELTA_MIN <= delta <= (V - 1) / V):
                raise ValueError(f"delta must lie in [{DELTA_MIN}, (V-1)/V = {(V - 1) / V:.6g}]; got {delta!r}")
        self.delta = delta
        self._logr = math.log(delta) - math.log(V - 1) - math.log1p(-delta)
        s = self.support.strings
        onehot = np.zeros((self.support.K, self.L, V))
        onehot[np.arange(self.support.K)[:, None], np.arange(self.L), s] = 1.0
        self._onehot = onehot.reshape(self.support.K, self.L * V)
        self._entropy = None

    # --- the law ------------------------------------------------------------------------

    def _kernel_mix(self, Q):
        """Token law from component token weights ``Q`` (..., V): (1 - delta) Q_v + delta/(V-1) (sum Q - Q_v)."""
        d, V = self.delta, self.V
        return (1.0 - d) * Q + d / (V - 1) * (Q.sum(axis=-1, keepdims=True) - Q)

    @property
    def marginal_entropies(self) -> np.ndarray:
        r""":math:`H(X^l)` under :math:`\pi_\delta`, shape (L,)."""
        Q = (self.support.weights @ self._onehot).reshape(self.L, self.V)
        return entropy_nats(self._kernel_mix(Q))

    def log_prob(self, x) -> np.ndarray:
        r""":math:`\log\pi_\delta(x)` of full strings.

        Parameters
        ----------
        x : array_like, shape (n, L)
            Strings.

        Returns
        -------
        ndarray, shape (n,)
        """
        from scipy.special import logsumexp

        x = check_tokens(x, self.V, "x")
        d = self.support._mismatches(x, np.ones(x.shape, dtype=bool)).astype(np.float64)
        return self.L * math.log1p(-self.delta) + logsumexp(np.log(self.support.weights) + d * self._logr, axis=1)

    def entropy_estimate(self, n_samples: int = ENTROPY_SAMPLES, *, rng=None) -> Estimate:
        r""":math:`H(\pi_\delta) = -E\log\pi_\delta(X)` by Monte Carlo, with its standard error.

        Parameters
        ----------
        n_samples : int
            Draws.
        rng : numpy.random.Generator, int or None
            Randomness (keyword-only).

        Returns
        -------
        Estimate
        """
        n = check_count(n_samples, "n_samples")
        gen = as_generator(rng)
        vals = []
        for lo in range(0, n, 1024):
            vals.append(-self.log_prob(self.sample_strings(min(1024, n - lo), rng=gen)))
        v = np.concatenate(vals)
        se = float(v.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
        return Estimate(float(v.mean()), se, "monte-carlo", n_samples=n,
                        info={"seed": rng if isinstance(rng, int) else None})

    @property
    def entropy(self) -> Estimate:
        r""":math:`H(\pi_\delta)`: :meth:`entropy_estimate` with ``ENTROPY_SAMPLES`` draws and seed ``ENTROPY_SEED``."""
        if self._entropy is None:
            self._entropy = self.entropy_estimate(ENTROPY_SAMPLES, rng=ENTROPY_SEED)
        return self._entropy

    def sample_strings(self, n: int, *, rng=None) -> np.ndarray:
        """Draw ``n`` strings of :math:`\\pi_\\delta`: a training string, then each token replaced with probability delta.

        Parameters
        ----------
        n : int
            Number of strings.
        rng : numpy.random.Generator, int or None
            Randomness (keyword-only).

        Returns
        -------
        ndarray of int64, shape (n, L)
        """
        n = check_count(n, "n")
        gen = as_generator(rng)
        base = self.support.sample_strings(n, rng=gen)
        flip = gen.random(base.shape) < self.delta
        shift = gen.integers(1, self.V, size=base.shape)
        return np.where(flip, (base + shift) % self.V, base)

    # --- exact per-sample values -----------------------------------------------------------

    def sample_values(self, x, mask):
        r"""Exact :math:`H(X^l \mid z^{\sim l})` per position (``H(X | z)`` is ``None``: no closed form).

        Parameters
        ----------
        x : array_like, shape (n, L)
            Strings (any, not only training strings).
        mask : array_like of bool, shape (n, L)
            True where masked.

        Returns
        -------
        None
        per_position : ndarray, shape (n, L)
        """
        x, mask = self.support._check_batch(x, mask)
        vis = ~mask
        n, L, V = x.shape[0], self.L, self.V
        m = self.support._mismatches(x, vis).astype(np.float64)
        logw = np.log(self.support.weights) + (m - m.min(axis=1, keepdims=True)) * self._logr
        A = np.exp(logw - logw.max(axis=1, keepdims=True))
        Q = (A @ self._onehot).reshape(n, L, V)
        # leaving a visible token out divides the weight of the components that mismatch there by r
        other = vis[..., None] & (np.arange(V) != x[..., None])
        Q = np.where(other, Q * math.exp(-self._logr), Q)
        return None, entropy_nats(self._kernel_mix(Q))

    def finite_law(self) -> FiniteLaw:
        """The same law as its :math:`V^L` strings with their probabilities (small :math:`V^L` only).

        Returns
        -------
        FiniteLaw
        """
        from noisealloc.theory.masked.models import all_strings

        s = all_strings(self.V, self.L)
        w = np.exp(self.log_prob(s))
        return FiniteLaw(s, self.V, weights=w / w.sum())
