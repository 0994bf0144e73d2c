"""The forward-process observation every data model samples the same way."""

from __future__ import annotations

import math

from noisealloc.theory.errors import as_generator, scalar_lam

__all__ = ["sample_observation"]


def sample_observation(model, lam, n: int, rng=None):
    r"""Draw ``(x0, x)`` with :math:`x = x_0 + e^{-\lambda/2}\varepsilon` (VE/EDM scaling); scalar ``lam``.

    Parameters
    ----------
    model : object
        A data model with ``sample_x0(n, rng=...)`` returning an (n, D) array.
    lam : float
        Log-SNR of the observation (a scalar).
    n : int
        Number of draws.
    rng : numpy.random.Generator, int or None
        Source of randomness.

    Returns
    -------
    x0, x : numpy.ndarray
        Clean samples and their noisy observations, each of shape (n, D).
    """
    lam = scalar_lam(lam)
    gen = as_generator(rng)
    x0 = model.sample_x0(n, rng=gen)
    return x0, x0 + math.exp(-0.5 * lam) * gen.standard_normal(x0.shape)
