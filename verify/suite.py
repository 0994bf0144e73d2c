"""The verification suite: every theorem check in a quick tier (CI, about a minute) and a full tier.

``quick``: the checks of :mod:`noisealloc.verify.checks` on small instances, the random-matrix
checks (i)--(iv) with few replications, and a short coupling sweep (J = 1, 2, 4 on the Dirac mixture).
``full``: more replications and levels, the sandwich against training with more seeds, and the
coupling sweep for J in {1, 2, 4, 8, 16, 32} on a Dirac mixture and on a Gaussian manifold.

Every check runs with BLAS limited to one thread: the matrices are small, and on a shared
machine thread oversubscription slows them by an order of magnitude.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from noisealloc.theory.errors import as_generator, check_choice
from noisealloc.verify.checks.report import CheckReport

__all__ = ["TIERS", "run", "format_table", "coupling_check"]

TIERS = ("quick", "full")


def coupling_check(model, J_values, *, criterion: str, name: str, data: str, lam=None, rng=0) -> CheckReport:
    r"""The coupling sweep as a check: every row's atom count within the Theorem 1 bound and finite values.

    The sweep is descriptive (whether the entropic proxy tracks the optimum is a finding, not a
    theorem); what is checked is that each optimum is certified (relative gap or KKT residual at
    most 1e-4 after the solver's own tolerance), within the atom bound, and no worse than the
    entropic allocation (efficiency <= 1 + 1e-9).

    Parameters
    ----------
    model : data model
        A model of :mod:`noisealloc.theory` (Dirac mixture, Gaussian manifold, ...; e.g.
        ``checks.default_gaussian()``).
    J_values : sequence of int
        Numbers of B-spline basis functions to sweep (``J = 1`` is the fully coupled regime).
    criterion : {'L', 'sandwich'}
        Criterion of the coupled optimum (see :func:`noisealloc.verify.experiments.coupling.coupling_sweep`).
    name : str
        Name of the returned report.
    data : str
        Description of the instance (also the sweep's ``model_name``).
    lam : array_like, optional
        Candidate log-SNR grid (default: the sweep's, 97 levels on [-8, 8]).
    rng : numpy.random.Generator, int or None, default 0
        Randomness of Monte-Carlo problem builders in the sweep.

    Returns
    -------
    CheckReport
        ``holds`` when every row passes; headline ``max_efficiency``
        (:math:`\max_J V(p^*)/V(p_{\mathrm{entropic}})`); ``measured`` holds per-J lists of
        ``J``, ``m``, ``n_atoms``, ``n_atoms_reduced``, ``n_clusters``, ``atom_bound``,
        ``w1``, ``efficiency``, ``value`` and ``gap``.

    References
    ----------
    docs/THEORY.md section 4, regime (c) (partial coupling) and Theorem 1 (the atom bound).
    """
    from noisealloc.verify.experiments.coupling import coupling_sweep

    t0 = time.perf_counter()
    rep = coupling_sweep(model, J_values, lam=lam, criterion=criterion, rng=rng, model_name=data)
    ok = all(r["n_atoms_reduced"] <= r["atom_bound"] and np.isfinite(r["value"]) and r["efficiency"] <= 1 + 1e-9
             and r["gap"] <= 1e-4 for r in rep.rows)
    worst = max(r["efficiency"] for r in rep.rows)
    return CheckReport(
        name=name, holds=bool(ok),
        measured={"max_efficiency": worst, **{k: [r[k] for r in rep.rows] for k in
                                              ("J", "m", "n_atoms", "n_atoms_reduced", "n_clusters", "atom_bound", "w1", "efficiency",
                                               "value", "gap")}},
        tolerance=1.0, assumptions=("B-spline partial coupling", f"criterion {criterion}"), data=data,
        seconds=time.perf_counter() - t0, headline="max_efficiency",
        message="atoms <= bound, certified (gap <= 1e-4), V(p*)/V(p_entropic) <= 1; W1 and efficiency reported per J",
    )


def _checks(tier: str, gen):
    from noisealloc.verify import checks
    from noisealloc.verify.checks import rmt

    quick = tier == "quick"
    yield lambda: checks.check_i_mmse()
    yield lambda: checks.check_i_mmse_monte_carlo(n_samples=4096 if quick else 16384, rng=gen)
    yield lambda: checks.check_budget()
    yield lambda: checks.check_theorem1()
    yield lambda: checks.check_theorem1p(rng=gen)
    yield lambda: checks.check_theorem2(rng=gen, n_perturb=200 if quick else 2000)
    yield lambda: checks.check_decoupling(n=40_000 if quick else 400_000, rng=gen)
    yield lambda: checks.check_sandwich_simulation(n_seeds=200 if quick else 1000, N=2000, rng=gen)
    yield lambda: checks.check_coordinate_covariance()
    yield lambda: list(rmt.rmt_checks(quick=quick, rng=gen).values())
    if quick:
        yield lambda: coupling_check(checks.default_gaussian(), (1, 2, 4), criterion="sandwich",
                                     name="coupling.gaussian.sandwich",
                                     data="Gaussian manifold D=5 k=2, linear shrinkage, 97 levels on [-8, 8]")
    else:
        yield lambda: coupling_check(checks.default_gaussian(), (1, 2, 4, 8, 16, 32), criterion="sandwich",
                                     name="coupling.gaussian.sandwich",
                                     data="Gaussian manifold D=5 k=2, linear shrinkage, 97 levels on [-8, 8]")
        yield lambda: coupling_check(checks.default_gaussian(), (1, 2, 4, 8, 16, 32), criterion="L",
                                     name="coupling.gaussian.L",
                                     data="Gaussian manifold D=5 k=2, linear shrinkage, 97 levels on [-8, 8]")
        # On [-8, 8] the residual of the Dirac mixture vanishes at the top levels and the sandwich
        # solver meets singular moment matrices; on [-6, 4] (h >= 1e-3 max h) it is certified.
        yield lambda: coupling_check(checks.default_dirac(), (1, 2, 4, 8, 16, 32), criterion="sandwich",
                                     name="coupling.dirac.sandwich", lam=np.linspace(-6.0, 4.0, 81),
                                     data="dirac K=4 D=1, posterior weights, 81 levels on [-6, 4]")
        yield lambda: coupling_check(checks.default_dirac(), (1, 2, 4, 8, 16, 32), criterion="L",
                                     name="coupling.dirac.L",
                                     data="dirac K=4 D=1, posterior weights, 97 levels on [-8, 8]")


def _failed(name: str, exc: BaseException, seconds: float) -> CheckReport:
    return CheckReport(name=name, holds=False, measured={"error": f"{type(exc).__name__}: {exc}"[:500]},
                       tolerance=float("nan"), seconds=seconds, headline="", message="the check raised")


def run(tier: str = "quick", rng=0, progress: bool = True) -> list:
    """Run a tier of checks; a check that raises is reported as a failure (with the error), not propagated.

    Parameters
    ----------
    tier : {'quick', 'full'}
    rng : Generator, int or None
        Seed of every simulation in the tier (one generator, drawn in a fixed order).
    progress : bool
        Print one line per check to stderr as it finishes.

    Returns
    -------
    list of CheckReport
        In the order the checks ran; a check that raised appears as ``check#<i>`` with
        ``holds=False`` and the error in ``measured['error']``.

    Notes
    -----
    BLAS is limited to one thread for the duration of the run
    (:func:`noisealloc.solvers.single_blas_thread`) and restored afterwards.
    """
    check_choice(tier, "tier", TIERS)
    gen = as_generator(rng)
    from noisealloc.solvers import single_blas_thread

    reports = []
    with single_blas_thread():
        for i, make in enumerate(_checks(tier, gen)):
            t0 = time.perf_counter()
            try:
                out = make()
            except Exception as exc:  # a crash is a failed check, with its message
                out = _failed(f"check#{i}", exc, time.perf_counter() - t0)
            for r in out if isinstance(out, list) else [out]:
                reports.append(r)
                if progress:
                    print(f"  {'PASS' if r.holds else 'FAIL'}  {r.name:<28} {r.seconds:7.1f} s", file=sys.stderr, flush=True)
    return reports


def format_table(reports) -> str:
    """Fixed-width table: check, PASS/FAIL, measured value, tolerance, seconds.

    Parameters
    ----------
    reports : iterable of CheckReport
        E.g. the output of :func:`run`.

    Returns
    -------
    str
        A header line, one line per report (its headline ``value``) and a summary
        line with the number of checks, failures and total seconds.

    Examples
    --------
    >>> from noisealloc.verify.checks import CheckReport
    >>> ok = CheckReport(name="demo", holds=True, measured={"err": 2e-9}, tolerance=1e-6, seconds=0.5, headline="err")
    >>> bad = CheckReport(name="demo2", holds=False, measured={"err": 3e-3}, tolerance=1e-6, seconds=1.25, headline="err")
    >>> print(format_table([ok, bad]))
    check      result   measured   tolerance   seconds
    demo       PASS     2e-09      1e-06       0.5
    demo2      FAIL     0.003      1e-06       1.2
    2 checks, 1 failed, 1.8 s
    """
    lines = [f"{'check':<30} {'result':<6} {'measured':>12} {'tolerance':>11} {'seconds':>8}"]
    for r in reports:
        lines.append(f"{r.name:<30} {'PASS' if r.holds else 'FAIL':<6} {r.value:>12.4g} {r.tolerance:>11.3g} "
                     f"{r.seconds:>8.1f}")
    n_fail = sum(not r.holds for r in reports)
    lines.append(f"{len(reports)} checks, {n_fail} failed, {sum(r.seconds for r in reports):.1f} s")
    return "\n".join(lines)
