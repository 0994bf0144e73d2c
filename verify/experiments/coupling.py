r"""Partial-coupling sweep (docs/THEORY.md §4 (c)): from atoms (J = 1) towards the entropic density (J large).

The denoiser shares parameters through ``J`` B-splines in log-SNR,
:math:`D_\theta(x,\lambda) = \sum_{j\le J} B_j(\lambda) D_{\theta_j}(x)`, so the per-level matrices are
:math:`A_J = (BB^\top)\otimes A`, :math:`G_J = (BB^\top)\otimes G`
(:func:`noisealloc.theory.information.matrices.spline_matrices`).  For each ``J`` the sweep solves the
allocation problem on the grid and reports

* the optimal allocation (atoms and weights) and its atom count against the Theorem 1 bound;
* the Wasserstein-1 distance in :math:`\lambda` between the optimal allocation and the square-root
  entropic density :math:`p \propto \sqrt{h}` of the model
  (:func:`noisealloc.verify.checks.loss_recovery.w1_lambda`);
* the efficiency :math:`V(p^*)/V(p_{\mathrm{entropic}})\le 1`, where :math:`p_{\mathrm{entropic}}`
  is the square-root entropic density put on the same grid (trapezoid weights), and
  :math:`V` is the criterion that was optimised, evaluated at both allocations by the solvers' one
  implementation (:func:`noisealloc.solvers.sandwich_value`, :func:`noisealloc.solvers.allocation_value`;
  no ridge, ``+inf`` where the moment matrix is numerically singular).

Criteria: ``'sandwich'`` (the asymptotic excess risk :math:`\tfrac12\mathrm{tr}(A_\omega A_p^{-1}G_pA_p^{-1})`,
non-convex, KKT certificate) or ``'L'`` (its convex surrogate :math:`\mathrm{tr}(A_\omega A_p^{-1})`, i.e.
the sandwich with :math:`G = A`, duality-gap certificate).  Note that the surrogate ignores the
residual size: its independent-learner limit is :math:`p \propto \sqrt{\omega}` rather than
:math:`\sqrt{h}`, so only the sandwich can be expected to approach the entropic proxy.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.errors import NoiseallocWarning, check_choice

__all__ = ["CouplingSweepReport", "coupling_sweep", "grid_entropic_weights", "AtomSchedule"]


class AtomSchedule:
    """A finitely supported allocation in log-SNR, with the ``to``/``interval``/``cdf`` interface that
    :func:`~noisealloc.verify.checks.loss_recovery.w1_lambda` reads (a step CDF).

    Parameters
    ----------
    atoms : array_like, shape (k,)
        Atom positions in log-SNR.
    weights : array_like, shape (k,)
        Non-negative weights (normalised here).
    interval : tuple of float
        ``(lam_min, lam_max)``.

    Attributes
    ----------
    atoms, weights : ndarray
        Sorted by position.
    interval : tuple of float
    coordinate : str
        ``'lambda'``.
    """

    coordinate = "lambda"

    def __init__(self, atoms, weights, interval):
        order = np.argsort(atoms)
        self.atoms = np.asarray(atoms, dtype=np.float64)[order]
        self.weights = np.asarray(weights, dtype=np.float64)[order]
        self.weights = self.weights / self.weights.sum()
        self.interval = (float(interval[0]), float(interval[1]))

    def to(self, coordinate):
        """The schedule in ``coordinate`` (only ``'lambda'``: returns itself)."""
        if coordinate != "lambda":
            raise ValueError(f"AtomSchedule lives in 'lambda' only; got coordinate {coordinate!r}")
        return self

    def cdf(self, x):
        """Step CDF: total weight of the atoms at or below ``x``."""
        x = np.asarray(x, dtype=np.float64)
        c = np.concatenate([[0.0], np.cumsum(self.weights)])
        return c[np.searchsorted(self.atoms, x, side="right")]


def grid_entropic_weights(lam, h):
    r"""The square-root entropic density on the grid: :math:`p_i \propto \sqrt{h_i}\,w_i` (trapezoid weights :math:`w_i`).

    Parameters
    ----------
    lam : array_like, shape (n,)
        Increasing log-SNR grid.
    h : array_like, shape (n,)
        Entropy rate :math:`h(\lambda_i)` (negative values count as 0).

    Returns
    -------
    ndarray, shape (n,)
        Probability vector on the grid.

    References
    ----------
    docs/THEORY.md section 4 (b): the square-root law :math:`p \propto \sqrt{h}`.

    Examples
    --------
    >>> from noisealloc.verify.experiments.coupling import grid_entropic_weights
    >>> grid_entropic_weights([0.0, 1.0, 2.0], [1.0, 4.0, 1.0]).tolist()  # sqrt(h) * (1/2, 1, 1/2)
    [0.16666666666666666, 0.6666666666666666, 0.16666666666666666]
    """
    lam = np.asarray(lam, dtype=np.float64)
    dl = np.diff(lam)
    w = np.zeros_like(lam)
    w[:-1] += dl / 2
    w[1:] += dl / 2
    p = np.sqrt(np.maximum(np.asarray(h, dtype=np.float64), 0.0)) * w
    if not p.sum() > 0:
        raise ValueError("the entropy rate is zero on the whole grid; no entropic density exists")
    return p / p.sum()


def _value(prob, p, criterion):
    """The optimised criterion at grid weights ``p``, by the solvers' one implementation.

    No ridge (a not-identified allocation has infinite risk; the solver's ridge must not hide it),
    and ``+inf`` where the moment matrix is numerically singular.
    """
    from noisealloc.solvers import allocation_value, sandwich_value

    if criterion == "L":
        return allocation_value(prob.A, p, "L", W=prob.A_eval)
    return sandwich_value(prob.A, prob.G, prob.A_eval, p)


def _clusters(idx) -> int:
    idx = np.asarray(idx)
    return int(idx.size and 1 + np.count_nonzero(np.diff(idx) > 1))


@dataclass(frozen=True)
class CouplingSweepReport:
    r"""Result of :func:`coupling_sweep`.

    Attributes
    ----------
    rows : list of dict
        One per ``J``: ``J``, ``m`` (= J x base m), ``n_atoms`` (grid support size), ``n_clusters``
        (runs of adjacent grid atoms, i.e. off-grid atoms), ``atom_bound`` (Theorem 1), ``w1``
        (W1 in lambda to the sqrt-entropic density), ``efficiency`` (:math:`V(p^*)/V(p_{ent})`),
        ``value`` (:math:`V(p^*)`), ``value_entropic``, ``gap`` (certified relative gap or KKT residual),
        ``converged``, ``regularization``, ``atoms``, ``weights``, ``method``, ``warnings``, ``status`` (of
        :func:`noisealloc.solvers.optimize_allocation`: 4 = no allocation, numerically singular; then
        ``value``, ``efficiency`` and ``gap`` are infinite, ``w1`` is NaN and ``error`` holds the
        message, else None), ``error``, ``seconds``.
    lam : ndarray
        The candidate grid.
    entropic_weights : ndarray
        The sqrt-entropic density on the grid (probability vector).
    model, family, criterion : str
    seconds : float
    info : dict
    errors : list of dict
        (property) ``J`` and ``error`` (``"<ExceptionType>: <message>"``) of every row whose
        optimisation ended without an allocation.
    """

    rows: list
    lam: np.ndarray
    entropic_weights: np.ndarray
    model: str
    family: str
    criterion: str
    seconds: float
    info: dict = field(default_factory=dict)

    @property
    def errors(self) -> list:
        """``[{"J": J, "error": message}]`` for the rows without an allocation (status 4)."""
        return [{"J": r["J"], "error": r["error"]} for r in self.rows if r.get("error")]

    def table(self) -> str:
        """Fixed-width text table of the sweep."""
        head = f"{'J':>3} {'m':>4} {'atoms':>5} {'red.':>4} {'runs':>4} {'bound':>6} {'W1':>8} {'eff':>8} {'gap':>9} {'sec':>6}"
        lines = [head]
        for r in self.rows:
            lines.append(f"{r['J']:>3d} {r['m']:>4d} {r['n_atoms']:>5d} {r['n_atoms_reduced']:>4d} {r['n_clusters']:>4d} {r['atom_bound']:>6d} "
                         f"{r['w1']:>8.4f} {r['efficiency']:>8.4f} {r['gap']:>9.2e} {r['seconds']:>6.1f}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """Plain-JSON form."""
        from noisealloc.theory.output import to_jsonable

        return to_jsonable({"model": self.model, "family": self.family, "criterion": self.criterion,
                          "seconds": self.seconds, "lam": self.lam, "entropic_weights": self.entropic_weights,
                          "rows": self.rows, "info": self.info})


def coupling_sweep(model, J_values=(1, 2, 4, 8, 16, 32), *, lam=None, criterion: str = "L", family=None,
                   rng=0, model_name: str = "") -> CouplingSweepReport:
    r"""Sweep the number of B-spline basis functions ``J`` (docs/THEORY.md §4 (c)).

    Parameters
    ----------
    model
        A data model of :mod:`noisealloc.theory` (Dirac mixture, Gaussian manifold, ...).
    J_values : sequence of int
        Basis sizes; ``J = 1`` is the fully coupled regime (a).
    lam : (n,) array, optional
        Candidate grid (default 97 levels on [-8, 8]).
    criterion : {'L', 'sandwich'}
        Optimised criterion (see module docstring).
    family : str, optional
        Base feature family (default: the model's natural well-specified family, see
        :func:`noisealloc.theory.information.matrices.build_family_matrices`).
    rng : Generator, int or None
        Randomness of Monte-Carlo problem builders (random features, large Dirac spans).

    Returns
    -------
    CouplingSweepReport
    """
    check_choice(criterion, "criterion", ("L", "sandwich"))
    J_values = [int(J) for J in J_values]
    if not J_values or min(J_values) < 1:
        raise ValueError(f"J_values must be a non-empty sequence of integers >= 1; got {J_values!r}")
    from noisealloc.solvers import single_blas_thread

    with single_blas_thread():
        return _sweep(model, J_values, lam=lam, criterion=criterion, family=family, rng=rng, model_name=model_name)


def _sweep(model, J_values, *, lam, criterion, family, rng, model_name):
    from noisealloc.solvers import optimize_allocation
    from noisealloc.theory.schedules.entropic import entropic_schedule
    from noisealloc.theory.information.matrices import build_family_matrices, natural_family, spline_matrices
    from noisealloc.verify.checks.loss_recovery import w1_lambda

    t0 = time.perf_counter()
    lam = np.linspace(-8.0, 8.0, 97) if lam is None else np.asarray(lam, dtype=np.float64)
    family = natural_family(model) if family is None else family
    base = build_family_matrices(model, family, lam, rng=rng)
    h = np.asarray(base.entropy_rate if base.entropy_rate is not None else model.entropy_rate(lam).value)
    p_ent = grid_entropic_weights(lam, h)
    # A 1e-12 uniform floor keeps the tabulated density positive where h underflows to 0;
    # it moves W1 by at most 1e-12 times the interval length.
    ent = entropic_schedule(lam, h, floor=1e-12)
    rows = []
    for J in J_values:
        t1 = time.perf_counter()
        prob = spline_matrices(base, J)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # solve -> Caratheodory reduction (ties, e.g. saturated top levels with equal matrices, can
            # leave more grid atoms than Theorem 1 needs; the reduction keeps the moments and shows the bound)
            opt = optimize_allocation(prob, criterion, offgrid=False, exact=False)
        if opt.solve_result is None:
            # no allocation (numerically singular): a row that cannot pass any check (infinite risk)
            rows.append({
                "J": J, "m": prob.m, "n_atoms": 0, "n_atoms_reduced": 0, "n_clusters": 0,
                "atom_bound": int(opt.atom_bound), "w1": float("nan"), "efficiency": float("inf"),
                "value": float("inf"), "value_entropic": _value(prob, p_ent, criterion), "gap": float("inf"),
                "converged": False, "regularization": float(opt.problem.regularization),
                "atoms": np.zeros(0), "weights": np.zeros(0), "method": "none (no allocation)",
                "warnings": [str(w.message)[:200] for w in caught if issubclass(w.category, NoiseallocWarning)],
                "status": int(opt.status), "error": opt.error, "seconds": time.perf_counter() - t1,
            })
            continue
        res = opt.solve_result
        p = np.asarray(res.weights)
        idx = np.flatnonzero(p > 0)
        n_red = int(opt.reduction.n_atoms_after) if opt.reduction is not None else int(idx.size)
        atoms = AtomSchedule(lam[idx], p[idx], (lam[0], lam[-1]))
        v_star = _value(prob, p, criterion)
        v_ent = _value(prob, p_ent, criterion)
        m = prob.m
        rows.append({
            "J": J, "m": m, "n_atoms": int(idx.size), "n_atoms_reduced": n_red, "n_clusters": _clusters(idx),
            "atom_bound": int(opt.atom_bound),
            "w1": w1_lambda(atoms, ent, n=100001), "efficiency": v_star / v_ent, "value": v_star, "value_entropic": v_ent,
            "gap": float(res.rel_gap), "converged": bool(res.success), "regularization": float(res.regularization),
            "atoms": lam[idx], "weights": p[idx],
            "method": "no-polish (polish raised)" if opt.polish_fallback else res.method,
            "warnings": [str(w.message)[:200] for w in caught if issubclass(w.category, NoiseallocWarning)],
            "status": int(opt.status), "error": None, "seconds": time.perf_counter() - t1,
        })
    return CouplingSweepReport(rows=rows, lam=lam, entropic_weights=p_ent, model=model_name or repr(model),
                               family=family, criterion=criterion, seconds=time.perf_counter() - t0,
                               info={"base_m": base.m, "rng": rng if isinstance(rng, int) else None,
                                     "problem_info": base.info})
