"""Data sets and the data SPEC of the command line.

Loaders return float64 arrays of flattened images with pixels scaled to
``[-1, 1]`` by default (``scale="symmetric"``: ``x = 2 p / p_max - 1`` with
``p_max = 255`` for MNIST and ``16`` for scikit-learn's 8x8 digits);
``scale="unit"`` gives ``p / p_max`` in ``[0, 1]`` and ``scale="raw"`` the
stored integers as float64.  An empirical data set is the Dirac mixture
``P = (1/K) sum_k delta_{x_k}`` over its images (docs/THEORY.md section 3.1).  Grey-level images are marked
as a sample of a continuous law (``DiracMixture.sample_of_continuous_law``: their entropic schedules
come from the manifold-smoothed law by default); binarised images are discrete data (repeated images
merge into atoms of larger weight).

:func:`load_data` turns a SPEC string into a data model:

============================================  ==============================================
SPEC                                          model
============================================  ==============================================
``dirac:K=5,D=1,sep=2,seed=0``                :class:`DiracMixture` of ``K`` atoms in ``R^D``
``gaussian:D=8,k=2,var=1,seed=0``             :class:`GaussianManifold` (random k-dim subspace)
``circle:D=2,r=1``                            uniform law on a circle of radius ``r`` in ``R^D``
``digits``                                    scikit-learn 8x8 digits, 1797 atoms, ``D = 64``
``mnist`` / ``mnist:PATH``                    MNIST test set, 10,000 atoms, ``D = 784``
``digits-binarised``, ``mnist-binarised[:P]``  the same images with pixels set to -1 or +1 (sign of ``x``)
``npz:PATH``                                  user file: ``atoms`` (+ ``weights``) or ``mean``, ``basis``, ``variances``
``markov:V=2,L=12,stay=0.9``                  token strings of a stationary Markov chain (masked process only)
============================================  ==============================================

The model classes live in :mod:`noisealloc.theory.models.dirac`,
:mod:`noisealloc.theory.models.gaussian` and :mod:`noisealloc.theory.models.manifolds`; they
are imported only when a SPEC needs them.
"""

from __future__ import annotations

import gzip
import zipfile
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from noisealloc.theory.errors import as_float_array, as_float_scalar, as_generator, as_int_scalar, check_choice

__all__ = [
    "MNIST_ENV_VAR",
    "MNIST_FILES",
    "SPEC_FORMS",
    "DataSpec",
    "load_mnist",
    "load_digits",
    "parse_spec",
    "load_data",
    "load_images",
    "IMAGE_KINDS",
    "dirac_atoms",
    "gaussian_parameters",
]

#: Environment variable naming the directory of the MNIST IDX files.
MNIST_ENV_VAR = "NOISEALLOC_MNIST_DIR"
#: The MNIST test-set files, with their IDX magic numbers and item shapes.
MNIST_FILES = {
    "images": ("t10k-images-idx3-ubyte.gz", 0x00000803, (10000, 28, 28)),
    "labels": ("t10k-labels-idx1-ubyte.gz", 0x00000801, (10000,)),
}
SCALES = ("symmetric", "unit", "raw")

#: The allowed SPEC forms, quoted by error messages.
SPEC_FORMS = (
    "dirac:K=5,D=1,sep=2,seed=0[,layout=random|line][,weights=uniform|dirichlet]",
    "gaussian:D=8,k=2[,var=1][,seed=0]",
    "circle:D=2[,r=1]",
    "digits",
    "mnist[:PATH]",
    "digits-binarised",
    "mnist-binarised[:PATH]",
    "npz:PATH",
    "markov:V=2,L=12,stay=0.9",
)


def _scale(pixels: np.ndarray, p_max: float, scale: str) -> np.ndarray:
    check_choice(scale, "scale", SCALES)
    x = pixels.astype(np.float64)
    if scale == "symmetric":
        # 2 p / p_max - 1 maps 0 -> -1 and p_max -> +1 exactly in float64.
        return x * (2.0 / p_max) - 1.0
    if scale == "unit":
        return x / p_max
    return x


