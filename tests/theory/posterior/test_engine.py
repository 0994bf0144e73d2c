"""Tests of the blocked posterior engine (theory/posterior/engine.py and its kernels).

References are independent routes: a dense direct numpy computation of the
posterior (explicit x, explicit differences ||x - mu_j||^2, scipy's logsumexp),
scipy.integrate.quad over the noise for 1-D atoms, and closed-form limits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st
from scipy import integrate
from scipy.special import logsumexp

from noisealloc.theory.posterior import _engine_kernels as kern
from noisealloc.theory.posterior.common_random_numbers import draw_common_random_numbers, stratified_mean_stderr
from noisealloc.theory.posterior.engine import information_samples, monte_carlo_information, posterior_weights_blocked
from noisealloc.theory.entropy_rate import entropy_rate_from_mmse
from noisealloc.theory.tolerances import EMPIRICAL_DENSE_RTOL, EMPIRICAL_FLOAT32_RTOL, EPS, MC_NSIGMA

from helpers.strategies import examples

# --- references ---------------------------------------------------------------------------------


def dense_posterior(mu, w, x, lam):
    """Direct posterior at points x: explicit squared differences, scipy logsumexp."""
    d2 = ((x[:, None, :] - mu[None, :, :]) ** 2).sum(-1)
    logits = np.log(w)[None, :] - d2 * np.exp(lam) / 2.0
    lse = logsumexp(logits, axis=1, keepdims=True)
    log_w = logits - lse
    ww = np.exp(log_w)
    return ww, log_w, lse[:, 0]


def dense_samples(mu, w, lam, k, eps):
    """Per-sample entropy and 1/2 sum_j w_j ||mu_j - mu_k||^2 by the dense route, x = mu_k + sigma eps."""
    A = ((mu[k][:, None, :] - mu[None, :, :]) ** 2).sum(-1)
    H = np.empty((len(lam), len(k)))
    M = np.empty_like(H)
    for t, lv in enumerate(lam):
        x = mu[k] + np.exp(-lv / 2.0) * eps
        ww, log_w, _ = dense_posterior(mu, w, x, lv)
        H[t] = -(ww * np.where(ww > 0, log_w, 0.0)).sum(1)
        M[t] = 0.5 * (ww * A).sum(1)
    return H, M


def exact_1d(mu, w, lam):
    """mmse and H of a 1-D Dirac mixture by adaptive quadrature over the noise (scipy.quad)."""
    mu = np.asarray(mu, float)

    def post(x):
        logits = np.log(w) - (x - mu) ** 2 * np.exp(lam) / 2.0
        lw = logits - logsumexp(logits)
        return np.exp(lw), lw

    sig = np.exp(-lam / 2.0)
    mm = hh = 0.0
    for k in range(len(mu)):
        def f_m(e, k=k):
            ww, _ = post(mu[k] + sig * e)
            return np.exp(-e * e / 2) / np.sqrt(2 * np.pi) * (mu[k] - ww @ mu) ** 2

        def f_h(e, k=k):
            ww, lw = post(mu[k] + sig * e)
            return np.exp(-e * e / 2) / np.sqrt(2 * np.pi) * -(ww * lw).sum()

        # break points where x crosses a midpoint between atoms (the posterior switches there)
        mids = ((mu[:, None] + mu[None, :]) / 2.0).ravel()
        pts = sorted(set(float(p) for p in (mids - mu[k]) / sig if abs(p) < 12))
        mm += w[k] * integrate.quad(f_m, -12, 12, points=pts or None, limit=400, epsabs=1e-13, epsrel=1e-12)[0]
        hh += w[k] * integrate.quad(f_h, -12, 12, points=pts or None, limit=400, epsabs=1e-13, epsrel=1e-12)[0]
    return mm, hh


def assert_close_rel(actual, desired, rtol, atol_scale=1.0, msg=""):
    """|actual - desired| <= rtol * (|desired| + atol_scale), elementwise."""
    actual, desired = np.asarray(actual), np.asarray(desired)
    err = np.abs(actual - desired)
    bound = rtol * (np.abs(desired) + atol_scale)
    assert np.all(err <= bound), f"{msg}: max excess {np.max(err - bound):.3e}, max error {err.max():.3e}"


def test_assert_close_rel_fails_on_wrong_input():
    with pytest.raises(AssertionError):
        assert_close_rel([1.0 + 1e-9], [1.0], 1e-12)
    assert_close_rel([1.0 + 1e-13], [1.0], 1e-12)


def small_mixture(seed, K, D, scale=1.0):
    rng = np.random.default_rng(seed)
    mu = scale * rng.standard_normal((K, D))
    w = rng.dirichlet(np.ones(K))
    return mu, w


# --- kernel against the dense route -----------------------------------------------------------------


@given(
    seed=st.integers(0, 2**16),
    K=st.integers(1, 30),
    D=st.integers(1, 12),
    block=st.integers(1, 40),
)
@example(seed=0, K=1, D=1, block=1)
def test_samples_match_dense_float64(seed, K, D, block):
    mu, w = small_mixture(seed, K, D)
    lam = np.array([-6.0, -2.0, 0.0, 1.5, 4.0])  # logits e^lam d^2 / 2 stay below ~1e3
    for kernel_name in ("numba", "numpy"):
        s = information_samples(mu, w, lam, n_samples=6, rng=seed, block_size=block, kernel=kernel_name)
        H, M = dense_samples(mu, w, lam, s.draws.atom_index, s.draws.eps)
        assert_close_rel(s.entropy, H, EMPIRICAL_DENSE_RTOL, msg=f"entropy {kernel_name}")
        assert_close_rel(s.mmse, M, EMPIRICAL_DENSE_RTOL, msg=f"mmse {kernel_name}")


@given(seed=st.integers(0, 2**16), K=st.integers(1, 30), D=st.integers(1, 8), n_const=st.integers(1, 5))
@example(seed=0, K=1, D=1, n_const=1)
def test_samples_with_constant_coordinates_match_dense(seed, K, D, n_const):
    # Coordinates where all atoms agree (MNIST's border pixels) are skipped by the GEMM: the dense route
    # over all coordinates, with the noise in every coordinate, must still agree.
    mu, w = small_mixture(seed, K, D)
    rng = np.random.default_rng(seed + 1)
    const = np.broadcast_to(rng.uniform(-3.0, 3.0, n_const), (K, n_const))
    order = rng.permutation(D + n_const)
    mu = np.hstack([mu, const])[:, order]
    lam = np.array([-6.0, -2.0, 0.0, 1.5, 4.0])
    for kernel_name in ("numba", "numpy"):
        s = information_samples(mu, w, lam, n_samples=6, rng=seed, kernel=kernel_name)
        H, M = dense_samples(mu, w, lam, s.draws.atom_index, s.draws.eps)
        assert_close_rel(s.entropy, H, EMPIRICAL_DENSE_RTOL, msg=f"entropy {kernel_name}")
        assert_close_rel(s.mmse, M, EMPIRICAL_DENSE_RTOL, msg=f"mmse {kernel_name}")


def test_samples_match_dense_float32():
    for K, D in [(20, 3), (200, 50), (300, 784)]:
        mu, w = small_mixture(K + D, K, D)
        lam = np.linspace(-8.0, 8.0 if D < 100 else 4.0, 9)
        s = information_samples(mu, w, lam, n_samples=16, rng=1, float32_distances=True)
        H, M = dense_samples(mu, w, lam, s.draws.atom_index, s.draws.eps)
        assert_close_rel(s.entropy, H, EMPIRICAL_FLOAT32_RTOL, msg=f"entropy K={K} D={D}")
        assert_close_rel(s.mmse, M, EMPIRICAL_FLOAT32_RTOL, atol_scale=0.0, msg=f"mmse K={K} D={D}")


def test_numba_and_numpy_kernels_agree():
    mu, w = small_mixture(7, 300, 20, scale=2.0)
    lam = np.linspace(-12, 12, 25)
    a = information_samples(mu, w, lam, n_samples=40, rng=3, kernel="numba", block_size=128)
    b = information_samples(mu, w, lam, n_samples=40, rng=3, kernel="numpy", block_size=128)
    assert a.info["kernel"] == "numba" and b.info["kernel"] == "numpy"
    # The kernels shift the logits differently (the compiled one by a bound at low SNR), so tiny
    # weights differ by eps * |logit| relative, |logit| <= ~1e3 where they are not zero.
    assert_close_rel(a.entropy, b.entropy, EMPIRICAL_DENSE_RTOL, msg="entropy")
    assert_close_rel(a.mmse, b.mmse, EMPIRICAL_DENSE_RTOL, atol_scale=0.0, msg="mmse")
    # well-conditioned entries (value not tiny) agree to a few hundred ulps
    big = b.mmse > 1e-3
    assert_close_rel(a.mmse[big], b.mmse[big], 300 * EPS, atol_scale=0.0, msg="mmse, not tiny")


@pytest.mark.parametrize("float32", [False, True])
def test_worker_threads_do_not_change_results(float32):
    """The engine deals the sample rows to worker threads: 1, 2 and 3 workers agree with each other and
    with the numpy reference.  The level passes treat each row alone, but the BLAS may round a row of
    the GEMM differently when it is part of another set of rows (float32 here: different edge
    kernels), so agreement is asserted to the engine's tolerance, not to the bit."""
    numba = pytest.importorskip("numba")
    mu, w = small_mixture(11, 700, 30, scale=2.0)
    lam = np.linspace(-12, 12, 13)
    saved = numba.get_num_threads()
    runs = {}
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS), min(3, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            runs[threads] = information_samples(mu, w, lam, n_samples=41, rng=5, block_size=256,
                                                float32_distances=float32, kernel="numba")
    finally:
        numba.set_num_threads(saved)
    ref = runs[1]
    assert ref.info["threads"] == 1
    rtol = EMPIRICAL_FLOAT32_RTOL if float32 else EMPIRICAL_DENSE_RTOL
    b = information_samples(mu, w, lam, n_samples=41, rng=5, block_size=256, float32_distances=float32,
                            kernel="numpy")
    for threads, s in runs.items():
        assert s.info["threads"] == threads
        for other, name in ((ref, "1 worker"), (b, "numpy")):
            assert_close_rel(s.entropy, other.entropy, rtol, msg=f"entropy, {threads} workers vs {name}")
            assert_close_rel(s.mmse, other.mmse, rtol, atol_scale=0.0, msg=f"mmse, {threads} workers vs {name}")


@pytest.mark.parametrize("failing_chunk", ["first", "last"])
def test_failed_worker_stops_the_others(monkeypatch, failing_chunk):
    """A worker that fails (on the first or the last level-pass chunk of the first block, so that
    either worker can be the one that fails, before or after the other reaches the next barrier)
    must not leave the others waiting: the error reaches the caller, promptly."""
    pytest.importorskip("numba")
    import threading

    real = kern.level_pass_gram_rows
    n = 64
    bad = 0 if failing_chunk == "first" else n - 16

    def failing(G, row_lo, *args):
        if row_lo == bad:
            raise RuntimeError("injected failure")
        return real(G, row_lo, *args)

    monkeypatch.setattr(kern, "level_pass_gram_rows", failing)
    mu, w = small_mixture(2, 400, 8)
    errors = []

    def call():
        for _ in range(5):
            try:
                information_samples(mu, w, [-1.0, 0.0, 1.0], n_samples=n, rng=0, block_size=50, kernel="numba")
            except RuntimeError as exc:
                errors.append(str(exc))

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(60)
    assert not caller.is_alive(), "a failed worker left the call waiting"
    assert errors == ["injected failure"] * 5


def _blas_threads():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p.get("user_api") == "blas"]


