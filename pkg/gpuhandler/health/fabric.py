"""The node's fabric faults: a card of a multi-node NVLink fabric that is not Ready, per card.

A card whose fabric is still joining, failed to join, or reports a fault in its health mask
still runs local work, but a job spread over nodes that counts on its NVLink peers would hang or
crawl on it. So its offers carry a ``NoSchedule`` device taint (:mod:`.taints`) while that lasts
— never withdrawn silently, never evicting what runs — and the taint goes when the fabric
recovers. This is kept apart from the health verdict: a fabric fault is not a hardware fault of
the card (``HardwareHealthy`` stays as the probe says), and the two are tolerated separately.

Which fault:

* ``Joining`` or ``Failed`` — key ``gpu.deckhouse.io/fabric-not-ready``;
* ``Degraded`` — key ``gpu.deckhouse.io/fabric-degraded``;
* ``Ready``, or no fabric — none.

The value is the fabric's reasons joined with ``.`` (``RegistrationNotStarted``,
``DegradedBandwidth.RouteUnhealthy``). ``since`` stays while the key and value do, because it is
the taint's ``timeAdded``: a moving one would rewrite the slices on every publish. The
enrichment observes each readable card on every pass; subscribers (the publisher) hear of every
change. Thread-safe.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from api.gpu.v1alpha1 import FabricState
from pkg.domain.names import DRIVER

logger = logging.getLogger(__name__)

FABRIC_NOT_READY_KEY: Final = f"{DRIVER}/fabric-not-ready"
FABRIC_DEGRADED_KEY: Final = f"{DRIVER}/fabric-degraded"
_KEYS: Final = {
    FabricState.JOINING: FABRIC_NOT_READY_KEY,
    FabricState.FAILED: FABRIC_NOT_READY_KEY,
    FabricState.DEGRADED: FABRIC_DEGRADED_KEY,
}
MAX_VALUE: Final = 63  # a label value


@dataclass(frozen=True, kw_only=True)
class FabricFault:
    key: str
    value: str
    since: datetime


def fabric_fault_of(
    state: FabricState | None, reasons: Sequence[str], *, since: datetime
) -> FabricFault | None:
    """The fault of a card in ``state`` (``None``: no fabric), or ``None`` when there is none."""
    key = _KEYS.get(state) if state is not None else None
    if key is None:
        return None
    value = ".".join(reasons)[:MAX_VALUE].rstrip(".") or str(state)
    return FabricFault(key=key, value=value, since=since)


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)  # the API keeps seconds


class FabricFaults:
    def __init__(self, *, now: Callable[[], datetime] = _now) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._faults: dict[str, FabricFault] = {}
        self._subscribers: list[Callable[[str], None]] = []

    def subscribe(self, subscriber: Callable[[str], None]) -> None:
        """Called with the card's PCI address on every change of its fault."""
        self._subscribers.append(subscriber)

    def observe(self, address: str, state: FabricState | None, reasons: Sequence[str] = ()) -> None:
        """The card's fabric as this pass read it."""
        with self._lock:
            old = self._faults.get(address)
            new = fabric_fault_of(state, reasons, since=self._now())
            if new is not None and old is not None and (new.key, new.value) == (old.key, old.value):
                return
            if new is None and old is None:
                return
            if new is None:
                del self._faults[address]
            else:
                self._faults[address] = new
        logger.info(
            "fabric fault changed",
            extra={
                "pci_address": address,
                "fault": f"{new.key}={new.value}" if new else None,
                "previous": f"{old.key}={old.value}" if old else None,
            },
        )
        for subscriber in self._subscribers:
            try:
                subscriber(address)
            except Exception:  # one broken subscriber must not stop the others
                logger.exception("fabric subscriber failed", extra={"pci_address": address})

    def fault(self, address: str) -> FabricFault | None:
        with self._lock:
            return self._faults.get(address)
