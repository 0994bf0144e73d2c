r"""Compiled per-candidate kernels of the convex solvers, each beside its numpy reference (private).

Every kernel is compiled through :func:`noisealloc.theory._numba.jit` (``cache=True``,
``fastmath=False``: the same IEEE arithmetic as numpy, up to the order of summation) and has a
numpy reference with the same contract, the expression the solvers use.
``noisealloc bench solver --kernels`` times each pair in one run
(:func:`noisealloc.verify.bench.solver.measure_kernels`).  A kernel is wired into the solvers
(:data:`WIRED`) only where it wins; **none is**.  Measured on the 2-core development machine,
one BLAS thread (the solvers' setting), the first call (compile or cache load) excluded:

* :func:`weighted_sum` -- the moment matrix :math:`\sum_{i \in S} p_i A_i` over a sparse support
  (:func:`noisealloc.solvers.problem.moments`): numpy gathers ``Aflat[S]`` (a copy) before its
  GEMV; the kernel reads the rows in place.  Wins per call (2.4-3.3x on 40 atoms: ~1 us against
  ~3 us) but **loses where it counts**: this sum is 2-4% of a solve's time (cProfile of the A-optimal
  bench problems at n = 2000), so a warm solve gains at most ~2%, below the run-to-run noise, while
  the first call in a process pays numba's import and the kernel's cache load (~0.5-0.9 s, more
  than a whole n = 2000 solve).  Not wired.
* :func:`sensitivities` -- :math:`g_i = \langle D, A_i\rangle` over all ``n`` candidates
  (:func:`noisealloc.solvers.criteria.gradient`): the numpy path is one BLAS GEMV, which a
  scalar loop without reassociation (``fastmath=False``) cannot vectorise.  **Loses** (2-5x
  slower).  Not wired.
* :func:`hessian_logdet` -- :math:`H_{jk} = \operatorname{tr}(K A_j K A_k)` on a face (the
  Newton polish of 'D'; 'L'/'A'/'c' contract the same products): numpy forms ``K A_j`` by
  batched matmul and ``H`` by one GEMM.  **Loses** (2-3x slower).  Not wired.
* :func:`multiplicative_weights` -- the update
  :math:`q_i = p_i \max(-g_i, 0)^{\rho} / \sum_j p_j \max(-g_j, 0)^{\rho}` of
  :mod:`~noisealloc.solvers.algorithms.multiplicative`: numpy's vectorised ``power`` beats a scalar
  ``pow`` per element.  **Loses** (1.5-4x slower).  Not wired.

The per-candidate work of these solvers is BLAS-shaped (GEMV over the ``(n, m*m)`` stack, GEMM
for Hessians); compiled loops that must keep numpy's rounding cannot beat it.  The tests compare
each kernel with its reference (``tests/solvers/test_kernels.py``), so a kernel can be wired later
(set :data:`WIRED` and dispatch on :data:`noisealloc.theory._numba.HAVE_NUMBA` at call time) with the
``solver_kernel`` fixture of ``tests/conftest.py`` running the solver tests on both paths.

References
----------
docs/THEORY.md section 4 (a): the sensitivities :math:`g_i = \partial\Phi/\partial p_i` and the
moment matrices :math:`M(p) = \sum_i p_i A_i`.
"""

from __future__ import annotations

import numpy as np

from noisealloc.theory._numba import jit

__all__ = [
    "VERDICTS",
    "WIRED",
    "weighted_sum",
    "weighted_sum_numpy",
    "sensitivities",
    "sensitivities_numpy",
    "hessian_logdet",
    "hessian_logdet_numpy",
    "multiplicative_weights",
    "multiplicative_weights_numpy",
]

#: Kernel name -> whether the solvers call it on the numba path (only a kernel that wins end to end is).
WIRED = {"weighted_sum": False, "sensitivities": False, "hessian_logdet": False, "multiplicative_weights": False}
#: Kernel name -> the one-line verdict that ``bench solver --kernels`` prints beside its timings.
VERDICTS = {
    "weighted_sum": "wins per call, but is 2-4% of a solve and its first call costs numba's import (~0.5-1 s)",
    "sensitivities": "loses to one BLAS GEMV",
    "hessian_logdet": "loses to batched matmul + GEMM",
    "multiplicative_weights": "loses to numpy's vectorised power",
}