def _read_idx(path: Path, magic: int, shape: tuple[int, ...]) -> np.ndarray:
    """Read one gzip-compressed IDX file and check its magic number and sizes."""
    import zlib

    try:
        with gzip.open(path, "rb") as fh:
            data = fh.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        # a gzip stream cut short or damaged: name the file (the bare EOFError names nothing)
        raise ValueError(f"{path}: corrupt or truncated gzip file ({type(exc).__name__}: {exc})") from exc
    ndim = len(shape)
    header_len = 4 + 4 * ndim
    if len(data) < header_len:
        raise ValueError(f"{path}: file too short for an IDX header ({len(data)} bytes)")
    got_magic = int.from_bytes(data[:4], "big")
    if got_magic != magic:
        raise ValueError(f"{path}: IDX magic number 0x{got_magic:08x}, expected 0x{magic:08x}")
    dims = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    if dims != shape:
        raise ValueError(f"{path}: IDX dimensions {dims}, expected {shape}")
    n_bytes = int(np.prod(shape))
    if len(data) != header_len + n_bytes:
        raise ValueError(f"{path}: {len(data)} bytes after decompression, expected {header_len + n_bytes}")
    return np.frombuffer(data, dtype=np.uint8, offset=header_len).reshape(shape)


def _mnist_dir(path) -> Path:
    if path is None:
        env = os.environ.get(MNIST_ENV_VAR)
        if not env:
            raise FileNotFoundError(
                f"MNIST directory not given: pass path=... (CLI: --data mnist:PATH) or set the environment variable "
                f"{MNIST_ENV_VAR} to the directory holding {MNIST_FILES['images'][0]} and {MNIST_FILES['labels'][0]}"
            )
        path = env
    return Path(path).expanduser()


def check_mnist_dir(path=None) -> Path:
    """Check, without loading them, that ``path`` holds the two MNIST test-set files (a few bytes read).

    Each file must be a regular file whose gzip stream starts with the IDX magic number and sizes of
    :data:`MNIST_FILES` and whose gzip trailer gives the length those sizes imply (a file cut short or
    of another data set is refused).  A program checks its ``--mnist`` with this before any work.

    Parameters
    ----------
    path : str or Path, optional
        The directory (default: the environment variable ``NOISEALLOC_MNIST_DIR``).

    Returns
    -------
    pathlib.Path
        The directory.

    Raises
    ------
    FileNotFoundError
        The directory or a file is missing.
    ValueError
        A file is not a regular file, not gzip, or not the MNIST IDX file of that name.
    """
    import stat
    import zlib

    directory = _mnist_dir(path)
    if not directory.is_dir():
        raise FileNotFoundError(f"MNIST directory not found: {directory}")
    for name, magic, shape in MNIST_FILES.values():
        file = directory / name
        if not file.exists():
            raise FileNotFoundError(f"MNIST file not found: {file} (the directory must hold {name})")
        if not stat.S_ISREG(file.stat().st_mode):
            raise ValueError(f"MNIST file {file} is not a regular file")
        header_len = 4 + 4 * len(shape)
        try:
            with gzip.open(file, "rb") as fh:
                head = fh.read(header_len)
            with open(file, "rb") as fh:
                fh.seek(-4, os.SEEK_END)
                size = int.from_bytes(fh.read(4), "little")  # ISIZE: the uncompressed length mod 2**32
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"MNIST file {file} is not a readable gzip file ({type(exc).__name__}: {exc})") from None
        dims = tuple(int.from_bytes(head[4 + 4 * i: 8 + 4 * i], "big") for i in range(len(shape)))
        if len(head) < header_len or int.from_bytes(head[:4], "big") != magic or dims != shape:
            raise ValueError(f"MNIST file {file} is not the IDX file {name} (magic 0x{magic:08x}, sizes {shape})")
        if size != header_len + int(np.prod(shape)):
            raise ValueError(f"MNIST file {file} is cut short or damaged (its gzip trailer gives {size} bytes, "
                             f"expected {header_len + int(np.prod(shape))})")
    return directory


