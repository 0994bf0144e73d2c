"""Fuzz of the command line and the public loaders with bad input (issue 16 item 6, acceptance 2).

Every generated input is bad by construction (an unknown data family, a parameter out of range, an
inverted or non-finite interval, a corrupt file, a path that cannot be written ...), so the only
acceptable outcome is a clean refusal:

* the CLI (run in-process through :func:`noisealloc.cli.main`, in a fresh temporary folder) exits
  non-zero, prints no traceback and no internal error, its stderr is one line naming the command
  (argparse's own usage errors end in one ``error:`` line), and no new file appears in the folder;
* a loader raises ``ValueError`` or ``OSError`` (or ``EOFError``/``BadZipFile`` for a corrupt file,
  which the CLI reports as such) with a one-line message (never ``KeyError``,
  ``IndexError``, ``AttributeError`` ... and never a silent result).

An exit status 0 is a *silent wrong* (a bad input accepted); exit 3, an exception escaping
``main`` or "Traceback" on stderr is a *traceback*.  The default tier tries a few inputs per
subcommand; the slow tier (``-m slow``) many more, printing per subcommand the inputs tried and both
counts, and asserting that both are 0.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import string
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from helpers.strategies import examples

from noisealloc.cli import EXIT_INTERNAL, main

GOOD_SPEC = "dirac:K=2,D=1,sep=2,seed=0"
from noisealloc.commands.reproduce import FIGURES  # noqa: E402


# ----------------------------------------------------------------------------- running one input
@dataclass
class Outcome:
    code: int
    err: str
    new_files: list
    escaped: str | None = None
    argparse: bool = False

    @property
    def traceback(self) -> bool:
        return self.escaped is not None or self.code == EXIT_INTERNAL or "Traceback" in self.err

    @property
    def silent_wrong(self) -> bool:
        return self.escaped is None and self.code == 0

    def problems(self, command: str) -> list[str]:
        out = []
        if self.traceback:
            out.append(f"traceback/internal error: {self.escaped or self.err.strip()}")
        if self.silent_wrong:
            out.append("exit 0 on bad input")
        lines = [ln for ln in self.err.splitlines() if ln.strip()]
        if self.argparse:
            if not lines or "error:" not in lines[-1]:
                out.append(f"argparse exit without an error line: {self.err!r}")
        elif self.escaped is None and self.code != 0:
            if len(lines) != 1 or not lines[0].startswith(f"noisealloc {command}:"):
                out.append(f"stderr is not one line naming the command: {self.err!r}")
        if self.new_files:
            out.append(f"new files left: {self.new_files}")
        return out


def _tree(root: Path) -> set:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def run_cli(argv: list[str], files: dict | None = None, env: dict | None = None) -> Outcome:
    """Run ``noisealloc ARGV`` in-process in a fresh temporary folder holding ``files``.

    ``files`` maps a relative path to bytes (a file) or ``None`` (a folder).
    """
    old_cwd = os.getcwd()
    old_env = {k: os.environ.get(k) for k in (env or {})}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rel, content in (files or {}).items():
            p = root / rel
            if content is None:
                p.mkdir(parents=True, exist_ok=True)
            else:
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(content)
        before = _tree(root)
        err, out = io.StringIO(), io.StringIO()
        code, escaped, argparse_exit = None, None, False
        try:
            os.chdir(root)
            os.environ.update(env or {})
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                try:
                    code = main(argv)
                except SystemExit as exc:  # argparse: usage and one error line, status 2
                    code, argparse_exit = (exc.code if isinstance(exc.code, int) else 1), True
                except BaseException as exc:  # noqa: BLE001 - anything escaping main is a finding
                    escaped = f"{type(exc).__name__}: {exc}"
                    code = -1
        finally:
            os.chdir(old_cwd)
            for k, v in old_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        new = sorted(_tree(root) - before)
    return Outcome(int(code), err.getvalue(), new, escaped, argparse_exit)


# ----------------------------------------------------------------------------- strategies
_TEXT = st.text(alphabet=string.ascii_letters + string.digits + ":=,._-/ ", max_size=16)
_NON_POSITIVE_INT = st.integers(-10**6, 0).map(str)
_NOT_INT = st.one_of(st.sampled_from(["", "abc", "2.5", "1e400", "nan", "inf", "0x10", "--"]),
                     st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not float(x).is_integer()).map(repr))
_BAD_POSITIVE_FLOAT = st.one_of(st.floats(max_value=0.0), st.sampled_from(["nan", "inf", "-inf", "abc", ""]).map(str))


def _fmt(x) -> str:
    return x if isinstance(x, str) else repr(x)


def bad_specs():
    """Data SPECs that every loader must refuse."""
    unknown_family = _TEXT.map(lambda t: "zz" + t)
    dirac_count = st.builds(lambda key, v: f"dirac:{key}={v}", st.sampled_from(["K", "D"]),
                            st.one_of(_NON_POSITIVE_INT, _NOT_INT))
    dirac_sep = _BAD_POSITIVE_FLOAT.map(lambda v: f"dirac:K=2,D=1,sep={_fmt(v)}")
    dirac_seed = st.integers(-10**9, -1).map(lambda s: f"dirac:K=2,seed={s}")
    circle_r = _BAD_POSITIVE_FLOAT.map(lambda v: f"circle:D=2,r={_fmt(v)}")
    gaussian_k = st.integers(3, 50).map(lambda k: f"gaussian:D=2,k={k}")
    unknown_key = st.builds(lambda fam, key: f"{fam}:{key}=1", st.sampled_from(["dirac", "gaussian", "circle", "digits"]),
                            st.text(alphabet="xyzq", min_size=2, max_size=6))
    missing = st.sampled_from(["npz:", "npz:absent.npz", "mnist:absent_dir", ""])
    # issue 28: beyond the float range or the memory (an OverflowError, a MemoryError naming no knob)
    extreme = st.sampled_from(["circle:r=1e300", "circle:r=1e-300", "dirac:K=1000000000000", "circle:D=100000000",
                               "gaussian:D=100000000,k=50"])
    return st.one_of(unknown_family, dirac_count, dirac_sep, dirac_seed, circle_r, gaussian_k, unknown_key, missing,
                     extreme)


def _valid_npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def corrupt_npz():
    """Bytes of an ``.npz`` that must be refused: not a zip, truncated, non-finite, empty or pickled."""
    good = _valid_npz_bytes(atoms=np.array([[-1.0], [1.0]]))
    truncated = st.integers(0, len(good) - 1).map(lambda n: good[:n])
    random_bytes = st.binary(max_size=200).filter(lambda b: not b.startswith(b"PK"))
    nonfinite = st.sampled_from([math.nan, math.inf, -math.inf]).map(
        lambda v: _valid_npz_bytes(atoms=np.array([[v], [1.0]])))
    empty = st.just(_valid_npz_bytes(atoms=np.zeros((0, 1))))
    pickled = st.just(_valid_npz_bytes(atoms=np.array([{"a": 1}, None], dtype=object)))
    wrong_key = st.just(_valid_npz_bytes(nothing_here=np.ones(3)))
    return st.one_of(truncated, random_bytes, nonfinite, empty, pickled, wrong_key)


def corrupt_gz():
    """A gzip MNIST file that is not an IDX file of the right shape (or not gzip at all)."""
    import gzip

    return st.one_of(st.binary(max_size=64).map(gzip.compress), st.binary(max_size=64),
                     st.integers(1, 40).map(lambda n: gzip.compress(b"\x00\x00\x08\x03" + b"\x00" * n)))


def bad_intervals():
    """(lam_min, lam_max) that is not a finite increasing pair."""
    finite = st.floats(-50, 50)
    inverted = st.tuples(finite, finite).filter(lambda t: t[0] >= t[1])
    nonfinite = st.tuples(st.sampled_from([math.nan, math.inf, -math.inf]), finite)
    return st.one_of(inverted, nonfinite, nonfinite.map(lambda t: (t[1], t[0])))


def bad_out_paths():
    """(argument value, files) of an output file path that cannot be written."""
    return st.sampled_from([("", {}), ("nodir/x.json", {}), ("adir", {"adir": None}), (".", {}),
                            ("/proc/x.json", {}), ("n" * 300 + ".json", {})])


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(v)


def _toml(doc: dict) -> bytes:
    lines = []
    for table, body in doc.items():
        lines.append(f"[{table}]")
        lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in body.items()]
    return ("\n".join(lines) + "\n").encode()


def bad_sweep_docs():
    """Sweep documents each with one fault."""
    base = {"sweep": {"name": "s", "kind": "demo"}, "grid": {"a": [1.0]}}

    def with_(path, value):
        doc = json.loads(json.dumps(base))
        table, key = path
        doc.setdefault(table, {})[key] = value
        return doc

    kind = st.one_of(st.sampled_from(["subprocess:run", "os:system", "nosuch.module:fn",
                                      "noisealloc.verify.experiments.sweep.cells:cell_demo", ""]), _TEXT.map(lambda t: "zz" + t))
    name = st.one_of(st.sampled_from(["/../../../../elsewhere/x", "..", ".", "a/b", "", ".hidden", "x" * 101]),
                     _TEXT.filter(lambda t: "/" in t).map(lambda t: "n" + t))
    unknown = st.tuples(st.sampled_from(["sweep", "fixed", "grid", "summary"]), st.text("qxz", min_size=2, max_size=5))
    wrong_type = st.sampled_from([["notanumber"], [math.nan], [math.inf], [True], [[1.0]]])
    return st.one_of(
        kind.map(lambda k: with_(("sweep", "kind"), k)),
        name.map(lambda n: with_(("sweep", "name"), n)),
        unknown.map(lambda tk: with_(tk, [1] if tk[0] == "grid" else 1)),
        wrong_type.map(lambda v: with_(("grid", "a"), v)),
        st.just(with_(("grid", "a"), [])),
        st.just(with_(("fixed", "seed"), -1.5)),
        st.just({"sweep": {"name": "s", "kind": "demo"}, "grid": {"a": [1.0] * 1000, "b": [1.0] * 1000,
                                                                  "seed": list(range(1000))}}),
        st.just({"grid": {"a": [1.0]}}),
    )


def bad_sweep_files():
    return st.one_of(bad_sweep_docs().map(_toml), st.binary(max_size=100).filter(lambda b: b"[sweep]" not in b))


def bad_loss_csvs():
    """Loss tables a profile cannot come from: wrong header, text cells, empty, non-UTF-8, too few levels."""
    words = st.text(alphabet=string.ascii_letters, min_size=1, max_size=6)
    return st.one_of(
        st.lists(st.tuples(words, words), min_size=1, max_size=5).map(
            lambda rows: ("\n".join(f"{a},{b}" for a, b in [("lam", "loss_eps")] + rows) + "\n").encode()),
        st.just(b""),
        st.binary(min_size=1, max_size=60).map(lambda b: b"\xff" + b),
        st.sampled_from([b"lam,loss_eps\n1,nan\n2,1\n3,0.5\n", b"lam,loss_eps\ninf,1\n2,1\n3,0.5\n",
                         b"a,b\n1,2\n", b"lam\n1\n2\n3\n", b"lam,loss_eps\n1,2\n"]),
    )


def _args(**opts) -> list[str]:
    out = []
    for k, v in opts.items():
        out += [f"--{k.replace('_', '-')}", _fmt(v)]
    return out


# One strategy per subcommand: each example is (argv, files, env).
def _entropy():
    spec = bad_specs().map(lambda s: (["entropy", "--data", s, "--levels", "5", "--samples", "8", "--out", "o.json"],
                                      {}, {}))
    npz = corrupt_npz().map(lambda b: (["entropy", "--data", "npz:bad.npz", "--levels", "5", "--out", "o.json"],
                                       {"bad.npz": b}, {}))
    interval = bad_intervals().map(lambda ab: (["entropy", "--data", GOOD_SPEC, "--levels", "5", "--out", "o.json"]
                                               + _args(lam_min=ab[0], lam_max=ab[1]), {}, {}))
    sizes = st.one_of(
        st.integers(-10, 2).map(lambda n: ["--levels", str(n)]),
        st.integers(10**9, 10**12).map(lambda n: ["--levels", str(n)]),
        st.integers(-10, 1).map(lambda n: ["--samples", str(n)]),
        st.integers(-10, -1).map(lambda n: ["--seed", str(n)]),
        st.sampled_from([["--coordinate", "nosuch"], ["--block-size", "0"], ["--levels", "abc"]]),
    ).map(lambda extra: (["entropy", "--data", GOOD_SPEC, "--out", "o.json"] + extra, {}, {}))
    paths = bad_out_paths().map(lambda pf: (["entropy", "--data", GOOD_SPEC, "--levels", "5", "--out", pf[0]],
                                            pf[1], {}))
    mnist = corrupt_gz().map(lambda b: (["entropy", "--data", "mnist", "--levels", "5", "--out", "o.json"],
                                        {"m/t10k-images-idx3-ubyte.gz": b, "m/t10k-labels-idx1-ubyte.gz": b},
                                        {"NOISEALLOC_MNIST_DIR": "m"}))
    return st.one_of(spec, npz, interval, sizes, paths, mnist)


def _optimize():
    base = ["optimize", "--model", "posterior-weights", "--levels", "5"]
    spec = bad_specs().map(lambda s: (base + ["--data", s], {}, {}))
    npz = corrupt_npz().map(lambda b: (base + ["--data", "npz:bad.npz"], {"bad.npz": b}, {}))
    interval = bad_intervals().map(lambda ab: (base + ["--data", GOOD_SPEC] + _args(lam_min=ab[0], lam_max=ab[1]),
                                               {}, {}))
    opts = st.one_of(
        st.integers(-5, 2).map(lambda n: ["--levels", str(n)]),
        st.integers(10**6, 10**12).map(lambda n: ["--levels", str(n)]),
        st.sampled_from([["--tol", "nan"], ["--tol", "0"], ["--tol", "-1"], ["--features", "0"],
                         ["--criterion", "Z"], ["--model", "nosuch"], ["--model", "spline:0"]]),
        _TEXT.map(lambda t: ["--model", "zz" + t]),
    ).map(lambda extra: (base + ["--data", GOOD_SPEC] + extra, {}, {}))
    paths = bad_out_paths().map(lambda pf: (base + ["--data", GOOD_SPEC, "--out", pf[0]], pf[1], {}))
    return st.one_of(spec, npz, interval, opts, paths)


def _schedules():
    interval = bad_intervals().map(lambda ab: (["schedules", "--points", "9"] + _args(lam_min=ab[0], lam_max=ab[1]),
                                               {}, {}))
    points = st.one_of(st.integers(-10, 1), st.integers(10**8, 10**12)).map(
        lambda n: (["schedules", "--points", str(n), "--out", "s.json"], {}, {}))
    coord = _TEXT.map(lambda t: (["schedules", "--coordinate", "zz" + t], {}, {}))
    paths = st.tuples(st.sampled_from(["--out", "--plot"]), bad_out_paths()).map(
        lambda o: (["schedules", "--points", "9", o[0], o[1][0]], o[1][1], {}))
    return st.one_of(interval, points, coord, paths)


def _schedule():
    base = ["schedule", "--levels", "5", "--samples", "16"]
    spec = bad_specs().map(lambda s: (base + ["--from-data", s, "--out", "o.json"], {}, {}))
    losses = bad_loss_csvs().map(lambda b: (base + ["--from-losses", "l.csv", "--out", "o.json"], {"l.csv": b}, {}))
    compare_docs = st.one_of(st.sampled_from([b"[1, 2]", b"{}", b'{"format": "noisealloc.schedule"}', b"null",
                                              b'{"format": "noisealloc.schedules", "version": 1, "schedules": 3}',
                                              b"[" * 100_000 + b"]" * 100_000, b"{" * 50_000,
                                              b'{"format": "noisealloc.schedule", "version": true}']),
                             st.binary(max_size=40).filter(lambda b: not b.strip().startswith(b"{")))
    compare = compare_docs.map(lambda b: (base + ["--from-data", GOOD_SPEC, "--compare", "c.json", "--out", "o.json"],
                                          {"c.json": b}, {}))
    compare_dir = st.just((base + ["--from-data", GOOD_SPEC, "--compare", "cdir"], {"cdir": None}, {}))
    interval = bad_intervals().map(lambda ab: (base + ["--from-data", GOOD_SPEC, "--out", "o.json"]
                                               + _args(lam_min=ab[0], lam_max=ab[1]), {}, {}))
    sizes = st.one_of(st.integers(-5, 2), st.integers(10**8, 10**12)).map(
        lambda n: (["schedule", "--from-data", GOOD_SPEC, "--levels", str(n), "--out", "o.json"], {}, {}))
    paths = bad_out_paths().map(lambda pf: (base + ["--from-data", GOOD_SPEC, "--out", pf[0]], pf[1], {}))
    return st.one_of(spec, losses, compare, compare_dir, interval, sizes, paths)


def _sweep():
    files = bad_sweep_files().map(lambda b: (["sweep", "s.toml", "--no-progress"], {"s.toml": b}, {}))
    good = _toml({"sweep": {"name": "s", "kind": "demo"}, "grid": {"a": [1.0]}})
    out_file = st.just((["sweep", "s.toml", "--out", "afile", "--no-progress"], {"s.toml": good, "afile": b"x"}, {}))
    workers = st.integers(-5, 0).map(lambda n: (["sweep", "s.toml", "--workers", str(n)], {"s.toml": good}, {}))
    scheduler = st.sampled_from(["tcp://127.0.0.1:1", "http://x", "nonsense", "tcp://:0"]).map(
        lambda a: (["sweep", "s.toml", "--scheduler", a, "--no-progress"], {"s.toml": good}, {}))
    missing = st.sampled_from([(["sweep", "absent.toml"], {}, {}), (["sweep", "d"], {"d": None}, {})])
    return st.one_of(files, out_file, workers, scheduler, missing)


def _reproduce():
    # Non-empty names only: `--only ""` is read as "no --only" and reproduces every figure (minutes;
    # reported to the coordinator, reproduce.py is not this test's to change).
    names = st.lists(st.text(alphabet=string.ascii_lowercase + "_0123456789", min_size=1, max_size=10), min_size=1,
                     max_size=4)
    only = names.filter(lambda ns: not any(n in FIGURES for n in ns)).map(
        lambda ns: (["reproduce", "--quick", "--only", ",".join(ns), "--out", "r"], {}, {}))
    out_file = st.just((["reproduce", "--quick", "--out", "afile"], {"afile": b"x"}, {}))
    bad_out = st.sampled_from([(["reproduce", "--out", ""], {}, {}), (["reproduce", "--out", "no/such/dir"], {}, {})])
    return st.one_of(only, out_file, bad_out)


def _verify():
    return st.one_of(bad_out_paths().map(lambda pf: (["verify", "--quick", "--out", pf[0]], pf[1], {})),
                     st.sampled_from([(["verify", "--seed", "abc"], {}, {}), (["verify", "--bogus"], {}, {})]))


def _bench():
    mnist = corrupt_gz().map(lambda b: (["bench", "posterior", "--mnist", "m"],
                                        {"m/t10k-images-idx3-ubyte.gz": b, "m/t10k-labels-idx1-ubyte.gz": b}, {}))
    absent = st.just((["bench", "posterior", "--mnist", "absent_dir"], {}, {}))
    name = _TEXT.map(lambda t: (["bench", "zz" + t], {}, {}))
    return st.one_of(mnist, absent, name)


COMMAND_STRATEGIES = {
    "entropy": _entropy, "optimize": _optimize, "schedules": _schedules, "schedule": _schedule,
    "sweep": _sweep, "reproduce": _reproduce, "verify": _verify, "bench": _bench,
}


# ----------------------------------------------------------------------------- public loaders
def _loader_cases():
    from noisealloc.theory.schedules.samplers import load_table
    from noisealloc.theory.models.datasets import load_data, load_mnist
    from noisealloc.theory.information.from_losses import read_loss_csv
    from noisealloc.theory.schedules.io import load_json, load_npz, load_schedules_json
    from noisealloc.verify.experiments.sweep.spec import load_sweep

    json_bytes = st.one_of(st.binary(max_size=60), st.sampled_from([b"[]", b"{}", b"null", b"3", b'{"format": 1}']))
    return {
        "load_data": (bad_specs(), lambda d, spec: load_data(spec)),
        "load_data(npz)": (corrupt_npz(), lambda d, b: (d / "a.npz").write_bytes(b) is not None and load_data(f"npz:{d / 'a.npz'}")),
        "load_mnist": (corrupt_gz(), lambda d, b: [(d / n).write_bytes(b) for n in
                                                   ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")]
                       and load_mnist(str(d))),
        "load_sweep": (bad_sweep_files(), lambda d, b: (d / "s.toml").write_bytes(b) is not None and load_sweep(d / "s.toml")),
        "read_loss_csv": (bad_loss_csvs(), lambda d, b: (d / "l.csv").write_bytes(b) is not None
                          and read_loss_csv(d / "l.csv")),
        "load_json": (json_bytes, lambda d, b: (d / "s.json").write_bytes(b) is not None and load_json(d / "s.json")),
        "load_schedules_json": (json_bytes, lambda d, b: (d / "s.json").write_bytes(b) is not None
                                and load_schedules_json(d / "s.json")),
        "load_npz": (corrupt_npz(), lambda d, b: (d / "s.npz").write_bytes(b) is not None and load_npz(d / "s.npz")),
        "samplers.load_table": (json_bytes, lambda d, b: (d / "s.json").write_bytes(b) is not None
                                and load_table(d / "s.json")),
    }


def run_loader(fn, value) -> str | None:
    """Call a loader on a bad value; return the problem, or None when it refused cleanly."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            result = fn(Path(tmp), value)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:  # the CLI's "corrupt file" errors
            text = str(exc)
            if "\n" in text.strip() or not text.strip():
                return f"{type(exc).__name__} without a one-line message: {text!r}"
            return None
        except Exception as exc:  # noqa: BLE001 - the finding
            return f"traceback: {type(exc).__name__}: {exc}"
    return f"silent wrong: returned {type(result).__name__}"


