r"""Coordinate covariance of the square-root law (docs/THEORY.md section 4 (b)): the law moved between
coordinates picks up :math:`|du/d\lambda|^{1/2}`.
"""

from __future__ import annotations


import numpy as np

from noisealloc.theory.tolerances import (
    FD_RTOL,
)
from noisealloc.verify.checks.report import CheckReport, _Timer, default_dirac

__all__ = ['check_coordinate_covariance']


def check_coordinate_covariance(model=None, coordinates=("sigma", "log-sigma", "t-cosine"), *, lam=None,
                                data: str = "dirac K=4 D=1") -> CheckReport:
    r"""Coordinate covariance of the square-root law.

    For learners uniform in ``u``: (1) the schedule built in ``u`` and moved to :math:`\lambda` equals
    :math:`\sqrt{h}\,|du/d\lambda|^{1/2}` normalised (the Jacobian by centred differences of ``u(lambda)``,
    independent of the coordinate module's analytic derivative), to ``FD_RTOL``; (2) its
    independent-learner factor in ``u`` is 1 while the :math:`\lambda`-law moved to ``u`` loses a factor > 1
    (equal to 1 for an affine coordinate such as log-sigma, where the two laws coincide).

    Parameters
    ----------
    model : DataModel, optional
        Data model (default :func:`default_dirac`).
    coordinates : sequence of str
        Coordinates ``u`` of the learners.
    lam : array_like, optional
        Level grid (default 121 levels on [-6, 6]).
    data : str
        Description of the instance for the report.

    Returns
    -------
    CheckReport
        Headline ``max_rel_pdf_error``.

    References
    ----------
    docs/THEORY.md section 4 (b): the square-root law is not coordinate invariant.
    """
    from noisealloc.theory.coordinates import get_coordinate
    from noisealloc.theory.schedules.entropic import entropic_schedule, independent_learner_factor
    from noisealloc.theory.tolerances import FD_REL_STEP

    with _Timer() as t:
        model = default_dirac() if model is None else model
        lam = np.linspace(-6.0, 6.0, 121) if lam is None else np.asarray(lam, dtype=np.float64)
        h = np.asarray(model.entropy_rate(lam).value)
        lam_law = entropic_schedule(lam, h, coordinate="lambda")
        inner = lam[1:-1]
        rows = {}
        worst = 0.0
        ok = True
        for name in coordinates:
            c = get_coordinate(name)
            step = FD_REL_STEP * np.maximum(1.0, np.abs(inner))
            dudl = np.abs((c.from_lam(inner + step) - c.from_lam(inner - step)) / (2 * step))
            sched = entropic_schedule(lam, h, coordinate=name).to("lambda")
            got = sched.pdf(inner)
            ref = np.sqrt(h[1:-1] * dudl)
            # normalise both on the same interior grid (the schedule's own normalisation is the trapezoid in u)
            got_n = got / np.trapezoid(got, inner)
            ref_n = ref / np.trapezoid(ref, inner)
            rel = float(np.max(np.abs(got_n - ref_n) / ref_n))
            u = c.from_lam(lam)
            order = np.argsort(u)
            u_s = u[order]
            hu = (h * np.abs(c.dlam_du(u)))[order]
            f_u = independent_learner_factor(u_s, hu, np.sqrt(hu))
            p_lam_in_u = (np.sqrt(h) * np.abs(c.dlam_du(u)))[order]
            f_lam = independent_learner_factor(u_s, hu, p_lam_in_u)
            # an affine coordinate (log-sigma = -lam/2) has a constant Jacobian: there both laws coincide
            affine = bool(np.ptp(dudl) <= FD_RTOL * np.max(dudl))
            rows[name] = {"max_rel_pdf_error": rel, "factor_u_law": f_u, "factor_lambda_law_in_u": f_lam,
                          "affine": affine}
            worst = max(worst, rel)
            lam_ok = abs(f_lam - 1) <= 1e-12 if affine else f_lam > 1 + 1e-6
            ok &= bool(rel <= FD_RTOL and abs(f_u - 1) <= 1e-12 and lam_ok)
        del lam_law
    return CheckReport(
        name="coordinate-covariance", holds=ok, measured={"max_rel_pdf_error": worst, **rows}, tolerance=FD_RTOL,
        assumptions=("learners on a grid uniform in u", "decoupled features (omega_u c ∝ h_u)"),
        data=data + f", coordinates {', '.join(coordinates)}", seconds=t.seconds, headline="max_rel_pdf_error",
        message="pdf in lambda of the u-law vs sqrt(h |du/dlam|) (relative, after normalisation on the grid); "
                "factor(u-law) = 1 < factor(lambda-law)",
    )