@jit
def weighted_sum(Af, idx, w, out):  # pragma: no cover - compiled
    r"""``out = sum_t w[t] * Af[idx[t]]``: :math:`\sum_{i \in S} p_i \operatorname{vec} A_i` without gathering the rows.

    Parameters
    ----------
    Af : ndarray, shape (n, k)
        Flattened stack (``Problem.Aflat``).
    idx : ndarray of int64, shape (s,)
        Rows ``S``.
    w : ndarray, shape (s,)
        Weights of those rows.
    out : ndarray, shape (k,)
        Overwritten with the sum (accumulated row by row, in the order of ``idx``).
    """
    k = Af.shape[1]
    for j in range(k):
        out[j] = 0.0
    for t in range(idx.shape[0]):
        i = idx[t]
        wi = w[t]
        for j in range(k):
            out[j] += wi * Af[i, j]


def weighted_sum_numpy(Af, idx, w):
    """numpy reference of :func:`weighted_sum`: gather, then one GEMV."""
    return w @ Af[idx]


@jit
def sensitivities(Af, D, out):  # pragma: no cover - compiled
    r"""``out[i] = sum_j Af[i, j] D[j]``: :math:`g_i = \langle D, A_i\rangle` for every candidate.

    Parameters
    ----------
    Af : ndarray, shape (n, k)
    D : ndarray, shape (k,)
        Flattened gradient matrix :math:`D_A`.
    out : ndarray, shape (n,)
    """
    n, k = Af.shape
    for i in range(n):
        s = 0.0
        for j in range(k):
            s += Af[i, j] * D[j]
        out[i] = s


def sensitivities_numpy(Af, D):
    """numpy reference of :func:`sensitivities`: one BLAS GEMV."""
    return Af @ D


@jit
def hessian_logdet(A, idx, K, H):  # pragma: no cover - compiled
    r""":math:`H_{jk} = \operatorname{tr}(K A_j K A_k) = \sum_{ab} X_{j,ab} X_{k,ba}`, :math:`X_j = K A_j`.

    Parameters
    ----------
    A : ndarray, shape (n, m, m)
    idx : ndarray of int64, shape (s,)
        Candidates of the face.
    K : ndarray, shape (m, m)
        :math:`M^{-1}`.
    H : ndarray, shape (s, s)
        Overwritten with the (symmetric) Hessian.
    """
    s = idx.shape[0]
    m = K.shape[0]
    X = np.empty((s, m, m))
    for t in range(s):
        i = idx[t]
        for a in range(m):
            for b in range(m):
                acc = 0.0
                for c in range(m):
                    acc += K[a, c] * A[i, c, b]
                X[t, a, b] = acc
    for j in range(s):
        for k in range(j, s):
            acc = 0.0
            for a in range(m):
                for b in range(m):
                    acc += X[j, a, b] * X[k, b, a]
            H[j, k] = acc
            H[k, j] = acc


def hessian_logdet_numpy(A, idx, K):
    """numpy reference of :func:`hessian_logdet` (:meth:`LogDetCriterion.hessian`'s expression)."""
    As = A[idx]
    s_, m = As.shape[0], K.shape[0]
    X = np.matmul(K, As)
    XT = np.swapaxes(X, 1, 2).reshape(s_, m * m)
    H = X.reshape(s_, m * m) @ XT.T
    return 0.5 * (H + H.T)


@jit
def multiplicative_weights(p, g, rho, out):  # pragma: no cover - compiled
    r""":math:`q_i = p_i \max(-g_i, 0)^{\rho} / \sum_j p_j \max(-g_j, 0)^{\rho}` into ``out``.

    Parameters
    ----------
    p, g : ndarray, shape (n,)
        Allocation and sensitivities.
    rho : float
        Exponent.
    out : ndarray, shape (n,)
    """
    n = p.shape[0]
    tot = 0.0
    for i in range(n):
        s = -g[i]
        if s < 0.0:
            s = 0.0
        q = p[i] * s**rho
        out[i] = q
        tot += q
    for i in range(n):
        out[i] /= tot


def multiplicative_weights_numpy(p, g, rho):
    """numpy reference of :func:`multiplicative_weights` (the expression of :func:`multiplicative.run`)."""
    q = p * np.maximum(-g, 0.0) ** rho
    q /= q.sum()
    return q
