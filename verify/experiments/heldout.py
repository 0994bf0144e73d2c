r"""The held-out diffusion loss of docs/THEORY.md §6.6: the quality metric of trained denoisers.

For a denoiser :math:`D(x, \lambda)` and a test split :math:`\{x_{0,i}\}_{i=1}^n` never trained on,

.. math::

    \mathcal L(D) = \tfrac12 \int_{\lambda_{min}}^{\lambda_{max}} e^\lambda\,
    E\,\|D(x_0 + e^{-\lambda/2}\varepsilon, \lambda) - x_0\|^2 \, d\lambda
    \quad\text{(nats per example, summed over the D coordinates)},

estimated on a *frozen evaluation set* (:class:`HeldoutSet`): a fixed log-SNR grid with trapezoid
weights, and one fixed noise draw :math:`\varepsilon_i` per test example, shared by every level
(common random numbers) and by every schedule compared, so that differences between schedules are
paired.  Per example the integral over the grid is one number

.. math:: \ell_i = \sum_l w_l\, \tfrac12 e^{\lambda_l}\, \|D(x_{0,i} + \sigma_l \varepsilon_i, \lambda_l) - x_{0,i}\|^2 ,

and :math:`\mathcal L \approx \bar\ell` with standard error :math:`\mathrm{sd}(\ell)/\sqrt n` over the
test examples (they are i.i.d.).  Reported in nats per example, nats per dimension
(:math:`\bar\ell / D`) and bits per dimension (:math:`\bar\ell / (D \ln 2)`).  With the exact Bayes
denoiser :math:`m` the metric is :math:`\tfrac12\int e^\lambda\,\mathrm{mmse}(\lambda)\,d\lambda`
(the I-MMSE relation makes it :math:`I(\lambda_{max}) - I(\lambda_{min})`, docs/THEORY.md §2).  When the
data law's Bayes denoiser is known (Dirac mixtures through the posterior engine), the set also holds
:math:`m` and the *gap* :math:`\tfrac12\int e^\lambda E\|D - m\|^2 d\lambda` (the ELBO gap of
docs/THEORY.md §4) is estimated the same way.

Everything here is float64 NumPy: a network evaluated in float32 is cast to float64 before the
squared errors are formed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from noisealloc.theory.errors import as_float_array, as_generator, check_count, check_finite, check_interval

__all__ = [
    "HeldoutSet",
    "HeldoutLoss",
    "make_heldout_set",
    "heldout_loss",
    "bayes_heldout_loss",
    "paired_difference",
    "split_train_test",
    "trapezoid_weights",
]

#: Largest number of float64 entries of the stored Bayes denoiser values (levels x examples x D): the
#: exact denoiser is evaluated once per set; beyond ~2 GB it is not stored (ask for fewer examples).
MAX_BAYES_ENTRIES = 250_000_000


def trapezoid_weights(lam) -> np.ndarray:
    r"""Trapezoid weights of a strictly increasing grid: :math:`\int f\,d\lambda \approx \sum_l w_l f(\lambda_l)`.

    Parameters
    ----------
    lam : array_like, shape (L,), L >= 2, strictly increasing

    Returns
    -------
    ndarray, shape (L,)
        :math:`w_0 = (\lambda_1-\lambda_0)/2`, :math:`w_l = (\lambda_{l+1}-\lambda_{l-1})/2`,
        :math:`w_{L-1} = (\lambda_{L-1}-\lambda_{L-2})/2`.

    Examples
    --------
    >>> trapezoid_weights([0.0, 1.0, 3.0]).tolist()
    [0.5, 1.5, 1.0]
    """
    lam = check_finite(as_float_array(lam, "lam", ndim=1), "lam")
    if lam.size < 2 or np.any(np.diff(lam) <= 0):
        raise ValueError(f"lam must be a strictly increasing grid of >= 2 levels; got {lam.tolist()[:6]}")
    d = np.diff(lam)
    w = np.zeros(lam.size)
    w[:-1] += d / 2
    w[1:] += d / 2
    return w


@dataclass(frozen=True)
class HeldoutSet:
    r"""A frozen evaluation set: test examples, one noise draw each, a log-SNR grid and its weights.

    Attributes
    ----------
    lam : ndarray, shape (L,)
        Log-SNR grid on :math:`[\lambda_{min}, \lambda_{max}]`.
    weights : ndarray, shape (L,)
        Trapezoid weight times the ELBO weight, :math:`w_l\,\tfrac12 e^{\lambda_l}`.
    x0 : ndarray, shape (n, D)
        Test examples (never trained on).
    eps : ndarray, shape (n, D)
        Standard normal noise, one draw per example, shared by every level.
    bayes : ndarray, shape (L, n, D) or None
        Exact Bayes denoiser :math:`m(x, \lambda_l)` at the set's noisy points, when known.
    seed : int or None
        Seed of the noise draw (recorded for the outputs).
    """

    lam: np.ndarray
    weights: np.ndarray
    x0: np.ndarray
    eps: np.ndarray
    bayes: np.ndarray | None = None
    seed: int | None = None
    info: dict = field(default_factory=dict, compare=False)

    @property
    def n(self) -> int:
        """Number of test examples."""
        return int(self.x0.shape[0])

    @property
    def dim(self) -> int:
        """Data dimension D."""
        return int(self.x0.shape[1])

    def noisy(self, level: int) -> np.ndarray:
        r""":math:`x = x_0 + e^{-\lambda_l/2}\varepsilon` at grid index ``level``, shape (n, D)."""
        return self.x0 + np.exp(-0.5 * self.lam[level]) * self.eps


@dataclass(frozen=True)
class HeldoutLoss:
    r"""The held-out diffusion loss of one denoiser on one :class:`HeldoutSet`.

    Attributes
    ----------
    nats, nats_se : float
        :math:`\bar\ell` (nats per example, summed over coordinates) and its standard error over
        the test examples.
    nats_per_dim, bits_per_dim, bits_per_dim_se : float
        :math:`\bar\ell/D`, :math:`\bar\ell/(D\ln 2)` and the standard error of the latter.
    per_level_mse, per_level_mse_se : ndarray, shape (L,)
        :math:`E\|D(x, \lambda_l) - x_0\|^2` per grid level and its standard error (the per-level
        x0 losses a practitioner feeds to ``noisealloc schedule --from-losses``).
    gap_nats, gap_se : float or None
        :math:`\tfrac12\int e^\lambda E\|D - m\|^2 d\lambda` and its standard error, when the set
        holds the Bayes denoiser.
    per_example : ndarray, shape (n,)
        :math:`\ell_i`, the integral per test example (for paired comparisons on one set:
        :func:`paired_difference`).
    lam : ndarray, shape (L,)
        The grid of the set.
    n, dim : int
        Test examples and data dimension.
    """

    nats: float
    nats_se: float
    nats_per_dim: float
    bits_per_dim: float
    bits_per_dim_se: float
    per_level_mse: np.ndarray
    per_level_mse_se: np.ndarray
    lam: np.ndarray
    n: int
    dim: int
    gap_nats: float | None = None
    gap_se: float | None = None
    per_example: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        """JSON-ready dict of the scalars and per-level arrays (lists).

        Returns
        -------
        dict
        """
        return {
            "nats": self.nats, "nats_se": self.nats_se, "nats_per_dim": self.nats_per_dim,
            "bits_per_dim": self.bits_per_dim, "bits_per_dim_se": self.bits_per_dim_se,
            "gap_nats": self.gap_nats, "gap_se": self.gap_se, "n": self.n, "dim": self.dim,
            "lam": self.lam.tolist(), "per_level_mse": self.per_level_mse.tolist(),
            "per_level_mse_se": self.per_level_mse_se.tolist(),
        }


def split_train_test(data, n_test: int, *, rng=None) -> tuple[np.ndarray, np.ndarray]:
    """Split the rows of ``data`` at random into a training part and a disjoint test part.

    Parameters
    ----------
    data : array_like, shape (N, D)
    n_test : int
        Test rows, ``1 <= n_test < N``.
    rng : numpy.random.Generator, int or None
        Seed of the permutation.

    Returns
    -------
    train : ndarray, shape (N - n_test, D)
    test : ndarray, shape (n_test, D)

    Examples
    --------
    >>> tr, te = split_train_test(np.arange(10.0).reshape(5, 2), 2, rng=0)
    >>> tr.shape, te.shape
    ((3, 2), (2, 2))
    """
    data = check_finite(as_float_array(data, "data", ndim=2), "data")
    n_test = check_count(n_test, "n_test")
    if not 1 <= n_test < data.shape[0]:
        raise ValueError(f"n_test must lie in [1, {data.shape[0] - 1}] (rows of data minus one); got {n_test}")
    perm = as_generator(rng).permutation(data.shape[0])
    return data[perm[n_test:]].copy(), data[perm[:n_test]].copy()


def make_heldout_set(x0, lam_min: float = -10.0, lam_max: float = 10.0, *, levels: int = 41, rng=None,
                     bayes=None) -> HeldoutSet:
    r"""Freeze an evaluation set: the grid, its ELBO-trapezoid weights and one noise draw per example.

    Parameters
    ----------
    x0 : array_like, shape (n, D)
        Test examples (a split never trained on, or fresh draws of a data model).
    lam_min, lam_max : float
        Interval of the metric in log-SNR.
    levels : int
        Grid levels (uniform in :math:`\lambda`), >= 2.
    rng : numpy.random.Generator, int or None
        Seed of the noise :math:`\varepsilon` (an int is recorded in the set).
    bayes : object with ``denoiser(x, lam)``, optional
        The data law's exact denoiser (e.g. :class:`~noisealloc.theory.models.dirac.DiracMixture`); its
        values at the set's noisy points are stored so that the gap to it can be reported.

    Returns
    -------
    HeldoutSet

    Examples
    --------
    >>> hs = make_heldout_set(np.zeros((4, 2)), -2.0, 2.0, levels=5, rng=0)
    >>> hs.lam.tolist(), hs.eps.shape
    ([-2.0, -1.0, 0.0, 1.0, 2.0], (4, 2))
    """
    x0 = check_finite(as_float_array(x0, "x0", ndim=2), "x0")
    if x0.shape[0] < 2:
        raise ValueError(f"x0 must hold >= 2 test examples (a standard error needs two); got {x0.shape[0]}")
    lo, hi = check_interval(lam_min, lam_max, "[lam_min, lam_max]")
    levels = check_count(levels, "levels")
    if levels < 2:
        raise ValueError(f"levels must be >= 2; got {levels}")
    seed = int(rng) if isinstance(rng, (int, np.integer)) else None
    eps = as_generator(rng).standard_normal(x0.shape)
    lam = np.linspace(lo, hi, levels)
    weights = trapezoid_weights(lam) * 0.5 * np.exp(lam)
    m = None
    if bayes is not None:
        if levels * x0.size > MAX_BAYES_ENTRIES:
            raise ValueError(f"bayes: levels * n * D = {levels * x0.size} exceeds {MAX_BAYES_ENTRIES} stored "
                             "entries; use fewer test examples or levels")
        m = np.empty((levels,) + x0.shape)
        for i, l in enumerate(lam):
            m[i] = np.asarray(bayes.denoiser(x0 + np.exp(-0.5 * l) * eps, float(l)), dtype=np.float64)
    info = {"levels": levels, "n": int(x0.shape[0]), "lam_min": lo, "lam_max": hi, "seed": seed}
    return HeldoutSet(lam, weights, x0, eps, m, seed, info)


def heldout_loss(denoiser, hset: HeldoutSet) -> HeldoutLoss:
    r"""Evaluate :math:`\tfrac12\int e^\lambda E\|D(x,\lambda) - x_0\|^2 d\lambda` on a frozen set.

    Parameters
    ----------
    denoiser : callable
        ``denoiser(x, lam)`` with ``x`` of shape (n, D) (float64) and ``lam`` a float, returning
        :math:`D(x, \lambda)` of shape (n, D) in any float dtype (cast to float64 here).
    hset : HeldoutSet

    Returns
    -------
    HeldoutLoss
        Mean and standard error over the test examples of the per-example integral
        :math:`\ell_i` (module docstring), in nats, nats/dim and bits/dim; per-level MSEs; the gap
        to the Bayes denoiser when ``hset.bayes`` is set.

    References
    ----------
    docs/THEORY.md §6.6 (quality metric), §2 (I-MMSE), §4 (ELBO weight).

    Examples
    --------
    >>> hs = make_heldout_set(np.zeros((8, 1)), -1.0, 1.0, levels=3, rng=0)
    >>> heldout_loss(lambda x, lam: np.zeros_like(x), hs).nats   # the zero data: D = 0 is exact
    0.0
    """
    if not isinstance(hset, HeldoutSet):
        raise ValueError(f"hset must be a HeldoutSet (make_heldout_set); got {type(hset).__name__}")
    L, n, d = hset.lam.size, hset.n, hset.dim
    per_ex = np.zeros(n)
    gap_ex = np.zeros(n) if hset.bayes is not None else None
    sq = np.empty((L, n))
    for i in range(L):
        x = hset.noisy(i)
        out = np.asarray(denoiser(x, float(hset.lam[i])), dtype=np.float64)
        if out.shape != x.shape:
            raise ValueError(f"denoiser must return shape {x.shape} for x of that shape; got {out.shape}")
        if not np.all(np.isfinite(out)):
            raise ValueError(f"denoiser returned non-finite values at lam = {hset.lam[i]!r}")
        sq[i] = np.sum((out - hset.x0) ** 2, axis=1)
        per_ex += hset.weights[i] * sq[i]
        if gap_ex is not None:
            gap_ex += hset.weights[i] * np.sum((out - hset.bayes[i]) ** 2, axis=1)
    root_n = np.sqrt(n)
    nats = float(per_ex.mean())
    nats_se = float(per_ex.std(ddof=1) / root_n)
    ln2 = np.log(2.0)
    gap = gap_se = None
    if gap_ex is not None:
        gap, gap_se = float(gap_ex.mean()), float(gap_ex.std(ddof=1) / root_n)
    return HeldoutLoss(
        nats=nats, nats_se=nats_se, nats_per_dim=nats / d, bits_per_dim=nats / (d * ln2),
        bits_per_dim_se=nats_se / (d * ln2), per_level_mse=sq.mean(axis=1),
        per_level_mse_se=sq.std(axis=1, ddof=1) / root_n, lam=hset.lam.copy(), n=n, dim=d,
        gap_nats=gap, gap_se=gap_se, per_example=per_ex,
    )


def bayes_heldout_loss(hset: HeldoutSet) -> HeldoutLoss:
    r"""The held-out loss of the exact Bayes denoiser on the same frozen set: the floor of trained networks.

    :func:`heldout_loss` of :math:`m(x, \lambda)` (stored in ``hset.bayes``): the estimate, with the set's
    noise, of :math:`\tfrac12\int e^\lambda\,\mathrm{mmse}(\lambda)\,d\lambda = H(\lambda_{min}) - H(\lambda_{max})`
    (I-MMSE, docs/THEORY.md §2), which no denoiser beats in expectation.

    Parameters
    ----------
    hset : HeldoutSet
        A set made with ``bayes=`` (Dirac mixtures).

    Returns
    -------
    HeldoutLoss
        Its ``gap_nats`` is 0.
    """
    if not isinstance(hset, HeldoutSet) or hset.bayes is None:
        raise ValueError("hset must be a HeldoutSet made with bayes= (the exact denoiser of the data law)")
    level = {float(l): i for i, l in enumerate(hset.lam)}
    return heldout_loss(lambda x, lam: hset.bayes[level[float(lam)]], hset)


def paired_difference(a: HeldoutLoss, b: HeldoutLoss) -> tuple[float, float]:
    r"""Difference :math:`\mathcal L_a - \mathcal L_b` of two losses on the same held-out set, paired.

    Both denoisers saw the same examples and noise, so the standard error is that of the mean of
    the per-example differences :math:`\ell_{a,i} - \ell_{b,i}` (much smaller than the two
    separate errors when the losses are correlated).

    Parameters
    ----------
    a, b : HeldoutLoss
        From :func:`heldout_loss` on one :class:`HeldoutSet`.

    Returns
    -------
    diff, se : float
        Mean difference (nats per example) and its standard error.

    Examples
    --------
    >>> hs = make_heldout_set(np.ones((6, 1)), -1.0, 1.0, levels=3, rng=0)
    >>> d, se = paired_difference(heldout_loss(lambda x, l: x, hs), heldout_loss(lambda x, l: x, hs))
    >>> d, se
    (0.0, 0.0)
    """
    for name, v in (("a", a), ("b", b)):
        if not isinstance(v, HeldoutLoss) or v.per_example is None:
            raise ValueError(f"{name} must be a HeldoutLoss from heldout_loss; got {type(v).__name__}")
    if a.per_example.shape != b.per_example.shape or not np.array_equal(a.lam, b.lam):
        raise ValueError(f"a and b must come from the same held-out set; got {a.n} and {b.n} examples")
    d = a.per_example - b.per_example
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size))
