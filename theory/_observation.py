"""The forward-process observation every data model samples the same way."""

from __future__ import annotations

import math

from noisealloc.theory.errors import as_generator, scalar_lam


def sample_observation(model, lam, n: int, rng=None):
    r"""Draw ``(x0, x)`` with :math:`x = x_0 + e^{-\lambda/2}\varepsilon` (VE/EDM scaling); scalar ``lam``.

    ``x0`` comes from ``model.sample_x0(n, rng=...)``; both have shape (n, D).
    """
    lam = scalar_lam(lam)
    gen = as_generator(rng)
    x0 = model.sample_x0(n, rng=gen)
    return x0, x0 + math.exp(-0.5 * lam) * gen.standard_normal(x0.shape)
