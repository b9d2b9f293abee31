"""Step 2: right after start-up, wait (at most ``grace`` seconds) for the enrichment to describe
every card the cache says is readable, so a restart does not withdraw the node's offers only to
publish them again a moment later. Once something was published, it never waits again."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from api.gpu.v1alpha1 import DriverType
from pkg.framework.reconcile import Result, StopHandlerChain
from pkg.gpuhandler.publishing.selection import ready_but_undescribed
from pkg.gpuhandler.publishing.state import PublishState

logger = logging.getLogger("pkg.gpuhandler.publishing.reconciler")


class StartupGraceHandler:
    name = "startup-grace"

    def __init__(
        self, *, grace: float, pci_vendor_id: str, driver_type: DriverType, clock: Callable[[], float]
    ) -> None:
        self._grace = grace
        self._vendor = pci_vendor_id
        self._driver = driver_type
        self._clock = clock

    def handle(self, state: PublishState) -> Result | None:
        wait = self._wait(state)
        if wait > 0:
            raise StopHandlerChain(Result(requeue_after=timedelta(seconds=wait)), reason="start-up grace")
        return None

    def _wait(self, state: PublishState) -> float:
        """Seconds left to wait for the enrichment's first description of every readable card."""
        memory = state.memory
        if memory.published:
            return 0.0
        now = self._clock()
        if memory.first_pass is None:
            memory.first_pass = now
        remaining = memory.first_pass + self._grace - now
        if remaining <= 0:
            return 0.0
        pending = ready_but_undescribed(
            entries=state.entries, gpus=state.gpus, pci_vendor_id=self._vendor, driver_type=self._driver
        )
        if not pending:
            return 0.0
        logger.info(
            "waiting for the enrichment to describe the node's cards before the first publish",
            extra={"node": state.node_name, "pending": pending, "seconds_left": round(remaining, 1)},
        )
        return remaining