# ----------------------------------------------------------------------------- default tier
_FAST = settings(max_examples=examples(6), deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.mark.parametrize("command", sorted(COMMAND_STRATEGIES))
def test_bad_cli_input_is_one_clean_line(command):
    @_FAST
    @given(COMMAND_STRATEGIES[command]())
    def check(case):
        argv, files, env = case
        outcome = run_cli(argv, files, env)
        assert not outcome.problems(command), (argv, outcome.problems(command))

    check()


#: Loaders with a known defect found by this fuzz, in files outside this test's area (reported):
#: strict, so the mark must go when the loader is fixed.
#: Loader -> known defect kept as a strict xfail (empty: load_npz now names the file and the missing arrays).
KNOWN_LOADER_DEFECTS: dict = {}


@pytest.mark.parametrize("loader", [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=KNOWN_LOADER_DEFECTS[name]))
    if name in KNOWN_LOADER_DEFECTS else name
    for name in sorted(_loader_cases())])
def test_bad_loader_input_is_a_clean_error(loader):
    strategy, fn = _loader_cases()[loader]

    @_FAST
    @given(strategy)
    def check(value):
        problem = run_loader(fn, value)
        assert problem is None, (loader, value if not isinstance(value, bytes) else value[:80], problem)

    check()


def test_fuzz_harness_detects_each_kind_of_failure(monkeypatch):
    """The checks can fail: an accepted input, a traceback, two stderr lines and a stray file are all seen."""
    import noisealloc.commands.schedules as cmd

    monkeypatch.setattr(cmd, "run", lambda args: 0)
    assert "exit 0 on bad input" in run_cli(["schedules"]).problems("schedules")
    monkeypatch.setattr(cmd, "run", lambda args: {}["x"])
    monkeypatch.delenv("NOISEALLOC_TRACEBACK", raising=False)
    assert any("traceback" in p for p in run_cli(["schedules"]).problems("schedules"))

    def two_lines(args):
        import sys

        print("first\nsecond", file=sys.stderr)
        return 2

    monkeypatch.setattr(cmd, "run", two_lines)
    assert any("not one line" in p for p in run_cli(["schedules"]).problems("schedules"))

    def litter(args):
        Path("stray.txt").write_text("x")
        raise ValueError("bad")

    monkeypatch.setattr(cmd, "run", litter)
    assert any("new files" in p for p in run_cli(["schedules"]).problems("schedules"))
    assert run_loader(lambda d, v: {}[v], "k").startswith("traceback")
    assert run_loader(lambda d, v: v, 1).startswith("silent wrong")


