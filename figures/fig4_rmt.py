"""Figure 4: random-matrix checks of the feature-noise decoupling proxy (docs/THEORY.md section 4 (b), items (i)-(iv)).

Draws the reports of :func:`noisealloc.verify.checks.rmt.rmt_checks`:

(i)   simulated OLS excess risk against the exact :math:`s^2 q/(n-q-1)`, and simulated ridge variance against
      the Marchenko-Pastur deterministic equivalent;
(ii)  the numerically optimised finite-N allocation against the closed form
      :math:`n_u = q + 1 + \\sqrt{q s^2 \\omega_u/\\nu}`;
(iii) convergence of the finite-N allocation to the square-root law as :math:`N/q \\to \\infty` (slope -1);
(iv)  the law failing when decoupling is violated (features whose spectrum moves with :math:`\\lambda`).

Run alone: ``python -m noisealloc.figures.fig4_rmt --out DIR [--quick|--full]``.
"""

from __future__ import annotations

import numpy as np

from noisealloc.figures import _common as C

NAME = "fig4_rmt"
#: Round-off floor of a loss ratio minus one: 1000 machine epsilons (a ratio of sums over a few hundred levels,
#: each carrying a few ulps); panel (iv) states it, so a decoupled loss below it reads as zero, not as data.
ROUNDOFF_FLOOR = 1000 * np.finfo(float).eps


def compute(*, quick: bool = True, seed: int = 0, mnist=None, progress=None) -> dict:
    """All numbers of figure 4: the reports of :func:`~noisealloc.verify.checks.rmt.rmt_checks` (no I/O).

    ``mnist`` is accepted for the common figure signature and not used.  The returned
    document has ``figure``, ``seed``, ``quick`` and ``checks``: one entry per check key
    (``'i.ols'``, ``'i.ridge'``, ``'ii'``, ``'iii'``, ``'iv'``) with its name, verdict,
    headline value, tolerance, message, data description and measured arrays.
    """
    from noisealloc.verify.checks.rmt import rmt_checks

    reports = rmt_checks(quick=quick, rng=seed)
    checks = {}
    for key, rep in reports.items():
        checks[key] = {"name": rep.name, "holds": bool(rep.holds), "headline": rep.headline,
                       "headline_value": rep.measured.get(rep.headline), "tolerance": rep.tolerance,
                       "message": rep.message, "data": rep.data, "measured": rep.measured}
        if progress is not None:
            progress(f"{key} done")
    return {"figure": NAME, "checks": checks, "seed": seed, "quick": quick}


def _arr(m, k):
    return np.asarray(m[k], dtype=float)


