r"""Laws of token strings with closed forms under masking, as models and test oracles (docs/THEORY.md section 7.4).

:class:`ProductLaw`
    Independent tokens, :math:`X^l \sim p_l`.  Then :math:`H(X^l \mid Z^{\sim l}) = H(p_l)` whatever is
    observed, so :math:`S(\lambda) = \sum_l H(p_l)` is constant, :math:`H(\lambda) = \varepsilon\sum_l H(p_l)`,
    :math:`h = \alpha\varepsilon\sum_l H(p_l)` and :math:`H(\pi) = \sum_l H(p_l)`.

:class:`MarkovChain`
    A stationary chain with transition matrix :math:`P` (:math:`V` states, length :math:`L`, initial law
    the stationary :math:`\mu`), :math:`H(\pi) = H(\mu) + (L - 1) H_{rate}`, :math:`H_{rate} = -\sum_i \mu_i
    \sum_j P_{ij}\log P_{ij}`.  Per sample, forward--backward over the erased positions gives the posterior
    marginal of :math:`x^l` from the other visible tokens, :math:`\propto f_l(v)\,b_l(v)` (forward message
    not yet including position :math:`l`, backward message), and the posterior entropy by the chain rule
    :math:`H(X \mid z) = H(\gamma_1) + \sum_l [H(\xi_l) - H(\gamma_l)]` over the posterior marginals
    :math:`\gamma` and pair marginals :math:`\xi`.  In expectation the Markov property gives an exact
    closed form (:meth:`MarkovChain.exact_information`): :math:`H(X^l \mid Z^{\sim l})` depends only on
    the nearest visible tokens left and right, at distances :math:`a, b` with probabilities
    :math:`\alpha\varepsilon^{a-1}` (or :math:`\varepsilon^{l-1}` for none), so

    .. math:: S(\lambda) = \sum_l \sum_{a, b} p^{\leftarrow}_l(a)\,p^{\rightarrow}_l(b)\,
              H(X_0 \mid X_{-a}, X_{b}), \qquad
              H(\lambda) = \varepsilon \sum_l \sum_b p^{\rightarrow}_l(b)\, H(X_0 \mid X_{-1}, X_b)

    (the second by the chain rule over masked positions from left to right; for :math:`l = 1` there is
    no left neighbour), with :math:`H(X_0 \mid X_{-a}, X_b)` from the stationary joint
    :math:`\mu_i P^a_{iv} P^b_{vj}`.

Both models expose what :class:`~noisealloc.theory.masked.finite.FiniteLaw` does (per-sample values,
Monte-Carlo ``information``, ``entropy``, string sampling) plus ``exact_information(lam)`` and, for small
:math:`V^L`, ``finite_law()``: the same law as :math:`V^L` weighted strings.

References
----------
docs/THEORY.md section 7.4 (closed forms used in tests).
"""

from __future__ import annotations

import numpy as np

from noisealloc.theory.errors import as_generator, check_count
from noisealloc.theory.masked.information import MaskedInformation, MaskedModel, check_levels, entropy_nats
from noisealloc.theory.masked.process import check_tokens, keep_probability, mask_rate

__all__ = ["ProductLaw", "MarkovChain", "all_strings", "MAX_ENUMERATED_STRINGS"]

#: Largest :math:`V^L` that ``finite_law()`` enumerates.
MAX_ENUMERATED_STRINGS = 2 ** 20
#: Allowed deviation of a probability vector's sum from 1.
PROBABILITY_SUM_ATOL = 1e-9


def all_strings(V: int, L: int) -> np.ndarray:
    """Every string of length ``L`` over ``0 .. V-1``, in lexicographic order.

    Parameters
    ----------
    V, L : int
        Vocabulary size and length (``V ** L <= MAX_ENUMERATED_STRINGS``).

    Returns
    -------
    ndarray of int64, shape (V**L, L)

    Examples
    --------
    >>> all_strings(2, 2).tolist()
    [[0, 0], [0, 1], [1, 0], [1, 1]]
    """
    if V ** L > MAX_ENUMERATED_STRINGS:
        raise ValueError(f"V**L must be <= {MAX_ENUMERATED_STRINGS} to enumerate the strings; got {V}**{L}")
    return np.indices((V,) * L).reshape(L, -1).T.astype(np.int64)


