"""The thread that turns the backend's health events into verdicts, and re-probes cards to recover.

One loop, for the life of the process: open the backend's event source for the node's readable
cards (bound to the backend's driver, ``DriverReady``; reopened when that set changes), wait at
most ``poll`` seconds for events and record them in the :class:`~.tracker.HealthTracker`, then
probe every card whose quiet period is over
(:meth:`~.tracker.HealthTracker.recovering`). Recovery thus needs no enrichment pass and no
restart: it happens within ``quiet_period + poll`` of the last event once the card probes well.

A source that fails (the library is not loaded yet, the driver restarted) is closed and opened
again after a backoff (1 s doubling to 60 s); the probes go on meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends.backend import BackendError, VendorBackend
from pkg.backends.health_events import HealthEventSource
from pkg.gpuhandler.health.tracker import HealthTracker

logger = logging.getLogger(__name__)

BACKOFF_BASE = 1.0
BACKOFF_MAX = 60.0


def _address(gpu: PhysicalGPU) -> str | None:
    info = gpu.status.pci_info if gpu.status else None
    return info.address if info is not None else None


class HealthMonitor:
    """A :class:`~pkg.framework.manager.runnable.Runnable`; ``gpus`` lists the node's PhysicalGPUs.

    ``readable`` says whether the backend may read a card now (the enrichment's readiness). Only
    those cards have events: a card handed to vfio-pci, or whose driver is still loading, is
    invisible to the backend's library and would fail the whole event set."""

    name = "health-monitor"
    needs_leader_election = False

    def __init__(
        self,
        *,
        backend: VendorBackend,
        tracker: HealthTracker,
        gpus: Callable[[], Iterable[PhysicalGPU]],
        readable: Callable[[PhysicalGPU], bool],
        poll: float = 1.0,
    ) -> None:
        self._backend = backend
        self._tracker = tracker
        self._gpus = gpus
        self._readable = readable
        self._poll = poll
        self._source: HealthEventSource | None = None
        self._addresses: tuple[str, ...] = ()
        self._failures = 0
        self._retry_at = 0.0

    def run(self, stop: threading.Event) -> None:
        logger.info("watching device health events", extra={"quiet_period": self._tracker.quiet_period})
        try:
            while not stop.is_set():
                self.step(stop)
        finally:
            self._close()

    def step(self, stop: threading.Event) -> None:
        """One round: wait for events (at most ``poll``), then probe the cards ready to recover."""
        gpus = {a: g for g in self._gpus() if (a := _address(g)) is not None and self._readable(g)}
        source = self._open(tuple(sorted(gpus)), stop)
        if source is not None:
            try:
                for event in source.wait(self._poll):
                    self._tracker.record(event)
                self._failures = 0
            except BackendError as exc:
                self._failed(exc)
        else:
            stop.wait(self._poll)
        for address in self._tracker.recovering():
            gpu = gpus.get(address)
            if gpu is not None:
                self._tracker.probe(address, self._backend.health(gpu))

    def _open(self, addresses: tuple[str, ...], stop: threading.Event) -> HealthEventSource | None:
        if addresses != self._addresses:
            self._close()
            self._addresses = addresses
        if self._source is None and addresses:
            if self._failures and time.monotonic() < self._retry_at:
                return None
            self._source = self._backend.health_events(addresses)
        return self._source

    def _failed(self, exc: BackendError) -> None:
        self._close()
        self._failures += 1
        delay = min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (self._failures - 1))
        self._retry_at = time.monotonic() + delay
        logger.warning("health events unavailable, retrying in %.0f s: %s", delay, exc)

    def _close(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None
