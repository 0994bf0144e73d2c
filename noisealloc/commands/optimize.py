"""``noisealloc optimize``: certified optimal noise allocation in the fully coupled regime (docs/THEORY.md §4 (a)).

Example::

    noisealloc optimize --data dirac:K=4,D=1,sep=2 --model posterior-weights --criterion L \\
        --levels 161 --out opt.json --plot opt.png

Parse -> one library call -> print and write: :func:`noisealloc.solvers.optimize_allocation`
builds the per-level matrices of a linear-in-parameters denoiser family on a log-SNR grid
(``noisealloc.theory.information.matrices``), solves for the optimal allocation with a
certificate, reduces its support (Theorem 1), re-certifies the reduced allocation, checks the
sensitivity function between grid points and, for the Gaussian ``linear`` family, exactly (sympy).
"""

from __future__ import annotations

import numpy as np

from noisealloc.theory.request_limits import MAX_FEATURES, MAX_OPTIMIZE_LEVELS

CRITERIA = ("sandwich", "L", "A", "D", "E")


def add_arguments(parser) -> None:
    parser.add_argument("--data", required=True, metavar="SPEC", help="data SPEC (see `noisealloc entropy --help`)")
    parser.add_argument("--model", required=True, metavar="FAMILY",
                        help="posterior-weights | linear | random-features | spline:J")
    parser.add_argument("--criterion", default="L", choices=CRITERIA,
                        help="sandwich V(p) (non-convex, KKT certificate), L = tr(A_w M^-1) (default), A = tr(M^-1), "
                             "D = -log det M, E = -lambda_min(M)")
    parser.add_argument("--levels", type=int, default=161,
                        help=f"candidate log-SNR levels (default 161; 3 to {MAX_OPTIMIZE_LEVELS} without --allow-large)")
    parser.add_argument("--lam-min", type=float, default=-8.0)
    parser.add_argument("--lam-max", type=float, default=8.0)
    parser.add_argument("--features", type=int, default=32, help="random features q (random-features family)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tol", type=float, default=1e-8, help="certified relative gap (default 1e-8)")
    parser.add_argument("--out", metavar="FILE.json")
    parser.add_argument("--plot", metavar="FILE.png")
    parser.add_argument("--allow-large", action="store_true",
                        help="lift the limit on --levels (the estimated memory is still checked against the "
                             "available memory)")


def _check_size(args) -> None:
    """Refuse a request above the size limits or the available memory, before building anything."""
    from noisealloc.theory.request_limits import check_memory, check_size

    allow = getattr(args, "allow_large", False)
    check_size("--levels", args.levels, MAX_OPTIMIZE_LEVELS, minimum=3, allow_large=allow)
    check_size("--features", args.features, MAX_FEATURES, minimum=1, allow_large=allow)
    # Dense level x level work of the solver and certificates, and one (m x m) information matrix
    # per level (m <= features + 1), each with a few copies: 8 bytes x 8 arrays.
    m = args.features + 1
    check_memory(64.0 * args.levels ** 2 + 64.0 * args.levels * m * m,
                 f"--levels {args.levels} --features {args.features}")


def _sensitivity_curve(result, lam_fine):
    """Sensitivity -g(lam) on a fine grid and its bound -sum_j p_j g_j (for the plot).

    The fine levels are appended to the problem as candidates of zero weight, so the
    certificate code computes their g exactly as for grid points.
    """
    from noisealloc.solvers import certify
    from noisealloc.solvers.pipeline import criterion_arrays

    fm = result.matrices
    A_aug = np.concatenate([fm.A, np.stack([fm.A_of_lam(l) for l in lam_fine])])
    G_aug = None
    if result.criterion == "sandwich":
        G_aug = np.concatenate([fm.G, np.stack([fm.G_of_lam(l) for l in lam_fine])])
    w = np.concatenate([result.weights, np.zeros(lam_fine.size)])
    cert = certify(A_aug, w, result.criterion, **criterion_arrays(fm, result.criterion, G=G_aug))
    g = np.asarray(cert.g)
    return -g[fm.lam.size:], -float(cert.g_bar)