def test_concurrent_calls_share_the_workers_without_deadlock(monkeypatch):
    """Calls from several threads at once (a threaded Dask scheduler, a user's threads) share one pool
    of worker threads whose tasks wait for each other at barriers: they must take turns, not hold
    one worker each and wait forever.  A pause between a call's submissions lets the other callers
    in between (without it the interleaving is rare, not impossible)."""
    import threading
    import time

    import noisealloc.theory._threads as thr

    mu = np.random.default_rng(0).normal(size=(300, 8))
    ref = information_samples(mu, None, [0.0, 1.0], n_samples=16, rng=0, block_size=100)
    if ref.info["threads"] < 2:
        pytest.skip("one worker thread: no barrier to deadlock on")
    real = thr._worker_pool

    class SlowSubmit:
        def __init__(self, pool):
            self.pool = pool

        def submit(self, fn, w):
            time.sleep(0.01)
            return self.pool.submit(fn, w)

    def slow_pool(threads):
        pool, lock = real(threads)
        return SlowSubmit(pool), lock

    monkeypatch.setattr(thr, "_worker_pool", slow_pool)
    blas_before = _blas_threads()
    out = []

    def call():
        out.append(information_samples(mu, None, [0.0, 1.0], n_samples=16, rng=0, block_size=100))

    callers = [threading.Thread(target=call, daemon=True) for _ in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(60)
    assert not any(t.is_alive() for t in callers), "concurrent calls deadlocked"
    assert len(out) == 4
    # Overlapping single-thread BLAS limits end with the BLAS as it was (not left at one thread).
    assert _blas_threads() == blas_before
    for s in out:
        assert np.array_equal(s.mmse, ref.mmse) and np.array_equal(s.entropy, ref.entropy)


def _forked_profile(queue, mu, importance):
    opts = {"importance": True} if importance else {"block_size": 100}
    s = information_samples(mu, None, [0.0, 1.0], n_samples=64, rng=0, **opts)
    queue.put(s.mmse.tolist())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX, if another test loaded it; the child uses none
@pytest.mark.parametrize("importance", [False, True])
def test_engine_runs_in_a_forked_child(importance):
    """The worker threads live in a pool kept per process; a child forked after the parent used it
    (as process pools do) inherits the pool but not its threads, and must make its own instead of
    waiting forever for threads that do not exist.  No engine uses numba's ``parallel`` either: its
    OpenMP layer aborts a child forked after the parent used it."""
    from helpers.forking import run_in_forked_child

    mu = np.random.default_rng(0).normal(size=(700, 20))
    opts = {"importance": True} if importance else {"block_size": 100}
    parent = information_samples(mu, None, [0.0, 1.0], n_samples=64, rng=0, **opts)
    assert np.array_equal(np.array(run_in_forked_child(_forked_profile, mu, importance)), parent.mmse)


def test_pure_python_fallback_matches(tmp_path):
    """With NOISEALLOC_DISABLE_NUMBA=1 the jit kernel runs as plain Python; same numbers."""
    code = (
        "import json, numpy as np\n"
        "from noisealloc.theory._numba import HAVE_NUMBA\n"
        "from noisealloc.theory.posterior.engine import information_samples\n"
        "rng = np.random.default_rng(11); mu = rng.standard_normal((9, 3))\n"
        "s = information_samples(mu, None, [-3.0, 0.0, 5.0], n_samples=4, rng=2, kernel='numba')\n"
        "print(json.dumps({'numba': HAVE_NUMBA, 'H': s.entropy.tolist(), 'M': s.mmse.tolist()}))\n"
    )
    env = dict(os.environ, NOISEALLOC_DISABLE_NUMBA="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert got["numba"] is False
    mu = np.random.default_rng(11).standard_normal((9, 3))
    ref = information_samples(mu, None, [-3.0, 0.0, 5.0], n_samples=4, rng=2, kernel="numpy")
    assert_close_rel(got["H"], ref.entropy, 100 * EPS, msg="entropy")
    assert_close_rel(got["M"], ref.mmse, 100 * EPS, atol_scale=0.0, msg="mmse")


@given(st.lists(st.floats(-800.0, 300.0), min_size=1, max_size=300))
@example([0.0, -1e-300, -707.9, -708.0, -708.1, -745.1, -745.2, -746.0, -0.3465735902799727, 300.0])
def test_vectorised_exp_against_numpy(values):
    s = np.array(values)
    got = kern.exp_nonpositive(s)
    ref = np.exp(s)
    live = s > kern.EXP_CUTOFF
    np.testing.assert_allclose(got[live], ref[live], rtol=4 * EPS, atol=0)
    # subnormal results: one rounding to the grid of spacing 2**-1074 after a product with
    # relative error <= 4 eps, so within one spacing of np.exp's correctly rounded value
    sub = ~live
    assert np.all(np.abs(got[sub] - ref[sub]) <= 4 * EPS * ref[sub] + 2.0**-1074)
    assert np.all(got[s <= kern.EXP_UNDERFLOW] == 0.0) and np.all(ref[s <= kern.EXP_UNDERFLOW] == 0.0)


# --- posterior at given points -------------------------------------------------------------------------


@given(seed=st.integers(0, 2**16), K=st.integers(1, 25), D=st.integers(1, 10), block=st.integers(1, 30),
       lam=st.floats(-6.0, 4.0))
def test_posterior_weights_blocked_matches_dense(seed, K, D, block, lam):
    mu, w = small_mixture(seed, K, D)
    rng = np.random.default_rng(seed + 1)
    x = mu[rng.integers(0, K, 7)] + np.exp(-lam / 2) * rng.standard_normal((7, D))
    den, H, logz = posterior_weights_blocked(mu, np.log(w), x, lam, block_size=block)
    ww, log_w, lse = dense_posterior(mu, w, x, lam)
    assert_close_rel(den, ww @ mu, EMPIRICAL_DENSE_RTOL, msg="denoiser")
    assert_close_rel(H, -(ww * log_w).sum(1), EMPIRICAL_DENSE_RTOL, msg="entropy")
    assert_close_rel(logz, lse, EMPIRICAL_DENSE_RTOL, msg="log normaliser")


def longdouble_posterior(mu, w, x, lam):
    """Direct posterior weights and mean in x87 extended precision (64-bit significand, 2^11 x float64)."""
    mu, x = mu.astype(np.longdouble), x.astype(np.longdouble)
    d2 = ((x[:, None, :] - mu[None, :, :]) ** 2).sum(-1)
    logits = np.log(np.asarray(w, np.longdouble))[None, :] - d2 * np.exp(np.longdouble(lam)) / 2
    logits -= logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    ww = e / e.sum(axis=1, keepdims=True)
    return ww.astype(np.float64), (ww @ mu).astype(np.float64)


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= EPS / 16, reason="long double is not extended precision here")
@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 2**16), D=st.sampled_from([64, 256, 784]), lam=st.floats(-10.0, 30.0),
       offset=st.floats(0.0, 50.0))
