"""A signal sent to ``make demo``'s ``make`` stops the demo, as a signal sent to the demo does.

GNU make forwards SIGTERM to the recipe it runs, but not SIGINT: it expects Ctrl-C in a terminal,
which reaches the whole foreground process group, and ``kill -INT <make's PID>`` reaches make alone,
which then waits for its children for ever. What make does on a fatal signal can be seen from its
child, though: it resets that signal's handler to the default before waiting (GNU make's
``fatal_error_signal``), so the signal leaves the set the kernel shows as caught in
``/proc/<make's PID>/status`` (``SigCgt``). :func:`watch_parent` polls that set and calls back
when a stop signal the parent caught at the start is no longer caught, or when the parent is gone.
The recipe ``exec``s the demo so that make, not a shell, is its parent.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def mask_of(signals: Iterable[signal.Signals]) -> int:
    """The kernel's bit mask for ``signals`` (bit ``n - 1`` for signal ``n``)."""
    mask = 0
    for sig in signals:
        mask |= 1 << (int(sig) - 1)
    return mask


def caught_signals(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The mask of signals process ``pid`` has a handler for, or ``None`` if it cannot be read."""
    try:
        for line in (proc / str(pid) / "status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return int(line.split(":", 1)[1].strip(), 16)
    except (OSError, ValueError):
        return None
    return None


def stop_requested(caught_at_start: int, caught_now: int | None, watched: int) -> bool:
    """Whether the parent has begun handling a stop signal: one it caught at the start (of those
    ``watched``) is caught no more. An unreadable parent (``None``) is a stopped one."""
    if caught_now is None:
        return True
    return bool(caught_at_start & watched & ~caught_now)


def watch_parent(
    on_stop: Callable[[], None],
    *,
    signals: Iterable[signal.Signals] = STOP_SIGNALS,
    poll: float = 0.5,
    proc: Path = Path("/proc"),
) -> threading.Thread:
    """Starts a daemon thread that calls ``on_stop`` once when the parent process stops catching a
    stop signal it caught now, or exits (this process is handed to another parent)."""
    parent = os.getppid()
    watched = mask_of(signals)
    at_start = caught_signals(parent, proc) or 0

    def watch() -> None:
        while True:
            time.sleep(poll)
            if os.getppid() != parent or stop_requested(at_start, caught_signals(parent, proc), watched):
                on_stop()
                return

    thread = threading.Thread(target=watch, name="parent-stop", daemon=True)
    thread.start()
    return thread
