"""Named tolerances, each with the reason for its value.

Tests and library code import these instead of typing numbers inline.  Units
of machine epsilon are used where rounding is the reason for the value.
Sections are grouped by the layer that mainly uses them.
"""

from __future__ import annotations

import numpy as np

EPS = float(np.finfo(np.float64).eps)  # 2.22e-16

# --- coordinates and schedules -------------------------------------------------
#: Round trip lambda -> u -> lambda of a coordinate map: a few dozen ulps of the
#: result, since each map is a composition of log/exp/expm1/log1p with relative
#: condition number O(1) away from the interval ends (docs/THEORY.md section 1 asks 1e-10).
COORD_ROUNDTRIP_RTOL = 1e-10
#: Inverse-CDF clamp: u is kept in [U_CLAMP, 1 - U_CLAMP] so that ppf never
#: returns an interval end point that maps to an infinite coordinate.
U_CLAMP = 1e-12
#: A table's cdf must be the cumulative trapezoid integral of its pdf to this share of the total mass
#: (issue 28: samplers took a cdf of another pdf, or a decreasing one, and put 40-84 % of the draws on
#: one knot).  The cumulative sum of K <= 1e7 cell masses in float64 is off by at most about K eps
#: (2e-9) of the total in the worst order; a cdf that belongs to another density is off by far more.
TABLE_CDF_RTOL = 1e-8
#: Densities that must integrate to one after transport (adaptive quadrature).
DENSITY_INTEGRAL_ATOL = 1e-8
#: Round trip of a schedule through JSON / npz (1e-12).
EXPORT_ROUNDTRIP_RTOL = 1e-12
#: Relative step for centred finite differences of a smooth map: eps**(1/3)
#: balances truncation O(h^2) against rounding O(eps/h).
FD_REL_STEP = EPS ** (1.0 / 3.0)
#: Agreement of a centred finite difference with the analytic derivative:
#: O(eps**(2/3)) ~ 4e-11 in the best case; 1e-6 leaves room for curvature.
FD_RTOL = 1e-6
#: Significance level of the Kolmogorov-Smirnov sampler checks.
KS_ALPHA = 1e-3
#: A Monte-Carlo estimate agrees with its reference within this many standard errors.
MC_NSIGMA = 4.0
#: cdf(ppf(q)) == q for a schedule: q passes through up to four coordinate maps,
#: each accurate to a few ulps of lambda (|lambda| <= 50), times a density <= 1
#: per unit lambda: ~1e-14 observed; 1e-13 (~450 eps) leaves a margin.
QUANTILE_ROUNDTRIP_ATOL = 1e-13
#: ppf(cdf(x)) == x: the level q = F(x) carries a relative rounding error of a
#: few eps, which moves x by eps * q / p(x) (the condition number of F^{-1});
#: the test bound is COORD_ROUNDTRIP_RTOL * max(1, |x|) + this factor * EPS * q / p(x).
PPF_ROUNDTRIP_EPS_FACTOR = 64.0