def test_posterior_weights_blocked_accuracy_contract(seed, D, lam, offset):
    """Every logit is as accurate as the better of the GEMM expansion and the direct sum (within 4x), so the
    posterior mean is within 2 E (atom spread) of an extended-precision reference, where
    E = (e^lam / 2) (D + 2) eps min(||x||^2 + ||mu||^2, 4 ||x - mu||^2) bounds the logit error of
    the live atoms (centred coordinates; the direct sum's bound uses ||x - mu||^2)."""
    rng = np.random.default_rng(seed)
    K = 40
    mu = offset + rng.standard_normal((K, D)) * rng.uniform(0.1, 1.0)
    # Near twins at the noise scale: at high SNR the posterior is split between twins, so the
    # mean depends on small logit differences (the case the direct recomputation exists for).
    mu[K // 2:] = mu[:K // 2] + np.exp(-lam / 2) * rng.standard_normal((K // 2, D)) / np.sqrt(D)
    w = rng.uniform(0.5, 1.0, K)
    x = mu[rng.integers(0, K, 6)] + np.exp(-lam / 2) * rng.standard_normal((6, D))
    den, _, _ = posterior_weights_blocked(mu, np.log(w), x, lam)
    ww, ref = longdouble_posterior(mu, w, x, lam)
    c = mu.mean(0)
    nx = ((x - c) ** 2).sum(1)[:, None]
    nm = ((mu - c) ** 2).sum(1)[None, :]
    d2 = ((x[:, None, :] - mu[None, :, :]) ** 2).sum(-1)
    a = np.exp(lam) / 2
    live = ww > 1e-30  # atoms whose logit errors can move the mean by more than 1e-30 x spread
    e_logit = a * (D + 2) * EPS * np.where(live, np.minimum(nx + nm, 4 * d2), 0.0).max(axis=1)
    spread = np.abs(mu - c).max() * 2
    tol = 2 * e_logit * spread + 64 * EPS * (np.abs(c).max() + spread)
    err = np.abs(den - ref).max(axis=1)
    assert np.all(err <= tol), (err, tol)


def test_posterior_weights_blocked_high_snr_refinement():
    """At lam = 30 the GEMM expansion alone would be off by ~e^30 * 1e-16 * ||x||^2 nats;
    the refinement recomputes the live distances directly."""
    mu = np.array([[100.0, 0.0], [100.0, 1e-6], [-100.0, 5.0]])
    w = np.array([0.25, 0.5, 0.25])
    x = np.array([[100.0, 0.3e-6], [100.0, 0.7e-6]])
    lam = 30.0
    den, H, logz = posterior_weights_blocked(mu, np.log(w), x, lam)
    # exact two-atom posterior along the second coordinate (the third atom is dead)
    d0 = (x[:, 1] - 0.0) ** 2
    d1 = (x[:, 1] - 1e-6) ** 2
    l0, l1 = np.log(0.25) - d0 * np.exp(lam) / 2, np.log(0.5) - d1 * np.exp(lam) / 2
    p1 = 1.0 / (1.0 + np.exp(l0 - l1))
    np.testing.assert_allclose(den[:, 1], p1 * 1e-6, rtol=1e-9)
    Hx = -(p1 * np.log(p1) + (1 - p1) * np.log1p(-p1))
    np.testing.assert_allclose(H, Hx, rtol=1e-9)


def test_posterior_float32_distances_close():
    mu, w = small_mixture(5, 100, 40)
    x = mu[:5] + 0.3 * np.random.default_rng(0).standard_normal((5, 40))
    den, H, _ = posterior_weights_blocked(mu, np.log(w), x, 1.0, float32_distances=True)
    ww, log_w, _ = dense_posterior(mu, w, x, 1.0)
    assert_close_rel(den, ww @ mu, EMPIRICAL_FLOAT32_RTOL)
    assert_close_rel(H, -(ww * log_w).sum(1), EMPIRICAL_FLOAT32_RTOL)


# --- Monte Carlo against exact references ------------------------------------------------------------

MU_1D = np.array([[-1.5], [0.0], [2.0]])
W_1D = np.array([0.2, 0.5, 0.3])
LAM_1D = np.array([-4.0, -1.0, 0.0, 1.0, 3.0])


@pytest.fixture(scope="module")
def exact_ref_1d():
    return np.array([exact_1d(MU_1D[:, 0], W_1D, lv) for lv in LAM_1D])


@pytest.mark.parametrize("stratify", [True, False])
def test_monte_carlo_matches_quad_reference(exact_ref_1d, stratify):
    out = monte_carlo_information(MU_1D, W_1D, LAM_1D, n_samples=4001, rng=123, stratify=stratify)
    for key, col in (("mmse", 0), ("conditional_entropy", 1)):
        est = getattr(out, key)
        assert est.method == "monte-carlo" and est.n_samples == 4001
        ref = exact_ref_1d[:, col]
        z = (est.value - ref) / est.stderr
        assert np.all(np.abs(z) <= MC_NSIGMA), f"{key}: z = {z}"
        # the test has power: standard errors are small compared with the values (lam <= 1;
        # at lam = 3 the MMSE is made of rare boundary crossings and only the z-score is checked)
        assert np.all(est.stderr[:4] < 0.05 * ref[:4]), f"{key}: stderr {est.stderr} vs {ref}"
    # the toolkit's one formula for h (overflow-free 1/2 e^lam mmse), applied to the MMSE estimate
    np.testing.assert_array_equal(out.entropy_rate.value, entropy_rate_from_mmse(LAM_1D, out.mmse).value)
    np.testing.assert_array_equal(out.entropy_rate.stderr, entropy_rate_from_mmse(LAM_1D, out.mmse).stderr)
    # exp(lam - log 2 + log mmse) rounds its argument: a relative error of a few eps times |argument|
    arg = np.abs(LAM_1D - np.log(2.0) + np.log(out.mmse.value))
    np.testing.assert_allclose(out.entropy_rate.value, 0.5 * np.exp(LAM_1D) * out.mmse.value,
                               rtol=4 * EPS * (1.0 + arg.max()))


def test_stderr_is_calibrated(exact_ref_1d):
    """Over 30 independent seeds the z-scores have mean square near 1 (chi-square with 30 dof:
    mean of z^2 in [0.35, 2.0] has probability > 0.999 for a calibrated estimator)."""
    z = []
    for seed in range(30):
        out = monte_carlo_information(MU_1D, W_1D, LAM_1D[2:4], n_samples=200, rng=seed)
        z.append((out.conditional_entropy.value - exact_ref_1d[2:4, 1]) / out.conditional_entropy.stderr)
    z2 = np.mean(np.square(z), axis=0)
    assert np.all((0.35 <= z2) & (z2 <= 2.0)), z2


def test_trace_identity_and_direct_estimators_agree():
    """1/2 sum_j w_j ||mu_j - mu_k||^2 and ||mu_k - m(x)||^2 have the same mean: their paired
    per-sample difference averages to 0 within MC_NSIGMA standard errors."""
    mu, w = small_mixture(2, 40, 6, scale=1.5)
    lam = np.array([-2.0, 0.0, 1.0, 2.5])
    s = information_samples(mu, w, lam, n_samples=3000, rng=9)
    k, eps = s.draws.atom_index, s.draws.eps
    for t, lv in enumerate(lam):
        x = mu[k] + np.exp(-lv / 2) * eps
        den, _, _ = posterior_weights_blocked(mu, np.log(w), x, lv)
        direct = ((mu[k] - den) ** 2).sum(1)
        diff_mean, diff_se = stratified_mean_stderr(s.mmse[t] - direct, s.draws.stratum)
        assert abs(diff_mean) <= MC_NSIGMA * diff_se, (lv, diff_mean, diff_se)
        _, se_identity = stratified_mean_stderr(s.mmse[t], s.draws.stratum)
        _, se_direct = stratified_mean_stderr(direct, s.draws.stratum)
        # the identity estimator averages tr C (the Rao-Blackwellised direct term) in: never noisier
        assert se_identity <= se_direct * 1.05, (lv, se_identity, se_direct)


def test_budget_identity_within_standard_errors():
    """int h dlam = H(pi) with trapezoid over [-16, 14] (tails below 1e-6), per-sample integrals."""
    mu, w = small_mixture(5, 50, 5, scale=2.0)
    lam = np.linspace(-16.0, 14.0, 121)
    s = information_samples(mu, w, lam, n_samples=2000, rng=0)
    q = np.full(lam.size, lam[1] - lam[0])
    q[[0, -1]] /= 2
    h = 0.5 * np.exp(lam)[:, None] * s.mmse
    val, se = s.mean_stderr(q @ h)
    H_pi = -(w * np.log(w)).sum()
    assert abs(val - H_pi) <= MC_NSIGMA * se, (val, se, H_pi)
    assert se < 0.03 * H_pi


def test_extreme_levels_limits():
    mu, w = small_mixture(4, 12, 3)
    out = monte_carlo_information(mu, w, [-50.0, 50.0], n_samples=500, rng=1)
    H, M = out.conditional_entropy, out.mmse
    assert np.all(np.isfinite(H.value)) and np.all(np.isfinite(M.value))
    H_pi = -(w * np.log(w)).sum()
    # at lam = -50 the weights equal pi up to ~e^{-25}: every sample's entropy is H(pi)
    assert abs(H.value[0] - H_pi) < 1e-9
    total_var = float(w @ ((mu - w @ mu) ** 2).sum(1))
    assert abs(M.value[0] - total_var) <= MC_NSIGMA * M.stderr[0]
    assert H.value[1] == 0.0 and M.value[1] == 0.0
    assert np.all(np.isfinite(out.entropy_rate.value)) and out.entropy_rate.value[1] == 0.0


def test_duplicate_atoms_are_handled():
    """Two copies of an atom stay ambiguous at every level: H(+50) = binary entropy of their weights."""
    mu = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 1.0]])
    w = np.array([0.25, 0.5, 0.25])
    out = monte_carlo_information(mu, w, [50.0], n_samples=600, rng=2)
    # samples from the pair have H = h2(1/3); from the third atom H = 0
    expect = 0.75 * -(1 / 3 * np.log(1 / 3) + 2 / 3 * np.log(2 / 3))
    assert abs(out.conditional_entropy.value[0] - expect) <= MC_NSIGMA * out.conditional_entropy.stderr[0] + 1e-12