def load_mnist(path=None, *, scale: str = "symmetric") -> tuple[np.ndarray, np.ndarray]:
    """Load the MNIST test set (10,000 images) from its gzip-compressed IDX files.

    Parameters
    ----------
    path : str or Path, optional
        Directory holding ``t10k-images-idx3-ubyte.gz`` and
        ``t10k-labels-idx1-ubyte.gz``.  Defaults to the environment variable
        ``NOISEALLOC_MNIST_DIR``.  The toolkit ships no copy of MNIST.
    scale : {'symmetric', 'unit', 'raw'}
        Pixel scaling: ``2 p / 255 - 1`` in ``[-1, 1]`` (default), ``p / 255``
        in ``[0, 1]`` or the raw ``0..255``.

    Returns
    -------
    images : ndarray, shape (10000, 784), float64
        Row-major flattened 28 x 28 images.
    labels : ndarray, shape (10000,), int64
        Digit classes 0..9.

    Raises
    ------
    FileNotFoundError
        If the directory or a file is missing; the message names the path
        tried and the environment variable.
    ValueError
        If a file's IDX magic number, dimensions or length is wrong.
    """
    check_choice(scale, "scale", SCALES)
    directory = _mnist_dir(path)
    arrays = {}
    for key, (name, magic, shape) in MNIST_FILES.items():
        file = directory / name
        if not file.is_file():
            raise FileNotFoundError(
                f"MNIST file not found: {file} (set {MNIST_ENV_VAR} or pass the directory holding {name})"
            )
        arrays[key] = _read_idx(file, magic, shape)
    images = _scale(arrays["images"].reshape(10000, 784), 255.0, scale)
    return images, arrays["labels"].astype(np.int64)