def plot(doc: dict, path) -> None:
    """Draw the six panels of figure 4 from a document of :func:`compute` (or its saved JSON) to ``path``."""
    plt = C.setup_matplotlib()
    ch = doc["checks"]
    fig, axes = plt.subplots(2, 3, figsize=(16, 9.5))
    verdict = {True: "holds", False: "FAILS"}

    ax = axes[0, 0]
    m = ch["i.ols"]["measured"]
    n = _arr(m, "n")
    ax.errorbar(n, _arr(m, "simulated"), yerr=2 * _arr(m, "stderr"), fmt="o", capsize=3, label="simulated (±2 s.e.)")
    ax.plot(n, _arr(m, "exact"), "k-", label=r"exact $s^2 q/(n-q-1)$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("samples per learner n")
    ax.set_ylabel("expected excess risk (units of $s^2$)")
    ax.set_title(f"(i) OLS, q = {m['q']}: {verdict[ch['i.ols']['holds']]} (max z = {float(m['max_z']):.2f})")
    ax.legend()

    ax = axes[0, 1]
    m = ch["i.ridge"]["measured"]
    n, g = _arr(m, "n"), _arr(m, "gamma")
    for gv in np.unique(g):
        sel = g == gv
        eb = ax.errorbar(n[sel], _arr(m, "simulated")[sel], yerr=2 * _arr(m, "stderr")[sel], fmt="o", capsize=3,
                         label=f"simulated (\u00b12 s.e.), ridge $\\gamma$ = {gv:g}")
        ax.plot(n[sel], _arr(m, "deterministic_equivalent")[sel], "-", color=eb.lines[0].get_color(),
                label=f"Marchenko-Pastur deterministic equivalent, $\\gamma$ = {gv:g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("samples per learner n")
    ax.set_ylabel("variance term of the excess risk")
    ax.set_title(f"(i) ridge, q = {m['q']}: simulated vs Marchenko-Pastur DE (lines)\n"
                 f"{verdict[ch['i.ridge']['holds']]}: max rel. error {float(m['max_rel_error']):.3f}")
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi * 6.0)  # log axis: a band above the data for the legend
    ax.legend(fontsize=8, loc="upper right")

    ax = axes[0, 2]
    m = ch["ii"]["measured"]
    lam = _arr(m, "lam")
    ax.plot(lam, _arr(m, "n_closed_form"), "C0-", lw=2.5, alpha=0.6, label=r"closed form $q+1+\sqrt{q s^2\omega/\nu}$")
    ax.plot(lam, _arr(m, "n_numerical"), "k.", label="numerical optimum")
    ax.set_xlabel(C.LAM_LABEL)
    ax.set_ylabel("samples allocated to the level, $n_u$")
    ax.set_title(f"(ii) finite-N optimal allocation: {verdict[ch['ii']['holds']]}\n"
                 f"(max |difference| / N = {float(m['max_rel_diff']):.1e})")
    ax.legend()

    ax = axes[1, 0]
    m = ch["iii"]["measured"]
    x = _arr(m, "N_over_q")
    ax.loglog(x, _arr(m, "l1"), "o-", label=f"L1 to the sqrt law (slope {float(m['slope_l1']):.3f})")
    ax.loglog(x, _arr(m, "w1"), "s-", label=f"W1 in $\\lambda$ (slope {float(m['slope_w1']):.3f})")
    ax.loglog(x, np.maximum(_arr(m, "efficiency_loss"), 1e-300), "^-",
              label=f"efficiency loss (slope {float(m['slope_efficiency_loss']):.2f})")
    ax.set_xlabel("total samples per parameter N / q")
    ax.set_ylabel("distance of the finite-N allocation to the sqrt law")
    ax.set_title(f"(iii) convergence to the square-root law: {verdict[ch['iii']['holds']]}")
    ax.legend(fontsize=8)

    ax = axes[1, 1]
    m = ch["iv"]["measured"]
    x = _arr(m, "N_over_Uq")
    # linear in the loss, so zero is zero: the decoupled loss is 0 up to round-off (the law is exact there), and a
    # log axis would spend 16 decades on that round-off
    coupled, decoupled = _arr(m, "efficiency_loss_coupled"), _arr(m, "efficiency_loss_decoupled")
    ax.semilogx(x, coupled, "C3o-",
                label=f"spectrum moves with $\\lambda$ (asymptotic factor {float(m['factor_coupled']):.3f})")
    ax.semilogx(x, decoupled, "C0s-", label=f"decoupled (factor {float(m['factor_decoupled']):.3f}); "
                f"max |loss| {np.max(np.abs(decoupled)):.0e}"
                + (f" <= round-off floor {ROUNDOFF_FLOOR:.0e}" if np.max(np.abs(decoupled)) <= ROUNDOFF_FLOOR else ""))
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xlabel("samples per learner and parameter N / (U q)")
    ax.set_ylabel(r"loss of the $\sqrt{h}$ law vs optimum (ratio - 1), linear")
    ax.set_title(f"(iv) decoupling violated -> the law fails: {verdict[ch['iv']['holds']]}\n"
                 f"(round-off floor {ROUNDOFF_FLOOR:.0e} = 1000 machine epsilons)")
    ax.legend(fontsize=8)

    ax = axes[1, 2]
    sl = _arr(m, "sim_lam")
    for key, col, lab in (("decoupled", "C0", "decoupled"), ("coupled", "C3", "spectrum moves with $\\lambda$")):
        ax.errorbar(sl, _arr(m, f"cost_ratio_{key}"), yerr=2 * _arr(m, f"cost_ratio_{key}_se"), fmt="o", color=col,
                    capsize=3, label=f"simulated, {lab}")
        ax.plot(sl, _arr(m, f"cost_ratio_de_{key}"), "-", color=col, label=f"deterministic equivalent, {lab}")
    ax.set_xlabel(C.LAM_LABEL)
    ax.set_ylabel(r"per-level cost $n\cdot$excess$/s^2$ (ridge learner)")
    ax.set_title(f"(iv) simulated learners, n = {m['sim_n']} per level")
    ax.legend(fontsize=8)

    fig.suptitle("Figure 4: random-matrix checks of the square-root law (independent learners)", fontsize=12)
    fig.tight_layout()
    C.write_png(fig, path)
    plt.close(fig)


def run(out_dir, *, quick: bool = True, seed: int = 0, mnist=None, progress=None) -> dict:
    """Compute, write ``fig4_rmt.{json,png,config.json}``; return their paths."""
    return C.run_figure(NAME, compute, plot, out_dir, seed=seed,
                        options={"quick": quick},
                        compute_kwargs={"quick": quick, "seed": seed, "progress": progress})


def main(argv=None) -> int:
    """Command line: ``python -m noisealloc.figures.fig4_rmt --out DIR [--quick|--full]``."""
    return C.figure_main(run, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