def test_zero_weight_atoms_are_ignored():
    mu, w = small_mixture(3, 6, 2)
    w0 = np.r_[w, 0.0] / 1.0
    mu0 = np.vstack([mu, [[0.1, 0.2]]])
    a = monte_carlo_information(mu, w, [0.0, 2.0], n_samples=100, rng=5)
    b = monte_carlo_information(mu0, w0, [0.0, 2.0], n_samples=100, rng=5)
    np.testing.assert_allclose(a.mmse.value, b.mmse.value, rtol=1e-13)
    np.testing.assert_allclose(a.conditional_entropy.value, b.conditional_entropy.value, rtol=1e-13)


# --- reproducibility, shapes, progress -----------------------------------------------------------------


def test_same_seed_identical_output():
    mu, w = small_mixture(1, 30, 4)
    a = monte_carlo_information(mu, w, [[-1.0, 0.0], [1.0, 2.0]], n_samples=50, rng=42)
    b = monte_carlo_information(mu, w, [[-1.0, 0.0], [1.0, 2.0]], n_samples=50, rng=42)
    c = monte_carlo_information(mu, w, [[-1.0, 0.0], [1.0, 2.0]], n_samples=50, rng=43)
    for key in ("mmse", "conditional_entropy", "entropy_rate"):
        ea, eb, ec = (getattr(r, key) for r in (a, b, c))
        assert ea.value.shape == (2, 2)
        assert np.array_equal(ea.value, eb.value) and np.array_equal(ea.stderr, eb.stderr)
        assert not np.array_equal(ea.value, ec.value)
    assert a.mmse.info["seed"] == 42
    d1 = draw_common_random_numbers(w, 9, 4, rng=7)
    d2 = draw_common_random_numbers(w, 9, 4, rng=7)
    assert np.array_equal(d1.atom_index, d2.atom_index) and np.array_equal(d1.eps, d2.eps)


