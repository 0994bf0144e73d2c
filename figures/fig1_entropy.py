"""Figure 1: generative entropy-rate profiles and square-root entropic densities (docs/THEORY.md section 6.1).

For each data set, :math:`h(\\lambda) = \\tfrac12 e^\\lambda\\,\\mathrm{mmse}(\\lambda)` on a log-SNR grid
and the square-root entropic density :math:`p(\\lambda) \\propto \\sqrt{h(\\lambda)}` (coordinate
:math:`\\lambda`), with the EDM log-normal and cosine densities overlaid (drawn for data at EDM's
scale :math:`\\sigma_{data} = 0.5`, i.e. unshifted).  Data sets: Dirac mixtures (number of atoms,
separation), Gaussian manifolds (intrinsic dimension), a circle in R^2, scikit-learn's 8x8 digits
and MNIST (10,000 test images) when a path is given.  Discrete data with a low-dimensional span
use adaptive quadrature; digits and MNIST use Monte Carlo with common random numbers.

Checks in the numbers file (both from :func:`noisealloc.theory.information.profile.information_profile`, one
rule each):

* budget identity :math:`\\int_a^b h\\,d\\lambda = H(a) - H(b)` (:math:`\\to H(\\pi)`): adaptive
  Gauss-Kronrod on ``[-30, 30]`` for quadrature models; for Monte-Carlo models the grid trapezoid,
  with the standard error of the difference propagated sample by sample;
* I-MMSE: centred finite difference of :math:`H` (or :math:`I`) against :math:`h` at three levels.

Run alone: ``python -m noisealloc.figures.fig1_entropy --out DIR [--quick|--full] [--mnist PATH]``.
"""

from __future__ import annotations

import numpy as np

from noisealloc.figures import _common as C

NAME = "fig1_entropy"
DISCRETE_SPECS = ("dirac:K=2,D=1,sep=2,seed=0", "dirac:K=5,D=1,sep=2,seed=0", "dirac:K=5,D=1,sep=4,seed=0",
                  "dirac:K=16,D=1,sep=1,seed=0")
CONTINUOUS_SPECS = ("gaussian:D=8,k=1,seed=0", "gaussian:D=8,k=2,seed=0", "gaussian:D=8,k=4,seed=0",
                    "circle:D=2,r=1")
IMAGE_SPECS = ("digits",)
IMMSE_LEVELS = (-4.0, 0.0, 4.0)
#: Interval and relative target of the adaptive budget quadrature of deterministic models (Monte-Carlo
#: models are integrated on the figure's grid); on [-30, 30] the budget H(-30) - H(30) equals H(pi) to ~1e-13.
BUDGET_INTERVAL = (-30.0, 30.0)
BUDGET_RTOL = 1e-8


def _sizes(quick: bool) -> dict:
    if quick:
        return {"lam_min": -12.0, "lam_max": 12.0, "levels": 97, "mc_samples_digits": 512, "mc_samples_mnist": 128}
    return {"lam_min": -12.0, "lam_max": 12.0, "levels": 241, "mc_samples_digits": 4096, "mc_samples_mnist": 1024}


def profile(spec: str, model, lam, *, n_samples: int, rng: int) -> dict:
    """Entropy rate, sqrt-entropic density and the checks for one data set (a row of the numbers file).

    Every number comes from :func:`noisealloc.theory.information.profile.information_profile`; the budget and
    I-MMSE verdicts are its checks' (one rule each, :mod:`noisealloc.theory.information`).
    """
    from noisealloc.theory.schedules.entropic import schedule_from_rate
    from noisealloc.theory.information.profile import information_profile

    prof = information_profile(model, lam, n_samples=n_samples, rng=rng, quadrature_interval=BUDGET_INTERVAL,
                               budget_rtol=BUDGET_RTOL, i_mmse_levels=IMMSE_LEVELS)
    h = np.asarray(prof.entropy_rate.value, dtype=np.float64)
    h_se = np.broadcast_to(np.asarray(prof.entropy_rate.stderr, dtype=np.float64), h.shape)
    p = schedule_from_rate(lam, h, h_stderr=h_se, rule="sqrt-entropy", coordinate="lambda").pdf
    row = {"spec": spec, "discrete": prof.discrete, "method": prof.method, "h": h, "h_stderr": h_se, "p_sqrt": p,
           "dim": int(model.dim)}
    if prof.discrete:
        row["entropy_H_pi"] = prof.entropy
        b = prof.budget
        row["budget"] = {"kind": b.description, "integral": b.value, "target": b.target, "abs_error": abs(b.error),
                         "stderr": b.difference_stderr, "holds": b.holds,
                         # the rule's own tolerance and statement, so the report can print what was compared
                         "tolerance": b.tolerance, "integral_holds": b.integral_holds,
                         "covers_budget": b.covers_budget, "rule": b.rule}
    else:
        row["budget_not_computed"] = ("continuous data: H(pi) is not finite, so there is no entropy budget "
                                      "to integrate to")
    if prof.i_mmse is not None:
        chk = prof.i_mmse
        row["i_mmse"] = {"lam": chk.lam, "fd": chk.fd, "rate": chk.rate, "rel_error": chk.rel_error,
                         "max_rel_error": chk.max_rel_error, "holds": chk.holds, "tolerance": chk.tolerance,
                         "rule": chk.rule}
    else:
        row["i_mmse_not_computed"] = ("Monte-Carlo model: a centred difference of Monte-Carlo estimates has no "
                                      "usable accuracy" if prof.monte_carlo else "not requested")
    return row