# --- information quantities ----------------------------------------------------
#: Quadrature values against 30-digit mpmath references (1e-9 relative).
QUAD_RTOL = 1e-9
#: Budget identity int h dlam = H(pi) with deterministic quadrature.  The one budget rule
#: (noisealloc.theory.information.budget.budget_check) also allows the integration error estimate and
#: MC_NSIGMA standard errors of a Monte-Carlo budget on top of this.
BUDGET_ATOL_QUAD = 1e-6
#: Largest share of the budget H(pi) the left tail int_{-inf}^a h dlam may hold for an interval [a, b]
#: to count as covering the budget (issue 28: the tail bound 1/2 e^a Var(P) is valid for every a, but
#: once it reaches H(pi) it says nothing (H(pi) - H(a) <= H(pi) always), and [700, 800] with int h = 0
#: was said to cover H(pi) = 1.1).  0.1 keeps the documented use of the bound (a = -2 for atoms of
#: variance ~1: a tail of ~8 % of the budget, bounded a priori) and refuses a vacuous bound.
BUDGET_LEFT_TAIL_RTOL = 0.1
#: Relative target of the adaptive quadrature of h in the budget check of deterministic models
#: (noisealloc.theory.information.profile.information_profile, the command `noisealloc entropy`).  Its conservative
#: |K21 - G10| estimate is added to the rule's tolerance, so the target only has to keep that estimate
#: small against BUDGET_ATOL_QUAD: 1e-8 of a budget H(pi) <= log K nats is <= 4e-8 for the <= 64 atoms
#: of the quadrature (>= 20x below).  1e-9 cost 1.5x the levels (252 vs 168 on [-16, 8], 5 atoms in the
#: plane), each a full quadrature of mmse.
BUDGET_RTOL = 1e-8
#: A grid counts as uniform for the budget on the grid's own levels
#: (noisealloc.theory.information.budget.budget_check_on_grid) when every step is within this fraction of the
#: mean step: np.linspace rounds steps to ~1e-15 of the levels' size, and step errors e (relative)
#: move Gregory's rule by at most e * int |h| (1e-10 of the integral, 100x below BUDGET_RTOL).
GRID_UNIFORM_RTOL = 1e-10
#: The I-MMSE finite-difference check compares relative errors only where the entropy rate exceeds
#: this (docs/THEORY.md section 3.1: "test relative accuracy wherever h exceeds 1e-8"); below it the
#: centred difference of H divides the quadrature rounding of H by a vanishing rate.
I_MMSE_RATE_FLOOR = 1e-8
#: Blocked empirical kernel (float64 GEMM) against a dense direct computation
#: (the target is 1e-12): the GEMM expansion of squared distances and the
#: polynomial exp each cost a few ulps, amplified by the logit size e^lam d^2/2
#: (kept <= ~1e3 in the tests), so ~1e3 * few * EPS ~ 1e-12.
EMPIRICAL_DENSE_RTOL = 1e-12
#: Same comparison with float32 cross products (float64 accumulation): a float32
#: dot product of length D carries a relative error ~ sqrt(D) * 6e-8 of |mu_k||mu_j|;
#: measured <= 1.5e-4 relative on per-sample MMSE and <= 3e-6 nats on entropy for
#: D <= 784, unit-scale atoms, lam in [-8, 8]; 1e-3 leaves a margin of ~7x.
EMPIRICAL_FLOAT32_RTOL = 1e-3