def test_seed_recorded_when_none():
    out = monte_carlo_information(np.eye(3), None, [0.0], n_samples=4, rng=None)
    seed = out.mmse.info["seed"]
    again = monte_carlo_information(np.eye(3), None, [0.0], n_samples=4, rng=seed)
    assert np.array_equal(out.mmse.value, again.mmse.value)


def test_block_size_does_not_change_results():
    mu, w = small_mixture(8, 37, 5)
    lam = np.linspace(-5, 5, 7)
    ref = information_samples(mu, w, lam, n_samples=10, rng=0, block_size=37)
    for bs in (1, 5, 36):
        s = information_samples(mu, w, lam, n_samples=10, rng=0, block_size=bs)
        assert s.info["block_size"] == bs
        # Each merge of the online log-sum-exp rescales by exp(m_old - m_new), whose relative
        # rounding is eps * |logit| (<= ~3e3 here): the dense-comparison tolerance covers it.
        assert_close_rel(s.entropy, ref.entropy, EMPIRICAL_DENSE_RTOL)
        assert_close_rel(s.mmse, ref.mmse, EMPIRICAL_DENSE_RTOL, atol_scale=0.0)


def test_progress_bar_same_numbers(capsys):
    mu, w = small_mixture(8, 20, 3)
    a = monte_carlo_information(mu, w, [0.0], n_samples=8, rng=0, progress=True, block_size=5)
    b = monte_carlo_information(mu, w, [0.0], n_samples=8, rng=0, progress=False, block_size=5)
    assert np.array_equal(a.mmse.value, b.mmse.value)