#: What the two columns hold: a classification of the *law* whose h is computed, not of the data's values.
LAW_KINDS = ("finite laws, H(pi) finite: Dirac mixtures, and digits and MNIST as the empirical law of their "
             "images (as data, digits and MNIST are grey-level images: figures 5-7 and the C4/C5 rows use their "
             "smoothed law and class them continuous)",
             "continuous laws, H(pi) infinite: Gaussian manifolds, a circle")
#: A density within this fraction of its maximum counts as on its plateau.
PLATEAU_RTOL = 0.1


def plateau(lam, p, *, spec: str) -> dict:
    r"""Where a square-root entropic density is flat up to :math:`\lambda_{max}`, and how much mass that holds.

    For continuous laws :math:`h \to d/2` as :math:`\lambda \to \infty`, so :math:`\sqrt{h}` tends to a
    constant and the mass above any level is set by where the interval is cut.

    Parameters
    ----------
    lam, p : ndarray
        Grid and density (per unit :math:`\lambda`).
    spec : str

    Returns
    -------
    dict
        ``spec``; ``start``: the smallest grid level from which ``p >= (1 - PLATEAU_RTOL) max p`` up to the
        end (``None`` when the last level is below that); ``mass``: the trapezoid mass on ``[start, lam_max]``.
    """
    lam, p = np.asarray(lam, float), np.asarray(p, float)
    high = p >= (1.0 - PLATEAU_RTOL) * np.max(p)
    if not high[-1]:
        return {"spec": spec, "start": None, "mass": 0.0}
    i = lam.size - 1
    while i > 0 and high[i - 1]:
        i -= 1
    mass = float(np.sum(0.5 * (p[i + 1:] + p[i:-1]) * np.diff(lam[i:]))) if i < lam.size - 1 else 0.0
    return {"spec": spec, "start": float(lam[i]), "mass": mass}


def compute(*, quick: bool = True, seed: int = 0, mnist=None, progress=None) -> dict:
    """All numbers of figure 1 (no I/O except reading data sets)."""
    from noisealloc.theory.models.datasets import load_data
    from noisealloc.theory.schedules.builtin import cosine, edm_lognormal

    s = _sizes(quick)
    lam = np.linspace(s["lam_min"], s["lam_max"], s["levels"])
    specs = list(DISCRETE_SPECS) + list(IMAGE_SPECS) + list(CONTINUOUS_SPECS)
    mnist_dir = C.resolve_mnist(mnist)
    if mnist_dir:
        specs.insert(len(DISCRETE_SPECS) + len(IMAGE_SPECS), f"mnist:{mnist_dir}")
    rows, skipped = [], []
    for i, spec in enumerate(specs):
        if progress is not None:
            progress(f"{i + 1}/{len(specs)} {spec}")
        try:
            model = load_data(spec)
        except ValueError as exc:  # a model class not available in this installation
            skipped.append({"spec": spec, "reason": str(exc)})
            continue
        n = s["mc_samples_mnist"] if spec.startswith("mnist") else s["mc_samples_digits"]
        row = profile(spec, model, lam, n_samples=n, rng=seed)
        if spec.startswith("mnist"):
            row["spec"] = "mnist"  # the path is machine-specific; keep the numbers file portable
        rows.append(row)
    edm = edm_lognormal(lam_min=s["lam_min"], lam_max=s["lam_max"])
    cos = cosine(lam_min=s["lam_min"], lam_max=s["lam_max"])
    return {"figure": NAME, "lam": lam, "rows": rows, "skipped": skipped,
            "plateaus": [plateau(lam, r["p_sqrt"], spec=r["spec"]) for r in rows if not r["discrete"]],
            "law_kinds": LAW_KINDS,
            "overlays": {"edm_lognormal": edm.pdf(lam), "cosine": cos.pdf(lam)},
            "data_scale": "heuristic overlays drawn unshifted, i.e. for data at EDM's sigma_data = 0.5; "
                          "entropic densities come from the data themselves",
            "seed": seed, "quick": quick, "sizes": s}