def _check_stochastic(p, name: str, ndim: int) -> np.ndarray:
    if np.iscomplexobj(p):  # never cut to the real part
        raise ValueError(f"{name} must be real; got a complex array")
    try:
        arr = np.asarray(p, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric array; got ragged or non-numeric input") from None
    if arr.ndim != ndim or arr.shape[-1] < 2:
        raise ValueError(f"{name} must be a {ndim}-dimensional array with at least 2 token values; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must hold finite probabilities >= 0")
    s = arr.sum(axis=-1)
    if np.any(np.abs(s - 1.0) > PROBABILITY_SUM_ATOL):
        worst = float(s.ravel()[np.argmax(np.abs(s - 1).ravel())])
        raise ValueError(f"{name} rows must sum to 1; got a row summing to {worst!r}")
    return arr / s[..., None]


def _check_batch(x, mask, V: int, L: int):
    x = check_tokens(x, V, "x")
    m = np.asarray(mask)
    if m.dtype != bool:
        raise ValueError(f"mask must be a boolean array; got dtype {m.dtype}")
    if x.shape[1] != L or m.shape != x.shape:
        raise ValueError(f"x and mask must have shape (n, {L}); got {x.shape} and {m.shape}")
    return x, m


class ProductLaw(MaskedModel):
    r"""Independent tokens with per-position marginals :math:`p_l` (closed forms in the module docstring).

    Parameters
    ----------
    marginals : array_like, shape (L, V)
        Row :math:`l` is the law of token :math:`l`.

    Attributes
    ----------
    marginals : ndarray, shape (L, V)
    V, L : int

    Examples
    --------
    >>> law = ProductLaw([[0.5, 0.5], [0.5, 0.5]])
    >>> round(law.entropy / np.log(2), 12)
    2.0
    >>> info = law.exact_information([0.0])
    >>> round(float(info.entropy_rate.value[0] / np.log(2)), 12)   # alpha eps S = 1/4 * 2 bits
    0.5
    """

    def __init__(self, marginals):
        self.marginals = _check_stochastic(marginals, "marginals", 2)
        self.L, self.V = (int(v) for v in self.marginals.shape)
        self._H = entropy_nats(self.marginals)
        self._cum = np.cumsum(self.marginals, axis=1)

    @property
    def entropy(self) -> float:
        r""":math:`H(\pi) = \sum_l H(p_l)` (nats)."""
        return float(self._H.sum())

    @property
    def marginal_entropies(self) -> np.ndarray:
        r""":math:`H(p_l)`, shape (L,)."""
        return self._H.copy()

    def sample_strings(self, n: int, *, rng=None) -> np.ndarray:
        """Draw ``n`` strings.

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
        u = as_generator(rng).random((n, self.L, 1))
        return np.minimum((u >= self._cum[None]).sum(axis=-1), self.V - 1).astype(np.int64)

    def sample_values(self, x, mask):
        r"""Exact per-sample values: :math:`H(X \mid z) = \sum_{l\,\mathrm{masked}} H(p_l)`, :math:`H(X^l \mid z^{\sim l}) = H(p_l)`.

        Parameters
        ----------
        x : array_like, shape (n, L)
            Strings.
        mask : array_like of bool, shape (n, L)
            True where masked.

        Returns
        -------
        H : ndarray, shape (n,)
        per_position : ndarray, shape (n, L)
        """
        x, m = _check_batch(x, mask, self.V, self.L)
        return m @ self._H, np.broadcast_to(self._H, x.shape).copy()

    def exact_information(self, lam) -> MaskedInformation:
        r"""Closed forms :math:`S = \sum_l H(p_l)`, :math:`H(\lambda) = \varepsilon S`.

        Parameters
        ----------
        lam : array_like, shape (m,)
            Log-odds levels.

        Returns
        -------
        MaskedInformation
            Method ``closed-form``, standard errors 0.
        """
        lam = check_levels(lam)
        S = np.full(lam.shape, self.entropy)
        return MaskedInformation.closed_form(lam, S, mask_rate(lam) * S)

    def finite_law(self):
        """The same law as its :math:`V^L` strings with product weights (small :math:`V^L` only).

        Returns
        -------
        FiniteLaw
        """
        from noisealloc.theory.masked.finite import FiniteLaw

        s = all_strings(self.V, self.L)
        w = np.prod(self.marginals[np.arange(self.L), s], axis=1)
        return FiniteLaw(s, self.V, weights=w / w.sum())


class MarkovChain(MaskedModel):
    r"""A stationary Markov chain of length ``L`` on ``V`` states (closed forms in the module docstring).

    Parameters
    ----------
    P : array_like, shape (V, V)
        Transition matrix, rows summing to 1.
    L : int
        String length.

    Attributes
    ----------
    P : ndarray, shape (V, V)
    stationary : ndarray, shape (V,)
        The initial law :math:`\mu` with :math:`\mu P = \mu`.
    entropy_rate_per_token : float
        :math:`H_{rate} = -\sum_i \mu_i \sum_j P_{ij}\log P_{ij}` (nats).
    V, L : int

    Examples
    --------
    >>> chain = MarkovChain([[0.9, 0.1], [0.2, 0.8]], L=12)
    >>> chain.stationary.round(6).tolist()
    [0.666667, 0.333333]
    >>> info = chain.exact_information(np.array([-40.0, 40.0]))
    >>> [round(float(v), 6) for v in info.conditional_entropy.value] == [round(chain.entropy, 6), 0.0]
    True
    """

    def __init__(self, P, L: int):
        self.P = _check_stochastic(P, "P", 2)
        if self.P.shape[0] != self.P.shape[1]:
            raise ValueError(f"P must be square (V, V); got shape {self.P.shape}")
        self.L = check_count(L, "L")
        self.V = int(self.P.shape[0])
        V = self.V
        A = np.vstack([self.P.T - np.eye(V), np.ones((1, V))])
        mu = np.linalg.lstsq(A, np.r_[np.zeros(V), 1.0], rcond=None)[0]
        mu = np.maximum(mu, 0.0)
        self.stationary = mu / mu.sum()
        self.entropy_rate_per_token = float(self.stationary @ entropy_nats(self.P))
        self._logP = None

    @property
    def entropy(self) -> float:
        r""":math:`H(\pi) = H(\mu) + (L - 1) H_{rate}` (nats)."""
        return float(entropy_nats(self.stationary) + (self.L - 1) * self.entropy_rate_per_token)

    @property
    def marginal_entropies(self) -> np.ndarray:
        r""":math:`H(X^l) = H(\mu)` at every position, shape (L,)."""
        return np.full(self.L, float(entropy_nats(self.stationary)))

    def sample_strings(self, n: int, *, rng=None) -> np.ndarray:
        """Draw ``n`` strings of the stationary chain.

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
        u = gen.random((n, self.L))
        cumP = np.cumsum(self.P, axis=1)
        x = np.empty((n, self.L), dtype=np.int64)
        x[:, 0] = np.minimum(np.searchsorted(np.cumsum(self.stationary), u[:, 0], side="right"), self.V - 1)
        for l in range(1, self.L):
            x[:, l] = np.minimum((u[:, l, None] >= cumP[x[:, l - 1]]).sum(axis=1), self.V - 1)
        return x

    def sample_values(self, x, mask):
        r"""Exact per-sample values by forward--backward over the erased positions.

        Parameters
        ----------
        x : array_like, shape (n, L)
            Strings.
        mask : array_like of bool, shape (n, L)
            True where masked.

        Returns
        -------
        H : ndarray, shape (n,)
            :math:`H(X \mid z)` (nats).
        per_position : ndarray, shape (n, L)
            :math:`H(X^l \mid z^{\sim l})` (nats).
        """
        x, m = _check_batch(x, mask, self.V, self.L)
        n, L, V, P = x.shape[0], self.L, self.V, self.P
        e = np.where(m[..., None], 1.0, (np.arange(V) == x[..., None]).astype(np.float64))  # (n, L, V)
        f = np.empty((n, L, V))  # forward message before observing l, normalised
        f[:, 0] = self.stationary
        for l in range(L - 1):
            g = f[:, l] * e[:, l]
            g /= g.sum(axis=1, keepdims=True)
            nxt = g @ P
            f[:, l + 1] = nxt / nxt.sum(axis=1, keepdims=True)
        b = np.empty((n, L, V))  # backward message p(z_{>l} | x^l), normalised
        b[:, L - 1] = 1.0
        for l in range(L - 2, -1, -1):
            nxt = (e[:, l + 1] * b[:, l + 1]) @ P.T
            b[:, l] = nxt / nxt.sum(axis=1, keepdims=True)
        per = entropy_nats(f * b)
        fe = f * e
        gamma = fe * b
        H = entropy_nats(gamma[:, 0])
        for l in range(L - 1):
            xi = fe[:, l, :, None] * P[None] * (e[:, l + 1] * b[:, l + 1])[:, None, :]
            H = H + entropy_nats(xi.reshape(n, V * V)) - entropy_nats(gamma[:, l])
        return np.maximum(H, 0.0), per

    def _conditional_table(self) -> np.ndarray:
        """``T[a, b] = H(X_0 | X_{-a}, X_b)`` for a, b in 0 .. L-1 (0: no neighbour on that side)."""
        L, mu = self.L, self.stationary
        Pk = [np.eye(self.V)]
        for _ in range(L):
            Pk.append(Pk[-1] @ self.P)
        Hmu = float(entropy_nats(mu))
        T = np.empty((L, L))
        for a in range(L):
            for b in range(L):
                if a == 0 and b == 0:
                    T[a, b] = Hmu
                elif b == 0:
                    J = mu[:, None] * Pk[a]
                    T[a, b] = float(entropy_nats(J.ravel())) - Hmu
                elif a == 0:
                    J = mu[:, None] * Pk[b]
                    T[a, b] = float(entropy_nats(J.ravel())) - Hmu
                else:
                    J = mu[:, None, None] * Pk[a][:, :, None] * Pk[b][None, :, :]
                    T[a, b] = float(entropy_nats(J.ravel()) - entropy_nats(J.sum(axis=1).ravel()))
        return np.maximum(T, 0.0)

    def exact_information(self, lam) -> MaskedInformation:
        r"""Exact :math:`S(\lambda)`, :math:`H(\lambda)`, :math:`h` and :math:`L^*` (closed form of the module docstring).

        Parameters
        ----------
        lam : array_like, shape (m,)
            Log-odds levels.

        Returns
        -------
        MaskedInformation
            Method ``closed-form``, standard errors 0.
        """
        lam = check_levels(lam)
        L = self.L
        T = self._conditional_table()
        a_, e_ = keep_probability(lam), mask_rate(lam)
        k = np.arange(L)
        powe = e_[:, None] ** k[None, :]  # (m, L): eps^k
        S = np.zeros(lam.size)
        H = np.zeros(lam.size)
        for l in range(1, L + 1):
            # left: distance a = 1 .. l-1 with prob alpha eps^(a-1), none (index 0) with eps^(l-1)
            pl = np.zeros((lam.size, L))
            pl[:, 1:l] = a_[:, None] * powe[:, : l - 1]
            pl[:, 0] = powe[:, l - 1]
            pr = np.zeros((lam.size, L))
            pr[:, 1:L - l + 1] = a_[:, None] * powe[:, : L - l]
            pr[:, 0] = powe[:, L - l]
            S += np.einsum("ma,ab,mb->m", pl, T, pr)
            H += e_ * (pr @ T[1 if l > 1 else 0])
        return MaskedInformation.closed_form(lam, S, H)

    def finite_law(self):
        """The same law as its :math:`V^L` strings with their probabilities (small :math:`V^L` only).

        Returns
        -------
        FiniteLaw
        """
        from noisealloc.theory.masked.finite import FiniteLaw

        s = all_strings(self.V, self.L)
        w = self.stationary[s[:, 0]] * np.prod(self.P[s[:, :-1], s[:, 1:]], axis=1)
        return FiniteLaw(s, self.V, weights=w / w.sum())