def test_stratification_draws():
    w = np.array([0.1, 0.0, 0.6, 0.3])
    d = draw_common_random_numbers(w, 1001, 2, rng=0)
    counts = np.bincount(d.atom_index, minlength=4)
    assert counts[1] == 0
    # one sample per 1/n of probability: counts within 3 of n * w (strata of width 2/n or 3/n)
    assert np.all(np.abs(counts - 1001 * w) <= 3), counts
    assert np.all(np.bincount(d.stratum) >= 2)


def test_stratified_mean_stderr_formula():
    rng = np.random.default_rng(0)
    v = rng.standard_normal((3, 11))
    strata = np.array([0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4])
    mean, se = stratified_mean_stderr(v, strata)
    var = np.zeros(3)
    for s in range(5):
        part = v[:, strata == s]
        var += part.shape[1] * part.var(axis=1, ddof=1)
    np.testing.assert_allclose(mean, v.mean(axis=1), rtol=1e-15)
    np.testing.assert_allclose(se, np.sqrt(var) / 11, rtol=1e-13)
    # one stratum: the i.i.d. formula
    _, se1 = stratified_mean_stderr(v, np.zeros(11, int))
    np.testing.assert_allclose(se1, v.std(axis=1, ddof=1) / np.sqrt(11), rtol=1e-13)
    with pytest.raises(ValueError, match="two samples"):
        stratified_mean_stderr(v, np.arange(11))


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "atoms, weights, lam, kwargs, match",
    [
        ([[np.nan, 0.0]], None, [0.0], {}, "atoms must be finite"),
        ([[np.inf, 0.0]], None, [0.0], {}, "atoms must be finite"),
        ([1.0, 2.0], None, [0.0], {}, "atoms must be a \\(K, D\\)"),
        ([[0.0], [1.0]], [-0.5, 1.5], [0.0], {}, "weights must be >= 0"),
        ([[0.0], [1.0]], [0.0, 0.0], [0.0], {}, "not be all zero"),
        ([[0.0], [1.0]], [0.3, 0.3], [0.0], {}, "sum to 1"),
        ([[0.0], [1.0]], [0.5, 0.5, 0.0], [0.0], {}, "weights must have shape \\(2,\\)"),
        ([[0.0], [1.0]], [np.nan, 1.0], [0.0], {}, "weights must be finite"),
        ([[0.0], [1.0]], None, [np.nan], {}, "lam must be finite"),
        ([[0.0], [1.0]], None, [np.inf], {}, "lam must be finite"),
        ([[0.0], [1.0]], None, [800.0], {}, "lam must satisfy"),
        ([[0.0], [1.0]], None, [0.0], {"n_samples": 1}, "n_samples must be an integer >= 2"),
        ([[0.0], [1.0]], None, [0.0], {"block_size": 0}, "block_size must be a positive integer"),
    ],
)
def test_bad_input_monte_carlo(atoms, weights, lam, kwargs, match):
    kw = {"n_samples": 4, "rng": 0}
    kw.update(kwargs)
    with pytest.raises(ValueError, match=match):
        monte_carlo_information(atoms, weights, lam, **kw)