def plot(doc: dict, path) -> None:
    """Draw figure 1 from its numbers file (so it can be redrawn without recomputing)."""
    plt = C.setup_matplotlib()
    lam = np.asarray(doc["lam"], dtype=float)
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5), sharex=True)
    groups = [(True, "finite laws\n(Dirac mixtures; digits, MNIST: their empirical law)"),
              (False, "continuous laws\n(Gaussian manifolds, circle)")]
    for col, (disc, title) in enumerate(groups):
        ax_h, ax_p = axes[0, col], axes[1, col]
        if not any(bool(r["discrete"]) == disc for r in doc["rows"]):
            ax_h.text(0.5, 0.5, "no model of this kind available\n(listed as skipped in the numbers file)",
                      ha="center", va="center", transform=ax_h.transAxes)
        drawn = []  # (spec, density) already on the density panel, to flag curves that coincide
        for row in doc["rows"]:
            if bool(row["discrete"]) != disc:
                continue
            h = np.asarray(row["h"], dtype=float)
            p = np.asarray(row["p_sqrt"], dtype=float)
            line, = ax_h.semilogy(lam, np.maximum(h, 1e-12))
            twin = next((spec for spec, q in drawn if np.max(np.abs(p - q)) <= 1e-3 * np.max(np.abs(q))), None)
            label = row["spec"] if twin is None else f"{row['spec']} (same density as {twin.split(',seed')[0]})"
            # A coinciding density is dashed on top of its twin, so neither hides the other.
            ax_p.plot(lam, p, color=line.get_color(), ls="-" if twin is None else (0, (4, 3)), label=label)
            drawn.append((row["spec"], p))
        ax_p.plot(lam, doc["overlays"]["edm_lognormal"], "k--", lw=1.2, label=r"EDM log-normal ($\sigma_{data}=0.5$)")
        ax_p.plot(lam, doc["overlays"]["cosine"], "k:", lw=1.4, label=r"cosine ($\sigma_{data}=0.5$)")
        ax_h.set_ylim(1e-6, None)
        ax_h.set_title(f"entropy rate $h(\\lambda)=\\frac{{1}}{{2}}e^\\lambda\\,$mmse of {title}", fontsize=10)
        ax_h.set_ylabel(r"$h(\lambda)$ (nats per unit $\lambda$)")
        ax_p.set_title(r"square-root entropic density $p(\lambda)\propto\sqrt{h(\lambda)}$")
        ax_p.set_ylabel(r"density per unit $\lambda$")
        ax_p.set_xlabel(C.LAM_LABEL)
        plats = [q for q in doc.get("plateaus", []) if q["start"] is not None]
        if not disc and plats:
            lo, hi = min(q["mass"] for q in plats), max(q["mass"] for q in plats)
            start = min(q["start"] for q in plats)
            ax_p.set_title(r"square-root entropic density $p(\lambda)\propto\sqrt{h(\lambda)}$" + "\n"
                           f"flat up to $\\lambda_{{max}} = {lam[-1]:g}$ (within {100 * PLATEAU_RTOL:g}% of its maximum "
                           f"from $\\lambda = {start:.3g}$):\n{100 * lo:.0f}-{100 * hi:.0f}% of the mass lies on that "
                           "plateau, an amount set by where the interval is cut", fontsize=9)
        # One legend per column, below it and outside the data: both panels of a column share colours.
        ax_p.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    title = "Figure 1: generative entropy rate and the square-root entropic schedule"
    title += ("\ndigits and MNIST appear here as the empirical law of their images (a finite law); as data they are "
              "grey-level images, classed continuous in figures 5-7")
    if doc["skipped"]:
        title += "\n(skipped: " + ", ".join(s["spec"] for s in doc["skipped"]) + ")"
    fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    C.write_png(fig, path)
    plt.close(fig)


def run(out_dir, *, quick: bool = True, seed: int = 0, mnist=None, progress=None) -> dict:
    """Compute, write ``fig1_entropy.{json,png,config.json}`` into ``out_dir``; return their paths and a summary."""
    return C.run_figure(NAME, compute, plot, out_dir, seed=seed,
                        options={"quick": quick, "mnist": bool(C.resolve_mnist(mnist)), **_sizes(quick)},
                        compute_kwargs={"quick": quick, "seed": seed, "mnist": mnist, "progress": progress})


def main(argv=None) -> int:
    return C.figure_main(run, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
