r"""Support reduction (Carathéodory) and merging of adjacent grid atoms.

**Carathéodory reduction.**  The criteria depend on ``p`` only through the moments
:math:`(A_p, G_p)`, i.e. through :math:`\sum_i p_i v_i` with
:math:`v_i = (\operatorname{vech} A_i, \operatorname{vech} G_i, 1)`.  While the support
vectors are linearly dependent, take :math:`z \ne 0` with :math:`\sum_{i \in S} z_i v_i = 0`
and move :math:`p_S \leftarrow p_S - t z` with the largest :math:`t` keeping ``p >= 0``: the
moments, hence the value, are unchanged and one atom leaves.  :func:`caratheodory` finds the
dependencies in one sweep with an updated QR factorisation of an independent subset
(:math:`O(n m^4)` in all).  At the end the support vectors
are independent, so there are at most ``dim v`` atoms: ``m(m+1)/2 + 1`` (convex
criteria) or ``m(m+1) + 1`` (sandwich), Theorem 1's bound.  The value is recomputed and
the reduction is undone if rounding ever increased it.

**Merging.**  On a fine grid a continuous optimal atom shows up as a cluster of
neighbouring grid points.  :func:`merge_atoms` replaces each cluster by the one grid
point that gives the smallest value after re-optimising the weights on the new
support, and keeps the merge only if the value rises by at most ``rtol * scale``.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg as sla

from noisealloc.theory._threads import single_blas_thread
from noisealloc.solvers._linalg import triangular_solve
from noisealloc.solvers.algorithms.polish import newton_on_support
from noisealloc.solvers.problem import SingularMomentError, as_problem, check_weights, evaluate, scale
from noisealloc.solvers.result import ReductionResult
from noisealloc.theory.tolerances import FW_GAP_RTOL

#: Rank tolerance of :func:`caratheodory`: a residual or singular value below this fraction of the
#: largest (column-scaled) row norm or singular value counts as zero.  The moment vectors are known to
#: a few ulps, so true dependencies show up near 1e-15; 1e-12 keeps a margin of ~4500 eps while the
#: moment change per step, t times the residual, stays below 1e-12 relative.
CARATHEODORY_RCOND = 1e-12

#: Atoms per block step of the sweep in :func:`caratheodory` (one GEMM of this many rows).
_SWEEP_BLOCK = 32

#: Relative value change accepted from a Caratheodory step (pure rounding: the moments
#: are unchanged to ~1e-15 relative; the value amplifies that by cond(M) <= 1e5 here).
REDUCTION_RTOL = 1e-10

__all__ = ["CARATHEODORY_RCOND", "REDUCTION_RTOL", "caratheodory", "reduce_support", "merge_atoms", "moment_vectors"]


def moment_vectors(A, G=None) -> np.ndarray:
    r"""Rows :math:`v_i = (\operatorname{vech} A_i, \operatorname{vech} G_i, 1)` of the Carathéodory reduction.

    Parameters
    ----------
    A : array_like, shape (n, m, m)
    G : array_like, shape (n, m, m), optional

    Returns
    -------
    ndarray, shape (n, d)
        ``d = m(m+1)/2 + 1`` without ``G``, ``m(m+1) + 1`` with it.
    """
    A = np.asarray(A, dtype=float)
    m = A.shape[1]
    iu = np.triu_indices(m)
    parts = [A[:, iu[0], iu[1]]]
    if G is not None:
        parts.append(np.asarray(G, dtype=float)[:, iu[0], iu[1]])
    parts.append(np.ones((A.shape[0], 1)))
    return np.concatenate(parts, axis=1)


def _caratheodory_svd(Vs: np.ndarray, p: np.ndarray, rcond: float) -> np.ndarray:
    """The former reduction: one full SVD of the support's rows per eliminated atom, O(n^4).

    Kept as the independent reference of the tests and the baseline of ``bench solver``, and
    used on at most ``d`` atoms when the final independence check of :func:`caratheodory`
    finds a dependency that the incremental sweep let through.  ``Vs`` is already
    column-scaled; ``p`` is modified in place and returned.
    """
    while True:
        S = np.flatnonzero(p > 0)
        if S.size <= 1:
            return p
        _, sv, vt = np.linalg.svd(Vs[S].T, full_matrices=True)
        rank = int(np.sum(sv > rcond * sv[0])) if sv.size else 0
        if rank >= S.size:
            return p
        z = vt[-1]
        if not np.any(z > 0):
            z = -z
        pos = z > 0
        t = np.min(p[S][pos] / z[pos])
        k = S[pos][np.argmin(p[S][pos] / z[pos])]
        p[S] = p[S] - t * z
        p[k] = 0.0
        p[p < 0] = 0.0


def _scaled_rows(V: np.ndarray) -> np.ndarray:
    # Column scaling so that vech entries of very different size count alike in the rank test.
    colscale = np.maximum(np.abs(V).max(axis=0), np.finfo(float).tiny)
    return V / colscale


def _check_caratheodory_args(V, p, rcond):
    V = np.asarray(V, dtype=float)
    p = np.array(p, dtype=float)
    if V.ndim != 2:
        raise ValueError(f"V must be a 2-D array (n, d); got shape {V.shape}")
    if p.shape != (V.shape[0],):
        raise ValueError(f"p must have shape ({V.shape[0]},) (one weight per row of V); got shape {p.shape}")
    if not np.all(np.isfinite(V)):
        raise ValueError("V must be finite; it has NaN or infinite entries")
    if not (np.all(np.isfinite(p)) and np.all(p >= 0)):
        bad = float(p[~(np.isfinite(p) & (p >= 0))][0])
        raise ValueError(f"p must be finite and non-negative; got an entry {bad!r}")
    if rcond is None:
        rcond = CARATHEODORY_RCOND
    if not (isinstance(rcond, (int, float, np.floating)) and 0.0 < float(rcond) < 1.0):
        raise ValueError(f"rcond must be a float in (0, 1); got {rcond!r}")
    return V, p, float(rcond)


def caratheodory(V, p, *, rcond: float | None = None) -> np.ndarray:
    r"""Reduce ``p`` so that the rows of ``V`` on its support are linearly independent.

    Keeps :math:`\sum_i p_i V_i` (up to rounding) and ``p >= 0``; returns the new weights.

    One sweep over the support keeps a set :math:`B` of linearly independent rows (column-scaled)
    with a full QR factorisation :math:`[v_b]_{b \in B} = Q R`, updated by
    :func:`scipy.linalg.qr_insert` / :func:`scipy.linalg.qr_delete` in :math:`O(d^2)`.  For each
    atom :math:`i`, :math:`c = Q^\top v_i`; if the residual :math:`\|c_{k:}\|` (``k = |B|``) exceeds
    ``rcond`` times the largest row norm, :math:`i` joins :math:`B`.  Otherwise
    :math:`v_i = \sum_{b \in B} y_b v_b` with :math:`R_{:k,:k}\, y = c_{:k}`, and

    .. math::  p_i \leftarrow p_i - t, \qquad p_B \leftarrow p_B + t\,y, \qquad
               t = \min\bigl(p_i,\ \min_{y_b < 0} p_b / (-y_b)\bigr)

    keeps :math:`\sum_i p_i v_i` and ``p >= 0`` and sets one weight to zero: :math:`p_i` (then the
    sweep moves on) or a member of :math:`B` (removed from the factorisation; :math:`i` is tested
    again against the smaller basis).  Every step removes an atom, so there are at most
    ``2 |S|`` steps of :math:`O(d^2)`: :math:`O(n d^2) = O(n m^4)` in all, against the
    :math:`O(n^4)` of one SVD per eliminated atom.  Runs of dependent atoms that the current
    basis absorbs (:math:`t = p_i` for each) are done as a block: one GEMM gives their
    :math:`c`, one triangular solve their :math:`y`, and a cumulative sum finds where the run
    must stop.  Atoms are visited heaviest first.  The QR factors are recomputed from the basis
    rows every ``d`` updates (Givens updates lose orthogonality slowly), and at the end the
    singular values of the at most ``d`` remaining rows are checked with the same ``rcond``
    (relative to the largest); a dependency found there (possible only near the rank
    tolerance) is removed by the SVD elimination on those rows.

    Parameters
    ----------
    V : array_like, shape (n, d)
        One row per candidate (its last column should be all ones so that the total mass is kept).
    p : array_like, shape (n,)
        Non-negative weights.
    rcond : float, optional
        Rank tolerance in (0, 1) (default ``CARATHEODORY_RCOND = 1e-12``): a residual below
        ``rcond`` times the largest scaled row norm, or a singular value below ``rcond`` times
        the largest, counts as zero.

    Returns
    -------
    ndarray, shape (n,)
        Reduced weights (support inside that of ``p``, rows of ``V`` on it independent).

    References
    ----------
    docs/THEORY.md section 4 (a), Theorem 1 (Carathéodory).  The updating of a QR factorisation by
    Givens rotations: G. H. Golub, C. F. Van Loan, *Matrix Computations*, 4th ed., section 6.5.

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.solvers.algorithms.support import caratheodory
    >>> V = np.array([[0.0, 1.0], [0.5, 1.0], [1.0, 1.0]])  # (x, 1) for x = 0, 1/2, 1
    >>> q = caratheodory(V, np.array([0.5, 0.3, 0.2]))  # mean x = 0.35: two atoms are needed
    >>> int(np.count_nonzero(q)), bool(np.allclose(q @ V, [0.35, 1.0])), bool(np.all(q >= 0))
    (2, True, True)
    """
    V, p, rcond = _check_caratheodory_args(V, p, rcond)
    S = np.flatnonzero(p > 0)
    if S.size <= 1:
        return p
    Vs = _scaled_rows(V)
    d = Vs.shape[1]
    if S.size <= d:
        # Rows already independent (the final test below, on the input): nothing to reduce.  One thin
        # SVD of |S| x d, against the sweep's full d x d Q (at m = 96, d = 4657: 170 MB copied per update).
        sv = np.linalg.svd(Vs[S], compute_uv=False)
        if int(np.sum(sv > rcond * sv[0])) == S.size:
            return p
    tol = rcond * float(np.sqrt(np.max(np.einsum("ij,ij->i", Vs[S], Vs[S]))))
    Q = np.eye(d)
    R = np.zeros((d, 0))
    basis: list[int] = []
    updates = 0
    # Heaviest atoms first: on a grid, neighbouring atoms are nearly dependent, and a basis of
    # grid-order neighbours would be ill-conditioned (large y, rounding in p_B); the heavy atoms
    # of a solver's output are spread over the optimal support points.
    order = S[np.argsort(-p[S], kind="stable")]
    pos = 0
    while pos < order.size:
        if updates >= d:
            # Each Givens update costs O(eps) of orthogonality: start afresh from the rows.
            Q, R = sla.qr(Vs[basis].T, mode="full", check_finite=False)
            updates = 0
        # Block step: while the basis stays the same, consecutive dependent atoms whose weight the
        # basis can absorb (p_B + sum_j p_j y_j >= 0 throughout) need no factorisation update; one
        # GEMM and one triangular solve treat _SWEEP_BLOCK of them (the light tail of the sweep).
        k = len(basis)
        block = order[pos:pos + _SWEEP_BLOCK]
        C = Vs[block] @ Q
        free = np.linalg.norm(C[:, k:], axis=1) <= tol if k < d else np.ones(block.size, bool)
        j1 = int(np.argmin(free)) if not free.all() else block.size
        if k and j1:
            B = np.asarray(basis)
            Y = triangular_solve(R[:k, :k], C[:j1, :k].T, lower=False)
            cum = p[B][:, None] + np.cumsum(Y * p[block[:j1]], axis=1)
            ok = np.all(cum >= 0.0, axis=0)
            j2 = int(np.argmin(ok)) if not ok.all() else j1
            if j2:
                p[B] = np.maximum(cum[:, j2 - 1], 0.0)
                p[block[:j2]] = 0.0
                pos += j2
                continue
        # The next atom is independent, or its weight would drive a basis atom negative: one
        # exchange step at a time until it joins the basis or has weight 0.
        i = order[pos]
        pos += 1
        v = Vs[i]
        while True:
            if updates >= d:
                Q, R = sla.qr(Vs[basis].T, mode="full", check_finite=False)
                updates = 0
            k = len(basis)
            c = Q.T @ v
            if k < d and np.linalg.norm(c[k:]) > tol:
                Q, R = sla.qr_insert(Q, R, v, k, which="col", check_finite=False)
                basis.append(int(i))
                updates += 1
                break
            y = triangular_solve(R[:k, :k], c[:k], lower=False)
            B = np.asarray(basis)
            t, drop = p[i], -1
            neg = np.flatnonzero(y < 0)
            if neg.size:
                ratios = p[B[neg]] / -y[neg]
                j = int(np.argmin(ratios))
                if ratios[j] < t:
                    t, drop = float(ratios[j]), int(neg[j])
            p[B] = np.maximum(p[B] + t * y, 0.0)
            if drop < 0:
                p[i] = 0.0
                break
            p[i] -= t
            p[B[drop]] = 0.0
            Q, R = sla.qr_delete(Q, R, drop, which="col", check_finite=False)
            del basis[drop]
            updates += 1
    S = np.flatnonzero(p > 0)
    if S.size > 1:
        sv = np.linalg.svd(Vs[S], compute_uv=False)
        if int(np.sum(sv > rcond * sv[0])) < S.size:
            p = _caratheodory_svd(Vs, p, rcond)
    return p


def reduce_support(problem, weights, criterion: str | None = None, *, W=None, G=None, A_eval=None,
                   c=None) -> ReductionResult:
    """Carathéodory reduction of an allocation to at most Theorem 1's number of atoms.

    Never increases the criterion value (it is recomputed; the input is returned if
    rounding would increase it).  Runs :func:`caratheodory` (:math:`O(n m^4)`) with BLAS limited
    to one thread, scoped to the call (:func:`~noisealloc.solvers.single_blas_thread`).

    Parameters
    ----------
    problem : Problem or array_like, shape (n, m, m)
        As in :func:`noisealloc.solvers.solve`.
    weights : array_like, shape (n,)
        A probability vector (non-negative, sums to one within ``WEIGHT_SUM_ATOL``, as in
        :func:`~noisealloc.solvers.certify`).
    criterion, W, G, A_eval, c
        As in :func:`noisealloc.solvers.solve` (raw arrays only).

    Returns
    -------
    ReductionResult

    References
    ----------
    docs/THEORY.md section 4 (a), Theorem 1 (Carathéodory).

    Examples
    --------
    >>> import numpy as np
    >>> from noisealloc.solvers import reduce_support
    >>> x = np.linspace(-1, 1, 5); F = np.stack([np.ones(5), x], 1)
    >>> red = reduce_support(F[:, :, None] * F[:, None, :], np.full(5, 0.2), "D")
    >>> red.n_atoms_before, red.n_atoms_after <= 4, red.value_after <= red.value_before + 1e-12
    (5, True, True)
    """
    prob = as_problem(problem, criterion, W=W, G=G, A_eval=A_eval, c=c)
    p = check_weights(weights, prob.n, exact_sum=True)
    V = moment_vectors(prob.A, prob.G)
    # d x d updates and small GEMMs: BLAS threads only oversubscribe (on a loaded 2-core machine
    # the reduction at n = 1000 took 0.5 s with them, 0.03 s without), as in solve and certify.
    with single_blas_thread():
        q = caratheodory(V, p)
        q /= q.sum()
        try:
            v0 = evaluate(prob, p).value
        except SingularMomentError as exc:
            raise SingularMomentError(
                f"weights: the moment matrix M(p) of this allocation is numerically singular ({exc}); a singular "
                "allocation has no criterion value to keep (+inf: allocation_value)") from exc
        v1 = evaluate(prob, q).value
    # The moments are kept exactly up to rounding, so the value can only move by rounding
    # amplified by the conditioning of M; anything beyond REDUCTION_RTOL is refused.
    refused = bool(v1 > v0 + REDUCTION_RTOL * max(abs(v0), 1.0))
    if refused:
        q, v1 = p, v0
    resid = float(np.max(np.abs(q @ V - p @ V)))
    k0, k1 = int(np.count_nonzero(p)), int(np.count_nonzero(q))
    if refused:
        message = ("reduction refused: rounding would raise the value by more than REDUCTION_RTOL; "
                   "the input allocation is returned")
    else:
        message = f"Caratheodory reduction from {k0} to {k1} atoms (moment residual {resid:.2e})"
    return ReductionResult(
        weights=q,
        support=np.flatnonzero(q > 0),
        value_before=float(v0),
        value_after=float(v1),
        n_atoms_before=k0,
        n_atoms_after=k1,
        moment_residual=resid,
        success=True,
        status=0,
        message=message,
        nit=k0 - k1,
        nfev=2,
    )


def merge_atoms(
    problem, weights, criterion: str | None = None, *, W=None, G=None, A_eval=None, c=None, max_gap: int = 1,
    rtol: float = FW_GAP_RTOL
) -> ReductionResult:
    """Merge clusters of support atoms that are at most ``max_gap`` grid indices apart.

    Each cluster is replaced by the member grid point that minimises the value after
    the weights are re-optimised on the new support (projected Newton); a merge is kept
    only if the value rises by at most ``rtol * scale`` (``scale`` as in the certificate).

    Parameters
    ----------
    problem : Problem or array_like, shape (n, m, m)
        As in :func:`noisealloc.solvers.solve`.
    weights : array_like, shape (n,)
        Non-negative weights with a positive sum.
    criterion, W, G, A_eval, c
        As in :func:`noisealloc.solvers.solve` (raw arrays only).
    max_gap : int
        Atoms at most this many grid indices apart form one cluster.
    rtol : float
        Allowed relative rise of the value per merge.

    Returns
    -------
    ReductionResult
    """
    if not (isinstance(max_gap, (int, np.integer)) and max_gap >= 1):
        raise ValueError(f"max_gap must be an integer >= 1; got {max_gap!r}")
    prob = as_problem(problem, criterion, W=W, G=G, A_eval=A_eval, c=c)
    p = check_weights(weights, prob.n, exact_sum=False)
    ev0 = evaluate(prob, p)
    v0 = ev0.value
    sc = scale(prob, ev0)
    budget = rtol * sc
    S = np.flatnonzero(p > 0)
    clusters = np.split(S, np.flatnonzero(np.diff(S) > max_gap) + 1) if S.size else []
    q = p.copy()
    nfev = 1
    merged = 0
    for cl in clusters:
        if cl.size < 2:
            continue
        best = None
        for keep in cl:
            trial = q.copy()
            trial[cl] = 0.0
            trial[keep] = q[cl].sum()
            sup = np.flatnonzero(trial > 0)
            try:
                trial, _, _ = newton_on_support(prob, trial, sup, target=0.1 * budget)
                val = evaluate(prob, trial).value
                nfev += 1
            except np.linalg.LinAlgError:
                continue
            if best is None or val < best[0]:
                best = (val, trial)
        if best is not None and best[0] <= v0 + budget:
            q = best[1]
            merged += 1
    v1 = evaluate(prob, q).value
    k1 = int(np.count_nonzero(q))
    return ReductionResult(
        weights=q,
        support=np.flatnonzero(q > 0),
        value_before=float(v0),
        value_after=float(v1),
        n_atoms_before=int(S.size),
        n_atoms_after=k1,
        moment_residual=float(np.max(np.abs(moment_vectors(prob.A, prob.G).T @ (q - p)))),
        success=True,
        status=0,
        message=f"merged {merged} clusters of adjacent atoms: {int(S.size)} -> {k1} atoms "
                f"(value {v0:.6g} -> {v1:.6g}, allowed rise rtol * scale = {budget:.2e})",
        nit=merged,
        nfev=nfev + 1,
    )