# ----------------------------------------------------------------------------- slow tier
@dataclass
class Tally:
    tried: int = 0
    tracebacks: int = 0
    silent_wrong: int = 0
    other: int = 0
    examples: list = field(default_factory=list)
    exit3: int = 0


@pytest.mark.slow
def test_fuzz_counts_slow_tier(capsys):
    """Many inputs per subcommand and loader; prints the table; tracebacks and silent wrongs are 0."""
    tallies: dict[str, Tally] = {}
    many = settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
    for command, make in sorted(COMMAND_STRATEGIES.items()):
        t = tallies.setdefault(command, Tally())
        _command_probe(many, make(), command, t)()
    for loader, (strategy, fn) in sorted(_loader_cases().items()):
        if loader in KNOWN_LOADER_DEFECTS:  # counted by its strict xfail in the default tier
            continue
        t = tallies.setdefault(f"loader {loader}", Tally())
        _loader_probe(many, strategy, fn, t)()
    _listed_probe(tallies)
    _print_and_check(tallies, capsys)


def _listed_probe(tallies) -> None:
    """The fixed cases of issue 28 (before the work, the listed cases, the messages), counted alike."""
    t = tallies.setdefault("issue 28 listed cases", Tally())
    cases = []
    for command, (base, bads) in BEFORE_THE_WORK.items():
        for bad in bads:
            files = {"l.csv": _CSV}
            argv = base + bad
            if bad[0].startswith("cell:"):
                files["s.toml"] = (_SWEEP_HEAD + bad[0][5:] + "\n").encode()
                argv = base
            cases.append((command.split()[0], argv, files))
    cases += [(argv[0], argv, files) for argv, files, status, _ in LISTED_CASES.values() if status == 2]
    cases += [(argv[0], argv, files) for argv, files, _, _ in MESSAGE_CASES.values()]
    for command, argv, files in cases:
        o = run_cli(argv, files)
        t.tried += 1
        t.tracebacks += o.traceback
        t.exit3 += o.code == EXIT_INTERNAL
        t.silent_wrong += o.silent_wrong
        problems = o.problems(command)
        if problems and not (o.traceback or o.silent_wrong):
            t.other += 1
        if problems and len(t.examples) < 3:
            t.examples.append((argv, problems))