def test_bad_input_posterior_weights():
    mu = np.zeros((3, 2))
    with pytest.raises(ValueError, match="x must have shape"):
        posterior_weights_blocked(mu, np.zeros(3), np.zeros((4, 3)), 0.0)
    with pytest.raises(ValueError, match="log_pi must have shape"):
        posterior_weights_blocked(mu, np.zeros(2), np.zeros((4, 2)), 0.0)
    with pytest.raises(ValueError, match="at least one finite"):
        posterior_weights_blocked(mu, np.full(3, -np.inf), np.zeros((4, 2)), 0.0)
    with pytest.raises(ValueError, match="NaN"):
        posterior_weights_blocked(mu, np.array([0.0, np.nan, 0.0]), np.zeros((4, 2)), 0.0)
    with pytest.raises(ValueError, match="x must be finite"):
        posterior_weights_blocked(mu, np.zeros(3), np.full((4, 2), np.nan), 0.0)
    with pytest.raises(ValueError, match="scalar"):
        posterior_weights_blocked(mu, np.zeros(3), np.zeros((4, 2)), [0.0, 1.0])
    with pytest.raises(ValueError, match="kernel must be"):
        information_samples(mu, None, [0.0], n_samples=4, kernel="cuda")


def test_posterior_weights_blocked_extreme_levels():
    mu, w = small_mixture(6, 15, 4, scale=3.0)
    rng = np.random.default_rng(1)
    k = rng.integers(0, 15, 9)
    x = mu[k] + 1e-3 * rng.standard_normal((9, 4))
    den, H, logz = posterior_weights_blocked(mu, np.log(w), x, 50.0, block_size=4)
    # all weight on the nearest atom (to the rounding of centring and un-centring)
    np.testing.assert_allclose(den, mu[k], rtol=4 * EPS, atol=4 * EPS)
    assert np.all(H == 0.0) and np.all(np.isfinite(logz))
    den, H, logz = posterior_weights_blocked(mu, np.log(w), x, -50.0, block_size=4)
    np.testing.assert_allclose(den, np.broadcast_to(w @ mu, den.shape), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(H, -(w * np.log(w)).sum(), rtol=1e-12)
    np.testing.assert_allclose(logz, 0.0, atol=1e-12)  # log sum_j pi_j e^{-tiny} = 0


@pytest.mark.parametrize("importance", [False, True])
def test_centre_and_live_hints(importance):
    """A model's cached centre and live coordinates (information_samples' hints) change nothing but
    rounding: any nearby centre and any superset of the live coordinates give the same values; wrong
    shapes and orders are refused with the argument named."""
    rng = np.random.default_rng(12)
    mu = rng.normal(size=(300, 6))
    mu[:, 2] = 0.75  # a dead coordinate
    w = rng.dirichlet(np.ones(300))
    lam = [-2.0, 1.0, 4.0]
    base = information_samples(mu, w, lam, n_samples=64, rng=3, importance=importance)
    hinted = information_samples(mu, w, lam, n_samples=64, rng=3, importance=importance,
                                 centre=w @ mu + 1e-3, live=np.arange(6))
    for a, b in ((hinted.mmse, base.mmse), (hinted.entropy, base.entropy)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    for bad, msg in (({"centre": np.zeros(5)}, "centre must have shape"),
                     ({"centre": np.full(6, np.nan)}, "centre"),
                     ({"live": np.array([3, 1])}, "live must be"),
                     ({"live": np.array([0, 6])}, "live must be"),
                     ({"live": np.array([0.0, 1.0])}, "live must be")):
        with pytest.raises(ValueError, match=msg):
            information_samples(mu, w, lam, n_samples=8, rng=3, importance=importance, **bad)


@pytest.mark.parametrize("kernel", ["numba", "numpy"])
@pytest.mark.parametrize("spread, lam", [(1e-4, (6.0, 11.0, 14.0)), (0.05, (4.0, 6.5, 9.0))])
def test_near_duplicates_at_high_snr_match_a_high_precision_reference(kernel, spread, lam):
    """Clusters of close atoms far from the origin, at levels where the members share the posterior:
    their weights hang on squared distances far below the squared norms (~1e5), whose GEMM form errs
    by ~1e-11 absolute, which the level multiplies by e^lam / 2.  Spread 1e-4: within the plain
    engine's cancellation rule; spread 0.05: beyond it, and only the direct sums of the atoms that can
    carry weight at the top level (near_thresholds) keep the values to rounding (relative ~1e-8 off
    without them).  Each per-sample value against mpmath at 40 digits, from the original atoms."""
    import mpmath as mp

    rng = np.random.default_rng(7)
    mu = np.repeat(rng.normal(size=(6, 12)) * 50.0 + 300.0, 6, axis=0) + rng.normal(size=(36, 12)) * spread
    w = rng.dirichlet(np.ones(36))
    lam = np.array(lam)
    s = information_samples(mu, w, lam, n_samples=12, rng=5, kernel=kernel)
    for t, lv in enumerate(lam):
        with mp.workdps(40):
            sig = mp.e ** (-mp.mpf(float(lv)) / 2)
            for i, k in enumerate(s.draws.atom_index):
                x = [mp.mpf(float(mu[k, d])) + sig * mp.mpf(float(s.draws.eps[i, d])) for d in range(12)]
                logits = [mp.log(mp.mpf(float(w[j])))
                          - mp.fsum((x[d] - mp.mpf(float(mu[j, d]))) ** 2 for d in range(12)) / (2 * sig**2)
                          for j in range(36)]
                top = max(logits)
                p = [mp.e ** (v - top) for v in logits]
                z = mp.fsum(p)
                p = [v / z for v in p]
                h = -mp.fsum(q * mp.log(q) for q in p if q > 0)
                m = mp.fsum(p[j] * mp.fsum((mp.mpf(float(mu[k, d])) - mp.mpf(float(mu[j, d]))) ** 2 for d in range(12))
                            for j in range(36)) / 2
                assert s.entropy[t, i] == pytest.approx(float(h), rel=1e-12, abs=1e-15), (lv, i)
                assert s.mmse[t, i] == pytest.approx(float(m), rel=1e-11, abs=0), (lv, i)
