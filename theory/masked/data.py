r"""Data of the masked process: token strings from a data SPEC, which law a schedule comes from, and the
one pipeline from a law and a grid to every number of docs/THEORY.md section 7 (:func:`masked_profile`).

SPECs (the one grammar of :func:`noisealloc.theory.models.datasets.parse_spec`):

============================================  ==============================================
SPEC                                          law of token strings
============================================  ==============================================
``npz:PATH``                                  ``atoms``: integer array (K, L) of tokens 0..V-1, optional
                                              ``weights`` (K,) summing to 1 and ``V`` (default max + 1)
``digits-binarised``                          scikit-learn's 8x8 digits, pixel > middle grey -> 1, L = 64
``mnist-binarised[:PATH]``                    MNIST test set binarised the same way, L = 784
``markov:V=2,L=12,stay=0.9``                  stationary Markov chain (exact, known H(pi))
============================================  ==============================================

Which law (``law="auto"``, :func:`resolve_masked_law`): images are a sample of an unknown discrete law,
so their schedules come from the Aitchison--Aitken smoothed law of the sample (docs/THEORY.md section
7.5; the empirical law memorises the sample); the strings of an npz file are a finite law given as such
(empirical); a Markov chain is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from noisealloc.theory.errors import check_choice
from noisealloc.theory.estimates import Estimate

__all__ = ["MASKED_LAWS", "load_masked_data", "resolve_masked_law", "MaskedProfile", "masked_profile",
           "MASKED_LEVEL_COLUMNS", "MASKED_LOSS_COLUMN", "MaskedLosses", "read_masked_losses"]

#: Choices of the law of a masked schedule.
MASKED_LAWS = ("auto", "empirical", "smoothed")


def _npz_strings(spec: str, path):
    import zipfile

    try:
        with np.load(path, allow_pickle=False) as z:
            keys = set(z.files)
            if "atoms" not in keys:
                raise ValueError(f"data spec {spec!r}: {path} must hold an integer array 'atoms' (K, L) of tokens "
                                 f"(and optionally 'weights', 'V'); it holds {sorted(keys)}")
            atoms = np.asarray(z["atoms"])
            weights = np.asarray(z["weights"]) if "weights" in keys else None
            V = np.asarray(z["V"]) if "V" in keys else None
    except (zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"data spec {spec!r}: {path} is not a readable .npz file ({type(exc).__name__})") from None
    if atoms.dtype.kind == "f":
        if not np.all(np.isfinite(atoms)) or np.any(atoms != np.round(atoms)):
            raise ValueError(f"data spec {spec!r}: 'atoms' must hold integer tokens 0..V-1; got non-integer values")
        atoms = atoms.astype(np.int64)
    elif atoms.dtype.kind not in "iu":
        raise ValueError(f"data spec {spec!r}: 'atoms' must be an integer array of tokens; got dtype {atoms.dtype}")
    if atoms.ndim != 2 or atoms.shape[0] < 1 or atoms.shape[1] < 1:
        raise ValueError(f"data spec {spec!r}: 'atoms' must have shape (K, L) with K, L >= 1; got {atoms.shape}")
    if np.any(atoms < 0):
        raise ValueError(f"data spec {spec!r}: tokens must be >= 0; found {int(atoms.min())}")
    if V is None:
        V = int(atoms.max()) + 1
    else:
        if V.shape != () or V.dtype.kind not in "iu":
            raise ValueError(f"data spec {spec!r}: 'V' must be one integer; got {V!r}")
        V = int(V)
        if np.any(atoms >= V):
            raise ValueError(f"data spec {spec!r}: tokens must be < V = {V} (V is the mask symbol); found "
                             f"{int(atoms.max())}")
    return atoms.astype(np.int64), weights, V


def load_masked_data(spec: str, *, mnist=None, law: str = "auto"):
    """The law of token strings a SPEC names (module docstring), under the law ``law`` picks.

    Parameters
    ----------
    spec : str
        ``npz:PATH``, ``digits-binarised``, ``mnist-binarised[:PATH]`` or ``markov:...``.
    mnist : str or path-like, optional
        MNIST folder when the SPEC names none.
    law : {"auto", "empirical", "smoothed"}
        Which law of a sample (:func:`resolve_masked_law`).

    Returns
    -------
    tuple
        ``(model, law, reason)``: a :class:`~noisealloc.theory.masked.finite.FiniteLaw`,
        :class:`~noisealloc.theory.masked.smoothed.SmoothedLaw` or
        :class:`~noisealloc.theory.masked.models.MarkovChain`; the law used and one line of why.

    Raises
    ------
    ValueError
        For a SPEC of no token strings, bad tokens (non-integer, negative, >= V, V = 1, ragged), or
        weights that are not a distribution; one line naming the problem.
    """
    from noisealloc.theory.masked.finite import FiniteLaw
    from noisealloc.theory.models.datasets import IMAGE_KINDS, load_images, parse_spec

    parsed = parse_spec(spec)
    kind = parsed.kind
    if kind == "markov":
        from noisealloc.theory.masked.models import MarkovChain

        V, L, stay = parsed.options["V"], parsed.options["L"], parsed.options["stay"]
        if V < 2 or L < 1 or not 0.0 <= stay <= 1.0:
            raise ValueError(f"data spec {spec!r}: markov needs V >= 2, L >= 1 and 0 <= stay <= 1; got V={V}, "
                             f"L={L}, stay={stay}")
        P = np.full((V, V), (1.0 - stay) / (V - 1))
        np.fill_diagonal(P, stay)
        choice, why = resolve_masked_law(kind, law)
        return MarkovChain(P, L), choice, why
    if kind == "npz":
        atoms, weights, V = _npz_strings(spec, parsed.path)
    elif kind in IMAGE_KINDS and kind.endswith("-binarised"):
        images, _ = load_images(parsed, mnist=mnist)
        atoms, weights, V = (images > 0).astype(np.int64), None, 2
    else:
        raise ValueError(f"data spec {spec!r}: the masked process takes token strings: npz:PATH (integer atoms), "
                         "digits-binarised, mnist-binarised[:PATH] or markov:V=..,L=..,stay=..")
    choice, why = resolve_masked_law(kind, law)
    if choice == "smoothed":
        from noisealloc.theory.masked.smoothed import SmoothedLaw

        if weights is not None and np.ptp(np.asarray(weights, float)) > 0:
            raise ValueError(f"data spec {spec!r}: law='smoothed' needs an equally weighted sample; these strings "
                             "have unequal weights")
        return SmoothedLaw(atoms, V), choice, why
    return FiniteLaw(atoms, V, weights), choice, why


def resolve_masked_law(kind: str, law: str = "auto") -> tuple[str, str]:
    """The one rule for the law of a masked schedule: ``(law, reason)``.

    Parameters
    ----------
    kind : str
        The SPEC kind (``npz``, ``digits-binarised``, ``mnist-binarised``, ``markov``).
    law : {"auto", "empirical", "smoothed"}
        The choice; explicit choices apply to samples (not to ``markov``).

    Returns
    -------
    tuple of str
        ``("empirical" | "smoothed" | "exact", reason)``.
    """
    law = check_choice(law, "law", MASKED_LAWS)
    if kind == "markov":
        if law != "auto":
            raise ValueError(f"law={law!r} applies to a sample of strings; a Markov chain is an exact law "
                             "(use law='auto')")
        return "exact", "a Markov chain is its own law"
    if law != "auto":
        return law, f"law={law!r} asked for"
    if kind.endswith("-binarised"):
        return "smoothed", "images are a sample of an unknown discrete law (Aitchison-Aitken smoothing)"
    return "empirical", "the strings of the file are the law"


@dataclass(frozen=True)
class MaskedProfile:
    """Every number of docs/THEORY.md section 7 for a law on a grid, from one set of draws.

    Attributes
    ----------
    information : MaskedInformation
        H, S, h and L* with standard errors.
    budget : MaskedBudgetCheck
        The budget check of h on the same grid and draws.
    """

    information: object
    budget: object


def masked_profile(model, lam, *, n_samples: int = 4096, rng=None) -> MaskedProfile:
    r"""The information profile of a masked law: one pipeline behind ``noisealloc entropy --process masked``.

    One set of draws (string, mask order) at every level gives :math:`H(\lambda)`,
    :math:`S(\lambda) = \sum_l H(X^l \mid Z^{\sim l})`, :math:`h = \alpha\varepsilon S` and
    :math:`L^* = \varepsilon S` with standard errors, and the budget :math:`\int h\,d\lambda = H(\pi)`
    checked on the same grid (:func:`~noisealloc.theory.masked.information.masked_budget_check`).

    Parameters
    ----------
    model : MaskedModel
        A law of token strings.
    lam : (m,) array_like
        Strictly increasing log-odds grid, m >= 3.
    n_samples : int
        Monte-Carlo draws.
    rng : numpy.random.Generator, int or None
        Randomness (keyword-only).

    Returns
    -------
    MaskedProfile
    """
    from noisealloc.theory.masked.information import MaskedInformation, masked_budget_check

    samples = model.information_samples(lam, n_samples=n_samples, rng=rng)
    ent = model.entropy
    ent_se = 0.0
    if isinstance(ent, Estimate):
        ent, ent_se = float(ent.value), float(ent.stderr)
    budget = masked_budget_check(samples, float(ent), float(np.sum(model.marginal_entropies)), entropy_stderr=ent_se)
    return MaskedProfile(MaskedInformation.from_samples(samples), budget)


#: Noise-level columns of a masked loss file: log-odds, mask rate, or the time t of alpha = 1 - t.
MASKED_LEVEL_COLUMNS = ("lam", "eps", "t")
#: Loss column: held-out masked cross-entropy per string, summed over the masked tokens, in nats.
MASKED_LOSS_COLUMN = "loss_ce"


@dataclass(frozen=True)
class MaskedLosses:
    """Per-level held-out masked cross-entropies read from a CSV file.

    Attributes
    ----------
    lam : ndarray, shape (n,)
        Increasing log-odds levels (rows at the same level averaged).
    loss : ndarray, shape (n,)
        Mean cross-entropy per string, summed over the masked tokens (nats).
    stderr : ndarray or None
        Standard errors (from a ``loss_se`` column, or from repeated rows), else None.
    source : dict
        Path, level column and row count.
    """

    lam: np.ndarray
    loss: np.ndarray
    stderr: np.ndarray | None
    source: dict


def read_masked_losses(path) -> MaskedLosses:
    r"""Read masked losses: a level column (``lam``, ``eps`` or ``t`` with :math:`\alpha = 1 - t`) and ``loss_ce``.

    One row per level (optional ``loss_se``), or one row per example as a training loop logs them: rows
    at the same level are averaged, with the standard error of their mean.  The entropy rate follows as
    :math:`h = \alpha L` (docs/THEORY.md section 7.3).

    Parameters
    ----------
    path : str or path-like
        The CSV file (UTF-8, a BOM and CRLF are fine).

    Returns
    -------
    MaskedLosses

    Raises
    ------
    ValueError
        One line naming the file, the row and the column of the first problem.
    """
    import csv

    from noisealloc.theory.masked.process import lam_from_mask_rate, lam_from_t

    with open(path, encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.reader(fh))
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise ValueError(f"{path}: empty file; expected a header with a level column ({', '.join(MASKED_LEVEL_COLUMNS)}) "
                         f"and {MASKED_LOSS_COLUMN}")
    header = [h.strip().lower() for h in rows[0]]
    levels = [h for h in header if h in MASKED_LEVEL_COLUMNS]
    if len(levels) != 1 or MASKED_LOSS_COLUMN not in header:
        raise ValueError(f"{path}: need exactly one level column of {list(MASKED_LEVEL_COLUMNS)} and a "
                         f"{MASKED_LOSS_COLUMN!r} column (masked cross-entropy per string, nats); header is {header}")
    i_lev, i_loss = header.index(levels[0]), header.index(MASKED_LOSS_COLUMN)
    i_se = header.index("loss_se") if "loss_se" in header else None
    vals = []
    for k, r in enumerate(rows[1:], start=2):
        if len(r) != len(header):
            raise ValueError(f"{path}: row {k} has {len(r)} fields; the header has {len(header)}")
        try:
            v = [float(r[i_lev]), float(r[i_loss]), float(r[i_se]) if i_se is not None else np.nan]
        except ValueError:
            raise ValueError(f"{path}: row {k}: not a number in {r}") from None
        if not (np.isfinite(v[0]) and np.isfinite(v[1])) or (i_se is not None and not np.isfinite(v[2])):
            raise ValueError(f"{path}: row {k}: values must be finite; got {r}")
        if v[1] < 0:
            raise ValueError(f"{path}: row {k}, column {MASKED_LOSS_COLUMN!r}: a cross-entropy is >= 0; got {v[1]!r}")
        vals.append(v)
    if not vals:
        raise ValueError(f"{path}: no data rows")
    a = np.asarray(vals)
    level = a[:, 0]
    if levels[0] == "lam":
        lam = level
    elif levels[0] == "eps":
        if np.any((level <= 0) | (level >= 1)):
            raise ValueError(f"{path}: column 'eps' (mask rate) must lie in the open interval (0, 1)")
        lam = lam_from_mask_rate(level)
    else:
        if np.any((level <= 0) | (level >= 1)):
            raise ValueError(f"{path}: column 't' (alpha = 1 - t) must lie in the open interval (0, 1)")
        lam = lam_from_t(level)
    u, inv = np.unique(lam, return_inverse=True)
    if u.size < 3:
        raise ValueError(f"{path}: need at least 3 distinct levels; got {u.size}")
    counts = np.bincount(inv)
    mean = np.bincount(inv, weights=a[:, 1]) / counts
    if i_se is not None and np.all(counts == 1):
        se = a[np.argsort(lam), 2]
    elif np.all(counts >= 2):
        dev = a[:, 1] - mean[inv]
        se = np.sqrt(np.bincount(inv, weights=dev * dev) / (counts - 1) / counts)
    else:
        se = None
    return MaskedLosses(u, mean, se, {"path": str(path), "level_column": levels[0], "rows": int(a.shape[0])})