# @given refuses functions with default arguments, so each probe is built by a factory that closes
# over its command (or loader) and tally.
def _command_probe(many, strategy, command, t):
    @many
    @given(strategy)
    def probe(case):
        argv, files, env = case
        o = run_cli(argv, files, env)
        t.tried += 1
        t.tracebacks += o.traceback
        t.exit3 += o.code == EXIT_INTERNAL
        t.silent_wrong += o.silent_wrong
        problems = o.problems(command)
        if problems and not (o.traceback or o.silent_wrong):
            t.other += 1
        if problems and len(t.examples) < 3:
            t.examples.append((argv, problems))

    return probe


def _loader_probe(many, strategy, fn, t):
    @many
    @given(strategy)
    def probe_loader(value):
        problem = run_loader(fn, value)
        t.tried += 1
        if problem:
            t.tracebacks += problem.startswith("traceback")
            t.silent_wrong += problem.startswith("silent wrong")
            t.other += not problem.startswith(("traceback", "silent wrong"))
            if len(t.examples) < 3:
                t.examples.append((value if not isinstance(value, bytes) else value[:40], problem))

    return probe_loader


def _print_and_check(tallies, capsys):
    with capsys.disabled():
        print(f"\n{'fuzz target':<30} {'tried':>6} {'tracebacks':>11} {'silent wrong':>13} {'exit 3':>7} {'other':>6}")
        for name, t in tallies.items():
            print(f"{name:<30} {t.tried:>6} {t.tracebacks:>11} {t.silent_wrong:>13} {t.exit3:>7} {t.other:>6}")
            for ex in t.examples:
                print(f"    e.g. {ex}")
        total = Tally(*(sum(getattr(t, k) for t in tallies.values()) for k in ("tried", "tracebacks", "silent_wrong",
                                                                                "other")),
                      exit3=sum(t.exit3 for t in tallies.values()))
        print(f"{'total':<30} {total.tried:>6} {total.tracebacks:>11} {total.silent_wrong:>13} {total.exit3:>7} "
              f"{total.other:>6}")
    assert all(t.tried > 0 for t in tallies.values())
    assert total.tracebacks == 0 and total.silent_wrong == 0 and total.exit3 == 0 and total.other == 0, {
        k: t.examples for k, t in tallies.items() if t.examples}


