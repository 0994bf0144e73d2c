r"""Information along the masked forward process: the area theorem, Monte Carlo with exact per-sample values, the budget.

For a law :math:`\pi` of strings :math:`X = (X^1, \dots, X^L)` and its erasure observation :math:`Z_\lambda`
(docs/THEORY.md section 7.2):

.. math::
    H(\lambda) = H(X \mid Z_\lambda), \qquad
    S(\lambda) = \sum_{l=1}^{L} H(X^l \mid Z_\lambda^{\sim l}), \qquad
    h(\lambda) = -\frac{dH}{d\lambda} = \alpha\varepsilon\,S(\lambda), \qquad
    L^*(\lambda) = \varepsilon\,S(\lambda) = h/\alpha,

where :math:`Z^{\sim l}` is the observation of every token *except* :math:`l` (the area theorem:
:math:`\partial H/\partial\varepsilon_l = H(X^l \mid Z^{\sim l})`), :math:`L^*` is the Bayes-optimal
masked cross-entropy summed over the masked tokens (section 7.3) and :math:`\int h\,d\lambda = H(\pi)`
(the budget).  All quantities are in nats.

Monte Carlo with exact per-sample values (section 7.4).  Draw :math:`n` pairs (string
:math:`x_i \sim \pi`, uniforms :math:`u_i \in [0,1)^L`); at level :math:`\lambda_j` token :math:`l` is
masked iff :math:`u_i^l < \varepsilon(\lambda_j)` (common random numbers: the same draws at every level,
so masks are nested and differences between levels are accurate).  Each pair contributes the exact
values :math:`H(X \mid z)` (entropy of the posterior) and :math:`H(X^l \mid z^{\sim l})` computed by the
model (:meth:`MaskedModel.sample_values`); the estimates are sample means with standard errors
:math:`\mathrm{sd}/\sqrt n` per level (floored at ``MASKED_ROUNDING_RTOL`` of the estimate, the rounding of
values that are exact and equal for every draw).  Integrals over :math:`\lambda` take their standard error from the
per-sample integrals, never from summed per-level errors (the levels share their draws).

The budget check (:func:`masked_budget_check`, :data:`MASKED_BUDGET_RULE`) integrates :math:`h` on the
grid and bounds what lies outside the interval :math:`[a, b]` a priori: since conditioning reduces
entropy, :math:`S(\lambda) \le \sum_l H(X^l)`, so

.. math:: \int_{-\infty}^{a} h + \int_b^\infty h \le \Big(\sum_l H(X^l)\Big)
          \big(\log(1 + e^{a}) + \log(1 + e^{-b})\big),

using :math:`\int_{-\infty}^a \alpha\varepsilon \le \int_{-\infty}^a \alpha = \log(1 + e^a)` and the mirror
bound on the right.

A second route needs neither quadrature nor tails (:meth:`MaskedModel.budget_by_strata`): given
:math:`C = c` masked tokens :math:`S` does not depend on :math:`\lambda`, and the binomial weight of the
stratum integrates to :math:`\int \alpha\varepsilon\binom{L}{c}\varepsilon^c\alpha^{L-c}d\lambda = 1/(L+1)`, so
:math:`H(\pi) = \frac{1}{L+1}\sum_{c=0}^{L} E[S \mid C = c]` exactly.

References
----------
docs/THEORY.md section 7.2 (area theorem), 7.3 (loss identity) and 7.4 (exact rates for finite laws).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.errors import as_float_array, as_float_scalar, as_generator, check_count
from noisealloc.theory.estimates import Estimate
from noisealloc.theory.masked.process import keep_probability, log_keep_probability, log_mask_rate, mask_rate
from noisealloc.theory.tolerances import BUDGET_ATOL_QUAD, MASKED_ROUNDING_RTOL, MC_NSIGMA

__all__ = [
    "MASKED_BUDGET_RULE",
    "DEFAULT_N_SAMPLES",
    "MaskedSamples",
    "MaskedInformation",
    "MaskedBudgetCheck",
    "MaskedModel",
    "entropy_nats",
    "check_levels",
    "masked_budget_check",
    "tail_bound",
]

#: Default Monte-Carlo sample count per level (strings and masks; the same draws at every level).
DEFAULT_N_SAMPLES = 512
#: Strings per block of per-sample evaluations (bounds the (block, K) work arrays).
BLOCK_ROWS = 256

#: The pass rule of :func:`masked_budget_check`.
MASKED_BUDGET_RULE = ("|int_a^b h dlam - H(pi)| <= BUDGET_ATOL_QUAD + abs_error + tail_bound "
                      "+ MC_NSIGMA * sqrt(stderr^2 + entropy_stderr^2)")


def entropy_nats(p, axis=-1):
    r"""Shannon entropy :math:`-\sum p \log p` (nats) of unnormalised non-negative weights along ``axis``.

    Parameters
    ----------
    p : array_like
        Non-negative weights; normalised along ``axis`` first (a zero row gives 0; a row holding a NaN
        gives NaN, as numpy does).
    axis : int
        Axis of the distribution.

    Returns
    -------
    ndarray of float64
        The entropies, ``p`` without ``axis``.

    Examples
    --------
    >>> round(float(entropy_nats([1.0, 1.0, 2.0])), 12) == round(1.5 * np.log(2.0), 12)
    True
    """
    from scipy.special import entr

    p = as_float_array(p, "p")
    tot = p.sum(axis=axis, keepdims=True)
    q = p / np.where(tot > 0, tot, 1.0)
    return np.maximum(entr(q).sum(axis=axis), 0.0)


def check_levels(lam) -> np.ndarray:
    r"""Log-odds levels as a one-dimensional finite float64 array (``ValueError`` otherwise).

    Parameters
    ----------
    lam : array_like
        A scalar or a one-dimensional array of finite levels (any finite value, e.g. :math:`\pm 10^4`).

    Returns
    -------
    ndarray of float64, shape (m,)
    """
    arr = np.atleast_1d(as_float_array(lam, "lam"))
    if arr.ndim != 1 or arr.size < 1:
        raise ValueError(f"lam must be a scalar or a non-empty one-dimensional array; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("lam must be finite; got a NaN or infinite level")
    return arr


@dataclass(frozen=True)
class MaskedSamples:
    r"""Per-sample exact values at every level, from one set of draws (common random numbers).

    Attributes
    ----------
    lam : ndarray, shape (m,)
        Log-odds levels.
    conditional_entropy : ndarray, shape (n, m), or None
        :math:`H(X \mid z_{ij})`, the entropy of the posterior over strings (``None`` when the model has
        no exact per-sample value, e.g. the smoothed law).
    erasure_entropy : ndarray, shape (n, m)
        :math:`\sum_l H(X^l \mid z_{ij}^{\sim l})`.
    seed : int or None
        Seed of the draws when one was given.
    """

    lam: np.ndarray
    conditional_entropy: np.ndarray | None
    erasure_entropy: np.ndarray
    seed: int | None = None

    @property
    def n_samples(self) -> int:
        """Number of draws :math:`n`."""
        return int(self.erasure_entropy.shape[0])

    @property
    def entropy_rate(self) -> np.ndarray:
        r"""Per-sample :math:`\alpha\varepsilon\sum_l H(X^l \mid z^{\sim l})`, shape (n, m)."""
        return (keep_probability(self.lam) * mask_rate(self.lam)) * self.erasure_entropy

    @property
    def loss(self) -> np.ndarray:
        r"""Per-sample Bayes masked cross-entropy :math:`\varepsilon\sum_l H(X^l \mid z^{\sim l})`, shape (n, m)."""
        return mask_rate(self.lam) * self.erasure_entropy


def _mc(values: np.ndarray, seed) -> Estimate:
    """Sample mean and standard error, floored at ``MASKED_ROUNDING_RTOL`` of the mean (rounding of exact values)."""
    n = values.shape[0]
    mean = values.mean(axis=0)
    se = values.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.zeros(values.shape[1])
    se = np.hypot(se, MASKED_ROUNDING_RTOL * np.abs(mean))
    return Estimate(mean, se, "monte-carlo", n_samples=n, info={"seed": seed})


@dataclass(frozen=True)
class MaskedInformation:
    r"""The information quantities of a law of strings under masking, at a set of levels (docs/THEORY.md section 7).

    Attributes
    ----------
    lam : ndarray, shape (m,)
        Log-odds levels.
    conditional_entropy : Estimate or None
        :math:`H(\lambda) = H(X \mid Z_\lambda)` (nats).
    erasure_entropy : Estimate
        :math:`S(\lambda) = \sum_l H(X^l \mid Z_\lambda^{\sim l})` (nats).
    entropy_rate : Estimate
        :math:`h(\lambda) = \alpha\varepsilon S(\lambda)`, nats per unit log-odds.
    loss : Estimate
        :math:`L^*(\lambda) = \varepsilon S(\lambda) = h/\alpha`, the Bayes masked cross-entropy summed over
        the masked tokens (nats per string).
    samples : MaskedSamples or None
        The per-sample values behind Monte-Carlo estimates (``None`` for closed forms).
    """

    lam: np.ndarray
    conditional_entropy: Estimate | None
    erasure_entropy: Estimate
    entropy_rate: Estimate
    loss: Estimate
    samples: MaskedSamples | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_samples(cls, samples: MaskedSamples) -> "MaskedInformation":
        """Sample means and standard errors of a :class:`MaskedSamples`.

        Parameters
        ----------
        samples : MaskedSamples
            Per-sample values.

        Returns
        -------
        MaskedInformation
        """
        H = None if samples.conditional_entropy is None else _mc(samples.conditional_entropy, samples.seed)
        return cls(samples.lam, H, _mc(samples.erasure_entropy, samples.seed), _mc(samples.entropy_rate, samples.seed),
                   _mc(samples.loss, samples.seed), samples)

    @classmethod
    def closed_form(cls, lam, erasure_entropy, conditional_entropy=None) -> "MaskedInformation":
        """Exact values (standard error 0, method ``closed-form``).

        Parameters
        ----------
        lam : ndarray, shape (m,)
            Levels.
        erasure_entropy : ndarray, shape (m,)
            Exact :math:`S(\\lambda)`.
        conditional_entropy : ndarray, shape (m,), optional
            Exact :math:`H(\\lambda)`.

        Returns
        -------
        MaskedInformation
        """
        lam = as_float_array(lam, "lam")
        S = as_float_array(erasure_entropy, "erasure_entropy")
        a, e = keep_probability(lam), mask_rate(lam)

        def est(v):
            return Estimate(v, 0.0, "closed-form")

        H = None if conditional_entropy is None else est(as_float_array(conditional_entropy, "conditional_entropy"))
        return cls(lam, H, est(S), est(a * e * S), est(e * S))


@dataclass(frozen=True)
class MaskedBudgetCheck:
    r"""The budget :math:`\int h\,d\lambda = H(\pi)` checked on a grid, with its verdict (:data:`MASKED_BUDGET_RULE`).

    Attributes
    ----------
    value : float
        :math:`\int_a^b h\,d\lambda` on the grid (nats).
    stderr : float
        Its Monte-Carlo standard error, from per-sample integrals.
    entropy : float
        :math:`H(\pi)`.
    entropy_stderr : float
        Standard error of ``entropy`` when it is itself estimated (smoothed law), else 0.
    abs_error : float
        Discretisation error estimate, :math:`|\text{trapezoid} - \text{Simpson}|` of the mean rate.
    tail_bound : float
        A priori bound on :math:`\int_{-\infty}^a h + \int_b^\infty h` (:func:`tail_bound`).
    tolerance : float
        ``BUDGET_ATOL_QUAD + abs_error + tail_bound + MC_NSIGMA * sqrt(stderr^2 + entropy_stderr^2)``.
    holds : bool
        ``|value - entropy| <= tolerance``.
    z : float or None
        ``(value - entropy) / sqrt(stderr^2 + entropy_stderr^2)`` (``None`` when that is 0).
    interval : tuple of float
        :math:`(a, b)`.
    n_samples : int or None
        Monte-Carlo draws.
    rule : str
        :data:`MASKED_BUDGET_RULE`.
    message : str
        One line: the comparison and the verdict.
    """

    value: float
    stderr: float
    entropy: float
    entropy_stderr: float
    abs_error: float
    tail_bound: float
    tolerance: float
    holds: bool
    z: float | None
    interval: tuple
    n_samples: int | None
    rule: str = MASKED_BUDGET_RULE
    message: str = ""


def tail_bound(marginal_entropy_sum: float, a: float, b: float) -> float:
    r"""Bound on the budget outside :math:`[a, b]`: :math:`(\sum_l H(X^l))(\log(1 + e^a) + \log(1 + e^{-b}))`.

    Parameters
    ----------
    marginal_entropy_sum : float
        :math:`\sum_l H(X^l)` (nats), an upper bound of :math:`S(\lambda)` at every level.
    a, b : float
        The interval.

    Returns
    -------
    float
    """
    marginal_entropy_sum = as_float_scalar(marginal_entropy_sum, "marginal_entropy_sum")
    a, b = as_float_scalar(a, "a"), as_float_scalar(b, "b")
    return marginal_entropy_sum * float(np.logaddexp(0.0, a) + np.logaddexp(0.0, -b))


def _grid_rules(lam: np.ndarray):
    from noisealloc.theory.information.rates import grid_quadrature_weights

    return grid_quadrature_weights(lam)


def masked_budget_check(samples: MaskedSamples, entropy: float, marginal_entropy_sum: float, *,
                        entropy_stderr: float = 0.0) -> MaskedBudgetCheck:
    r"""Check :math:`\int h\,d\lambda = H(\pi)` from per-sample rates on a grid (:data:`MASKED_BUDGET_RULE`).

    The integral is Simpson's rule on the grid applied to every draw's rate
    (:func:`~noisealloc.theory.information.rates.grid_quadrature_weights`), so its standard error is the
    spread of the per-draw integrals over :math:`\sqrt n`; the discretisation error estimate is the
    difference from the trapezoid rule; what lies outside the grid is bounded by :func:`tail_bound`.

    Parameters
    ----------
    samples : MaskedSamples
        Per-sample values on a strictly increasing grid of at least 3 levels.
    entropy : float
        :math:`H(\pi)` (nats).
    marginal_entropy_sum : float
        :math:`\sum_l H(X^l)`, for the tail bound.
    entropy_stderr : float
        Standard error of ``entropy`` when it is estimated (default 0).

    Returns
    -------
    MaskedBudgetCheck
    """
    entropy, entropy_stderr = as_float_scalar(entropy, "entropy"), as_float_scalar(entropy_stderr, "entropy_stderr")
    marginal_entropy_sum = as_float_scalar(marginal_entropy_sum, "marginal_entropy_sum")
    lam = np.asarray(samples.lam, dtype=np.float64)
    if lam.size < 3:
        raise ValueError(f"lam must have at least 3 levels for the budget check; got {lam.size}")
    trap, simp = _grid_rules(lam)
    per = samples.entropy_rate @ simp
    n = per.size
    value = float(per.mean())
    se = float(per.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
    mean_h = samples.entropy_rate.mean(axis=0)
    abs_error = float(abs(mean_h @ (simp - trap)))
    tb = tail_bound(marginal_entropy_sum, float(lam[0]), float(lam[-1]))
    sd = float(np.hypot(se, entropy_stderr))
    tol = BUDGET_ATOL_QUAD + abs_error + tb + MC_NSIGMA * sd
    diff = value - float(entropy)
    holds = bool(abs(diff) <= tol)
    z = diff / sd if sd > 0 else None
    msg = (f"int h dlam on [{lam[0]:g}, {lam[-1]:g}] = {value:.6g} +- {se:.2g} vs H(pi) = {float(entropy):.6g}: "
           f"|diff| = {abs(diff):.3g} {'<=' if holds else '>'} tolerance {tol:.3g} "
           f"(quadrature {abs_error:.2g}, tails {tb:.2g})")
    return MaskedBudgetCheck(value, se, float(entropy), float(entropy_stderr), abs_error, tb, tol, holds, z,
                             (float(lam[0]), float(lam[-1])), n, MASKED_BUDGET_RULE, msg)


class MaskedModel(abc.ABC):
    r"""What a law of token strings provides to the masked-diffusion toolkit, and the shared Monte-Carlo route.

    Subclasses set ``V`` and ``L`` and implement :meth:`sample_strings`, :meth:`sample_values`,
    :attr:`entropy` and :attr:`marginal_entropies`; :meth:`information_samples`, :meth:`information` and
    :meth:`budget_check` are shared.

    Attributes
    ----------
    V : int
        Vocabulary size (tokens ``0 .. V-1``; the mask symbol is ``V``).
    L : int
        String length.
    """

    V: int
    L: int
    #: ``False`` when :meth:`sample_values` cannot give :math:`H(X \mid z)` exactly.
    has_conditional_entropy: bool = True

    @abc.abstractmethod
    def sample_strings(self, n: int, *, rng=None) -> np.ndarray:
        """``n`` strings drawn from the law, shape ``(n, L)`` int64."""

    @abc.abstractmethod
    def sample_values(self, x, mask) -> tuple[np.ndarray | None, np.ndarray]:
        r"""Exact per-sample values: ``(H(X | z) of shape (n,) or None, H(X^l | z^{~l}) of shape (n, L))``."""

    @property
    @abc.abstractmethod
    def entropy(self) -> float:
        r""":math:`H(\pi)` in nats."""

    @property
    @abc.abstractmethod
    def marginal_entropies(self) -> np.ndarray:
        r""":math:`H(X^l)` per position, shape (L,)."""

    def information_samples(self, lam, *, n_samples: int = DEFAULT_N_SAMPLES, rng=None) -> MaskedSamples:
        r"""Per-sample values at every level from ``n_samples`` draws shared by the levels (the rare-event-safe estimator).

        The number of masked tokens :math:`C \sim \mathrm{Bin}(L, \varepsilon)` is split into its two extreme
        strata, whose values are known exactly, and the rest:

        .. math:: E f = \varepsilon^L f_{all} + \alpha^L\,E f_{none}(X) + (1 - \varepsilon^L - \alpha^L)\,
                  E[f \mid 1 \le C \le L - 1],

        with :math:`f_{all} = H(\pi)` for :math:`H` and :math:`\sum_l H(X^l)` for :math:`S` (nothing visible),
        :math:`f_{none} = 0` for :math:`H` and the draw's own :math:`S` with nothing masked.  Each draw
        :math:`i` is a string :math:`x_i \sim \pi`, a uniformly random order of the positions and one uniform
        :math:`v_i`; at level :math:`\lambda_j` the first :math:`c_{ij}` positions of the order are masked, with
        :math:`c_{ij}` the inverse CDF at :math:`v_i` of :math:`\mathrm{Bin}(L, \varepsilon_j)` truncated to
        :math:`[1, L - 1]`.  This is the Bernoulli masking of the process, in distribution, and the masks are
        nested across levels (common random numbers).  Each draw's value is the combination above, so its
        sample variance is an honest standard error at every level: plain Bernoulli draws would, at
        :math:`\lambda = -8` and :math:`L = 12`, leave every token of most samples masked, report
        :math:`H(\pi)` with a standard error of rounding size, and miss the rare visible token that carries
        the whole difference.

        Parameters
        ----------
        lam : array_like, shape (m,)
            Log-odds levels (any finite values).
        n_samples : int
            Number of draws.
        rng : numpy.random.Generator, int or None
            Randomness (keyword-only); an int seed is recorded.

        Returns
        -------
        MaskedSamples
        """
        from scipy.special import gammaln, logsumexp

        lam = check_levels(lam)
        n = check_count(n_samples, "n_samples")
        seed = int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else None
        gen = as_generator(rng)
        L = self.L
        x = self.sample_strings(n, rng=gen)
        rank = np.argsort(gen.random((n, L)), axis=1).argsort(axis=1).astype(np.float64)  # position -> its turn
        v = gen.random(n)
        order = np.argsort(lam, kind="stable")  # increasing lam: fewer masked tokens, growing visible sets
        ls = lam[order]
        le, la = log_mask_rate(ls), log_keep_probability(ls)
        p_all, p_none = np.exp(L * le), np.exp(L * la)
        p_mid = np.maximum(-np.expm1(np.logaddexp(L * le, L * la)), 0.0) if L > 1 else np.zeros(ls.size)
        counts = np.zeros((ls.size, n))
        if L > 1:
            c = np.arange(1, L)
            logpmf = gammaln(L + 1) - gammaln(c + 1) - gammaln(L - c + 1) + c * le[:, None] + (L - c) * la[:, None]
            cdf = np.cumsum(np.exp(logpmf - logsumexp(logpmf, axis=1, keepdims=True)), axis=1)
            for j in range(ls.size):
                counts[j] = 1 + np.minimum(np.searchsorted(cdf[j], v, side="left"), L - 2)
            counts = np.minimum.accumulate(counts, axis=0)  # nested masks (exact arithmetic gives this already)
        thresholds = np.concatenate([counts, np.zeros((1, n))])  # last: nothing masked
        H = np.empty((n, lam.size)) if self.has_conditional_entropy else None
        S = np.empty((n, lam.size))
        H_all = float(self._entropy_value()) if H is not None else 0.0
        S_all = float(np.sum(self.marginal_entropies))
        for lo in range(0, n, BLOCK_ROWS):
            hi = min(n, lo + BLOCK_ROWS)
            vals = list(self._level_sweep(x[lo:hi], rank[lo:hi], thresholds[:, lo:hi]))
            S_none = vals[-1][1].sum(axis=1)
            for k, j in enumerate(order):
                h_post, per_pos = vals[k]
                S[lo:hi, j] = p_all[k] * S_all + p_none[k] * S_none + p_mid[k] * per_pos.sum(axis=1)
                if H is not None:
                    H[lo:hi, j] = p_all[k] * H_all + p_mid[k] * h_post
        return MaskedSamples(lam, H, S, seed)

    def _entropy_value(self) -> float:
        ent = self.entropy
        return float(ent.value) if isinstance(ent, Estimate) else float(ent)

    def _level_sweep(self, x, u, thresholds):
        """``sample_values(x, u < t[:, None])`` for each row ``t`` of ``thresholds`` (non-increasing from row
        to row, so that the masks are nested); models may update incrementally."""
        for t in thresholds:
            yield self.sample_values(x, u < t[:, None])

    def information(self, lam, *, n_samples: int = DEFAULT_N_SAMPLES, rng=None) -> MaskedInformation:
        r"""Monte-Carlo estimates of :math:`H, S, h, L^*` at the levels, with standard errors.

        Parameters
        ----------
        lam : array_like, shape (m,)
            Log-odds levels.
        n_samples : int
            Draws (string, mask uniforms), the same at every level.
        rng : numpy.random.Generator, int or None
            Randomness (keyword-only).

        Returns
        -------
        MaskedInformation
        """
        return MaskedInformation.from_samples(self.information_samples(lam, n_samples=n_samples, rng=rng))

    def budget_by_strata(self, *, n_samples: int = DEFAULT_N_SAMPLES, rng=None) -> MaskedBudgetCheck:
        r"""The budget over the mask-count strata, no quadrature, no tails: :math:`H(\pi) = \tfrac{1}{L+1}\sum_c E[S \mid C = c]`.

        Given :math:`C = c` masked tokens (a uniformly random set), :math:`S` does not depend on
        :math:`\lambda`, and :math:`\int \alpha\varepsilon\binom{L}{c}\varepsilon^c\alpha^{L-c}\,d\lambda =
        \binom{L}{c} B(c + 1, L - c + 1) = 1/(L+1)`, so the area theorem integrates exactly.  Each draw
        (a string and a random order of its positions) visits every stratum once, revealing one token
        per step; its mean over the strata is one unbiased draw of :math:`H(\pi)`.

        Parameters
        ----------
        n_samples : int
            Draws.
        rng : numpy.random.Generator, int or None
            Randomness (keyword-only).

        Returns
        -------
        MaskedBudgetCheck
            ``abs_error`` and ``tail_bound`` are 0; ``interval`` is ``(-inf, inf)``.
        """
        n = check_count(n_samples, "n_samples")
        gen = as_generator(rng)
        L = self.L
        x = self.sample_strings(n, rng=gen)
        rank = np.argsort(gen.random((n, L)), axis=1).argsort(axis=1).astype(np.float64)
        thresholds = np.repeat(np.arange(L, -1, -1, dtype=np.float64)[:, None], n, axis=1)
        per = np.zeros(n)
        for lo in range(0, n, BLOCK_ROWS):
            hi = min(n, lo + BLOCK_ROWS)
            for _, per_pos in self._level_sweep(x[lo:hi], rank[lo:hi], thresholds[:, lo:hi]):
                per[lo:hi] += per_pos.sum(axis=1)
        per /= L + 1
        value = float(per.mean())
        se = float(per.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
        ent = self.entropy
        ent_se = float(ent.stderr) if isinstance(ent, Estimate) else 0.0
        ent = float(ent.value) if isinstance(ent, Estimate) else float(ent)
        sd = float(np.hypot(se, ent_se))
        tol = BUDGET_ATOL_QUAD + MC_NSIGMA * sd
        diff = value - ent
        holds = bool(abs(diff) <= tol)
        msg = (f"(1/(L+1)) sum_c E[S | c masked] = {value:.6g} +- {se:.2g} vs H(pi) = {ent:.6g}: "
               f"|diff| = {abs(diff):.3g} {'<=' if holds else '>'} tolerance {tol:.3g} (exact strata, no tails)")
        return MaskedBudgetCheck(value, se, ent, ent_se, 0.0, 0.0, tol, holds, diff / sd if sd > 0 else None,
                                 (-np.inf, np.inf), n, "|strata mean - H(pi)| <= BUDGET_ATOL_QUAD + MC_NSIGMA * sd",
                                 msg)

    def budget_check(self, lam=None, *, n_samples: int = DEFAULT_N_SAMPLES, rng=None) -> MaskedBudgetCheck:
        r"""Check :math:`\int h\,d\lambda = H(\pi)` on a grid (default 129 levels on :math:`[-30, 30]`).

        Parameters
        ----------
        lam : array_like, optional
            Strictly increasing grid of at least 3 levels.
        n_samples : int
            Monte-Carlo draws.
        rng : numpy.random.Generator, int or None
            Randomness (keyword-only).

        Returns
        -------
        MaskedBudgetCheck
        """
        lam = np.linspace(-30.0, 30.0, 129) if lam is None else lam
        samples = self.information_samples(lam, n_samples=n_samples, rng=rng)
        ent = self.entropy
        ent_se = 0.0
        if isinstance(ent, Estimate):
            ent, ent_se = float(ent.value), float(ent.stderr)
        return masked_budget_check(samples, float(ent), float(np.sum(self.marginal_entropies)),
                                   entropy_stderr=ent_se)
