r"""Noise-level samplers for training loops: numpy, PyTorch and JAX, from an exported schedule.

A schedule exported by ``noisealloc schedule --out schedule.json`` (format ``noisealloc.schedule``
version 1, :mod:`noisealloc.theory.schedules.io`) is a piecewise-linear density :math:`f` on
``knots`` with its exact CDF :math:`F` at the knots.  Every sampler here draws
:math:`q \sim U(\epsilon, 1 - \epsilon)\,F_K` and inverts the piecewise-quadratic CDF exactly:
in the cell :math:`[x_i, x_{i+1}]` holding :math:`q`, with :math:`r = q - F_i` and
:math:`w = x_{i+1} - x_i`,

.. math:: u = x_i + \frac{2r}{f_i + \sqrt{f_i^2 + 2 (f_{i+1} - f_i)\, r / w}} ,

in float64.  Densities that are 0 on runs of knots (zero-density tails or gaps) are valid: the
cell found for :math:`q` always has positive mass, a cell whose density starts at 0 gives the
step 0 (not 0/0) at :math:`r = 0`, and every draw lies in ``[knots[0], knots[-1]]``.

No framework is imported by this module: :class:`TorchSampler` imports ``torch`` and
:class:`JaxSampler` imports ``jax`` when constructed.  :func:`feed_estimator` passes per-sample
losses held in a framework tensor to the online
:class:`~noisealloc.theory.schedules.online.EntropyRateEstimator`.

References
----------
docs/THEORY.md §4 (b) (the square-root entropic schedule), §5 (samplers by the inverse CDF).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from noisealloc.theory.errors import as_float_array
from noisealloc.theory.schedules._inverse_cdf import check_table, draw_piecewise_linear

from noisealloc.theory._optional import require

__all__ = ["U_CLAMP", "ScheduleTable", "load_table", "NumpySampler", "TorchSampler", "JaxSampler",
           "to_numpy", "feed_estimator"]

#: Levels are drawn in ``[U_CLAMP, 1 - U_CLAMP]`` (as ``noisealloc.theory.tolerances.U_CLAMP``, repeated
#: here so that this module imports nothing but numpy): the inverse CDF is never evaluated at 0 or 1.
U_CLAMP = 1e-12

_FORMAT = "noisealloc.schedule"
_COLLECTION = "noisealloc.schedules"


@dataclass(frozen=True)
class ScheduleTable:
    r"""The arrays of an exported schedule: a piecewise-linear density and its CDF at the knots.

    Attributes
    ----------
    knots : (K,) ndarray of float64
        Strictly increasing knots :math:`x_i` in ``coordinate``.
    pdf : (K,) ndarray of float64
        Density :math:`f_i \ge 0` at the knots (linear between knots).
    cdf : (K,) ndarray of float64
        :math:`F(x_i) = \sum_{j<i} \tfrac12 (f_j + f_{j+1})(x_{j+1} - x_j)`, non-decreasing, ``cdf[0] = 0``.
    coordinate : str
        The coordinate of the knots (``"lambda"`` for log-SNR, ``"sigma"``, ...).
    name : str
        The schedule's name.
    """

    knots: np.ndarray
    pdf: np.ndarray
    cdf: np.ndarray
    coordinate: str = "lambda"
    name: str = "tabulated"

    def __post_init__(self):
        # made directly, a table is checked as a loaded one is (the samplers trust it)
        x, f, c = check_table(self.knots, self.pdf, self.cdf, f"schedule table {self.name!r}")
        object.__setattr__(self, "knots", x)
        object.__setattr__(self, "pdf", f)
        object.__setattr__(self, "cdf", c)


def _check_arrays(knots, pdf, cdf, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return check_table(knots, pdf, cdf, where)


def load_table(source, *, name: str | None = None) -> ScheduleTable:
    """Read an exported schedule: a ``.json`` or ``.npz`` path, or the dictionary of one.

    Parameters
    ----------
    source : str, path-like, mapping or TabulatedSchedule
        A file written by ``noisealloc schedule --out`` / ``noisealloc schedules --out`` or
        :mod:`noisealloc.theory.schedules.io`, a mapping with ``knots``, ``pdf`` and ``cdf``, or a
        :class:`~noisealloc.theory.schedules.base.TabulatedSchedule` (e.g. the online estimator's
        ``schedule()``).
    name : str, optional
        Which schedule of a collection file (``noisealloc.schedules``) to read; required there.

    Returns
    -------
    ScheduleTable
        float64 arrays, checked (finite, increasing knots, pdf >= 0, non-decreasing cdf).

    Examples
    --------
    >>> t = load_table({"knots": [0.0, 1.0, 2.0], "pdf": [0.0, 1.0, 0.0], "cdf": [0.0, 0.5, 1.0]})
    >>> t.coordinate, t.cdf.tolist()
    ('lambda', [0.0, 0.5, 1.0])
    """
    where = "schedule table"
    if hasattr(source, "cdf_values") and hasattr(source, "pdf_values"):  # a TabulatedSchedule
        x, f, c = _check_arrays(source.knots, source.pdf_values, source.cdf_values, where)
        return ScheduleTable(x, f, c, coordinate=str(source.coordinate.name), name=str(source.name))
    if isinstance(source, (str, Path)):
        path = Path(source)
        where = str(path)
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                d = {k: z[k] for k in z.files}
            d["coordinate"] = str(d.get("coordinate", "lambda"))
            d["name"] = str(d.get("name", path.stem))
        else:
            with open(path, encoding="utf-8-sig") as fh:
                try:
                    d = json.load(fh)
                except RecursionError:
                    raise ValueError(f"{where}: JSON nested too deeply to read") from None
    else:
        d = source
    if not hasattr(d, "get"):
        raise ValueError(f"{where}: expected a mapping or a file path; got {type(d).__name__}")
    if d.get("format") == _COLLECTION:
        entries = {str(e.get("name")): e for e in d.get("schedules", [])}
        if name not in entries:
            raise ValueError(f"{where} holds several schedules {sorted(entries)}; pass name= one of them")
        d = entries[name]
    elif d.get("format") not in (None, _FORMAT):
        raise ValueError(f"{where}: format must be {_FORMAT!r} or {_COLLECTION!r}; got {d.get('format')!r}")
    missing = [k for k in ("knots", "pdf", "cdf") if k not in d]
    if missing:
        raise ValueError(f"{where}: lacks the keys {missing}")
    x, f, c = _check_arrays(d["knots"], d["pdf"], d["cdf"], where)
    return ScheduleTable(x, f, c, coordinate=str(d.get("coordinate", "lambda")), name=str(d.get("name", "tabulated")))


def _as_table(source) -> ScheduleTable:
    return source if isinstance(source, ScheduleTable) else load_table(source)


class NumpySampler:
    r"""Draw noise levels from an exported schedule with numpy (exact inverse CDF, float64).

    Parameters
    ----------
    source : ScheduleTable, path or mapping
        The schedule (see :func:`load_table`).

    Attributes
    ----------
    table : ScheduleTable
        The arrays sampled.

    Examples
    --------
    >>> s = NumpySampler({"knots": [0.0, 1.0, 2.0], "pdf": [0.0, 1.0, 0.0], "cdf": [0.0, 0.5, 1.0]})
    >>> lam = s(5, np.random.default_rng(0))
    >>> bool(np.all((lam >= 0.0) & (lam <= 2.0))), lam.dtype
    (True, dtype('float64'))
    """

    def __init__(self, source):
        self.table = _as_table(source)

    def __call__(self, n: int, rng=None) -> np.ndarray:
        """``n`` draws (an ``(n,)`` float64 array) with ``rng`` (a Generator, a seed or None)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be a non-negative integer; got {n!r}")
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        t = self.table
        return draw_piecewise_linear(t.knots, t.pdf, t.cdf, np.clip(rng.random(int(n)), U_CLAMP, 1.0 - U_CLAMP))


