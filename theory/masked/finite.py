r"""A finite law over token strings and its exact per-sample posterior values under masking (docs/THEORY.md section 7.4).

The law puts weight :math:`w_k` on each of :math:`K` distinct strings :math:`s_k \in \{0..V-1\}^L`
(duplicates given as input are merged, their weights added).  Given an observation :math:`z` (visible
tokens, the rest masked) the posterior over strings is the prior restricted to the strings that agree
with every visible token,

.. math:: p(k \mid z) \propto w_k\,[m_k(z) = 0], \qquad
          m_k(z) = \#\{l \text{ visible}: s_k^l \ne z^l\},

and the posterior of token :math:`l` from all the *other* visible tokens (the area-theorem term
:math:`H(X^l \mid z^{\sim l})`) uses the strings that agree everywhere except possibly at :math:`l`:
:math:`\{m_k = 0\}` for a masked :math:`l`, and :math:`\{m_k = 0\} \cup \{m_k = 1 \text{ with the mismatch at } l\}`
for a visible one.  With the visible one-hot rows :math:`Z` of a batch and the one-hot strings :math:`O`,
the mismatch counts of every (sample, string) pair are one matrix product,
:math:`m = n_{vis} - Z O^\top` (for :math:`V = 2` with :math:`\pm1` codes, :math:`m = (n_{vis} - Z_\pm S_\pm^\top)/2`,
half the width), and the per-position token weights are two more rows of one product,

.. math:: G_0 = (w \odot [m = 0])\,O, \qquad G_1 = (w \odot [m = 1])\,O, \qquad
          q_l(v) = G_0(l, v) + [l \text{ visible}][v \ne z^l]\,G_1(l, v),

because a string with exactly one mismatch, found at a visible :math:`l`, differs from :math:`z` there and
only there.  So a batch costs about three GEMMs of shape (batch, L V) x (L V, K): BLAS speed.  The
counts are exact integers in float32 (entries 0/±1, sums below :math:`2^{24}`); with the uniform weights of
a data set the token weights :math:`G` are integer counts too, so float32 loses nothing, and general
weights use float64.

References
----------
docs/THEORY.md section 7.4 (exact rates for finite laws), 7.2 (area theorem).
"""

from __future__ import annotations

import numpy as np

from noisealloc.theory.errors import as_generator, as_int_scalar, check_count
from noisealloc.theory.masked.information import MaskedModel, entropy_nats
from noisealloc.theory.masked.process import check_tokens, check_vocabulary

__all__ = ["FiniteLaw", "check_weights", "merge_duplicate_strings"]

#: Largest total multiplicity for which float32 counts are exact (2**24).
_F32_EXACT = 2 ** 24
#: Class changes denser than this fraction of (samples x strings) are applied by a dense GEMM, sparser ones
#: by a sparse product (the crossover of multithreaded BLAS and single-threaded sparse on 2 cores).
DENSE_UPDATE_FRACTION = 0.05
#: The work arrays of a level sweep are compacted to the strings still within one mismatch of some sample
#: once those are fewer than this fraction of the columns (the rest can never count again).
COMPACT_FRACTION = 0.5
#: A class total that fell below this fraction of its running maximum is recomputed from scratch (float64
#: path): cancellation in the incremental sums then costs at most a factor 1/REANCHOR_RATIO in relative
#: rounding (measured: per-sample values within 1e-12 of the direct route on a 4,096-string Markov law).
REANCHOR_RATIO = 2.0 ** -4
#: Relative tolerance of the weights' sum (as for mixture weights elsewhere in the toolkit).
WEIGHT_SUM_ATOL = 1e-9


