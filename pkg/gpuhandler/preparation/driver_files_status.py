"""Whether the driver's user space can be given to containers, shown on each PhysicalGPU.

:class:`~.cdi.DriverSpec` reports what its last look at the driver root found (a
:class:`DriverFilesFinding`). The finding is the ``DriverFilesReady`` condition of each of the node's
PhysicalGPUs, written by server-side apply under a field manager of its own
(``gpu-handler-driver-files``), so it owns that one entry and neither the enrichment's apply nor
the validator's touch it; and a Warning event on each card when the finding turns bad.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile.conditions import find_condition, normalize_time, now_utc

logger = logging.getLogger(__name__)

CONDITION: Final = "DriverFilesReady"
FIELD_MANAGER: Final = "gpu-handler-driver-files"
REASON_FOUND: Final = "DriverFilesFound"


@dataclass(frozen=True)
class DriverFilesFinding:
    """What the last look at the driver root found: a condition's status, reason and message."""

    ready: bool
    reason: str
    message: str


class DriverFilesStatus(Protocol):
    def report(self, finding: DriverFilesFinding) -> None:
        """Makes ``finding`` the node's; reported to the PhysicalGPUs on :meth:`sync`."""
        ...

    def sync(self) -> None:
        """Writes the finding to each PhysicalGPU of the node whose condition differs."""
        ...


class KubeDriverFilesStatus:
    """:class:`DriverFilesStatus` on this node's PhysicalGPUs (``gpus``: the informer's store)."""

    def __init__(
        self, *, client: KubeClient, gpus: Callable[[], list[PhysicalGPU]], recorder: EventRecorderLogger
    ) -> None:
        self._client = KubeClient(client.api_client, field_manager=FIELD_MANAGER)
        self._gpus = gpus
        self._recorder = recorder
        self._finding: DriverFilesFinding | None = None
        self._warned: set[tuple[str, str]] = set()  # (card, reason) already told by an event
        self._lock = threading.Lock()

    def report(self, finding: DriverFilesFinding) -> None:
        with self._lock:
            changed, self._finding = finding != self._finding, finding
        if changed:
            self.sync()

    def sync(self) -> None:
        with self._lock:
            finding = self._finding
        if finding is None:
            return
        status = "True" if finding.ready else "False"
        for gpu in self._gpus():
            name = str(gpu.metadata.name)
            current = find_condition(gpu.status.conditions if gpu.status else None, CONDITION)
            if current is not None and (current.status, current.reason, current.message) == (
                status,
                finding.reason,
                finding.message,
            ):
                continue
            since = current.last_transition_time if current is not None and current.status == status else None
            condition = {
                "type": CONDITION,
                "status": status,
                "reason": finding.reason,
                "message": finding.message[:1000],
                "lastTransitionTime": normalize_time(since or now_utc()).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            body = {"metadata": {"name": name}, "status": {"conditions": [condition]}}
            try:
                self._client.apply(PHYSICAL_GPU, body, subresource="status", force=True)
            except Exception as exc:  # the next round writes it again
                logger.warning("could not report %s on %s: %s", CONDITION, name, exc)
                continue
            if not finding.ready and (name, finding.reason) not in self._warned:
                self._warned.add((name, finding.reason))
                self._recorder.event(
                    gpu,
                    type_="Warning",
                    reason=finding.reason,
                    message=finding.message[:1000],
                    kind=PHYSICAL_GPU,
                )
            elif finding.ready:
                self._warned = {warned for warned in self._warned if warned[0] != name}