# --- solvers -------------------------------------------------------------------
#: Certified relative Frank-Wolfe gap for convex criteria.
FW_GAP_RTOL = 1e-8
#: KKT stationarity of the non-convex sandwich criterion.
KKT_RTOL = 1e-6
#: Theorem 1' reduction keeps theta*(p) to this absolute accuracy.
THETA_STAR_ATOL = 1e-8
#: Input matrices A_i, G_i, W must be symmetric to this relative max-norm accuracy:
#: matrices assembled by quadrature are symmetric only to rounding (~1e3 ulps of
#: their largest entry); anything worse is an input error, not rounding.
SYMMETRY_RTOL = 1e-10
#: Smallest eigenvalue allowed, relative to the largest, before a matrix is
#: declared indefinite (same reasoning: rounding of assembled PSD matrices).
PSD_RTOL = 1e-10
#: Reciprocal condition number of the uniform information matrix (the most
#: regular allocation's range) below which the problem is regularised by a ridge
#: delta * I with delta = REG_RCOND * lambda_max: beyond ~1e12 the Cholesky-based
#: gradients lose all digits that a 1e-8 gap certificate needs.
REG_RCOND = 1e-12
#: A sandwich value V(p) is accepted only while the first-order bound of its rounding error (from the
#: assembly of M_p, G_p and a backward-stable inverse of M_p) is at most this fraction of
#: max(V, V(uniform)): values are judged on the problem's scale to 1e-8 (tests/solvers/test_sandwich.py).
#: Beyond it V has no reliable digit on that scale, whatever the BLAS, and a minimiser is drawn to
#: exactly such points.  The bound (SANDWICH_ROUNDING_ULPS) is componentwise: a normwise one charged
#: graded moment matrices (B-spline blocks under sqrt(h), J = 32) the rounding of their largest entries
#: in their smallest, refused the entropic allocation of the Dirac K=4 coupling sweep (float V accurate
#: to 1.4e-11 against 50 digits, normwise bound 2.5e-8 of V) and stalled its J = 8 optimum at gap 104.
SANDWICH_ROUNDING_RTOL = 1e-8
#: Size of the rounding of M_p and G_p in that bound, in ulps of sqrt(X_jj X_kk) per entry (j, k):
#: assembly of a sum of PSD matrices and the backward error of a Cholesky solve are both of this form,
#: so the bound is u * sum_jk (|dV/dM|_jk d_j d_k + |dV/dG|_jk g_j g_k), d = sqrt(diag M_p),
#: g = sqrt(diag G_p).  The worst-case Cholesky constant grows like (m+1) eps, but that is far above
#: the observed error: with one ulp the bound stays 14x above the 50-digit error of the J = 32
#: entropic allocation (m = 128) and 60x above it at the singular-boundary point of tests/solvers/test_sandwich.py.
SANDWICH_ROUNDING_ULPS = 1.0
#: Preconditioning of allocation problems: every problem but E is solved in the
#: coordinates where the uniform allocation's moment matrix is (close to) the identity.  The exact
#: power-of-two Jacobi scaling suffices while the Jacobi-scaled uniform moment has reciprocal
#: condition at least this (the solvers' Cholesky gradients then keep ~12 digits); below it the
#: per-level matrices are factored (A_i = C_i^T C_i) and the stacked factors orthonormalised by
#: Householder QR, which is backward stable column by column, so monomial bases of degree 10 on
#: [0, 1] (uniform moment rcond ~1e-14, a Hilbert-like matrix) lose nothing to their basis.
PRECOND_QR_RCOND = 1e-4
#: Below this reciprocal condition number (a few hundred ulps) the uniform
#: information matrix is singular in floating point: every allocation is singular.
SINGULAR_RCOND = 256 * EPS
#: E-optimality certificate: eigenvalues of M(p) within this relative distance
#: (of lambda_max) of lambda_min are treated as one perturbed multiple eigenvalue,
#: and the dual matrix is sought in their eigenspace (the equivalence theorem puts
#: it there at the optimum).  Any PSD trace-one E gives a rigorous bound, so this
#: only decides which candidate E are tried, never the validity of the bound; 1e-4
#: keeps clusters of allocations up to ~1e-4 suboptimal (their spread is at most
#: that), while distinct eigenvalues of regular problems are further apart.
E_CLUSTER_RTOL = 1e-4
#: Target of the double-double E polish and certificate (relative bound max_i <E, A_i> - lambda_min):
#: the double-double interior point reaches duality gaps ~1e-16 relative; the bound itself is then
#: evaluated in float64 (lambda_min by eigvalsh, <E, A_i> by one GEMV), whose rounding is a few
#: m * eps ~ 1e-14 relative for m <= 40; 1e-12 leaves a margin of ~100 above that.
E_POLISH_RTOL = 1e-12
#: Factor on the first-order rounding-error bounds (gamma_k ~ k eps) of the certificates' bounds for the
#: input as given: E's (certificates.e_rounding_bound: the sum forming M(p), eigvalsh's backward error,
#: the rounding of <E, A_i>) and the Frank-Wolfe gap's (certificates._fw_rounding_bound); 2 covers the
#: second-order terms and eigvalsh's small constant (LAPACK dsyevd).
E_ROUNDING_ULPS = 2.0
#: The E certificate tries the double-double dual only when its float64 candidates leave a relative bound
#: above this: 1e-10 is the target for degenerate (Chebyshev) problems and 100x below
#: FW_GAP_RTOL, so well-conditioned problems, whose cheap candidates are already below it, skip the cost.
E_DD_TRIGGER_RTOL = 1e-10
#: Weights of the double-double interior point below this fraction of the largest are its leftovers
#: (~ mu / z_i with mu ~ 1e-17) on inactive candidates and are zeroed: dropping them moves M(p) by less
#: than ~1e-12 relative, below E_POLISH_RTOL, while genuine atoms of these designs carry >= ~1e-4.
E_DD_WEIGHT_FLOOR = 1e-12
#: The double-double E interior point starts from the float64 one's first iterate with relative gap below
#: this: float64 follows the central path accurately down to ~1e-8 on degenerate (Chebyshev) problems, so
#: 1e-6 keeps a margin of 100 while saving the double-double iterations above it (Chebyshev m = 20 on
#: 100 candidates: 5 instead of 11, the same final gap 3.5e-15; starts at 1e-4 ... 1e-7 all reached it).
E_DD_WARM_RTOL = 1e-6
#: The Elfving dual barrier of 'c' (solvers.algorithms.elfving) stops at this relative gap 2 n mu / c^T y of its
#: central pair: it only has to show the Newton polish where the optimal atoms are (near-tied benchmark: 1e-3
#: left the polish 7 gradient rounds, 1e-4 left 4, 1e-6 left 3 for 20 % more barrier steps).
ELFVING_RTOL = 1e-4
#: A candidate is on the dual's support when y^T B_i y >= 1 - this (constraint active); the non-negative
#: weights on those candidates must reproduce c to this fraction of |c|.
ELFVING_ACTIVE_RTOL = 1e-3

