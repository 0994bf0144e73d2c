"""Atomic writes leave nothing behind: not after an exception, not after a SIGKILL (the next write
cleans up), and finished files get the mode the umask gives any new file."""

from __future__ import annotations

import os
import signal
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
