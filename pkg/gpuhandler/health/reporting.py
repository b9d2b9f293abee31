"""What people see of health changes: Kubernetes events on the PhysicalGPU, and metrics.

* ``gpu_health_transitions_total{reason,state}``: verdict changes of the node's cards, by the
  new state (``Healthy``, ``Degraded``, ``Fatal``) and its reason (the event, the probe's fault,
  or the healthy probe's reason on recovery);
* ``gpu_health_events_total{reason,severity}``: every health event the backend delivered,
  recoverable ones included (they change no verdict but are worth a graph).

Events: ``Warning`` ``DeviceUnhealthy`` when a card turns degraded or fatal (or escalates),
``Normal`` ``DeviceRecovered`` when it is healthy again. Recoverable events are logged and
counted only: they are the application's own faults, and an event per faulting kernel would
drown the card's history.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends.health_events import HealthEvent
from pkg.domain.metrics import METRICS
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.gpuhandler.health.verdict import CardHealth

logger = logging.getLogger(__name__)

transitions = METRICS.counter(
    "health_transitions_total",
    "Health verdict changes of the node's cards, by the new state and its reason.",
    labelnames=["reason", "state"],
)
events_seen = METRICS.counter(
    "health_events_total",
    "Health events the vendor library delivered, by reason and severity.",
    labelnames=["reason", "severity"],
)


class HealthReporter:
    """A tracker subscriber: one event on the PhysicalGPU and one count per transition."""

    def __init__(self, *, recorder: EventRecorderLogger, gpus: Callable[[], Iterable[PhysicalGPU]]) -> None:
        self._recorder = recorder
        self._gpus = gpus

    def changed(self, address: str, old: CardHealth, new: CardHealth) -> None:
        transitions.labels(reason=new.reason, state=new.level.value).inc()
        gpu = self._gpu(address)
        if gpu is None:
            logger.warning(
                "health changed on a card without a PhysicalGPU",
                extra={"pci_address": address, "state": new.level.value, "reason": new.reason},
            )
            return
        if new.healthy:
            self._recorder.event(
                gpu,
                type_="Normal",
                reason="DeviceRecovered",
                message=f"{address} is healthy again after {old.reason} ({old.level.value}): {new.message}",
            )
        else:
            self._recorder.event(
                gpu,
                type_="Warning",
                reason="DeviceUnhealthy",
                message=f"{address} is {new.level.value} ({new.reason}): {new.message}",
            )

    def seen(self, event: HealthEvent) -> None:
        events_seen.labels(reason=event.reason, severity=event.severity.value).inc()

    def _gpu(self, address: str) -> PhysicalGPU | None:
        for gpu in self._gpus():
            info = gpu.status.pci_info if gpu.status else None
            if info is not None and info.address == address:
                return gpu
        return None
