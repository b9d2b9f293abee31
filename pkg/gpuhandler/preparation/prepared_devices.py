"""``gpu_dra_prepared_device_info``: what the kubelet plugin made for each prepared device.

The controller's ``gpu_dra_allocation_info`` names who holds a device and the card's UUID, but a
MIG instance's UUID and GPU instance ID exist only once this node has created it, and are
recorded only in the node's checkpoint. This collector reads the checkpoint at scrape time and
exports one series per prepared MIG device with ``{namespace, claim, dra_device, node, mig_uuid,
GPU_I_ID}`` (``GPU_I_ID`` spelled like the DCGM exporter's label), so a recording rule joins it to
the controller's info series on ``(namespace, claim, dra_device)`` and then to DCGM's MIG series on
``(UUID, GPU_I_ID)``. Nothing is written to the API: the checkpoint is the record. Series go when
the claim is unprepared; an unreadable checkpoint exports nothing and logs why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pkg.domain.metrics import NAMESPACE
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, PreparePhase
from pkg.gpuhandler.preparation.kinds.mig import mig_record

logger = logging.getLogger(__name__)

LABELS = ("namespace", "claim", "dra_device", "node", "mig_uuid", "GPU_I_ID")


class PreparedDevicesCollector(Collector):
    def __init__(self, *, load: Callable[[], CheckpointData], node: str) -> None:
        self._load = load
        self._node = node

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            f"{NAMESPACE}_dra_prepared_device_info",
            "1 for every MIG device prepared on this node: its MIG UUID and GPU instance ID.",
            labels=list(LABELS),
        )
        try:
            data = self._load()
        except Exception as exc:  # a scrape must answer; the checkpoint's owner reports the damage
            logger.warning("prepared devices not exported: %s", exc)
            data = None
        for record in data.claims.values() if data is not None else ():
            if record.state is not PreparePhase.PREPARE_COMPLETED:
                continue
            for device in record.devices:
                mig = mig_record(device)
                if mig is None or mig.uuid is None:
                    continue
                gpu_instance = "" if mig.gpu_instance is None else str(mig.gpu_instance)
                family.add_metric(
                    [record.namespace, record.name, device.device, self._node, mig.uuid, gpu_instance], 1.0
                )
        yield family

    def describe(self) -> Iterator[Metric]:
        return iter(())


__all__ = ["LABELS", "PreparedDevicesCollector"]
