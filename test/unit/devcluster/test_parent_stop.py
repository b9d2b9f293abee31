"""``make demo`` stops on a signal sent to make: the demo sees make begin to handle it, or go."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from pkg.devcluster.parentstop import caught_signals, mask_of, stop_requested, watch_parent

INT, TERM = signal.SIGINT, signal.SIGTERM
# make as /proc shows it while it runs a recipe: SIGINT, SIGTERM, SIGHUP, SIGCHLD and more caught.
MAKE_RUNNING = 0x0000000001814203 | (1 << (TERM - 1))


def _status(proc: Path, pid: int, caught: int) -> None:
    folder = proc / str(pid)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "status").write_text(f"Name:\tmake\nSigIgn:\t0000000000000000\nSigCgt:\t{caught:016x}\n")


def test_masks_put_signal_n_at_bit_n_minus_one() -> None:
    assert mask_of([INT]) == 0x2
    assert mask_of([INT, TERM]) == 0x2 | 0x4000


def test_caught_signals_reads_the_kernel_s_mask(tmp_path: Path) -> None:
    _status(tmp_path, 77, MAKE_RUNNING)
    assert caught_signals(77, tmp_path) == MAKE_RUNNING
    assert caught_signals(78, tmp_path) is None


def test_caught_signals_of_this_process_include_its_handlers() -> None:
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    try:
        caught = caught_signals(os.getpid())
        assert caught is not None
        assert caught & mask_of([signal.SIGUSR1])
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_stop_signal_no_longer_caught_is_a_stop() -> None:
    watched = mask_of([INT, TERM])
    assert not stop_requested(MAKE_RUNNING, MAKE_RUNNING, watched)
    assert stop_requested(MAKE_RUNNING, MAKE_RUNNING & ~mask_of([INT]), watched)
    assert stop_requested(MAKE_RUNNING, MAKE_RUNNING & ~mask_of([TERM]), watched)
    assert stop_requested(MAKE_RUNNING, None, watched), "a parent that cannot be read is gone"


def test_signals_the_parent_never_caught_or_that_are_not_watched_are_no_stop() -> None:
    watched = mask_of([INT, TERM])
    assert not stop_requested(0, 0, watched), "a parent that ignores SIGINT never stops us by it"
    assert not stop_requested(MAKE_RUNNING, MAKE_RUNNING & ~mask_of([signal.SIGCHLD]), watched)


def test_the_watcher_calls_back_once_when_the_parent_starts_handling_sigint(tmp_path: Path) -> None:
    parent = os.getppid()
    _status(tmp_path, parent, MAKE_RUNNING)
    stopped = threading.Event()
    calls: list[bool] = []

    def on_stop() -> None:
        calls.append(True)
        stopped.set()

    thread = watch_parent(on_stop, poll=0.05, proc=tmp_path)
    assert not stopped.wait(0.3), "called back while the parent still caught its stop signals"
    _status(tmp_path, parent, MAKE_RUNNING & ~mask_of([INT]))
    assert stopped.wait(5)
    thread.join(5)
    assert calls == [True]