# ----------------------------------------------------------------------------- issue 28 item 5: before the work
_LONG_NAME = "n" * 300 + ".json"
_CSV = b"lam,loss_eps\n" + b"".join(f"{x},{1 / (1 + math.exp(x))!r}\n".encode() for x in range(-8, 9))
_SWEEP_HEAD = '[sweep]\nname = "s"\nkind = "coupling"\n[fixed]\nJ = 4\n'
#: command -> (an argv whose run takes many seconds, [bad options]); each bad option must be refused
#: with exit 2 in well under the run's time, with nothing written.
BEFORE_THE_WORK = {
    "schedule": (["schedule", "--from-data", "digits", "--out", "o.json"],
                 [["--floor", "nan"], ["--floor", "1"], ["--floor=-0.1"], ["--seed=-1"], ["--levels", "2"],
                  ["--samples", "1"], ["--lam-min", "nan"], ["--lam-min", "5", "--lam-max", "1"],
                  ["--plot", "x.xyz"], ["--out", "/proc/x.json"], ["--out", _LONG_NAME],
                  ["--compare", "missing.json"], ["--law", "bogus"]]),
    "schedule --from-losses": (["schedule", "--from-losses", "l.csv", "--out", "o.json"],
                               [["--law", "smoothed"], ["--seed=-1"], ["--floor", "nan"], ["--plot", "p.xyz"]]),
    "entropy": (["entropy", "--data", "digits", "--levels", "65", "--out", "o.json", "--quiet"],
                [["--seed=-1"], ["--levels", "2"], ["--samples", "1"], ["--lam-min", "inf"], ["--plot", "x.xyz"],
                 ["--coordinate", "zeta"], ["--out", _LONG_NAME], ["--lam-min", "3", "--lam-max", "1"],
                 ["--out", "/proc/x.json"]]),
    "optimize": (["optimize", "--data", "dirac:K=50,D=3", "--model", "posterior-weights", "--levels", "400"],
                 [["--tol", "nan"], ["--tol", "0"], ["--features", "0"], ["--seed=-1"], ["--levels", "2"],
                  ["--plot", "x.xyz"], ["--model", "nosuch"], ["--lam-min", "nan"], ["--criterion", "Q"]]),
    "schedules": (["schedules", "--points", "2000000"],
                  [["--points", "1"], ["--lam-min", "nan"], ["--plot", "x.xyz"], ["--out", _LONG_NAME]]),
    "verify": (["verify", "--quick"], [["--seed=-1"], ["--out", "/proc/x.json"], ["--out", _LONG_NAME]]),
    "reproduce": (["reproduce", "--quick", "--out", "r"],
                  [["--seed=-1"], ["--only", "nosuch"], ["--mnist", "bad"], ["--out", "/proc/x"]]),
    "bench": (["bench", "posterior", "--atoms", "2000"],
              [["--levels", "2"], ["--samples", "1"], ["--repeat", "0"], ["--atoms", "1"], ["--mnist", "bad"]]),
    "sweep": (["sweep", "s.toml", "--no-progress"],
              [[f"cell:{body}"] for body in ('data = "dirac:K=0"', 'data = "dirac:K=2"\ncriterion = "Q"',
                                              'data = "dirac:K=2"\nseed = -1', 'data = "dirac:K=2"\nlevels = 100000000000',
                                              'data = "dirac:K=2"\nlam_min = 5.0\nlam_max = 1.0',
                                              'data = "dirac:K=1000000000000"')]),
}
#: A refusal must come this fast (the issue: 'every bad option exits 2 in under 2 s').
REFUSED_WITHIN_SECONDS = 2.0


