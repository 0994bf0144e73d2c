"""Atomic writes leave nothing behind: not after an exception, not after a SIGKILL (the next write
cleans up), and finished files get the mode the umask gives any new file."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys

import pytest

from noisealloc.theory.output import atomic_write


def test_exception_removes_the_temporary(tmp_path):
    def boom(fh):
        fh.write(b"half")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "x.json", boom)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_mode_follows_the_umask(tmp_path, mask):
    old = os.umask(mask)
    try:
        out = atomic_write(tmp_path / "x.json", lambda fh: fh.write(b"{}"))
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask


def test_sigkill_leftover_is_cleaned_by_the_next_write(tmp_path):
    """A writer killed mid-write leaves its temporary; the next write of the same file removes it,
    and a temporary of a live process or of another file is left alone."""
    target = tmp_path / "big.json"
    code = (
        "import sys, time\n"
        "from noisealloc.theory.schedules.io import atomic_write\n"
        "def slow(fh):\n"
        "    fh.write(b'x' * 1000); fh.flush(); print('writing', flush=True); time.sleep(60)\n"
        "atomic_write(sys.argv[1], slow)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:  # pragma: no cover
            proc.kill()
    stale = [p.name for p in tmp_path.iterdir()]
    assert len(stale) == 1 and stale[0].startswith(".big.json.noisealloc-") and not target.exists()
    # a live writer's temporary (this process's parent's PID is alive) and another file's are kept
    live = tmp_path / f".big.json.noisealloc-{os.getppid()}-abc.tmp"
    live.write_bytes(b"")
    other = tmp_path / ".other.json.noisealloc-999999999-abc.tmp"
    other.write_bytes(b"")
    atomic_write(target, lambda fh: fh.write(b"done"))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["big.json", live.name, other.name]), names
    assert target.read_bytes() == b"done"


# ----------------------------------------------------------------------------- never replace what is not ours
def _mknod_char(path, major, minor):
    """A character device node at ``path`` (a copy of /dev/null or /dev/full); skips without the right."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except PermissionError:
        pytest.skip("mknod of a character device needs CAP_MKNOD")
    return path


def test_character_device_is_written_straight_not_replaced(tmp_path):
    null = _mknod_char(tmp_path / "null", 1, 3)
    atomic_write(null, lambda fh: fh.write(b"{}"))
    assert stat.S_ISCHR(os.stat(null).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_full_device_reports_the_error_and_stays_a_device(tmp_path):
    full = _mknod_char(tmp_path / "full", 1, 7)
    with pytest.raises(OSError) as info:
        atomic_write(full, lambda fh: fh.write(b"x" * 100000))
    assert info.value.filename == str(full)
    assert stat.S_ISCHR(os.stat(full).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]


def test_fifo_is_written_straight_not_replaced(tmp_path):
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    atomic_write(fifo, lambda fh: fh.write(b"hello"))
    reader.join(10)
    assert got == [b"hello"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_symlink_to_a_device_writes_the_device(tmp_path):
    null = _mknod_char(tmp_path / "null", 1, 3)
    link = tmp_path / "link"
    link.symlink_to(null)
    atomic_write(link, lambda fh: fh.write(b"{}"))
    assert link.is_symlink() and stat.S_ISCHR(os.stat(null).st_mode)


def test_socket_and_folder_are_refused(tmp_path):
    import socket

    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(ValueError, match="is a socket"):
            atomic_write(sock_path, lambda fh: fh.write(b"x"))
    assert stat.S_ISSOCK(os.stat(sock_path).st_mode)
    with pytest.raises(ValueError, match="is a folder"):
        atomic_write(tmp_path, lambda fh: fh.write(b"x"))


def test_long_name_gets_a_short_temporary(tmp_path):
    """A 250-byte name is a valid file name; its temporary must be one too (it was 290 bytes)."""
    name = "n" * 250
    out = atomic_write(tmp_path / name, lambda fh: fh.write(b"ok"))
    assert out.read_bytes() == b"ok" and [p.name for p in tmp_path.iterdir()] == [name]
