"""Tests of the data loaders and the data SPEC (theory/models/datasets.py).

MNIST facts come from ../shared/data/mnist/README.md (first labels, class counts,
mean pixel 33.79 on the 0-255 scale); digits facts from scikit-learn itself.
"""

from __future__ import annotations

import gzip
import importlib.util

import numpy as np
import pytest

from noisealloc.theory.models import datasets
from noisealloc.theory.models.datasets import (
    MNIST_ENV_VAR,
    SPEC_FORMS,
    dirac_atoms,
    gaussian_parameters,
    load_data,
    load_digits,
    load_mnist,
    parse_spec,
)

# --- MNIST ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mnist_raw(mnist_dir):
    return load_mnist(mnist_dir, scale="raw")


def test_mnist_readme_facts(mnist_raw):
    images, labels = mnist_raw
    assert images.shape == (10000, 784) and images.dtype == np.float64
    assert labels.shape == (10000,)
    assert labels[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    assert np.bincount(labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert round(float(images.mean()), 2) == 33.79
    assert images.min() == 0.0 and images.max() == 255.0
    assert np.array_equal(images, np.round(images))


def test_mnist_scalings(mnist_dir, mnist_raw):
    raw, _ = mnist_raw
    sym, labels = load_mnist(mnist_dir)
    unit, _ = load_mnist(str(mnist_dir), scale="unit")
    assert sym.min() == -1.0 and sym.max() == 1.0
    np.testing.assert_allclose(sym, 2.0 * raw / 255.0 - 1.0, rtol=0, atol=4e-16)
    np.testing.assert_allclose(unit, raw / 255.0, rtol=0, atol=2e-16)
    np.testing.assert_allclose(sym.mean(), 2 * 33.7912244897959 / 255 - 1, rtol=1e-12)
    assert labels[0] == 7


def test_mnist_from_environment_variable(mnist_dir, monkeypatch):
    monkeypatch.setenv(MNIST_ENV_VAR, str(mnist_dir))
    images, labels = load_mnist()
    assert images.shape == (10000, 784) and labels[:3].tolist() == [7, 2, 1]


def test_mnist_missing_path_names_path_and_variable(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError) as info:
        load_mnist(tmp_path)
    assert str(tmp_path) in str(info.value) and MNIST_ENV_VAR in str(info.value)
    monkeypatch.delenv(MNIST_ENV_VAR, raising=False)
    with pytest.raises(FileNotFoundError, match=MNIST_ENV_VAR):
        load_mnist()
    monkeypatch.setenv(MNIST_ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_mnist()


def _write_idx(path, magic, dims, payload):
    header = magic.to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in dims)
    with gzip.open(path, "wb") as fh:
        fh.write(header + payload)


@pytest.mark.parametrize(
    "magic, dims, n_bytes, match",
    [
        (0x00000802, (10000, 28, 28), 7840000, "magic"),
        (0x00000803, (9999, 28, 28), 9999 * 784, "dimensions"),
        (0x00000803, (10000, 28, 28), 7839999, "bytes"),
    ],
)
def test_mnist_corrupt_images_rejected(tmp_path, mnist_dir, magic, dims, n_bytes, match):
    _write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", magic, dims, bytes(n_bytes))
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes((mnist_dir / "t10k-labels-idx1-ubyte.gz").read_bytes())
    with pytest.raises(ValueError, match=match):
        load_mnist(tmp_path)


def test_bad_scale():
    with pytest.raises(ValueError, match="scale must be one of"):
        load_digits(scale="zscore")


# --- digits ----------------------------------------------------------------------------------------


def test_digits_scaling_matches_sklearn():
    from sklearn.datasets import load_digits as sk

    images, labels = load_digits()
    raw = sk().data
    assert images.shape == (1797, 64) and labels.shape == (1797,)
    assert images.min() == -1.0 and images.max() == 1.0
    np.testing.assert_array_equal((images + 1.0) * 8.0, raw)  # 2 p / 16 - 1 inverted exactly
    assert np.bincount(labels).sum() == 1797 and set(labels.tolist()) == set(range(10))
    unit, _ = load_digits(scale="unit")
    np.testing.assert_allclose(unit, raw / 16.0, rtol=0, atol=0)


# --- SPEC ------------------------------------------------------------------------------------------


def test_parse_spec_forms():
    s = parse_spec("dirac:K=7,D=3,sep=1.5,seed=4,layout=line,weights=dirichlet")
    assert s.kind == "dirac" and s.options == {"K": 7, "D": 3, "sep": 1.5, "seed": 4, "layout": "line",
                                               "weights": "dirichlet"}
    assert parse_spec("dirac").options["K"] == 5
    assert parse_spec("gaussian:D=8,k=2").options == {"D": 8, "k": 2, "var": 1.0, "seed": 0}
    assert parse_spec("circle:D=3,r=2").options == {"D": 3, "r": 2.0}
    assert parse_spec("mnist").path is None
    assert parse_spec("mnist:../shared/data/mnist").path == "../shared/data/mnist"
    assert parse_spec("npz:C:/x/y.npz").path == "C:/x/y.npz"
    assert parse_spec("digits").kind == "digits"


@pytest.mark.parametrize("spec, match", [
    ("imagenet", "unknown kind"),
    ("", "non-empty"),
    ("dirac:K=five", "not a valid int"),
    ("dirac:Q=3", "not one of"),
    ("dirac:K", "KEY=VALUE"),
    ("npz", "needs a path"),
    ("digits:n=5", "no options"),
])
def test_parse_spec_errors_list_allowed_forms(spec, match):
    with pytest.raises(ValueError, match=match) as info:
        parse_spec(spec)
    for form in ("mnist[:PATH]", "npz:PATH", "digits", "dirac:"):
        assert form in str(info.value)


def test_spec_forms_are_parseable():
    for form in SPEC_FORMS:
        text = form.split("[")[0].rstrip(",")
        if text == "npz:PATH":
            text = "npz:file.npz"
        parse_spec(text)


def test_dirac_family():
    atoms, w = dirac_atoms(4, 2, 3.0, seed=1, layout="line")
    np.testing.assert_allclose(atoms[:, 0], [-4.5, -1.5, 1.5, 4.5], rtol=0, atol=0)
    assert np.all(atoms[:, 1] == 0) and np.all(w == 0.25)
    a1, w1 = dirac_atoms(6, 3, 2.0, seed=5, weights="dirichlet")
    a2, w2 = dirac_atoms(6, 3, 2.0, seed=5, weights="dirichlet")
    assert np.array_equal(a1, a2) and np.array_equal(w1, w2)
    assert abs(w1.sum() - 1) < 1e-15 and np.all(w1 > 0)
    for kwargs, match in (({"K": 0}, "K must"), ({"D": 0}, "D must"), ({"sep": -1.0}, "sep must"),
                          ({"layout": "grid"}, "layout must")):
        args = {"K": 3, "D": 1, "sep": 1.0}
        args.update(kwargs)
        with pytest.raises(ValueError, match=match):
            dirac_atoms(**args)


def test_gaussian_family():
    mean, basis, var = gaussian_parameters(8, 3, 2.0, seed=2)
    assert mean.shape == (8,) and basis.shape == (8, 3) and np.all(var == 2.0)
    np.testing.assert_allclose(basis.T @ basis, np.eye(3), atol=1e-14)
    with pytest.raises(ValueError, match="k must"):
        gaussian_parameters(3, 4)
    with pytest.raises(ValueError, match="var must"):
        gaussian_parameters(3, 1, var=0.0)


def test_load_data_dirac_and_digits():
    m = load_data("dirac:K=4,D=2,sep=1,seed=3,weights=dirichlet")
    atoms, w = dirac_atoms(4, 2, 1.0, seed=3, weights="dirichlet")
    np.testing.assert_allclose(m.atoms, atoms, rtol=0, atol=0)
    np.testing.assert_allclose(m.weights, w, rtol=1e-15)
    d = load_data("digits")
    assert d.atoms.shape == (1797, 64) and d.discrete
    np.testing.assert_allclose(d.weights, 1 / 1797)


def test_load_data_mnist(mnist_dir):
    m = load_data(f"mnist:{mnist_dir}")
    assert m.atoms.shape == (10000, 784) and m.atoms.min() == -1.0


def test_load_data_mnist_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match=MNIST_ENV_VAR):
        load_data(f"mnist:{tmp_path}")


def test_load_data_npz_atoms(tmp_path):
    atoms = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, -1.0]])
    np.savez(tmp_path / "a.npz", atoms=atoms, weights=np.array([0.2, 0.3, 0.5]))
    m = load_data(f"npz:{tmp_path / 'a.npz'}")
    np.testing.assert_array_equal(m.atoms, atoms)
    np.testing.assert_allclose(m.weights, [0.2, 0.3, 0.5], rtol=1e-15)
    np.savez(tmp_path / "b.npz", atoms=atoms)
    assert np.allclose(load_data(f"npz:{tmp_path / 'b.npz'}").weights, 1 / 3)