class TorchSampler:
    r"""Draw noise levels from an exported schedule with PyTorch (float64 on ``device``).

    ``torch`` is imported when the sampler is built, not when this module is imported.

    Parameters
    ----------
    source : ScheduleTable, path or mapping
        The schedule (see :func:`load_table`).
    device : str or torch.device, optional
        Where the tables and the draws live (default CPU).

    Attributes
    ----------
    table : ScheduleTable
        The arrays sampled (numpy).
    """

    def __init__(self, source, device=None):
        torch = require("torch", "TorchSampler")

        self.table = _as_table(source)
        self._torch = torch
        self.knots, self.pdf, self.cdf = (torch.as_tensor(a, dtype=torch.float64, device=device)
                                          for a in (self.table.knots, self.table.pdf, self.table.cdf))

    def __call__(self, n: int, generator=None):
        """``n`` draws, a float64 tensor of shape ``(n,)`` (``generator``: a ``torch.Generator`` or None)."""
        torch = self._torch
        x, f, c = self.knots, self.pdf, self.cdf
        q = torch.rand(int(n), generator=generator, dtype=torch.float64, device=x.device)
        q = q.clamp(U_CLAMP, 1.0 - U_CLAMP) * c[-1]
        i = (torch.searchsorted(c, q, right=True) - 1).clamp(0, x.numel() - 2)
        w = x[i + 1] - x[i]
        r = torch.minimum((q - c[i]).clamp(min=0.0), c[i + 1] - c[i])
        disc = (f[i] ** 2 + 2.0 * (f[i + 1] - f[i]) * r / w).clamp(min=0.0)
        den = f[i] + disc.sqrt()
        step = torch.where(den > 0, 2.0 * r / torch.where(den > 0, den, torch.ones_like(den)), torch.zeros_like(r))
        return x[i] + torch.minimum(step.clamp(min=0.0), w)


