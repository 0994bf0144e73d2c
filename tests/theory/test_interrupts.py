"""Interrupts end every worker stage at once (issue 28 item 2): an interrupt between the pool's
start-up calls, a stage whose workers wait at a barrier, a long C call in the main thread."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from noisealloc.theory import _threads
from noisealloc.theory._threads import interruptible, run_stage_workers


def _barrier_work(barrier, halt, started):
    def work(w):
        started.append(w)
        while not halt.is_set():
            barrier.wait()  # every worker meets the others: one missing worker holds them all
        return w

    return work


def test_interrupt_between_the_workers_start_up_calls_stops_them(monkeypatch):
    """The window of the issue: SIGTERM after the first ``pool.submit`` and before the second left the
    first worker waiting at its barrier for ever (and the pool's lock taken)."""
    threads = 2
    pool, _lock = _threads._worker_pool(threads)
    real_submit = type(pool).submit
    calls = []

    def submit_then_interrupt(self, fn, *args):
        calls.append(args)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the signal lands between the two start-up calls
        return real_submit(self, fn, *args)

    monkeypatch.setattr(type(pool), "submit", submit_then_interrupt)
    halt, barrier, started = threading.Event(), threading.Barrier(threads), []
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_stage_workers(threads, _barrier_work(barrier, halt, started), halt, barrier)
    assert time.monotonic() - t0 < 2.0
    monkeypatch.undo()
    # the pool is idle again: the next stage, whose workers meet once at a barrier, runs to the end
    halt2, barrier2 = threading.Event(), threading.Barrier(threads, timeout=10)

    def meet_once(w):
        barrier2.wait()
        return w

    assert run_stage_workers(threads, meet_once, halt2, barrier2) == [0, 1]


def test_interrupt_while_waiting_stops_the_workers_within_a_second():
    threads = 2
    halt, barrier, started = threading.Event(), threading.Barrier(threads), []

    def slow(w):
        started.append(w)
        while not halt.is_set():
            time.sleep(0.01)
        return w

    def interrupt_soon():
        while len(started) < threads:
            time.sleep(0.005)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, _raise)
    try:
        threading.Thread(target=interrupt_soon, daemon=True).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            run_stage_workers(threads, slow, halt, barrier)
        assert time.monotonic() - t0 < 1.0 and halt.is_set()
    finally:
        signal.signal(signal.SIGUSR1, previous)


def _raise(signum, frame):
    raise KeyboardInterrupt


def test_interruptible_passes_results_and_errors():
    assert interruptible(divmod, 7, 2) == (3, 1)
    with pytest.raises(ZeroDivisionError):
        interruptible(divmod, 1, 0)
    box = []
    t = threading.Thread(target=lambda: box.append(interruptible(divmod, 9, 4)))
    t.start()
    t.join()
    assert box == [(2, 1)]


def _kill_thread_named_soon(prefix, delay=0.1):
    """SIGUSR1 to the first live thread whose name starts with ``prefix``, ``delay`` s after it
    appears: a signal sent to the process (``kill PID``) lands on any thread that does not block it."""
    def go():
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            target = next((t for t in threading.enumerate() if t.name.startswith(prefix)), None)
            if target is not None:
                time.sleep(delay)
                signal.pthread_kill(target.ident, signal.SIGUSR1)
                return
            time.sleep(0.005)

    threading.Thread(target=go, daemon=True).start()


@pytest.mark.parametrize("delivered_to", ["main thread", "helper thread"])
def test_interruptible_returns_at_once_on_an_interrupt(delivered_to):
    """A long call (time.sleep stands for a LAPACK SVD: both release the GIL) on the helper thread does
    not hold off the main thread's interrupt, wherever the signal lands.  Delivered to the helper (busy
    in its C call), it sets Python's flag but does not wake a main thread blocked on an event without a
    timeout: before the fix the interrupt waited for the call (1 in ~80 SIGTERMs to
    ``bench posterior --mnist`` ended seconds late or not at all)."""
    previous = signal.signal(signal.SIGUSR1, _raise)
    try:
        if delivered_to == "main thread":
            threading.Timer(0.1, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR1)).start()
        else:
            _kill_thread_named_soon("noisealloc-interruptible")
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            interruptible(time.sleep, 5.0)
        assert time.monotonic() - t0 < 1.0
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_worker_stage_sees_a_signal_delivered_to_a_worker_thread():
    threads = 2
    halt, started = threading.Event(), []

    def slow(w):
        started.append(w)
        while not halt.is_set():
            time.sleep(0.01)
        return w

    previous = signal.signal(signal.SIGUSR1, _raise)
    try:
        _kill_thread_named_soon("noisealloc-kernel")
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            run_stage_workers(threads, slow, halt)
        assert time.monotonic() - t0 < 1.0 and halt.is_set()
    finally:
        signal.signal(signal.SIGUSR1, previous)