@pytest.mark.parametrize("command, bad", [(c, b) for c, (_, bads) in BEFORE_THE_WORK.items() for b in bads],
                         ids=lambda v: v if isinstance(v, str) else " ".join(v)[:40])
def test_every_bad_option_is_refused_before_the_work(command, bad):
    import time

    base, _ = BEFORE_THE_WORK[command]
    files = {"l.csv": _CSV}
    argv = base + bad
    if bad[0].startswith("cell:"):
        files["s.toml"] = (_SWEEP_HEAD + bad[0][5:] + "\n").encode()
        argv = base
    t0 = time.monotonic()
    outcome = run_cli(argv, files)
    seconds = time.monotonic() - t0
    name = command.split()[0]
    assert outcome.code == 2 and not outcome.problems(name), (argv, outcome.code, outcome.problems(name))
    assert seconds < REFUSED_WITHIN_SECONDS, (argv, f"refused after {seconds:.1f} s")


# ----------------------------------------------------------------------------- issue 28 items 3 and 4: listed cases
def _deep_json(depth: int = 100_000) -> bytes:
    return b"[" * depth + b"]" * depth


_GZ_GARBAGE = {"m/t10k-images-idx3-ubyte.gz": b"not gzip", "m/t10k-labels-idx1-ubyte.gz": b"not gzip"}
_VERSION_TRUE = json.dumps({"format": "noisealloc.schedule", "version": True, "name": "x", "coordinate": "lambda",
                            "interval": [0.0, 2.0], "knots": [0.0, 1.0, 2.0], "pdf": [0.0, 1.0, 0.0],
                            "cdf": [0.0, 0.5, 1.0]}).encode()
