"""Figure 2: fully coupled optimal allocations are atomic, with their certificates (docs/THEORY.md section 6.2).

For each case (data set x linear-in-parameters denoiser family of :mod:`noisealloc.theory.information.matrices`),
two optima on a log-SNR grid, each from the optimize chain :func:`noisealloc.solvers.optimize_allocation`:

* the L-optimal allocation :math:`\\min_p \\mathrm{tr}(A_\\omega A_p^{-1})` (the convex surrogate of the
  sandwich, exact when :math:`G = sA`), whose certificate is a rigorous duality gap: the
  sensitivity :math:`d(\\lambda) = \\mathrm{tr}(A_p^{-1} A_\\omega A_p^{-1} A(\\lambda))` never exceeds the
  value :math:`\\Phi(p)` and touches it at the atoms (Kiefer-Wolfowitz), checked on the grid and
  off the grid by local maximisation;
* the sandwich optimum :math:`\\min_p V(p)`, certified by first-order (KKT) stationarity.

Atom counts are compared with Theorem 1's bound (``m(m+1)/2 + 1`` convex, ``m(m+1) + 1`` sandwich).
The square-root entropic density of the same data is drawn for comparison.

Run alone: ``python -m noisealloc.figures.fig2_atoms --out DIR [--quick|--full]``.
"""

from __future__ import annotations

import warnings

import numpy as np

from noisealloc.figures import _common as C

NAME = "fig2_atoms"


def _cases(quick: bool):
    cases = [
        {"data": "dirac:K=3,D=1,sep=2,seed=0", "family": "posterior-weights", "opts": {}},
        {"data": "dirac:K=5,D=1,sep=2,seed=0", "family": "random-features", "opts": {"q": 8, "n_mc": 4096}},
        {"data": "gaussian:D=8,k=2,seed=0", "family": "linear", "opts": {}},
        {"data": "gaussian:D=8,k=2,seed=0", "family": "random-features", "opts": {"q": 8, "n_mc": 4096}},
    ]
    if not quick:
        cases.append({"data": "digits", "family": "random-features", "opts": {"q": 8, "n_mc": 1024}})
        cases.append({"data": "circle:D=2,r=1", "family": "random-features", "opts": {"q": 8, "n_mc": 4096}})
    return cases


def _sizes(quick: bool) -> dict:
    return {"lam_min": -12.0, "lam_max": 12.0, "levels": 97 if quick else 193}


