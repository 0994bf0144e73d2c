"""The command line's error boundary: one line, a documented exit status, nothing computed or written.

Each case is one that used to end in a traceback (issue 16): bad output paths (checked before any
computation), input paths that are folders, corrupt npz files, an interrupt, an internal error.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers.extras import requires_extra

from noisealloc import cli
from noisealloc.cli import EXIT_INTERNAL, EXIT_INTERRUPTED, main


def _one_line_error(capsys, *needles):
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1, captured.err
    assert "Traceback" not in captured.err
    for needle in needles:
        assert needle in err[0], err[0]
    return err[0]


@pytest.mark.parametrize("argv_tail, needle", [
    (["--out", ""], "--out is empty"),
    (["--out", "{tmp}"], "is a folder"),
    (["--out", "{tmp}/missing/x.json"], "does not exist (it is not created for you)"),
    (["--plot", "{tmp}"], "--plot"),
    (["--out", "{tmp}/a.json", "--plot", "{tmp}/a.json"], "name the same file"),
])
def test_bad_output_paths_are_refused_before_computing(tmp_path, capsys, monkeypatch, argv_tail, needle):
    called = []
    import noisealloc.commands.schedules as cmd

    monkeypatch.setattr(cmd, "run", lambda args: called.append(args) or 0)
    argv = ["schedules"] + [a.replace("{tmp}", str(tmp_path)) for a in argv_tail]
    assert main(argv) == 2
    _one_line_error(capsys, "noisealloc schedules: error:", needle)
    assert called == []  # nothing ran
    assert not (tmp_path / "missing").exists()  # no folder was created


def test_folder_output_must_not_be_a_file(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["reproduce", "--quick", "--out", str(afile)]) == 2
    _one_line_error(capsys, "exists and is not a folder")
    assert afile.read_text() == "x"


def test_input_that_is_a_folder(tmp_path, capsys):
    assert main(["schedule", "--from-data", "dirac:K=2,D=1,sep=2,seed=0", "--compare", str(tmp_path)]) == 2
    _one_line_error(capsys, "--compare", "is a folder")


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 truncated", b"not a zip at all"])
def test_corrupt_npz_is_one_line(tmp_path, capsys, content):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(content)
    out = tmp_path / "o.json"
    assert main(["entropy", "--data", f"npz:{bad}", "--out", str(out)]) == 2
    _one_line_error(capsys, "noisealloc entropy: error:")
    assert not out.exists()


def test_interrupt_is_one_line_with_status_130(monkeypatch, capsys):
    import noisealloc.commands.schedules as cmd

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cmd, "run", interrupted)
    assert main(["schedules"]) == EXIT_INTERRUPTED == 130
    _one_line_error(capsys, "interrupted")


def test_internal_error_is_one_line_unless_asked(monkeypatch, capsys):
    import noisealloc.commands.schedules as cmd

    def buggy(args):
        return {}["missing"]

    monkeypatch.setattr(cmd, "run", buggy)
    monkeypatch.delenv(cli.TRACEBACK_ENV_VAR, raising=False)
    assert main(["schedules"]) == EXIT_INTERNAL
    _one_line_error(capsys, "internal error", "KeyError", cli.TRACEBACK_ENV_VAR)
    monkeypatch.setenv(cli.TRACEBACK_ENV_VAR, "1")
    with pytest.raises(KeyError):
        main(["schedules"])


def test_sigterm_ends_with_one_line(tmp_path):
    """A real SIGTERM during a run: one line on stderr, status 130, no temporary file left behind."""
    code = (
        "import os, signal, sys\n"
        "import noisealloc.commands.schedules as cmd\n"
        "from noisealloc.cli import main\n"
        "def slow(args):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    import time; time.sleep(5)\n"
        "    return 0\n"
        "cmd.run = slow\n"
        "sys.exit(main(['schedules', '--out', sys.argv[1]]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s.json")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip().splitlines() == ["noisealloc schedules: interrupted"]
    assert list(tmp_path.iterdir()) == []


def test_path_checkers_accept_good_paths(tmp_path):
    cli.check_output_path(tmp_path / "x.json", "--out")
    cli.check_output_path(tmp_path / "newdir", "--out", "dir")
    cli.check_output_path(tmp_path, "--out", "dir")
    f = tmp_path / "in.csv"
    f.write_text("a")
    cli.check_input_path(f, "--from-losses")
    with pytest.raises(ValueError, match="file not found"):
        cli.check_input_path(tmp_path / "nope.csv", "--from-losses")


# ----------------------------------------------------------------------------- issue 16, listed cases (h7)
# Sweeps, size limits and the fuzz have their own files (tests/verify/experiments/test_sweep.py, tests/theory/test_request_limits.py,
# tests/cli/test_fuzz.py); the cases of the lists not covered above are collected here.
def _toml_file(path, text):
    path.write_text(text)
    return str(path)


@requires_extra("sweep")
def test_sweep_toml_cannot_run_code(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = _toml_file(tmp_path / "rce.toml", '[sweep]\nname = "x"\nkind = "subprocess:run"\n[fixed]\n'
                   f'args = "touch {tmp_path}/PWNED"\nshell = true\n')
    assert main(["sweep", f]) == 2
    _one_line_error(capsys, "noisealloc sweep: error:", "never a function", "'subprocess:run'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rce.toml"]


@requires_extra("sweep")
def test_sweep_name_cannot_leave_the_folder(tmp_path, capsys, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    f = _toml_file(work / "t.toml", '[sweep]\nname = "/../../../../elsewhere/x"\nkind = "demo"\n[grid]\na = [1.0]\n')
    assert main(["sweep", f]) == 2
    _one_line_error(capsys, "one path component")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"] and [p.name for p in work.iterdir()] == ["t.toml"]


@requires_extra("sweep")
def test_sweep_out_that_is_a_file(tmp_path, capsys):
    f = _toml_file(tmp_path / "t.toml", '[sweep]\nname = "x"\nkind = "demo"\n[grid]\na = [1.0]\n')
    (tmp_path / "afile").write_text("x")
    assert main(["sweep", f, "--out", str(tmp_path / "afile")]) == 2
    _one_line_error(capsys, "exists and is not a folder")


@pytest.mark.parametrize("body, needle", [
    ('[sweep]\nname = "x"\nkind = "nosuch.module:fn"\n', "kind must be one of"),
    ('[sweep]\nname = "x"\nkind = "demo"\nworkers = 3\n[grid]\na = [1.0]\n', "unknown keys ['workers'] in [sweep]"),
    ('[sweep]\nname = "x"\nkind = "demo"\n[grid]\na = [1.0]\nzz = [1]\n', "unknown keys ['zz'] in [grid]"),
    ('[sweep]\nname = "x"\nkind = "demo"\n[fixed]\nzz = 1\n[grid]\na = [1.0]\n', "unknown keys ['zz'] in [fixed]"),
    ('[sweep]\nname = "x"\nkind = "demo"\n[grid]\na = ["notanumber"]\n', "must be of type float"),
    ('[sweep]\nname = "x"\nkind = "demo"\n[grid]\na = [nan]\n', "must be a finite number"),
    ('[sweep]\nname = "x"\nkind = "coupling"\n[fixed]\nlam_min = nan\n[grid]\ndata = ["dirac:K=2"]\nJ = [1]\n',
     "lam_min = nan must be a finite number"),
    ('[sweep]\nname = "x"\nkind = "coupling"\n[fixed]\nlevels = 2\n[grid]\ndata = ["dirac:K=2"]\nJ = [1]\n',
     "levels = 2 must be >= 3"),
])
@requires_extra("sweep")
def test_bad_sweep_files_are_refused_at_parse_time(tmp_path, capsys, body, needle):
    f = _toml_file(tmp_path / "t.toml", body)
    assert main(["sweep", f, "--out", str(tmp_path / "o")]) == 2
    _one_line_error(capsys, needle)
    assert not (tmp_path / "o").exists()


def test_compare_with_a_json_list_is_one_line(tmp_path, capsys):
    lst = tmp_path / "list.json"
    lst.write_text("[1, 2]")
    out = tmp_path / "o.json"
    assert main(["schedule", "--from-data", "dirac:K=2,D=1,sep=2,seed=0", "--levels", "9", "--compare", str(lst),
                 "--out", str(out)]) == 2
    _one_line_error(capsys, "--compare", "got a JSON list")
    assert not out.exists()  # read before computing: nothing written


def test_grid_quadrature_weights_of_one_level():
    from noisealloc.theory.information.rates import grid_quadrature_weights

    with pytest.raises(ValueError, match="at least 2 levels"):
        grid_quadrature_weights([1.0])
    with pytest.raises(ValueError, match="strictly increasing"):
        grid_quadrature_weights([0.0, 2.0, 1.0])


@pytest.mark.slow  # moved out of the default tier: it ran 245-260 s against its 240 s budget
def test_wide_interval_writes_valid_json(tmp_path, capsys):
    import json

    out = tmp_path / "e.json"
    assert main(["entropy", "--data", "dirac:K=3,D=1,sep=2,seed=0", "--lam-min", "-800", "--lam-max", "800",
                 "--levels", "9", "--out", str(out), "--quiet"]) == 0
    def refuse(name):
        raise AssertionError(f"non-standard JSON literal {name}")

    # strict JSON: json.loads accepts NaN/Infinity literals unless told otherwise
    json.loads(out.read_text(), parse_constant=refuse)


# ------------------------------------------------------------------ cases of issue 16 without a test before
def test_output_folder_that_is_not_writable(tmp_path, monkeypatch, capsys):
    """A read-only disk (modelled by os.access, since root may write anywhere): refused before computing."""
    import os

    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if os.fspath(p) == str(ro) else real(p, mode, **kw))
    monkeypatch.chdir(tmp_path)
    assert main(["schedules", "--points", "100", "--out", "ro/s.json"]) == 2
    _one_line_error(capsys, "--out 'ro/s.json'", "is not writable")
    assert list(ro.iterdir()) == []


def test_full_disk_names_the_file_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    """ENOSPC during the write (a full disk): one line naming the destination, no temporary left."""
    import errno

    from noisealloc.theory.schedules import io as schedule_io

    real = schedule_io.os.fdopen

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(schedule_io.os, "fdopen", lambda fd, mode="r", *a, **k: Full(real(fd, mode, *a, **k)))
    monkeypatch.chdir(tmp_path)
    assert main(["schedules", "--points", "100", "--out", "big.json"]) == 2
    line = _one_line_error(capsys, "No space left on device", "big.json")
    assert line.startswith("noisealloc schedules: error:")
    assert list(tmp_path.iterdir()) == []


def test_mnist_gzip_stream_cut_short_names_the_file(tmp_path, capsys):
    import gzip

    d = tmp_path / "mn"
    d.mkdir()
    payload = gzip.compress(bytes(16 + 784 * 10000))
    (d / "t10k-images-idx3-ubyte.gz").write_bytes(payload[: len(payload) // 2])
    (d / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(bytes(8 + 10000)))
    assert main(["entropy", "--data", f"mnist:{d}", "--levels", "5", "--out", str(tmp_path / "o.json"),
                 "--quiet"]) == 2
    _one_line_error(capsys, "t10k-images-idx3-ubyte.gz", "corrupt or truncated gzip file")
    assert not (tmp_path / "o.json").exists()


def test_optimize_does_not_create_a_missing_output_folder(tmp_path, capsys):
    out = tmp_path / "nonexistent" / "o.json"
    assert main(["optimize", "--data", "dirac:K=3,D=1,sep=2,seed=0", "--model", "posterior-weights",
                 "--levels", "9", "--out", str(out)]) == 2
    _one_line_error(capsys, "does not exist (it is not created for you)")
    assert not out.parent.exists()


@pytest.mark.parametrize("argv", [["entropy", "--levels", "9", "--out", "e.json", "--quiet"],
                                  ["schedule", "--out", "s.json"]])
def test_atoms_beyond_the_float_range_are_one_line(tmp_path, monkeypatch, capsys, argv):
    import numpy as np

    monkeypatch.chdir(tmp_path)
    np.savez("big.npz", atoms=np.array([[-1e200], [1e200]]))
    data = ["--data", "npz:big.npz"] if argv[0] == "entropy" else ["--from-data", "npz:big.npz"]
    assert main(argv[:1] + data + argv[1:]) == 2
    _one_line_error(capsys, "ATOM_ABS_MAX", "got 1e+200", "lam + 2 log c")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.npz"]


def test_pickled_npz_is_refused(tmp_path, monkeypatch, capsys):
    """The npz loaders never unpickle (kept from before issue 16)."""
    import numpy as np

    monkeypatch.chdir(tmp_path)
    np.savez("pk.npz", atoms=np.array([{"a": 1}, None], dtype=object))
    assert main(["entropy", "--data", "npz:pk.npz", "--levels", "5", "--out", "e.json", "--quiet"]) == 2
    _one_line_error(capsys, "allow_pickle=False")
    assert not (tmp_path / "e.json").exists()


@pytest.mark.slow  # starts a Dask LocalCluster of two worker processes (~10-20 s)
def test_ctrl_c_to_a_running_sweep_is_one_line(tmp_path):
    """SIGINT to the whole process group, as a terminal's Ctrl-C: the workers ignore it, the sweep ends
    with one line and status 130, finished cells are kept, no worker process is left."""
    import os
    import signal
    import time

    (tmp_path / "demo.toml").write_text('[sweep]\nname = "demo"\nkind = "demo"\n[grid]\n'
                                        'a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]\n[fixed]\nsleep = 4.0\n')
    code = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); os.setpgrp(); "
            "from noisealloc.cli import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.Popen([sys.executable, "-c", code, "sweep", "demo.toml", "--out", "out", "--workers", "2",
                             "--no-progress"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / "out" / "cells").is_dir() or not any((tmp_path / "out" / "cells").iterdir()):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 130, err
    assert lines == ["noisealloc sweep: interrupted"], err
    assert "Traceback" not in err and any((tmp_path / "out" / "cells").iterdir())


# ----------------------------------------------------------------------------- issue 28 item 1: devices and FIFOs
#: One cheap run of every command that writes a file, with the output option last but one.
WRITERS = {
    "schedules": ["schedules", "--points", "9"],
    "entropy": ["entropy", "--data", "dirac:K=3,D=1", "--levels", "9", "--samples", "16", "--quiet"],
    "optimize": ["optimize", "--data", "dirac:K=2,D=1,sep=2,seed=0", "--model", "posterior-weights", "--levels", "5"],
    "schedule": ["schedule", "--from-data", "dirac:K=2,D=1,sep=2,seed=0", "--levels", "5", "--samples", "16"],
}


def _char_node(path, major, minor):
    import os
    import stat

    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except PermissionError:
        pytest.skip("mknod of a character device needs CAP_MKNOD")
    return path


@pytest.mark.parametrize("command", sorted(WRITERS))
@pytest.mark.parametrize("option", ["--out", "--plot"])
def test_output_to_a_character_device_writes_it_and_keeps_it(tmp_path, capsys, command, option):
    import os
    import stat

    null = _char_node(tmp_path / "null", 1, 3)  # a copy of /dev/null
    argv = WRITERS[command] + [option, str(null)]
    if option == "--plot" and command in ("schedule", "entropy"):  # --out is required there
        argv += ["--out", str(tmp_path / "s.json")]
    assert main(argv) in (0, 1), capsys.readouterr().err
    assert stat.S_ISCHR(os.stat(null).st_mode)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_output_to_a_full_device_is_one_line_and_keeps_it(tmp_path, capsys):
    import os
    import stat

    full = _char_node(tmp_path / "full", 1, 7)  # a copy of /dev/full: every write fails with ENOSPC
    assert main(WRITERS["schedules"] + ["--out", str(full)]) == 2
    _one_line_error(capsys, "No space left on device", str(full))
    assert stat.S_ISCHR(os.stat(full).st_mode) and [p.name for p in tmp_path.iterdir()] == ["full"]


def test_output_to_a_fifo_is_written_into_the_pipe(tmp_path, capsys):
    import json
    import os
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    assert main(WRITERS["schedules"] + ["--out", str(fifo)]) == 0
    reader.join(30)
    assert json.loads(got[0])["format"] == "noisealloc.schedules"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and [p.name for p in tmp_path.iterdir()] == ["pipe"]


@pytest.mark.parametrize("command", sorted(WRITERS) + ["verify"])
def test_output_to_a_socket_is_refused_before_work(tmp_path, capsys, monkeypatch, command):
    import importlib
    import socket

    called = []
    monkeypatch.setattr(importlib.import_module(f"noisealloc.commands.{command}"), "run",
                        lambda args: called.append(args) or 0)
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        assert main(WRITERS.get(command, ["verify", "--quick"]) + ["--out", str(sock_path)]) == 2
    _one_line_error(capsys, "--out", "is a socket")
    assert called == []


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_compare_from_a_fifo_or_device_is_refused_up_front(tmp_path, capsys, kind):
    import os

    path = tmp_path / "in.json"
    if kind == "fifo":
        os.mkfifo(path)  # reading would block until a writer comes
    else:
        _char_node(path, 1, 5)  # a copy of /dev/zero: reading never ends
    argv = WRITERS["schedule"] + ["--compare", str(path), "--out", str(tmp_path / "o.json")]
    assert main(argv) == 2
    _one_line_error(capsys, "--compare", "not a regular file")
    assert not (tmp_path / "o.json").exists()


def test_output_names_the_file_system_refuses_are_refused_before_work(tmp_path, capsys, monkeypatch):
    import noisealloc.commands.schedules as cmd

    called = []
    monkeypatch.setattr(cmd, "run", lambda args: called.append(args) or 0)
    assert main(["schedules", "--out", str(tmp_path / ("n" * 300 + ".json"))]) == 2
    line = _one_line_error(capsys, "--out", "305 bytes", "255")
    assert ".noisealloc-" not in line
    assert main(["schedules", "--out", "/proc/x.json"]) == 2
    _one_line_error(capsys, "--out", "/proc")
    assert called == []