def check_weights(weights, K: int) -> np.ndarray:
    r"""Weights of ``K`` strings as a float64 probability vector (``None``: uniform).

    Parameters
    ----------
    weights : array_like, shape (K,), or None
        Finite, non-negative, summing to 1 within ``WEIGHT_SUM_ATOL``.
    K : int
        Number of strings.

    Returns
    -------
    ndarray of float64, shape (K,)
        Renormalised to remove the rounding of the sum.

    Raises
    ------
    ValueError
        One line naming ``weights``: wrong shape, NaN/inf, negative or a sum other than 1.
    """
    if isinstance(K, bool) or as_int_scalar(K, "K") != K:
        raise ValueError(f"K must be an integer; got {K!r}")
    if weights is None:
        return np.full(K, 1.0 / K)
    if np.iscomplexobj(weights):  # never cut to the real part
        raise ValueError("weights must be real; got a complex array")
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("weights must be a one-dimensional array of K numbers; got non-numeric or ragged input") from None
    if w.shape != (K,):
        raise ValueError(f"weights must have shape ({K},), one per string; got {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite; got NaN or inf")
    if np.any(w < 0):
        raise ValueError(f"weights must be >= 0; got {float(w.min())!r}")
    s = float(w.sum())
    if abs(s - 1.0) > WEIGHT_SUM_ATOL:
        raise ValueError(f"weights must sum to 1 (a probability distribution); got sum {s!r}")
    return w / s


def merge_duplicate_strings(strings: np.ndarray, weights: np.ndarray):
    """Distinct strings with the weights of their copies added (zero-weight strings dropped).

    Parameters
    ----------
    strings : ndarray, shape (K, L)
        Integer strings.
    weights : ndarray, shape (K,)
        Their weights.

    Returns
    -------
    strings : ndarray, shape (K', L)
        Distinct strings with positive weight, in lexicographic order.
    weights : ndarray, shape (K',)
        Summed weights.
    counts : ndarray of int64, shape (K',)
        How many input rows each distinct string stands for.
    """
    for name, value in (("strings", strings), ("weights", weights)):
        if np.iscomplexobj(value):
            raise ValueError(f"{name} must be real; got a complex array")
    keep = weights > 0
    strings, weights = strings[keep], weights[keep]
    uniq, inv, counts = np.unique(strings, axis=0, return_inverse=True, return_counts=True)
    merged = np.bincount(inv.ravel(), weights=weights, minlength=uniq.shape[0])
    return uniq, merged, counts.astype(np.int64)


def _binary_entropy(q0, q1):
    """Entropy (nats) of the two-point law proportional to ``(q0, q1)``, elementwise."""
    from scipy.special import entr

    tot = q0 + q1
    inv = 1.0 / np.where(tot > 0, tot, 1.0)
    return entr(q0 * inv) + entr(q1 * inv)


