r"""Checks of the information identities of docs/THEORY.md section 2: I--MMSE (finite differences and
Monte Carlo) and the budget.
"""

from __future__ import annotations


import numpy as np

from noisealloc.theory.tolerances import (
    I_MMSE_RATE_FLOOR,
)
from noisealloc.verify.checks.report import CheckReport, _Timer, default_dirac

__all__ = ['check_i_mmse', 'check_i_mmse_monte_carlo', 'check_budget']


def check_i_mmse(model=None, lam=None, *, data: str = "dirac K=4 D=1") -> CheckReport:
    r"""I--MMSE identity :math:`-dH/d\lambda = \tfrac12 e^\lambda \mathrm{mmse}(\lambda)` (centred differences).

    The verdict is the library's one rule (:data:`noisealloc.theory.information.i_mmse.I_MMSE_RULE`): the
    largest relative error over levels with :math:`h >` ``I_MMSE_RATE_FLOOR`` is at most ``FD_RTOL``.

    Parameters
    ----------
    model : DataModel, optional
        A deterministic model (default :func:`default_dirac`).
    lam : array_like, optional
        Levels (default 13 levels on [-6, 6]).
    data : str
        Description of the instance for the report.

    Returns
    -------
    CheckReport
        Headline ``max_rel_error``.

    References
    ----------
    docs/THEORY.md section 2 (I-MMSE).
    """
    from noisealloc.theory.information.i_mmse import i_mmse_check

    with _Timer() as t:
        model = default_dirac() if model is None else model
        lam = np.linspace(-6.0, 6.0, 13) if lam is None else np.asarray(lam, dtype=np.float64)
        r = i_mmse_check(model, lam)
    return CheckReport(
        name="i-mmse", holds=r.holds,
        measured={"max_rel_error": r.max_rel_error, "lam": r.lam, "fd": r.fd, "rate": r.rate, "rel_error": r.rel_error,
                  "step": r.step, "tested": r.tested},
        tolerance=r.tolerance,
        assumptions=("discrete data (H finite)" if model.discrete else "continuous data (I finite)",
                     f"h > {I_MMSE_RATE_FLOOR:g} where tested"),
        data=data, seconds=t.seconds, headline="max_rel_error", message=r.rule,
    )


def check_i_mmse_monte_carlo(model=None, lam=None, *, n_samples: int = 4096, rng=0,
                             data: str = "dirac:K=5,D=3,sep=2,seed=0 (Monte Carlo)") -> CheckReport:
    r"""I-MMSE identity of a Monte-Carlo model, integrated per draw and judged by its standard error.

    The verdict is the library's rule (:data:`noisealloc.theory.information.i_mmse.I_MMSE_MC_RULE`): on every
    interval between consecutive levels, :math:`|\bar r| \le` ``MC_NSIGMA`` standard errors, with
    :math:`r_i = H_i(a) - H_i(b) - \int_a^b \tfrac12 e^\lambda \mathrm{mmse}_i\,d\lambda` per draw.

    Parameters
    ----------
    model : DiscreteDataModel, optional
        A discrete Monte-Carlo model (default: a 5-atom mixture spanning 3 dimensions).
    lam : array_like, optional
        Interval ends (default -2, -1, ..., 3).
    n_samples : int
        Draws of common random numbers.
    rng : int, Generator or None
        Randomness (a seed is recorded).
    data : str
        Description of the instance for the report.

    Returns
    -------
    CheckReport
        Headline ``max_abs_z``.

    References
    ----------
    docs/THEORY.md sections 2 (I-MMSE) and 3.1 (Monte-Carlo estimates carry standard errors).
    """
    from noisealloc.theory.models.datasets import load_data
    from noisealloc.theory.information.i_mmse import i_mmse_check

    with _Timer() as t:
        model = load_data("dirac:K=5,D=3,sep=2,seed=0") if model is None else model
        lam = np.arange(-2.0, 3.5, 1.0) if lam is None else np.asarray(lam, dtype=np.float64)
        r = i_mmse_check(model, lam, n_samples=n_samples, rng=rng)
    return CheckReport(
        name="i-mmse.monte-carlo", holds=r.holds,
        measured={"max_abs_z": float(np.max(np.abs(r.z))), "lam": r.lam, "difference": r.difference,
                  "integral": r.integral, "residual": r.residual, "stderr": r.stderr, "z": r.z,
                  "n_samples": r.n_samples, "seed": r.seed},
        tolerance=r.tolerance, assumptions=("discrete data, Monte Carlo (span dimension >= 3)",
                                            "common random numbers across levels"),
        data=data, seconds=t.seconds, headline="max_abs_z", message=r.rule,
    )


def check_budget(model=None, lam_min: float = -30.0, lam_max: float = 30.0, *, data: str = "dirac K=4 D=1") -> CheckReport:
    r"""Budget identity :math:`\int_a^b h\,d\lambda = H(a) - H(b)` (:math:`\to H(\pi)`), by adaptive quadrature.

    The verdict is the library's one rule (:data:`noisealloc.theory.information.budget.BUDGET_RULE`,
    :func:`noisealloc.theory.information.budget.budget_check`); what lies outside the finite interval,
    :math:`H(\pi) - (H(a) - H(b))`, is reported as ``tail``.

    Parameters
    ----------
    model : DiscreteDataModel, optional
        A discrete model (default :func:`default_dirac`).
    lam_min, lam_max : float
        The interval :math:`[a, b]`.
    data : str
        Description of the instance for the report.

    Returns
    -------
    CheckReport
        Headline ``abs_error`` (:math:`|\int_a^b h - (H(a) - H(b))|`).

    References
    ----------
    docs/THEORY.md section 2 (budget identity).
    """
    from noisealloc.theory.information.budget import budget_check

    with _Timer() as t:
        model = default_dirac() if model is None else model
        b = budget_check(model, lam_min, lam_max)
    return CheckReport(
        name="budget", holds=b.holds,
        measured={"abs_error": abs(b.error), "integral": b.value, "target": b.target, "entropy": b.entropy,
                  "tail": b.entropy - b.target, "quad_error": b.abs_error, "stderr": b.difference_stderr,
                  "nfev": b.nfev, "success": b.success},
        tolerance=b.tolerance, assumptions=("discrete data", "distinct atoms (H(lam) -> 0)"),
        data=data + f", lam in [{lam_min:g}, {lam_max:g}]", seconds=t.seconds, headline="abs_error",
        message=b.rule,
    )


# ------------------------------------------------------------------------------- Theorem 1