class JaxSampler:
    r"""Draw noise levels from an exported schedule with JAX (a pure, jit-compatible function of a key).

    ``jax`` is imported when the sampler is built.  The draws are float64 when JAX runs with
    ``jax_enable_x64`` (recommended: the inverse CDF loses accuracy in float32), else float32.

    Parameters
    ----------
    source : ScheduleTable, path or mapping
        The schedule (see :func:`load_table`).

    Attributes
    ----------
    table : ScheduleTable
        The arrays sampled (numpy).
    """

    def __init__(self, source):
        jax = require("jax", "JaxSampler")
        jnp = require("jax.numpy", "JaxSampler")

        self.table = _as_table(source)
        self.knots, self.pdf, self.cdf = (jnp.asarray(a) for a in (self.table.knots, self.table.pdf, self.table.cdf))
        self._jitted = jax.jit(self.draw, static_argnums=1)

    def __call__(self, key, n: int):
        """``n`` draws for the PRNG ``key``, shape ``(n,)`` (compiled once per ``n``)."""
        return self._jitted(key, int(n))

    def draw(self, key, n: int):
        """The traceable body of :meth:`__call__`, to call inside the user's own ``jax.jit`` (``n`` static)."""
        jax = require("jax", "JaxSampler")
        jnp = require("jax.numpy", "JaxSampler")

        x, f, c = self.knots, self.pdf, self.cdf
        q = jnp.clip(jax.random.uniform(key, (n,), dtype=x.dtype), U_CLAMP, 1.0 - U_CLAMP) * c[-1]
        i = jnp.clip(jnp.searchsorted(c, q, side="right") - 1, 0, x.size - 2)
        w = x[i + 1] - x[i]
        r = jnp.clip(q - c[i], 0.0, c[i + 1] - c[i])
        disc = jnp.maximum(f[i] ** 2 + 2.0 * (f[i + 1] - f[i]) * r / w, 0.0)
        den = f[i] + jnp.sqrt(disc)
        step = jnp.where(den > 0, 2.0 * r / jnp.where(den > 0, den, 1.0), 0.0)
        return x[i] + jnp.clip(step, 0.0, w)


def to_numpy(x, name: str = "x") -> np.ndarray:
    """A float64 numpy copy of a numpy array, a PyTorch tensor (detached, moved to CPU) or a JAX array.

    Parameters
    ----------
    x : array_like or torch.Tensor or jax.Array
        Real values, any shape (complex values are refused, not cut to their real part; NaN is kept, as
        numpy does).
    name : str, default 'x'
        Name of the argument, quoted in error messages.

    Returns
    -------
    ndarray of float64
        The same values, flattened to 1-d.

    Examples
    --------
    >>> to_numpy([[1, 2], [3, 4]]).tolist()
    [1.0, 2.0, 3.0, 4.0]
    """
    if hasattr(x, "detach"):  # torch.Tensor: leave the graph and the device first
        x = x.detach().cpu().numpy()
    return as_float_array(x, name).ravel()


def feed_estimator(estimator, lam, loss) -> None:
    r"""Pass per-sample ``(lam, loss)`` pairs from framework tensors to an online estimator.

    Calls ``estimator.update(to_numpy(lam), to_numpy(loss))`` on an
    :class:`~noisealloc.theory.schedules.online.EntropyRateEstimator` (the losses in its parameterisation,
    one per example: :math:`\|D(x, \lambda) - x_0\|^2` for ``"x0"``).

    Parameters
    ----------
    estimator : EntropyRateEstimator
        The online estimator.
    lam : array_like or tensor, shape (B,)
        Log-SNR of each example of the batch.
    loss : array_like or tensor, shape (B,)
        Per-example loss (not the batch mean).

    Returns
    -------
    None
        The estimator is updated in place.

    References
    ----------
    docs/THEORY.md §6.6 (iii) (the online estimator of the model's own held-out losses).
    """
    lam, loss = to_numpy(lam, "lam"), to_numpy(loss, "loss")
    if lam.shape != loss.shape:
        raise ValueError(f"lam and loss must hold one value per example; got {lam.size} and {loss.size} values")
    estimator.update(lam, loss)
