"""The periodic safety resync: a sync every ``period`` ± ``jitter``, whatever else happens.

Events can be missed (a uevent lost to a full netlink buffer, a watch gap), and someone may edit
the agent's fields by hand; a slow resync bounds how long any of that stays wrong. The jitter keeps
the agents of a large cluster, started together by a DaemonSet rollout, from resyncing in lockstep.
A resync of an unchanged node costs a sysfs scan and no API request.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)


class PeriodicTrigger:
    """A Runnable that calls ``enqueue`` every jittered period until stopped."""

    needs_leader_election = False

    def __init__(
        self,
        *,
        enqueue: Callable[[], None],
        period: float,
        jitter: float = 0.2,
        rand: Callable[[float, float], float] = random.uniform,
    ) -> None:
        if period <= 0 or not 0 <= jitter < 1:
            raise ValueError(f"need period > 0 and 0 <= jitter < 1, got period={period} jitter={jitter}")
        self.name = "periodic-resync"
        self._enqueue = enqueue
        self._period = period
        self._jitter = jitter
        self._rand = rand

    def next_delay(self) -> float:
        return self._period * self._rand(1 - self._jitter, 1 + self._jitter)

    def run(self, stop: threading.Event) -> None:
        logger.info("periodic resync", extra={"period_seconds": self._period, "jitter": self._jitter})
        while not stop.wait(self.next_delay()):
            logger.debug("periodic resync due")
            self._enqueue()