def run(args) -> int:
    import math

    _check_size(args)  # before the solver's imports: a refused request answers at once
    # every value before the work (a NaN --tol was refused by the solver after minutes of set-up)
    if not (math.isfinite(args.tol) and args.tol > 0):
        raise ValueError(f"--tol must be a positive finite number; got {args.tol!r}")
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0; got {args.seed}")
    if str(args.model).startswith("spline:"):  # J basis functions: a size, limited like --levels
        from noisealloc.theory.request_limits import MAX_OPTIMIZE_LEVELS, check_size

        j_text = str(args.model).split(":", 1)[1]
        if j_text.strip().lstrip("+").isdigit() and int(j_text) >= 1:  # J < 1: the library says so
            check_size("--model spline:J (basis functions J)", int(j_text), MAX_OPTIMIZE_LEVELS,
                       allow_large=getattr(args, "allow_large", False))
    from noisealloc import __version__
    from noisealloc.theory.output import write_json
    from noisealloc.solvers import optimize_allocation
    from noisealloc.theory.models.datasets import load_data
    from noisealloc.theory.errors import check_interval

    lo, hi = check_interval(args.lam_min, args.lam_max, "[--lam-min, --lam-max]")
    if args.levels < 3:
        raise ValueError(f"--levels must be >= 3; got {args.levels}")
    model = load_data(args.data)
    lam = np.linspace(lo, hi, args.levels)
    opts = {"q": args.features} if args.model == "random-features" else {}
    # build -> solve -> Caratheodory reduction (Theorem 1) -> certificate recomputed from the reduced
    # allocation alone (what is written is what is certified) -> off-grid and, for the Gaussian
    # 'linear' family, exact sensitivity checks: one library call.
    r = optimize_allocation(model, args.criterion, family=args.model, lam=lam, build_options=opts, data=args.data,
                            tol=args.tol, rng=args.seed)
    fm, res, cert, off, exact = r.matrices, r.solve_result, r.certificate, r.offgrid, r.exact
    if res is None:
        raise ValueError(f"no allocation: {r.message}")
    weights, support, m, bound = r.weights, r.support, fm.m, r.atom_bound
    n_solver = r.reduction.n_atoms_before if r.reduction is not None else int(np.count_nonzero(res.weights))
    print(f"data {args.data}, family {fm.family} (m = {m}), criterion {args.criterion}, {args.levels} levels "
          f"on [{lo:g}, {hi:g}]")
    print(f"build {r.timings['build']:.2f} s ({fm.info.get('method')}), solve {r.timings['solve']:.2f} s "
          f"({res.method}, {res.nit} it)")
    print(f"value {cert.value:.10g}; certified {'gap' if cert.kind == 'duality-gap' else 'KKT residual'} "
          f"{cert.gap:.3e} (relative {cert.rel_gap:.3e}); {res.message}")
    print(f"atoms: {n_solver} from the solver, {support.size} after Caratheodory reduction "
          f"(Theorem 1 bound {bound}); equivalence check "
          f"{'passes' if cert.equivalence_ok else 'FAILS'} (slack {cert.equivalence_slack:.2e})")
    if off is not None:
        print(f"off-grid sensitivity max {off.sensitivity_max:.10g} at lam = {off.lam_max:.4f} vs bound "
              f"{off.bound:.10g} (relative violation {off.rel_violation:.2e})")
    if exact is not None:
        print(f"exact (sympy) sensitivity certificate on the interval: {'holds' if exact.holds else 'FAILS'} "
              f"(degree {exact.degree}, {exact.n_roots} roots, min margin {exact.min_margin:.3e})")
    for i in support:
        print(f"  lam = {lam[i]:+8.4f}   weight = {weights[i]:.6f}")

    out = {
        "format": "noisealloc.allocation", "version": 1,
        "data": args.data, "family": fm.family, "criterion": args.criterion, "m": m,
        "lam": lam.tolist(), "weights": weights.tolist(),
        "atoms": lam[support].tolist(), "atom_weights": weights[support].tolist(),
        "value": cert.value, "solver": {"method": res.method, "n_iter": res.nit, "status": res.status,
                                       "message": res.message, "seconds": r.timings["solve"]},
        "certificate": {"kind": cert.kind, "gap": cert.gap, "rel_gap": cert.rel_gap,
                        "equivalence_ok": bool(cert.equivalence_ok), "equivalence_slack": cert.equivalence_slack,
                        "support_slack": cert.support_slack, "n_atoms": int(support.size), "atom_bound": bound,
                        "g": np.asarray(cert.g).tolist()},
        "offgrid": None if off is None else {"lam_max": off.lam_max, "sensitivity_max": off.sensitivity_max,
                                             "bound": off.bound, "rel_violation": off.rel_violation},
        "exact": None if exact is None else {"holds": bool(exact.holds), "degree": exact.degree,
                                             "min_margin": exact.min_margin},
        "meta": {"levels": args.levels, "lam_min": lo, "lam_max": hi, "seed": args.seed, "tol": args.tol,
                 "build": fm.info, "version": __version__},
    }
    if args.out:
        write_json(args.out, out, sort_keys=False)
        print(f"wrote {args.out}")
    if args.plot:
        _plot(args, r)
        print(f"wrote {args.plot}")
    return 0 if (cert.equivalence_ok or cert.kind == "kkt") else 1


