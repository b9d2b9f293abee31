"""Kernel uevents of the PCI subsystem (hot add, hot remove, driver bind/unbind) → a debounced sync.

The agent listens on the kernel's netlink uevent socket directly (pyudev, ``source="kernel"``):
the container runs no udevd, so the udev-processed stream is empty there. Kernel uevents are only
delivered in the host's network namespace, so the DaemonSet runs with ``hostNetwork: true``.

One hot-plug is many events (one per PCI function, then a bind per driver) spread over hundreds of
milliseconds, so the source waits for ``quiet`` seconds without events before it enqueues one
event, and at most ``max_delay`` after the first event of a burst, so an endless storm still syncs.
The events' contents are only logged: the sync reads sysfs itself (level-based). It is a
:class:`~pkg.framework.controller.source.Source` that lives here rather than in the framework
because it needs pyudev (libudev), which only the node agent loads.

Failures never stop the agent. If the monitor cannot be opened it logs an error and the periodic
resync remains; a failing ``poll`` (ENOBUFS means events were dropped) is treated as an event,
since something happened, and retried with exponential backoff.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from pkg.framework.controller.source import Emit

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5  # how often an idle source checks for stop
MAX_BACKOFF_SECONDS = 30.0


class Monitor(Protocol):
    def poll(self, timeout: float | None = None) -> Any: ...


def netlink_monitor() -> Monitor:
    """A started pyudev monitor of kernel uevents of subsystem ``pci``."""
    import pyudev  # noqa: PLC0415 - loads libudev; only the agent with --udev=true needs it

    monitor = pyudev.Monitor.from_netlink(pyudev.Context(), source="kernel")
    monitor.filter_by("pci")
    monitor.start()
    return monitor  # type: ignore[no-any-return]


class Debouncer:
    """Decides when a burst of events has ended: ``quiet`` s of silence, or ``max_delay`` s in."""

    def __init__(self, *, quiet: float, max_delay: float, clock: Callable[[], float] = time.monotonic):
        self._quiet = quiet
        self._max_delay = max(max_delay, quiet)
        self._clock = clock
        self._first: float | None = None
        self._last = 0.0

    def event(self) -> None:
        now = self._clock()
        self._first = now if self._first is None else self._first
        self._last = now

    def timeout(self, idle: float) -> float:
        """How long to wait for the next event: until the burst is due, or ``idle`` without one."""
        if self._first is None:
            return idle
        due = min(self._last + self._quiet, self._first + self._max_delay)
        return max(0.0, due - self._clock())

    def fire(self) -> bool:
        """True once per burst, when it is due; then the debouncer is idle again."""
        if self._first is None or self.timeout(0.0) > 0:
            return False
        self._first = None
        return True


class UdevSource:
    """A :class:`~pkg.framework.controller.source.Source`: one event after each burst of PCI uevents."""

    def __init__(
        self,
        *,
        monitor_factory: Callable[[], Monitor] = netlink_monitor,
        quiet: float = 1.0,
        max_delay: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = "udev"
        self._monitor_factory = monitor_factory
        self._debouncer = Debouncer(quiet=quiet, max_delay=max_delay, clock=clock)

    def start(self, emit: Emit, stop: threading.Event) -> None:
        try:
            monitor = self._monitor_factory()
        except Exception as exc:  # libudev missing, netlink refused: degrade, never crash
            logger.error("cannot listen to kernel uevents; relying on the periodic resync: %s", exc)
            stop.wait()
            return
        logger.info("listening to kernel PCI uevents")
        backoff = 0.0
        while not stop.is_set():
            try:
                device = monitor.poll(timeout=self._debouncer.timeout(POLL_SECONDS))
            except Exception as exc:
                backoff = min(MAX_BACKOFF_SECONDS, max(0.1, backoff * 2))
                logger.warning(
                    "reading uevents failed; syncing to be safe, retrying in %.1fs: %s", backoff, exc
                )
                self._debouncer.event()
                stop.wait(backoff)
            else:
                backoff = 0.0
                if device is not None:
                    action = getattr(device, "action", None)
                    logger.debug(
                        "pci uevent", extra={"action": action, "sys_path": getattr(device, "sys_path", None)}
                    )
                    self._debouncer.event()
            if self._debouncer.fire():
                logger.info("PCI uevents settled: syncing")
                emit(None)
