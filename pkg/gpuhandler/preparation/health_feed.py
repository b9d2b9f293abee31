"""The kubelet's health stream fed from what is prepared: each prepared device with its card's health.

The stream carries the complete list of the driver's devices (KEP-4680): here every device of a
``PrepareCompleted`` claim, with the health of its card. The source is the node's health verdict
(:class:`~pkg.gpuhandler.health.HealthTracker`: degraded or fatal → Unhealthy with the event as
message, healthy → Healthy), the same verdict the device taints and ``HardwareHealthy`` show; a
card the tracker has no verdict for yet falls back to the PhysicalGPU's ``HardwareHealthy``
condition (True → Healthy, False → Unhealthy, otherwise Unknown). The list is rebuilt after every
Prepare/Unprepare, at once on every verdict change, and on a short period, so a card turning
unhealthy reaches running Pods' status (``allocatedResourcesStatus``) within seconds and without a
new prepare.

A rebuild reads the checkpoint and every PhysicalGPU, which neither the kubelet's Prepare nor a
verdict change need wait for: they mark the list stale (:attr:`HealthFeed.stale`, an event) and the
feed's own loop (:meth:`HealthFeed.run`, on a thread of the plugin's) rebuilds it at once, or after
the period when nothing asked; a burst of calls costs a rebuild or two, not one each.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.framework.kubeletplugin.types import DeviceHealth, HealthBoard, HealthStatus
from pkg.gpuhandler.health import CardHealth
from pkg.gpuhandler.preparation.checkpoint import CheckpointError, CheckpointStore, PreparePhase

logger = logging.getLogger(__name__)

HARDWARE_HEALTHY = "HardwareHealthy"
_STATUS = {"True": HealthStatus.HEALTHY, "False": HealthStatus.UNHEALTHY}


class HealthFeed:
    def __init__(
        self,
        *,
        board: HealthBoard,
        store: CheckpointStore,
        gpus: Callable[[], Iterable[PhysicalGPU]],
        verdicts: Callable[[], Mapping[str, CardHealth]] = dict,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._board = board
        self._store = store
        self._gpus = gpus
        self._verdicts = verdicts
        self._clock = clock
        # Refreshes come from the plugin's period, Prepare/Unprepare and the health monitor; one at
        # a time, so an older list can never be published after a newer one.
        self._lock = threading.Lock()
        # Set to ask :meth:`run` for a rebuild (after a Prepare or Unprepare, on a verdict change).
        self.stale = threading.Event()

    def refresh(self) -> None:
        with self._lock:
            self._refresh()

    def run(self, stop: threading.Event, *, period: float) -> None:
        """Rebuilds the list whenever it is marked stale, and every ``period`` seconds, until
        ``stop``; a failed rebuild is logged and the next one tries again."""
        while not stop.is_set():
            self.stale.wait(period)
            self.stale.clear()
            if stop.is_set():
                return
            try:
                self.refresh()
            except Exception:
                logger.exception("rebuilding the device health list failed")

    def _refresh(self) -> None:
        try:
            checkpoint = self._store.load()
        except CheckpointError as exc:
            logger.error("cannot report device health: %s", exc)
            return
        health = self._card_health()
        now = int(self._clock())
        devices = []
        for claim in checkpoint.claims.values():
            if claim.state is not PreparePhase.PREPARE_COMPLETED:
                continue
            for device in claim.devices:
                if device.pci_address is None:  # on no card (an IMEX channel): nothing to be ill
                    status, message = HealthStatus.HEALTHY, "not on a card"
                else:
                    status, message = health.get(
                        device.card, (HealthStatus.UNKNOWN, "no HardwareHealthy reported")
                    )
                devices.append(
                    DeviceHealth(
                        pool=device.pool,
                        device=device.device,
                        status=status,
                        last_updated=now,
                        message=message,
                    )
                )
        self._board.publish(sorted(devices, key=lambda d: (d.pool, d.device)))

    def _card_health(self) -> dict[str, tuple[HealthStatus, str]]:
        found = {}
        for gpu in self._gpus():
            status = gpu.status
            if status is None or status.pci_info is None:
                continue
            condition = next((c for c in status.conditions or [] if c.type == HARDWARE_HEALTHY), None)
            if condition is not None:
                verdict = _STATUS.get(condition.status, HealthStatus.UNKNOWN)
                found[status.pci_info.address] = (
                    verdict,
                    f"{condition.reason}: {condition.message or ''}".strip(),
                )
        for address, health in self._verdicts().items():  # the verdict itself, ahead of the condition
            status_of = HealthStatus.HEALTHY if health.healthy else HealthStatus.UNHEALTHY
            found[address] = (status_of, f"{health.reason}: {health.message}".strip())
        return found
