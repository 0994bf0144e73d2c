"""`noisealloc entropy|schedule --process masked` (issue 27): the library's masked pipeline behind the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from noisealloc.cli import main
from noisealloc.theory.schedules.io import load_json


@pytest.fixture
def strings_npz(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "b12.npz"
    np.savez(path, atoms=rng.integers(0, 2, size=(12, 16)))
    return path


def test_entropy_of_a_finite_law(tmp_path, strings_npz):
    out = tmp_path / "m.json"
    assert main(["entropy", "--process", "masked", "--data", f"npz:{strings_npz}", "--levels", "33",
                 "--samples", "256", "--out", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    for key in ("lam", "entropy_rate", "entropy_rate_stderr", "conditional_entropy", "optimal_loss"):
        assert len(doc[key]) == 33, key
    b = doc["meta"]["budget"]
    assert b["H_pi"] == pytest.approx(np.log(12), rel=1e-12)  # 12 distinct strings, equal weights
    assert b["holds"] and abs(b["value"] - b["H_pi"]) <= 4 * b["stderr"] + b["tail_bound"] + 1e-2
    assert doc["conditional_entropy"][0] == pytest.approx(np.log(12), abs=1e-3)  # nearly all masked at lam = -12
    assert doc["meta"]["process"] == "masked" and doc["meta"]["law"] == "empirical"


def test_entropy_of_the_markov_source_matches_its_closed_form(tmp_path):
    from noisealloc.theory.masked.data import load_masked_data

    out = tmp_path / "m.json"
    assert main(["entropy", "--process", "masked", "--data", "markov:V=2,L=10,stay=0.8", "--levels", "9",
                 "--lam-min", "-8", "--lam-max", "8", "--samples", "2000", "--out", str(out), "--quiet"]) in (0, 1)
    doc = json.loads(out.read_text())
    model, _, _ = load_masked_data("markov:V=2,L=10,stay=0.8")
    exact = model.exact_information(np.asarray(doc["lam"]))
    z = (np.asarray(doc["entropy_rate"]) - exact.entropy_rate.value) / np.maximum(doc["entropy_rate_stderr"], 1e-300)
    assert np.all(np.abs(z[np.asarray(doc["entropy_rate_stderr"]) > 0]) < 4.5), z


def test_schedule_from_data_losses_and_coordinates(tmp_path, strings_npz):
    out = tmp_path / "s.json"
    assert main(["schedule", "--process", "masked", "--from-data", "markov:V=2,L=12,stay=0.9", "--levels", "17",
                 "--samples", "128", "--coordinate", "t-masked", "--out", str(out),
                 "--plot", str(tmp_path / "s.png")]) == 0
    doc = json.loads(out.read_text())
    assert doc["meta"]["process"] == "masked" and doc["coordinate"] == "lambda"
    assert doc["meta"]["built_in_coordinate"] == "t-masked"
    # losses of the exact denoiser of a product law: S constant, so h = alpha eps S and sqrt h is known
    lam = np.linspace(-8.0, 8.0, 33)
    eps = 1.0 / (1.0 + np.exp(lam))
    csv = tmp_path / "l.csv"
    csv.write_text("lam,loss_ce\n" + "".join(f"{float(a)!r},{float(3.0 * e)!r}\n" for a, e in zip(lam, eps)))
    assert main(["schedule", "--process", "masked", "--from-losses", str(csv), "--out", str(out)]) == 0
    s = load_json(out)
    want = np.sqrt(eps * (1.0 - eps))
    want /= np.trapezoid(want, lam)
    np.testing.assert_allclose(s.pdf(lam[2:-2]), want[2:-2], rtol=2e-2)


@pytest.mark.parametrize("argv, match", [
    (["entropy", "--process", "masked", "--data", "digits"], "token strings"),
    (["entropy", "--process", "masked", "--data", "markov:V=1"], "V >= 2"),
    (["entropy", "--process", "masked", "--data", "NEG"], "tokens must be >= 0"),
    (["entropy", "--process", "masked", "--data", "FLOAT"], "integer tokens"),
    (["entropy", "--process", "masked", "--data", "WEIGHTS"], "sum to 1"),
    (["entropy", "--process", "masked", "--data", "MASK"], "mask symbol"),
    (["schedule", "--from-data", "dirac:K=3", "--coordinate", "eps"], "add --process masked"),
    (["schedule", "--process", "masked", "--from-data", "markov:V=2", "--coordinate", "sigma"], "Gaussian"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, match):
    files = {"NEG": np.array([[0, 1], [-1, 0]]), "FLOAT": np.array([[0.5, 1.0], [1.0, 0.0]]),
             "WEIGHTS": np.array([[0, 1], [1, 0]]), "MASK": np.array([[0, 2], [1, 0]])}
    argv = list(argv)
    for i, a in enumerate(argv):
        if a in files:
            path = tmp_path / f"{a}.npz"
            extra = {"weights": np.array([0.5, 0.7])} if a == "WEIGHTS" else {"V": np.array(2)} if a == "MASK" else {}
            np.savez(path, atoms=files[a], **extra)
            argv[i] = f"npz:{path}"
    out = tmp_path / "o.json"
    assert main(argv + ["--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0], err
    assert not out.exists()
