"""Health events of the simulated driver: injected by a test, delivered like NVML's event set.

A test (or the demo) calls :func:`inject_event` with an NVML event type and its data — an XID —
for a card. The event is appended to the node's event log (``<state-dir>/driver/events.jsonl``,
shared by every process of the node like the rest of the driver state), and an event of a
severity worse than recoverable also marks the card ``reset_pending``: its probe then reports a
pending row remap (page retirement before Ampere), as a real card does after an uncorrectable
memory error, until :func:`recover` clears it (the GPU reset). So a recovery in the simulation is
what it is on a real node: no more events, and the health probe passing again.

:class:`SimulatedEventSet` is the simulated NVML's ``nvmlEventSet_t``: it sees only events logged
after it was opened (NVML does not replay) for the cards and types registered, and its wait polls
the log.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Final

from pkg.backends.health_events import Severity
from pkg.backends.nvidia.events import health_event
from pkg.backends.nvidia.nvml_port import EVENT_XID_CRITICAL, NO_INSTANCE, NvmlEvent
from pkg.backends.simulated.driver_memory import CardRecord, SimulatedDriverMemory

POLL_SECONDS: Final = 0.05


def inject_event(
    state: SimulatedDriverMemory,
    address: str,
    *,
    xid: int | None = None,
    event_type: int = EVENT_XID_CRITICAL,
    data: int = 0,
    gpu_instance: int = NO_INSTANCE,
) -> None:
    """Delivers one NVML event for the card at ``address`` (``xid``: an XID critical error)."""
    event = NvmlEvent(
        address=address,
        event_type=EVENT_XID_CRITICAL if xid is not None else event_type,
        data=xid if xid is not None else data,
        gpu_instance=gpu_instance,
    )
    if health_event(event).severity is not Severity.RECOVERABLE:

        def fault(card: CardRecord) -> None:
            card.reset_pending = True

        state.change(address, fault)
    state.append_event(
        {
            "address": event.address,
            "type": event.event_type,
            "data": event.data,
            "gpuInstance": event.gpu_instance,
        }
    )


def recover(state: SimulatedDriverMemory, address: str) -> None:
    """The card was reset: its probe passes again (events stop by themselves)."""

    def reset(card: CardRecord) -> None:
        card.reset_pending = False

    state.change(address, reset)


class SimulatedEventSet:
    """Events of the registered cards and types, logged after the set was opened."""

    def __init__(self, state: SimulatedDriverMemory, addresses: Sequence[str], event_types: int) -> None:
        self._state = state
        self._addresses = frozenset(addresses)
        self._types = event_types
        self._offset = state.events_end()
        self._pending: deque[NvmlEvent] = deque()
        self._freed = threading.Event()

    def wait(self, timeout_ms: int) -> NvmlEvent | None:
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            records, self._offset = self._state.events_after(self._offset)
            self._pending.extend(
                NvmlEvent(
                    address=str(r["address"]),
                    event_type=int(r["type"]),
                    data=int(r["data"]),
                    gpu_instance=int(r.get("gpuInstance", NO_INSTANCE)),
                )
                for r in records
                if r.get("address") in self._addresses and int(r.get("type", 0)) & self._types
            )
            if self._pending:
                return self._pending.popleft()
            left = deadline - time.monotonic()
            if left <= 0 or self._freed.wait(min(POLL_SECONDS, left)):
                return None

    def free(self) -> None:
        self._freed.set()