def _plot(args, result):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from noisealloc.theory.output import write_figure

    prob, lam, weights, support = result.matrices, result.matrices.lam, result.weights, result.support
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.4))
    if prob.entropy_rate is not None:
        h = np.maximum(prob.entropy_rate, 0.0)
        dens = np.sqrt(h) / np.trapezoid(np.sqrt(h), lam)
        ax1.fill_between(lam, dens, color="C0", alpha=0.25, label=r"sqrt-entropic density $\propto\sqrt{h(\lambda)}$")
        ax1.set_ylabel(r"density per unit $\lambda$")
    ax1b = ax1.twinx()
    ml, sl, bl = ax1b.stem(lam[support], weights[support], linefmt="C3-", markerfmt="C3o", basefmt=" ")
    ml.set_label("optimal atoms (weights, right axis)")
    ax1b.set_ylabel("atom weight")
    ax1b.set_ylim(0, max(weights.max() * 1.15, 1e-3))
    ax1.set_xlabel(r"log-SNR $\lambda$")
    atoms = f"{support.size} atom{'' if support.size == 1 else 's'}"
    ax1.set_title(f"{args.criterion}-optimal allocation: {atoms} ({prob.family}, m = {prob.m})",
                  fontsize=9)
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax1b.get_legend_handles_labels()
    ax1.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper left")
    ax1.grid(alpha=0.3)
    fine = np.linspace(lam[0], lam[-1], 400)
    sens, bound = _sensitivity_curve(result, fine)
    ax2.plot(fine, sens, color="C0", label=r"sensitivity $-g(\lambda)$")
    ax2.axhline(bound, color="k", ls="--", lw=1, label=r"bound $-\sum_j p_j g_j$")
    ax2.plot(lam[support], np.full(support.size, bound), "C3o", ms=5, label="atoms")
    span = max(abs(bound), float(np.ptp(sens[sens > bound - abs(bound)])) if np.any(sens > bound - abs(bound)) else 1.0)
    ax2.set_ylim(max(float(sens.min()), bound - 1.5 * span), bound + 0.3 * span)  # the part that certifies
    ax2.set_xlabel(r"log-SNR $\lambda$")
    ax2.set_ylabel("sensitivity (clipped below)")
    ax2.set_title("certificate: sensitivity <= bound, touching at the atoms", fontsize=9)
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    fig.suptitle(f"noisealloc optimize: {args.data}", fontsize=10)
    fig.tight_layout()
    write_figure(fig, args.plot)
    plt.close(fig)
