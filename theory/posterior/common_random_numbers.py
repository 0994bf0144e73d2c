r"""Common random numbers of the Monte-Carlo engines: the draws (atom, noise) shared by every
level, stratified by atom, and the stratified mean and standard error of per-sample values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from noisealloc.theory.errors import as_float_array, as_generator, check_weight_vector

__all__ = ['CommonRandomNumbers', 'draw_common_random_numbers', 'stratified_mean_stderr']


# --- common random numbers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CommonRandomNumbers:
    """The draws shared by every level.

    Attributes
    ----------
    atom_index : ndarray, shape (n,)
        Sampled true atoms ``k_i`` (indices into the atoms as given).
    eps : ndarray, shape (n, D)
        Standard normal noises.
    stratum : ndarray, shape (n,)
        Stratum label of each sample (non-decreasing; 2 or 3 samples per stratum).
    seed : int or None
        The integer seed the draws came from (``None`` when a Generator was passed).
    """

    atom_index: np.ndarray
    eps: np.ndarray
    stratum: np.ndarray
    seed: int | None = None


def _strata(n: int, stratify: bool) -> np.ndarray:
    if not stratify:
        return np.zeros(n, dtype=np.int64)
    n_strata = n // 2
    sizes = np.full(n_strata, 2, dtype=np.int64)
    sizes[: n - 2 * n_strata] += 1  # an odd n gives one stratum of three
    return np.repeat(np.arange(n_strata), sizes)


def _samples_and_seed(n_samples, rng):
    """``(n, seed, rng)``: ``n_samples`` checked (an integer >= 2), and the integer seed to record (drawn
    from the OS when ``rng`` is None, which then becomes that seed; None for a Generator)."""
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 2:
        raise ValueError(f"n_samples must be an integer >= 2 (a standard error needs two samples); got {n_samples!r}")
    seed = None
    if rng is None:
        seed = int(np.random.SeedSequence().entropy % (2**63))
        rng = seed
    elif isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        seed = int(rng)
    return int(n_samples), seed, rng


def draw_common_random_numbers(weights, n_samples: int, dim: int, *, rng=None, stratify: bool = True) -> CommonRandomNumbers:
    r"""Draw ``(k_i, eps_i)``, ``i = 1..n_samples``: ``k_i ~ pi`` (stratified) and ``eps_i ~ N(0, I_dim)``.

    Stratification: the unit interval of the cumulative weights is cut into
    ``n // 2`` strata of width ``n_s / n`` (``n_s`` = 2 or 3 samples each) and
    each sample is drawn uniformly inside its stratum, so every sample keeps
    weight ``1/n`` and the estimator stays the plain mean.

    Parameters
    ----------
    weights : array_like, shape (K,)
        Probabilities :math:`\pi`.
    n_samples : int
        ``n >= 2``.
    dim : int
        Dimension ``D`` of the noises.
    rng : Generator, int or None
        Randomness; an integer seed (drawn from the OS when ``None``) is recorded.
    stratify : bool
        Stratify the atom index (default) or draw it i.i.d.

    Returns
    -------
    CommonRandomNumbers
    """
    n, seed, rng = _samples_and_seed(n_samples, rng)
    gen = as_generator(rng)
    # checked (issue 28): [] raised an IndexError, a NaN weight sent every draw to one atom, complex
    # weights were cut to their real part
    if np.ndim(weights) != 1 or np.size(weights) == 0:
        raise ValueError(f"weights must be a 1-d array of at least one weight; got shape {np.shape(weights)}")
    check_weight_vector(weights, np.size(weights), normalise=True)
    w = np.asarray(weights, dtype=np.float64)  # as given: the draws of a seed do not change
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"dim must be an integer >= 1; got {dim!r}")
    stratum = _strata(n, stratify)
    u = gen.random(n)
    if stratify:
        sizes = np.bincount(stratum)
        lo = np.concatenate(([0], np.cumsum(sizes)[:-1]))[stratum] / n
        u = lo + u * sizes[stratum] / n
    cdf = np.cumsum(w)
    k = np.searchsorted(cdf, u * cdf[-1], side="right")
    k = np.minimum(k, len(w) - 1)
    # Rounding at the top of the cdf could land on a trailing zero-weight atom: step back to a positive one.
    positive = np.flatnonzero(w > 0)
    bad = w[k] <= 0
    if np.any(bad):
        k[bad] = positive[np.searchsorted(positive, k[bad], side="right") - 1]
    eps = gen.standard_normal((n, int(dim)))
    return CommonRandomNumbers(k.astype(np.int64), eps, stratum, seed)

def stratified_mean_stderr(values, stratum) -> tuple[np.ndarray, np.ndarray]:
    r"""Mean over the last axis and its standard error under a stratified design.

    .. math::

        \widehat{\operatorname{Var}} = \frac{1}{n^2} \sum_s n_s\, s_s^2,

    with ``s_s^2`` the unbiased within-stratum sample variance (``n_s`` samples), computed on
    deviations scaled by a power of two per row so that it does not underflow for values ~1e-300.

    Parameters
    ----------
    values : array_like, shape (..., n)
        Per-sample values (samples on the last axis, grouped by stratum).
    stratum : array_like, shape (n,)
        Non-decreasing stratum labels, at least 2 samples per stratum.

    Returns
    -------
    mean, stderr : ndarray, shape (...)

    Examples
    --------
    >>> import numpy as np
    >>> m, se = stratified_mean_stderr(np.array([1.0, 3.0, 2.0, 6.0]), np.array([0, 0, 1, 1]))
    >>> float(m), round(float(se), 12)
    (3.0, 1.11803398875)
    """
    v = as_float_array(values, "values")
    stratum = np.asarray(stratum)
    n = v.shape[-1]
    mean = v.mean(axis=-1)
    starts = np.flatnonzero(np.r_[True, stratum[1:] != stratum[:-1]])
    sizes = np.diff(np.r_[starts, n])
    if np.any(sizes < 2):
        raise ValueError("every stratum needs at least two samples for a variance estimate")
    sums = np.add.reduceat(v, starts, axis=-1)
    smean = sums / sizes
    dev = v - np.repeat(smean, sizes, axis=-1)
    # Squares of deviations below ~1e-162 underflow: scale each row by a power of two (exact, so the
    # result is bit-for-bit that of the unscaled formula wherever that did not under- or overflow).
    _, expo = np.frexp(np.max(np.abs(dev), axis=-1, keepdims=True) if n else np.zeros(v.shape[:-1] + (1,)))
    dev = np.ldexp(dev, -expo)
    ss = np.add.reduceat(dev * dev, starts, axis=-1)  # = (n_s - 1) s_s^2, scaled by 4^-expo
    var = (ss * (sizes / (sizes - 1))).sum(axis=-1) / n**2
    return mean, np.ldexp(np.sqrt(var), expo[..., 0])