#: Largest |coordinate| of a Dirac mixture's atom.  Squared distances (GEMM form, summed over up to
#: ~1e3 dimensions) must stay finite: 1e150^2 * 1e3 = 1e303 < 1.8e308.  Beyond it the data are
#: rescaled by the user: atoms c*mu at log-SNR lam are atoms mu at lam + 2 log c (docs/THEORY.md section 5).
ATOM_ABS_MAX = 1e150
#: A multi-start run stopped at KKT_RTOL (when the requested tol is tighter) is continued to tol only
#: when its value is within this relative distance of the best start's: continuing from a KKT point
#: at relative residual 1e-6 moved V by < 1e-9 relative on the Dirac K=5 random-features sandwich
#: (662.9937947 before and after), and distinct local optima there differ by > 1e-2, so 1e-3 keeps
#: every contender with a margin of 1e6 over the observed change while skipping the other basins.
SANDWICH_REFINE_RTOL = 1e-3

#: Every named tolerance (the upper-case names above).
__all__ = sorted(name for name in dict(globals()) if name.isupper())

#: Relative Frobenius distance ``||G - s A|| / ||G||`` (``s`` the least-squares factor) below which a
#: sandwich's ``G`` counts as proportional to ``A`` (then V is convex and a KKT point is global).
#: 64 eps: ``G`` assembled as ``s * A`` in floating point differs from it by a few ulps per entry.
SANDWICH_PROPORTIONAL_RTOL = 64 * 2.220446049250313e-16

#: Random Dirichlet starts of the sandwich multi-start (besides the uniform start, the convex
#: surrogate's optimum and any starts given), when no global proof is available.
SANDWICH_RANDOM_STARTS = 4

#: Two local optima of the sandwich multi-start are the same value within this relative distance
#: (the KKT tolerance ``KKT_RTOL`` bounds each one's first-order error).
SANDWICH_SAME_VALUE_RTOL = 1e-6

#: Starts of the sandwich multi-start on the best supports of m levels (enumerated where affordable).
SANDWICH_SUPPORT_STARTS = 4