_HUGE_LOSSES = b"lam,loss_eps\n" + b"".join(f"{x},1e308\n".encode() for x in range(-8, 9, 2))
_SMALL = ["--levels", "5", "--samples", "16"]
#: (argv, files, expected status, a phrase of the one stderr line): each once an internal error (exit 3)
#: or a silent wrong (exit 0) of issue 28.
LISTED_CASES = {
    "dirac sep=1e-300 (ZeroDivisionError)": (["entropy", "--data", "dirac:K=2,sep=1e-300", "--levels", "9",
                                               "--out", "o.json", "--quiet"], {}, 1, ""),
    "circle r=1e300 (OverflowError)": (["entropy", "--data", "circle:r=1e300", "--levels", "9", "--out", "o.json"],
                                       {}, 2, "radius must lie in"),
    "compare a 100k-deep JSON (RecursionError)": (["schedule", "--from-data", GOOD_SPEC, *_SMALL, "--compare", "d.json"],
                                                  {"d.json": _deep_json()}, 2, "nested too deeply"),
    "compare with version true": (["schedule", "--from-data", GOOD_SPEC, *_SMALL, "--compare", "v.json"],
                                  {"v.json": _VERSION_TRUE}, 2, "version must be 1"),
    "reproduce --mnist of garbage files": (["reproduce", "--full", "--only", "fig1_entropy", "--mnist", "m",
                                            "--out", "r"], _GZ_GARBAGE, 2, "MNIST file"),
    "reproduce --mnist of a missing folder": (["reproduce", "--full", "--mnist", "nowhere", "--out", "r"], {}, 2,
                                              "MNIST directory not found"),
    "schedule --seed -1": (["schedule", "--from-data", GOOD_SPEC, *_SMALL, "--seed=-1"], {}, 2, "--seed must be >= 0"),
    "--law with --from-losses": (["schedule", "--from-losses", "l.csv", "--law", "empirical", "--levels", "5"],
                                 {"l.csv": _CSV}, 2, "--law empirical applies to --from-data only"),
    "--from-losses near 1e308": (["schedule", "--from-losses", "l.csv", "--levels", "5", "--out", "o.json"],
                                 {"l.csv": _HUGE_LOSSES}, 2, "beyond the float64 range"),
}