def test_load_data_npz_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_data(f"npz:{tmp_path / 'missing.npz'}")
    np.savez(tmp_path / "c.npz", foo=np.zeros(3))
    with pytest.raises(ValueError, match="'atoms'"):
        load_data(f"npz:{tmp_path / 'c.npz'}")
    np.savez(tmp_path / "d.npz", atoms=np.array([[np.nan]]))
    with pytest.raises(ValueError, match="atoms must be finite"):
        load_data(f"npz:{tmp_path / 'd.npz'}")
    np.savez(tmp_path / "e.npz", atoms=np.zeros((2, 1)), weights=np.array([-1.0, 2.0]))
    with pytest.raises(ValueError, match="weights"):
        load_data(f"npz:{tmp_path / 'e.npz'}")


@pytest.mark.skipif(importlib.util.find_spec("noisealloc.theory.models.gaussian") is None,
                    reason="noisealloc.theory.models.gaussian not available yet")
def test_load_data_gaussian(tmp_path):
    g = load_data("gaussian:D=6,k=2,var=0.5,seed=1")
    assert g.dim == 6 and not g.discrete
    mean, basis, var = gaussian_parameters(6, 2, 0.5, seed=1)
    np.savez(tmp_path / "g.npz", mean=mean, basis=basis, variances=var)
    g2 = load_data(f"npz:{tmp_path / 'g.npz'}")
    lam = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(g2.mmse(lam).value, (0.5 / (1 + np.exp(lam) * 0.5)) * 2, rtol=1e-12)


@pytest.mark.skipif(importlib.util.find_spec("noisealloc.theory.models.manifolds") is None,
                    reason="noisealloc.theory.models.manifolds not available yet")
def test_load_data_circle():
    c = load_data("circle:D=3,r=2")
    assert c.dim == 3 and not c.discrete
    with pytest.raises(ValueError, match="D >= 2"):
        load_data("circle:D=1")


def test_missing_model_module_is_a_value_error(monkeypatch):
    def boom(spec, module, name):
        raise ValueError(f"data spec {spec!r} needs noisealloc.theory.{module}.{name}")

    monkeypatch.setattr(datasets, "_model_class", boom)
    with pytest.raises(ValueError, match="needs noisealloc.theory.models.dirac.DiracMixture"):
        load_data("dirac")


def test_an_option_given_twice_is_refused():
    import pytest

    from noisealloc.theory.models.datasets import parse_spec

    with pytest.raises(ValueError, match="option 'K' is given twice"):
        parse_spec("dirac:K=3,K=4")