def solve_case(model, case: dict, lam, *, seed: int) -> dict:
    """Both optima, certificates and the off-grid check of one case (two calls of the optimize chain).

    A chain that ends without an allocation (status 4, numerically singular) gives ``{"skipped": reason}``.
    """
    from noisealloc.solvers import optimize_allocation
    from noisealloc.theory.schedules.entropic import schedule_from_rate
    from noisealloc.theory.information.matrices import build_family_matrices

    prob = build_family_matrices(model, case["family"], lam, data=case["data"], rng=seed, **case["opts"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # L: solve -> Caratheodory reduction -> certificate of the reduced allocation -> off-grid check
        opt_L = optimize_allocation(prob, "L", exact=False)
        # sandwich: the solver's allocation and its KKT certificate as they are
        opt_V = optimize_allocation(prob, "sandwich", reduce=False, offgrid=False, exact=False)
    for opt in (opt_L, opt_V):
        if opt.weights is None:
            return {"skipped": f"criterion {opt.criterion}: {opt.message}"}
    red = opt_L.reduction
    reduced = {} if red is None else {"L": {"n_atoms_before": red.n_atoms_before, "n_atoms_after": red.n_atoms_after,
                                            "value_before": red.value_before, "value_after": red.value_after,
                                            "moment_residual": red.moment_residual}}
    og = opt_L.offgrid
    h = prob.entropy_rate
    p_ent = None
    if h is not None and np.any(np.asarray(h) > 0):
        p_ent = schedule_from_rate(prob.lam, np.asarray(h, float)).pdf
    out = {"data": case["data"], "family": case["family"], "m": prob.m, "options": case["opts"],
           "p_sqrt_entropic": p_ent, "warnings": sorted({f"{w.category.__name__}: {w.message}" for w in caught}),
           "reduction": reduced}
    for key, opt in (("L", opt_L), ("sandwich", opt_V)):
        res, cert, w = opt.solve_result, opt.certificate, opt.weights
        sup = np.flatnonzero(w > 0)
        out[key] = {
            "weights": w, "support_lam": prob.lam[sup], "support_weights": w[sup],
            "n_atoms_solver": int(np.count_nonzero(res.weights)),
            "value": res.value, "status": res.status, "message": res.message,
            "gap": cert.gap, "rel_gap": cert.rel_gap, "kind": cert.kind,
            "n_atoms": int(cert.n_atoms), "atom_bound": int(cert.atom_bound), "atoms_ok": bool(cert.atoms_ok),
            "sensitivity": -np.asarray(cert.g, float), "bound": -float(cert.g_bar),
            "equivalence_ok": bool(cert.equivalence_ok),
            "surrogate_value": cert.surrogate_value,
        }
    if og is not None:
        out["L"]["offgrid"] = {"lam_max": og.lam_max, "sensitivity_max": og.sensitivity_max, "bound": og.bound,
                               "rel_violation": og.rel_violation, "n_eval": og.nfev}
    return out


def compute(*, quick: bool = True, seed: int = 0, mnist=None, progress=None) -> dict:
    from noisealloc.theory.models.datasets import load_data

    s = _sizes(quick)
    lam = np.linspace(s["lam_min"], s["lam_max"], s["levels"])
    rows, skipped = [], []
    cases = _cases(quick)
    for i, case in enumerate(cases):
        if progress is not None:
            progress(f"{i + 1}/{len(cases)} {case['data']} {case['family']}")
        try:
            model = load_data(case["data"])
        except ValueError as exc:
            skipped.append({"data": case["data"], "family": case["family"], "reason": str(exc)})
            continue
        row = solve_case(model, case, lam, seed=seed)
        if "skipped" in row:
            skipped.append({"data": case["data"], "family": case["family"], "reason": row["skipped"]})
        else:
            rows.append(row)
    return {"figure": NAME, "lam": lam, "rows": rows, "skipped": skipped, "seed": seed, "quick": quick,
            "sizes": s, "evaluation_weight": "ELBO omega = exp(lam)/2"}


#: Atoms of the two optima closer than this (in lambda) are drawn apart by twice COINCIDENT_SHIFT.
COINCIDENT_TOL = 0.3
COINCIDENT_SHIFT = 0.2


def coincident_offsets(lam_l, lam_v) -> dict:
    """Drawing positions of two supports: atoms of one within ``COINCIDENT_TOL`` of the other's move apart.

    Returns ``{"L": x_L, "sandwich": x_V, "shared": [levels]}``: an L atom with a V atom nearby is drawn
    ``COINCIDENT_SHIFT`` to the left of its level and that V atom as far to the right; the rest stay.
    """
    xl, xv = np.array(lam_l, float), np.array(lam_v, float)
    shared = []
    for i, a in enumerate(np.asarray(lam_l, float)):
        near = np.flatnonzero(np.abs(np.asarray(lam_v, float) - a) < COINCIDENT_TOL)
        if near.size:
            xl[i] = a - COINCIDENT_SHIFT
            xv[near] = np.asarray(lam_v, float)[near] + COINCIDENT_SHIFT
            shared.append(float(a))
    return {"L": xl, "sandwich": xv, "shared": shared}


def plot(doc: dict, path) -> None:
    plt = C.setup_matplotlib()
    lam = np.asarray(doc["lam"], float)
    rows = doc["rows"]
    n = max(len(rows), 1)
    fig, axes = plt.subplots(n, 2, figsize=(13, 3.3 * n + 0.6), squeeze=False)
    for i, row in enumerate(rows):
        ax, bx = axes[i]
        xs = coincident_offsets(row["L"]["support_lam"], row["sandwich"]["support_lam"])
        for key, color in (("L", "C0"), ("sandwich", "C3")):
            r = row[key]
            x = xs[key]
            y = np.asarray(r["support_weights"], float)
            ml, sl, bl = ax.stem(x, y, linefmt=color + "-", markerfmt=color + "o", basefmt="none")
            what = "relative duality gap" if r["kind"] == "duality-gap" else "relative KKT residual"
            ml.set_label(f"{'L-optimal' if key == 'L' else 'sandwich V-optimal'}: {r['n_atoms']} atom{'' if r['n_atoms'] == 1 else 's'} "
                         f"(bound {r['atom_bound']}), {what} {float(r['rel_gap']):.1e}")
        if xs["shared"]:
            ax.plot([], [], " ", label=f"L and V atoms at the same level ({', '.join(f'{v:g}' for v in xs['shared'])}) "
                                       f"drawn {2 * COINCIDENT_SHIFT:g} apart")
        if row.get("p_sqrt_entropic") is not None:
            p = np.asarray(row["p_sqrt_entropic"], float)
            ax2 = ax.twinx()
            ax2.plot(lam, p, "k--", lw=1.1, label=r"$\sqrt{h}$ entropic density")
            ax2.set_ylabel("entropic density per unit $\\lambda$", fontsize=8.5)
            ax2.grid(False)
            # Headroom above both curves: the legend sits in the top quarter of the panel.
            ax2.set_ylim(0, 1.45 * max(float(np.max(p)), 1e-300))
            h1, l1 = ax.get_legend_handles_labels()
            h2, l2 = ax2.get_legend_handles_labels()
            ax2.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8, framealpha=0.9)
        ax.set_ylim(0, 1.45)
        ax.set_xlim(lam[0] - 0.5, lam[-1] + 0.5)
        ax.set_ylabel("allocation weight $p_i$")
        ax.set_title(f"{row['data']}, family '{row['family']}' (m = {row['m']} parameters)")
        if row.get("p_sqrt_entropic") is None:
            ax.legend(loc="upper left", fontsize=8)
        rL = row["L"]
        d = np.asarray(rL["sensitivity"], float)
        bound = float(rL["bound"])
        bx.plot(lam, d / bound, "C0-", label=r"sensitivity $d(\lambda)/\Phi(p^*)$ on the grid")
        bx.axhline(1.0, color="k", lw=1.0, ls="--", label=r"value $\Phi(p^*)$ (certificate: $d \leq \Phi$)")
        bx.plot(np.asarray(rL["support_lam"], float), np.ones(len(rL["support_lam"])), "C0o", label="atoms (touch)")
        if "offgrid" in rL:
            og = rL["offgrid"]
            bx.plot([og["lam_max"]], [og["sensitivity_max"] / bound], "rx", ms=9,
                    label=f"off-grid max (rel. violation {float(og['rel_violation']):.1e})")
        bx.set_ylim(0, 1.15)
        bx.set_ylabel(r"$d(\lambda) / \Phi(p^*)$ (L-criterion)")
        bx.set_title("sensitivity certificate of the L-optimal allocation")
        bx.legend(loc="lower right", fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel(C.LAM_LABEL)
    if doc["skipped"]:
        fig.text(0.01, 0.002, "skipped: " + ", ".join(f"{s['data']} ({s['family']})" for s in doc["skipped"]),
                 fontsize=8)
    fig.suptitle("Figure 2: fully coupled optimal allocations are finitely supported (atoms), with certificates",
                 fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()))  # room for the suptitle
    C.write_png(fig, path)
    plt.close(fig)


def run(out_dir, *, quick: bool = True, seed: int = 0, mnist=None, progress=None) -> dict:
    """Compute, write ``fig2_atoms.{json,png,config.json}``; return their paths."""
    return C.run_figure(NAME, compute, plot, out_dir, seed=seed,
                        options={"quick": quick, "cases": _cases(quick), **_sizes(quick)},
                        compute_kwargs={"quick": quick, "seed": seed, "progress": progress})


def main(argv=None) -> int:
    return C.figure_main(run, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