@pytest.mark.parametrize("case", sorted(LISTED_CASES))
def test_listed_cases_of_issue_28(case):
    argv, files, status, phrase = LISTED_CASES[case]
    outcome = run_cli(argv, files)
    lines = [ln for ln in outcome.err.splitlines() if ln.strip()]
    assert outcome.code == status, (argv, outcome.code, outcome.err)
    assert not outcome.traceback and "Warning" not in outcome.err, outcome.err
    assert phrase in outcome.err, (phrase, outcome.err)
    if status == 2:
        assert len(lines) == 1 and outcome.new_files == [], (lines, outcome.new_files)


def test_atoms_closer_than_the_float_range_give_the_right_answer(tmp_path):
    """dirac:K=2,sep=1e-300: the atoms cannot be told apart at any level of the interval, so H(lam) = log 2
    throughout, int h = 0, and the budget check FAILS (exit 1): the right answer, not a ZeroDivisionError."""
    out = tmp_path / "o.json"
    assert main(["entropy", "--data", "dirac:K=2,sep=1e-300", "--levels", "9", "--out", str(out), "--quiet"]) == 1
    doc = json.loads(out.read_text())
    np.testing.assert_allclose(doc["conditional_entropy"], math.log(2), rtol=1e-12)
    assert not doc["meta"]["budget"]["holds"]


# ----------------------------------------------------------------------------- issue 28 item 6: messages that help
def _npy_bytes() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ones(3))
    return buf.getvalue()


#: (argv, files, phrases the one stderr line must hold, phrases it must not hold)
MESSAGE_CASES = {
    "text file as npz": (["entropy", "--data", "npz:t.npz", "--out", "o.json"], {"t.npz": b"hello\n"},
                         ["t.npz", "not an .npz file"], ["allow_pickle"]),
    "npy file as npz": (["entropy", "--data", "npz:a.npy", "--out", "o.json"], {"a.npy": _npy_bytes()},
                        ["a.npy", ".npy file"], ["attribute"]),
    "dirac K too large": (["entropy", "--data", "dirac:K=1000000000000", "--out", "o.json"], {},
                          ["K = 1000000000000", "smaller K"], ["levels, points or samples"]),
    "circle D too large": (["entropy", "--data", "circle:D=100000000", "--out", "o.json"], {},
                           ["D = 100000000", "smaller D"], ["levels, points or samples"]),
    "spline J too large": (["optimize", "--data", GOOD_SPEC, "--model", "spline:1000000000", "--levels", "5"], {},
                           ["spline:J", "1000000000"], ["levels, points or samples"]),
    "bench --sizes too large": (["bench", "solver", "--sizes", "1000000000000"], {}, ["--sizes", "limit"],
                                ["levels, points or samples"]),
    "saturated coordinate": (["schedules", "--lam-min=-1e4", "--lam-max=1e4", "--coordinate", "t"], {},
                             ["saturates", "narrower"], []),
    "negative exponent as a value": (["entropy", "--data", GOOD_SPEC, "--lam-min", "-1e4", "--lam-max", "-2e4",
                                      "--out", "o.json"], {}, ["lo < hi"], ["expected one argument"]),
    "argparse error is one line": (["schedules", "--bogus"], {}, ["error:", "--bogus", "--help"], ["usage:"]),
}


@pytest.mark.parametrize("case", sorted(MESSAGE_CASES))
def test_messages_name_the_knob(case):
    argv, files, wanted, unwanted = MESSAGE_CASES[case]
    outcome = run_cli(argv, files)
    lines = [ln for ln in outcome.err.splitlines() if ln.strip()]
    assert outcome.code == 2 and len(lines) == 1 and not outcome.new_files, (argv, outcome)
    for phrase in wanted:
        assert phrase in lines[0], (phrase, lines[0])
    for phrase in unwanted:
        assert phrase not in lines[0], (phrase, lines[0])


def test_warnings_do_not_precede_the_error_line(monkeypatch):
    """A RuntimeWarning raised before a refusal is not printed: the error is the one line."""
    import warnings

    import noisealloc.commands.schedules as cmd

    def warns_then_fails(args):
        warnings.warn("overflow encountered in multiply", RuntimeWarning)
        raise ValueError("bad")

    monkeypatch.setattr(cmd, "run", warns_then_fails)
    outcome = run_cli(["schedules"])
    assert outcome.code == 2 and outcome.err.strip() == "noisealloc schedules: error: bad", outcome.err
