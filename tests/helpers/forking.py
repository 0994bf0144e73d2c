"""Run a function in a child process made by ``fork`` (as process pools do), for the tests of fork safety."""

from __future__ import annotations


def run_in_forked_child(target, *args, timeout: float = 60.0):
    """``target(queue, *args)`` in a forked child; returns what it put on ``queue``.

    Fails the test when the child hangs (killed after ``timeout`` seconds) or exits with an error
    (numba's OpenMP layer, for one, terminates a child forked after the parent used it).
    """
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=target, args=(queue, *args))
    child.start()
    child.join(timeout)
    if child.exitcode is None:
        child.kill()
        child.join()
    assert child.exitcode == 0, "the forked child hung or failed"
    return queue.get(timeout=5)
