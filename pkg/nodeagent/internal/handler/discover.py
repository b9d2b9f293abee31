"""Step 1, discover: which GPUs the node has now, and what the host is (:mod:`pkg.inventory.discovery`).

The discovery itself is shared with gpu-handler's offline view; this step puts its answer into the
sync state, records each card it could not describe as a failure of this step (the sync goes on and
is retried), and sets ``gpu_node_agent_devices``. A scan that cannot read the devices directory
raises and stops the chain, so an unreadable sysfs never reads as "every card removed".
"""

from __future__ import annotations

import logging

from pkg.backends import VendorRegistry
from pkg.inventory.desired import PciNames
from pkg.inventory.discovery import Discoverer
from pkg.inventory.host_info import HostInfoReader
from pkg.inventory.pci_scanner import PciScanner
from pkg.nodeagent import metrics
from pkg.nodeagent.internal.state import SyncState

logger = logging.getLogger(__name__)


class DiscoverHandler:
    name = "discover"

    def __init__(
        self, *, scanner: PciScanner, host_info: HostInfoReader, vendors: VendorRegistry, names: PciNames
    ) -> None:
        self._discoverer = Discoverer(scanner=scanner, host_info=host_info, vendors=vendors, names=names)

    def handle(self, state: SyncState) -> None:
        found = self._discoverer.discover()
        state.host = found.host
        state.known_vendors = found.known_vendors
        state.unreadable.update(found.unreadable)
        state.gpus.extend(found.gpus)
        for problem in found.problems:
            state.fail(self.name, problem.subject, problem.error)
        metrics.devices.labels(node=state.node_name).set(len(state.gpus))
        logger.debug(
            "discovered GPUs",
            extra={"node": state.node_name, "gpus": [gpu.address for gpu in state.gpus]},
        )