#: Boxes the sandwich branch and bound over A_p^-1 (solvers/sandwich_global.branch_and_bound) may
#: bound before it gives up (the result is then "local (KKT)" with the proved lower bound).  Issue
#: 15's 2-parameter instance on 41 levels closes in ~1.8k boxes (each an LP of ~1.4k rows, 10-20 ms).
SANDWICH_BNB_MAX_BOXES = 4000
#: The solver attempts the branch and bound by default only for m = 2 and at most this many levels:
#: each box's LP has (3^3 + 7) n rows, and at n = 161 a proof would take minutes.
SANDWICH_BNB_MAX_LEVELS = 64
#: A sandwich result is labelled "global" when the branch and bound proves no allocation lower than
#: V (1 - this): the same relative accuracy as the KKT certificate (KKT_RTOL) and the multi-start's
#: notion of equal values (SANDWICH_SAME_VALUE_RTOL).
SANDWICH_GLOBAL_RTOL = 1e-6
#: Rounds of bound tightening of the branch and bound's root box (each round: 2 m(m+1)/2 LPs).
SANDWICH_BNB_TIGHTEN_ROUNDS = 2
#: Margin of the branch and bound's rigorous LP dual bound sum_j min(r_j l_j, r_j u_j) - lam.b_ub -
#: nu.b_eq (r = c + A_ub^T lam + A_eq^T nu), in ulps of the sum of the magnitudes of its terms: each
#: r_j is a sum of a few dozen products (one ulp each with accumulation); 64 covers that and the sums.
SANDWICH_BNB_LP_ULPS = 64.0
#: The split G_i = sigma A_i + G'_i uses sigma = (1 - this) * min_i sigma_max(G_i, A_i), so that every
#: G'_i stays PSD through the rounding of the generalised eigenvalue (relative error ~cond * eps).
SANDWICH_BNB_SIGMA_SHRINK = 1e-6

# --- masked diffusion (docs/THEORY.md section 7) ---------------------------------
#: Agreement of two exact routes to the same per-sample entropies (GEMM matching vs forward-backward vs
#: plain filtering; incremental level sweep vs direct): sums of up to L entropies of a few nats, each
#: rounded through different normalisations and, on the float64 path, incremental class sums that are
#: recomputed once they lose a factor 16 to cancellation (measured <= 5e-13 on a 4,096-string law).
MASKED_EXACT_ATOL = 1e-11
#: Relative agreement of closed forms (Markov chain, product law) with exact enumeration: the same sums
#: in a different order, ~100 ulps.
MASKED_EXACT_RTOL = 1e-11
#: Floor of a masked Monte-Carlo standard error, relative to the estimate: per-sample values are exact
#: only up to rounding (~L ulps of a few nats), so when every draw gives the same exact value (L = 1, a
#: product law's S) the sample spread is rounding noise; the floor keeps z-scores of such estimates ~0.
MASKED_ROUNDING_RTOL = 1e-13

#: Rounding bound of the two-parameter sandwich proof's Bernstein coefficients
#: (solvers/sandwich_global.bernstein_proof), in ulps of the sum of the magnitudes of their terms per
#: subdivision level (plus four for the coefficients of the root simplex): each root coefficient is a
#: sum of a few dozen products of the inputs; each midpoint subdivision adds one rounding per term.
SANDWICH_BERNSTEIN_ULPS = 64.0
#: Deepest midpoint subdivision of one support's simplex in the Bernstein proof: a piece at depth d
#: has diameter ~2^(-d/3); the quadratic convergence of the coefficients needs diameter ~sqrt(rtol)
#: ~ 1e-3 near the minimiser (depth ~30) for SANDWICH_GLOBAL_RTOL = 1e-6.
SANDWICH_BERNSTEIN_MAX_DEPTH = 72
#: Pieces (simplices) the Bernstein proof may examine over all supports before it gives up.
SANDWICH_BERNSTEIN_MAX_PIECES = 200_000_000
#: The Bernstein proof enumerates all C(n, 4) sets of four levels: by default only for grids of at most
#: this many levels (C(64, 4) = 6.4e5 supports, ~10 s on one core; at n = 97, C(n, 4) = 3.5e6 took
#: figure 5's quick run over 5 minutes for one data set, so larger grids keep the "local (KKT)" label
#: unless global_search=True asks for the proof).
SANDWICH_BERNSTEIN_MAX_LEVELS = 64
#: The same bound when numba is missing or disabled: the proof's kernels then run as plain Python, about
#: 500x slower (``noisealloc bench solver --kernels``: 0.42 s against 0.0009 s on 120 supports of a 41-level
#: instance), so C(12, 4) = 495 supports (~1-2 s) is the default limit there.
SANDWICH_BERNSTEIN_MAX_LEVELS_PYTHON = 12