def load_digits(*, scale: str = "symmetric") -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled 8x8 digits (1797 images): the embedded default image data.

    Pixels take the integer values ``0..16``; ``scale="symmetric"`` maps them to
    ``2 p / 16 - 1`` in ``[-1, 1]``.

    Parameters
    ----------
    scale : {'symmetric', 'unit', 'raw'}
        Pixel scaling (module docstring).

    Returns
    -------
    images : ndarray, shape (1797, 64), float64
    labels : ndarray, shape (1797,), int64
    """
    check_choice(scale, "scale", SCALES)
    from sklearn.datasets import load_digits as _sk_load_digits

    bunch = _sk_load_digits()
    images = _scale(np.asarray(bunch.data), 16.0, scale)
    return images, np.asarray(bunch.target, dtype=np.int64)


# --- the data SPEC ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DataSpec:
    """A parsed data SPEC (:func:`parse_spec`).

    Attributes
    ----------
    kind : str
        ``'dirac'``, ``'gaussian'``, ``'circle'``, ``'digits'``, ``'mnist'`` or ``'npz'``.
    options : dict
        The family's options with their defaults filled in and converted (``K`` int, ``sep`` float, ...).
    path : str or None
        The path of ``mnist:PATH`` / ``npz:PATH``.
    text : str
        The SPEC as given (stripped).
    """

    kind: str
    options: dict
    path: str | None = None
    text: str = ""


_FAMILY_KEYS = {
    "dirac": {"K": int, "D": int, "sep": float, "seed": int, "layout": str, "weights": str},
    "gaussian": {"D": int, "k": int, "var": float, "seed": int},
    "circle": {"D": int, "r": float},
    # a stationary Markov chain over V tokens (the masked process's source with known H(pi)): each token
    # repeats the one before with probability `stay`, else moves to one of the V - 1 others uniformly
    "markov": {"V": int, "L": int, "stay": float},
}
_FAMILY_DEFAULTS = {
    "dirac": {"K": 5, "D": 1, "sep": 2.0, "seed": 0, "layout": "random", "weights": "uniform"},
    "gaussian": {"D": 8, "k": 2, "var": 1.0, "seed": 0},
    "circle": {"D": 2, "r": 1.0},
    "markov": {"V": 2, "L": 12, "stay": 0.9},
}


def _spec_error(spec, why: str) -> ValueError:
    return ValueError(f"data spec {spec!r}: {why}; allowed forms: " + " | ".join(SPEC_FORMS))


def parse_spec(spec: str) -> DataSpec:
    """Parse a data SPEC string (see the module docstring) without loading anything.

    Parameters
    ----------
    spec : str
        E.g. ``"dirac:K=5,D=1,sep=2,seed=0"``, ``"digits"``, ``"npz:atoms.npz"``.

    Returns
    -------
    DataSpec

    Raises
    ------
    ValueError
        For an unknown kind or a malformed option; the message lists the allowed forms.

    Examples
    --------
    >>> parse_spec("dirac:K=3,sep=1.5").options["K"], parse_spec("dirac:K=3,sep=1.5").options["sep"]
    (3, 1.5)
    """
    if not isinstance(spec, str) or not spec.strip():
        raise _spec_error(spec, "must be a non-empty string")
    text = spec.strip()
    kind, sep, rest = text.partition(":")
    if kind in ("mnist", "npz", "mnist-binarised"):
        if kind == "npz" and not rest:
            raise _spec_error(spec, "npz needs a path, e.g. npz:atoms.npz")
        return DataSpec(kind, {}, rest or None, text)
    if kind in ("digits", "digits-binarised"):
        if rest:
            raise _spec_error(spec, f"{kind} takes no options")
        return DataSpec(kind, {}, None, text)
    if kind not in _FAMILY_KEYS:
        raise _spec_error(spec, f"unknown kind {kind!r}")
    options = dict(_FAMILY_DEFAULTS[kind])
    given = set()
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or key not in _FAMILY_KEYS[kind]:
            raise _spec_error(spec, f"option {item!r} is not one of {sorted(_FAMILY_KEYS[kind])} written KEY=VALUE")
        if key in given:  # the last one silently won before
            raise _spec_error(spec, f"option {key!r} is given twice")
        given.add(key)
        try:
            options[key] = _FAMILY_KEYS[kind][key](value)
        except ValueError:
            raise _spec_error(spec, f"option {key}={value!r} is not a valid {_FAMILY_KEYS[kind][key].__name__}") from None
    return DataSpec(kind, options, None, text)


def dirac_atoms(K: int, D: int, sep: float, seed: int = 0, layout: str = "random", weights: str = "uniform"):
    """Atoms and weights of the synthetic ``dirac`` family.

    Parameters
    ----------
    K : int
        Number of atoms, ``>= 1``.
    D : int
        Dimension, ``>= 1``.
    sep : float
        Scale of the atoms' spread (> 0).
    seed : int
        Seed of the random layout and weights.
    layout : {'random', 'line'}
        ``"random"``: ``mu_k = sep * z_k`` with ``z_k ~ N(0, I_D)`` drawn from ``seed``;
        ``"line"``: ``mu_k = sep * (k - (K-1)/2) e_1`` (equally spaced, neighbours ``sep`` apart).
    weights : {'uniform', 'dirichlet'}
        ``"uniform"`` gives ``1/K``; ``"dirichlet"`` draws ``pi ~ Dirichlet(1, ..., 1)`` from the same seed.

    Returns
    -------
    atoms : ndarray, shape (K, D)
    weights : ndarray, shape (K,)
    """
    for name, value in (("K", K), ("D", D)):
        if isinstance(value, bool) or as_int_scalar(value, name) != value or value < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {value}")
    K, D = int(K), int(D)
    sep = as_float_scalar(sep, "sep")
    if not (np.isfinite(sep) and sep > 0):
        raise ValueError(f"sep must be a finite number > 0; got {sep}")
    check_choice(layout, "layout", ("random", "line"))
    check_choice(weights, "weights", ("uniform", "dirichlet"))
    rng = as_generator(as_int_scalar(seed, "seed"))
    if layout == "random":
        atoms = sep * rng.standard_normal((K, D))
    else:
        atoms = np.zeros((K, D))
        atoms[:, 0] = sep * (np.arange(K) - (K - 1) / 2.0)
    w = rng.dirichlet(np.ones(K)) if weights == "dirichlet" else np.full(K, 1.0 / K)
    return atoms, w


def gaussian_parameters(D: int, k: int, var: float = 1.0, seed: int = 0):
    """Mean, basis and variances of the synthetic ``gaussian`` family.

    ``mean = 0``, ``basis`` = the Q factor of a ``D x k`` standard normal matrix
    drawn from ``seed`` (orthonormal columns), ``variances = var`` for every axis.

    Parameters
    ----------
    D : int
        Ambient dimension, ``>= 1``.
    k : int
        Intrinsic dimension, ``0 <= k <= D``.
    var : float
        Variance along every axis of the subspace (> 0).
    seed : int
        Seed of the basis.

    Returns
    -------
    mean : ndarray, shape (D,)
    basis : ndarray, shape (D, k)
    variances : ndarray, shape (k,)
    """
    if isinstance(D, bool) or as_int_scalar(D, "D") != D or not 1 <= D:
        raise ValueError(f"D must be an integer >= 1; got {D}")
    if isinstance(k, bool) or as_int_scalar(k, "k") != k or not 0 <= k <= D:
        raise ValueError(f"k must be an integer with 0 <= k <= D = {D}; got {k}")
    D, k = int(D), int(k)
    var = as_float_scalar(var, "var")
    if not (np.isfinite(var) and var > 0):
        raise ValueError(f"var must be a finite number > 0; got {var}")
    rng = as_generator(as_int_scalar(seed, "seed"))
    q, _ = np.linalg.qr(rng.standard_normal((D, k)))
    return np.zeros(D), q, np.full(k, float(var))


def _load_npz(spec: str, path: str):
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"data spec {spec!r}: no such file {file}")
    with open(file, "rb") as fh:
        magic = fh.read(6)
    # np.load takes anything: a text file ended in its advice to pass allow_pickle= (unsafe) naming no
    # file, a .npy in an AttributeError (an array has no .files)
    if magic == b"\x93NUMPY":
        raise ValueError(f"data spec {spec!r}: {file} is a .npy file (one array); save the atoms into an .npz "
                         "with np.savez(path, atoms=...)")
    if not magic.startswith(b"PK"):
        raise ValueError(f"data spec {spec!r}: {file} is not an .npz file (a zip archive of arrays written by "
                         "np.savez)")
    try:
        with np.load(file, allow_pickle=False) as z:
            keys = set(z.files)
            for key in sorted(keys):
                if np.iscomplexobj(z[key]):
                    raise ValueError(f"data spec {spec!r}: {key} in {file} must be real; got dtype {z[key].dtype} "
                                     "(complex values are not truncated to their real part)")
            if "atoms" in keys:
                atoms = as_float_array(z["atoms"], "atoms", ndim=2)
                weights = as_float_array(z["weights"], "weights", ndim=1) if "weights" in keys else None
                return "dirac", (atoms, weights)
            if {"mean", "basis", "variances"} <= keys:
                return "gaussian", tuple(as_float_array(z[k], k) for k in ("mean", "basis", "variances"))
    except (zipfile.BadZipFile, EOFError) as exc:  # a truncated or corrupt archive: name the file
        raise ValueError(f"data spec {spec!r}: {file} is a corrupt or truncated .npz file "
                         f"({type(exc).__name__}: {exc})") from None
    raise ValueError(
        f"data spec {spec!r}: {file} must hold an array 'atoms' (and optionally 'weights') or the arrays "
        f"'mean', 'basis', 'variances'; it holds {sorted(keys)}"
    )


def _model_class(spec: str, module: str, name: str):
    import importlib

    try:
        return getattr(importlib.import_module(f"noisealloc.theory.{module}"), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"data spec {spec!r} needs noisealloc.theory.{module}.{name}, which is not available: {exc}") from exc


#: SPEC kinds that are image data sets (:func:`load_images`).
IMAGE_KINDS = ("digits", "mnist", "digits-binarised", "mnist-binarised")


def load_images(spec, *, mnist=None) -> tuple[np.ndarray, bool]:
    """The images of an image SPEC (``digits``, ``mnist[:PATH]`` and their ``-binarised`` forms).

    Parameters
    ----------
    spec : str or DataSpec
        The SPEC (parsed or not).
    mnist : str or path-like, optional
        MNIST folder when the SPEC names none (else ``$NOISEALLOC_MNIST_DIR``).

    Returns
    -------
    images : ndarray (K, D)
        Flattened images in ``[-1, 1]``; binarised: ``+1`` where the pixel is above the middle grey
        (``x > 0``), else ``-1``.
    continuous : bool
        True for grey-level images (a sample of a continuous law), False for binarised ones.
    """
    parsed = spec if isinstance(spec, DataSpec) else parse_spec(spec)
    if parsed.kind not in IMAGE_KINDS:
        raise ValueError(f"data spec {parsed.text!r} is not an image data set; allowed: {', '.join(IMAGE_KINDS)}")
    base = parsed.kind.split("-")[0]
    images = load_digits()[0] if base == "digits" else load_mnist(parsed.path or mnist)[0]
    if parsed.kind.endswith("-binarised"):
        return np.where(images > 0.0, 1.0, -1.0), False
    return images, True


def _check_family_size(spec: str, kind: str, opt: dict) -> None:
    """Refuse a synthetic family too large for the memory before building it, naming its size options
    (``dirac:K=1000000000`` ended in a MemoryError that said "ask for fewer levels, points or samples")."""
    from noisealloc.theory.request_limits import check_memory

    if kind == "dirac":
        # the atoms, a centred copy and the span's SVD: about three K x D float64 arrays
        check_memory(3 * 8.0 * max(int(opt["K"]), 0) * max(int(opt["D"]), 0),
                     f"data spec {spec!r} (K = {opt['K']} atoms in D = {opt['D']} dimensions; ask for a smaller K or D)")
    elif kind == "gaussian":
        check_memory(3 * 8.0 * max(int(opt["D"]), 0) * max(int(opt["k"]), 1),
                     f"data spec {spec!r} (D = {opt['D']} dimensions, k = {opt['k']}; ask for a smaller D or k)")
    elif kind == "circle":
        check_memory(8.0 * max(int(opt["D"]), 0) ** 2,
                     f"data spec {spec!r} (D = {opt['D']} dimensions; ask for a smaller D)")


def check_spec(spec: str) -> None:
    """Check a data SPEC without the work of loading large data: the synthetic families are built
    (milliseconds within the memory check), a file form's path must exist.  For sweep files, whose
    cells must be refused before a cluster starts.

    Raises
    ------
    ValueError, FileNotFoundError
        As :func:`load_data` would.
    """
    parsed = parse_spec(spec)
    if parsed.kind in ("dirac", "gaussian", "circle"):
        load_data(spec)
    elif parsed.kind in ("mnist", "mnist-binarised"):
        check_mnist_dir(parsed.path)
    elif parsed.kind == "npz":
        file = Path(parsed.path).expanduser()
        if not file.is_file():
            raise FileNotFoundError(f"data spec {spec!r}: no such file {file}")


def load_data(spec: str):
    """Build the data model named by a SPEC string (table in the module docstring).

    Parameters
    ----------
    spec : str
        The data SPEC.

    Returns
    -------
    DataModel
        A ``DiracMixture``, ``GaussianManifold`` or ``Circle``, each satisfying
        :class:`noisealloc.theory.models.protocol.DataModel`.

    Raises
    ------
    ValueError
        For an unknown or malformed SPEC; the message lists the allowed forms.
    FileNotFoundError
        For a missing MNIST directory or npz file.
    """
    parsed = parse_spec(spec)
    kind, opt = parsed.kind, parsed.options
    _check_family_size(spec, kind, opt)
    if kind == "dirac":
        return _model_class(spec, "models.dirac", "DiracMixture")(*dirac_atoms(**opt))
    if kind == "gaussian":
        return _model_class(spec, "models.gaussian", "GaussianManifold")(*gaussian_parameters(**opt))
    if kind == "markov":
        raise _spec_error(spec, "markov is a source of token strings for the masked process (--process masked, "
                                "noisealloc.theory.masked.data.load_masked_data)")
    if kind == "circle":
        Circle = _model_class(spec, "models.manifolds", "Circle")
        if opt["D"] < 2:
            raise _spec_error(spec, f"circle needs D >= 2; got D={opt['D']}")
        if not (np.isfinite(opt["r"]) and opt["r"] > 0):
            raise _spec_error(spec, f"circle needs r > 0; got r={opt['r']}")
        return Circle(radius=opt["r"], dim=opt["D"])
    if kind in IMAGE_KINDS:
        images, continuous = load_images(parsed)
        # grey-level images are a sample of a continuous law: their schedules come from the smoothed law
        return _model_class(spec, "models.dirac", "DiracMixture")(images, None, sample_of_continuous_law=continuous)
    # npz
    what, arrays = _load_npz(spec, parsed.path)
    if what == "dirac":
        return _model_class(spec, "models.dirac", "DiracMixture")(*arrays)
    return _model_class(spec, "models.gaussian", "GaussianManifold")(*arrays)
