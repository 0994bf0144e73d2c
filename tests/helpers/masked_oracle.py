"""Brute-force oracle of the masked process for tiny finite laws (docs/THEORY.md section 7.2).

Independent of the library's matching, GEMMs and forward-backward: it enumerates every mask of the
``L`` positions and every string of the law, filters the compatible strings with plain Python
comparisons, and returns the exact mask-configuration sums

* ``H_coef[c]``, ``S_coef[c]``: the sums of ``P(x) H(X | z)`` and ``P(x) sum_l H(X^l | z^{~l})`` over
  the strings and the masks with ``c`` masked positions, so that at mask rate ``e``
  ``H(lam) = sum_c e^c (1-e)^(L-c) H_coef[c]`` (and the same for ``S``);
* ``budget``: ``int h dlam = sum_c S_coef[c] * B(c + 1, L - c + 1)`` exactly, since
  ``h dlam = -S deps`` and ``int_0^1 e^c (1-e)^(L-c) de`` is the Beta function.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

__all__ = ["brute_force_coefficients", "brute_force_values", "entropy"]


def entropy(weights) -> float:
    """Entropy (nats) of non-negative weights, normalised; plain Python."""
    tot = float(sum(weights))
    return -sum((w / tot) * math.log(w / tot) for w in weights if w > 0)


def brute_force_coefficients(strings, weights, V: int):
    """``(H_coef, S_coef, budget)`` of the law ``sum_k weights[k] delta_{strings[k]}`` (see module docstring).

    Distinct strings are assumed (the oracle does not merge copies).
    """
    strings = [tuple(int(t) for t in s) for s in strings]
    weights = [float(w) for w in weights]
    L = len(strings[0])
    H_coef = [0.0] * (L + 1)
    S_coef = [0.0] * (L + 1)
    for mask in itertools.product((False, True), repeat=L):
        c = sum(mask)
        for x, px in zip(strings, weights):
            if px == 0:
                continue
            vis = [l for l in range(L) if not mask[l]]
            post = [w for s, w in zip(strings, weights) if all(s[l] == x[l] for l in vis)]
            H_coef[c] += px * entropy(post)
            s_sum = 0.0
            for l in range(L):
                others = [j for j in vis if j != l]
                tok = [0.0] * V
                for s, w in zip(strings, weights):
                    if all(s[j] == x[j] for j in others):
                        tok[s[l]] += w
                s_sum += entropy(tok)
            S_coef[c] += px * s_sum
    budget = sum(S_coef[c] * math.gamma(c + 1) * math.gamma(L - c + 1) / math.gamma(L + 2) for c in range(L + 1))
    return np.array(H_coef), np.array(S_coef), budget


def brute_force_values(strings, weights, V: int, lam):
    """Exact ``H(lam)`` and ``S(lam)`` at the levels ``lam`` (mask rate ``sigmoid(-lam)``)."""
    H_coef, S_coef, _ = brute_force_coefficients(strings, weights, V)
    L = len(H_coef) - 1
    lam = np.atleast_1d(np.asarray(lam, dtype=float))
    e = 1.0 / (1.0 + np.exp(lam))
    c = np.arange(L + 1)
    basis = e[:, None] ** c * (1.0 - e[:, None]) ** (L - c)
    return basis @ H_coef, basis @ S_coef