class FiniteLaw(MaskedModel):
    r"""A law on ``K`` token strings (a discrete Dirac mixture) with exact per-sample values under masking.

    Parameters
    ----------
    strings : array_like, shape (K, L)
        Integer tokens in :math:`\{0, \dots, V-1\}`.
    V : int
        Vocabulary size, at least 2 (the mask symbol is ``V``).
    weights : array_like, shape (K,), optional
        A probability vector; default uniform over the rows (copies of a string add up).

    Attributes
    ----------
    strings : ndarray of int64, shape (K', L)
        The distinct strings with positive weight.
    weights : ndarray of float64, shape (K',)
        Their probabilities.
    V, L, K : int
        Vocabulary size, string length, number of distinct strings.

    Examples
    --------
    Two strings that differ in their last token: one bit, all of it in the last position.

    >>> law = FiniteLaw([[0, 1, 1], [0, 1, 0]], V=2)
    >>> round(law.entropy, 6), law.marginal_entropies.round(6).tolist()
    (0.693147, [0.0, 0.0, 0.693147])
    >>> H, per = law.sample_values([[0, 1, 1]], [[False, True, True]])   # z = (0, *, *)
    >>> round(float(H[0]), 6), per[0].round(6).tolist()
    (0.693147, [0.0, 0.0, 0.693147])
    """

    def __init__(self, strings, V: int, weights=None):
        V = check_vocabulary(V)
        x = check_tokens(strings, V, "strings")
        w = check_weights(weights, x.shape[0])
        uniform_rows = weights is None
        self.strings, self.weights, counts = merge_duplicate_strings(x, w)
        self.V, self.L = V, int(x.shape[1])
        self.K = int(self.strings.shape[0])
        # float32 integer-count path: uniform weights over the rows (each distinct string weighs its count)
        self._counts = counts if (uniform_rows and counts.sum() < _F32_EXACT) else None
        self._cum = np.cumsum(self.weights)
        self._cum[-1] = 1.0
        s = self.strings
        if V == 2:
            self._codes = (2.0 * s - 1.0).astype(np.float32)               # (K, L), +-1
        else:
            self._codes = np.zeros((self.K, self.L * V), dtype=np.float32)   # one-hot, (K, L V)
            self._codes[np.arange(self.K)[:, None], np.arange(self.L) * V + s] = 1.0
        self._codes_T = np.ascontiguousarray(self._codes.T)
        # token weights (mass of string k) x [s_k^l = v] for v = 1 .. V-1 (v = 0 follows from the total),
        # shape (K, L (V-1)): integer counts in float32 on the uniform-rows path, probabilities in float64 otherwise
        dt = np.float32 if self._counts is not None else np.float64
        mass = self._counts.astype(dt) if self._counts is not None else self.weights
        ind = np.zeros((self.K, self.L, V - 1), dtype=dt)
        for v in range(1, V):
            ind[:, :, v - 1] = s == v
        self._ind = (ind * mass[:, None, None]).reshape(self.K, self.L * (V - 1))
        self._mass = mass.astype(np.float64)
        mlm = self._mass * np.log(self._mass)
        self._mass_log_mass = None if not np.any(mlm) else mlm  # all zero: distinct rows of equal weight

    # --- the law ------------------------------------------------------------------------

    @property
    def entropy(self) -> float:
        r""":math:`H(\pi) = -\sum_k w_k \log w_k` (nats)."""
        return float(entropy_nats(self.weights))

    @property
    def marginal_entropies(self) -> np.ndarray:
        r""":math:`H(X^l)` per position (nats), shape (L,)."""
        p = np.stack([self.weights @ (self.strings == v) for v in range(self.V)], axis=-1)
        return entropy_nats(p)

    def sample_strings(self, n: int, *, rng=None) -> np.ndarray:
        """Draw ``n`` strings from the law.

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
        idx = np.minimum(np.searchsorted(self._cum, gen.random(n), side="right"), self.K - 1)
        return self.strings[idx]

    # --- exact per-sample values -----------------------------------------------------------

    def mismatch_counts(self, x, mask) -> np.ndarray:
        r"""Visible mismatches :math:`m_k = \#\{l \text{ visible}: s_k^l \ne x^l\}` of every sample with every string.

        Parameters
        ----------
        x : array_like, shape (n, L)
            Token strings (only visible positions are read).
        mask : array_like of bool, shape (n, L)
            True where masked.

        Returns
        -------
        ndarray of float32, shape (n, K)
            Exact integer counts (one GEMM).
        """
        x, mask = self._check_batch(x, mask)
        return self._mismatches(x, ~mask)

    def _check_batch(self, x, mask):
        x = check_tokens(x, self.V, "x")
        m = np.asarray(mask)
        if m.dtype != bool:
            raise ValueError(f"mask must be a boolean array; got dtype {m.dtype}")
        if x.shape[1] != self.L or m.shape != x.shape:
            raise ValueError(f"x and mask must have shape (n, {self.L}); got {x.shape} and {m.shape}")
        return x, m

    def _mismatches(self, x, vis):
        nvis = vis.sum(axis=1, dtype=np.float32)[:, None]
        if self.V == 2:
            z = np.where(vis, 2.0 * x - 1.0, 0.0).astype(np.float32)
            return (nvis - z @ self._codes.T) * np.float32(0.5)
        n = x.shape[0]
        z = np.zeros((n, self.L * self.V), dtype=np.float32)
        rows, cols = np.nonzero(vis)
        z[rows, cols * self.V + x[rows, cols]] = 1.0
        return nvis - z @ self._codes.T

    def sample_values(self, x, mask):
        r"""Exact :math:`H(X \mid z)` and :math:`H(X^l \mid z^{\sim l})` for each (string, mask) pair.

        Parameters
        ----------
        x : array_like, shape (n, L)
            The strings (each must have positive weight under the law for the posterior to exist:
            a drawn string always does).
        mask : array_like of bool, shape (n, L)
            True where the token is masked.

        Returns
        -------
        H : ndarray, shape (n,)
            Entropy of the posterior over strings (nats).
        per_position : ndarray, shape (n, L)
            :math:`H(X^l \mid z^{\sim l})` (nats).

        Raises
        ------
        ValueError
            When no string of the law agrees with the visible tokens of a sample.
        """
        x, mask = self._check_batch(x, mask)
        vis = ~mask
        M = self._mismatches(x, vis)
        a = np.empty((2 * x.shape[0], self.K), dtype=self._ind.dtype)
        np.equal(M, 0.0, out=a[:x.shape[0]], casting="unsafe")
        np.equal(M, 1.0, out=a[x.shape[0]:], casting="unsafe")
        tot = (a @ self._mass.astype(a.dtype)).astype(np.float64)
        hw = a[:x.shape[0]].astype(np.float64) @ self._mass_log_mass if self._mass_log_mass is not None else None
        return self._values(x, vis, tot, hw, a @ self._ind)

    def _values(self, x, vis, tot, hw, G):
        """Entropies from the class totals ``tot`` (2n,), ``sum mass log mass`` of class 0 ``hw`` (n,) or None,
        and the token weights ``G`` (2n, L (V-1)) of the classes m = 0 (first n rows) and m = 1."""
        n, L, V = x.shape[0], self.L, self.V
        if np.any(tot[:n] <= 0):
            raise ValueError("x must be strings of the law: no string agrees with the visible tokens of a sample")
        # posterior over strings p_k = mass_k [m_k = 0] / T:  H = log T - sum_k p_k log mass_k
        H = np.log(tot[:n])
        if hw is not None:
            H = np.maximum(H - hw / tot[:n], 0.0)
        G = np.asarray(G, dtype=np.float64).reshape(2, n, L, V - 1)
        t = tot.reshape(2, n)[..., None]
        if V == 2:  # one column: q(1) = G, q(0) = T - G
            g0, g1 = G[0, ..., 0], G[1, ..., 0]
            # a string with one visible mismatch counts only at that position, for the token value != x^l
            q1 = g0 + np.where(vis & (x == 0), g1, 0.0)
            q0 = (t[0] - g0) + np.where(vis & (x == 1), t[1] - g1, 0.0)
            return H, _binary_entropy(np.maximum(q0, 0.0), np.maximum(q1, 0.0))
        q = np.empty((2, n, L, V))
        q[..., 1:] = G
        q[..., 0] = t - G.sum(axis=-1)
        other = vis[..., None] & (np.arange(V) != x[..., None])
        qt = q[0] + np.where(other, q[1], 0.0)
        return H, entropy_nats(np.maximum(qt, 0.0))

    @staticmethod
    def _reanchor(c0, c1, G, tot, hw, anchor, ind, mass, mlm):
        """Recompute (float64 path) the rows whose class total fell to ``REANCHOR_RATIO`` of its largest
        value since the last recomputation, so that cancellation never costs more than that factor."""
        from scipy import sparse

        np.maximum(anchor, tot, out=anchor)
        rows = np.flatnonzero(tot <= REANCHOR_RATIO * anchor)
        if rows.size == 0:
            return
        n = c0.shape[0]
        A = np.where((rows < n)[:, None], c0[np.minimum(rows, n - 1)], c1[np.maximum(rows - n, 0)])
        A = sparse.csr_matrix(A.astype(np.float64))
        G[rows] = A @ ind
        tot[rows] = A @ mass
        anchor[rows] = tot[rows]
        if hw is not None:
            first = rows < n
            hw[rows[first]] = A[np.flatnonzero(first)] @ mlm

    def _level_sweep(self, x, u, thresholds):
        r"""Values for the masks ``u < t[:, None]`` (``t`` the non-increasing rows of ``thresholds``), incrementally.

        With nested masks the visible sets only grow, so the mismatch counts are updated with the newly
        visible tokens only (a sparse product: every token once over the whole sweep), and the class sums
        :math:`G_0, G_1` with the strings that change class (:math:`m = 0 \to \ge 1`, :math:`\to 1`,
        :math:`1 \to \ge 2`): over the sweep each string leaves class 0 once, so the total work is a few
        GEMM-equivalents instead of a few per level.  Strings with :math:`m \ge 2` for every sample of the
        block never count again and are dropped from the work arrays (``COMPACT_FRACTION``).  Exact on
        the float32 integer-count path; float64 rounding of incremental sums otherwise.
        """
        from scipy import sparse

        x = check_tokens(x, self.V, "x")
        n, L, V = x.shape[0], self.L, self.V
        dt = self._ind.dtype
        codes_T, ind, mass64, mlm = self._codes_T, self._ind, self._mass, self._mass_log_mass
        K = ind.shape[0]
        M = np.zeros((n, K), dtype=np.float32)
        c0 = np.ones((n, K), dtype=bool)
        c1 = np.zeros((n, K), dtype=bool)
        G = np.zeros((2 * n, ind.shape[1]), dtype=dt)
        G[:n] = ind.sum(axis=0)
        mass = mass64.astype(dt)
        tot = np.zeros(2 * n)
        tot[:n] = mass64.sum()
        hw = None if mlm is None else np.full(n, float(mlm.sum()))
        prev = np.zeros((n, L), dtype=bool)  # visible before this level
        exact = dt == np.float32  # integer counts: incremental sums are exact
        anchor = tot.copy()
        for t in thresholds:
            vis = ~(u < np.asarray(t)[..., None])
            new = vis & ~prev
            if np.any(new):
                rows, cols = np.nonzero(new)
                if V == 2:
                    z = sparse.csr_matrix((2.0 * x[rows, cols] - 1.0, (rows, cols)), shape=(n, L), dtype=np.float32)
                    nnew = new.sum(axis=1, dtype=np.float32)[:, None]
                    M += (nnew - z @ codes_T) * np.float32(0.5)
                else:
                    z = sparse.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, cols * V + x[rows, cols])),
                                          shape=(n, L * V))
                    M += new.sum(axis=1, dtype=np.float32)[:, None] - z @ codes_T
                now0 = M == 0.0
                now1 = M == 1.0
                D = np.empty((2 * n, K), dtype=dt)
                np.subtract(now0, c0, out=D[:n], dtype=dt)
                np.subtract(now1, c1, out=D[n:], dtype=dt)
                c0, c1 = now0, now1
                nnz = np.count_nonzero(D)
                if nnz:
                    if nnz > DENSE_UPDATE_FRACTION * D.size:
                        G += D @ ind
                    else:
                        G += sparse.csr_matrix(D) @ ind
                    tot += D @ mass
                    if hw is not None:
                        hw += D[:n].astype(np.float64) @ mlm
                    if exact is False:
                        self._reanchor(c0, c1, G, tot, hw, anchor, ind, mass64, mlm)
                prev = vis
                live = (c0 | c1).any(axis=0)
                if np.count_nonzero(live) < COMPACT_FRACTION * K:
                    keep = np.flatnonzero(live)
                    M, c0, c1 = M[:, keep], c0[:, keep], c1[:, keep]
                    codes_T, ind = np.ascontiguousarray(codes_T[:, keep]), ind[keep]
                    mass64, mass = mass64[keep], mass[keep]
                    mlm = None if mlm is None else mlm[keep]
                    K = keep.size
            yield self._values(x, vis, tot, hw, G)
