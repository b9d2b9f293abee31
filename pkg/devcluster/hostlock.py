"""The machine's real-node lock: one set of real nodes (an e2e session, a demo, a benchmark) at a time.

The footprint check (:mod:`pkg.devcluster.footprint`) compares host-wide folders before and after,
so a second set of nodes starting meanwhile would be reported as the first one's leftovers; a run
waits here instead. The lock is an ``flock``, released by the kernel if the holder is killed.

A wait of minutes with no word looks like a hang, so the holder writes who it is into the lock
file (command, PID, when it took the lock) and a waiting run is told that, with the time it has
waited, at once and again every ``report_every`` seconds. The record is only advice: the flock
decides, and a record left by a holder that was killed is overwritten by the next one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

HOST_LOCK = Path("/run/lock/gpu-control-plane-nodes.lock")
REPORT_EVERY = 30.0
_POLL = 0.5


@dataclass(frozen=True)
class LockHolder:
    """Who holds the lock, as the holder wrote it."""

    pid: int
    command: str
    since: float  # seconds since the epoch

    def describe(self) -> str:
        started = time.strftime("%H:%M:%S UTC", time.gmtime(self.since))
        return f"{self.command} (PID {self.pid}, since {started})"


def elapsed(seconds: float) -> str:
    """``45s``, ``3m05s``: how long a run has waited, readable at a glance."""
    whole = int(seconds)
    return f"{whole}s" if whole < 60 else f"{whole // 60}m{whole % 60:02d}s"


def read_holder(lock_file: Path) -> LockHolder | None:
    """The holder's record, or ``None`` when there is none (not yet written, or unreadable)."""
    try:
        record = json.loads(lock_file.read_text())
        return LockHolder(
            pid=int(record["pid"]), command=str(record["command"]), since=float(record["since"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def waiting_message(holder: LockHolder | None, waited: float) -> str:
    """What a waiting run prints: the holder, how long it has waited, and how to stop waiting."""
    who = holder.describe() if holder else "a run that has not said who it is"
    return (
        f"waiting for another run's real nodes (e2e, demo) to stop: held by {who}; waited {elapsed(waited)} "
        "(Ctrl-C stops waiting)"
    )


def _write_record(handle: IO[str]) -> None:
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv and sys.argv[0] else "python"
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "command": command, "since": time.time()}))
    handle.flush()


def _clear_record(handle: IO[str]) -> None:
    with contextlib.suppress(OSError):
        handle.seek(0)
        handle.truncate()
        handle.flush()


@contextlib.contextmanager
def exclusive_host(
    lock_file: Path = HOST_LOCK,
    on_wait: Callable[[str], None] = lambda _message: None,
    *,
    report_every: float = REPORT_EVERY,
) -> Iterator[None]:
    """Holds the real-node lock for the ``with`` block; while another run holds it, calls ``on_wait``
    with :func:`waiting_message` at once and every ``report_every`` seconds."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a+") as handle:
        started = time.monotonic()
        next_report = started
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                now = time.monotonic()
                if now >= next_report:
                    on_wait(waiting_message(read_holder(lock_file), now - started))
                    next_report = now + report_every
                time.sleep(_POLL)
        _write_record(handle)
        try:
            yield
        finally:
            _clear_record(handle)
            fcntl.flock(handle, fcntl.LOCK_UN)
