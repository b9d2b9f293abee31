"""Step 3, cleanup: delete this node's PhysicalGPUs whose card is gone.

Deleted: objects of addresses the scan did not find, a second object for one address (the older
one is kept, see :func:`~pkg.inventory.naming.index_objects`), and objects with no
address at all (only this agent writes the node label and it always writes the address with it).
Kept: objects of addresses present in sysfs but unreadable this time, objects already being
deleted, and objects of a vendor no loaded backend knows: if a backend failed to load, its cards
are invisible to the scan, and reading that as "every card removed" would wipe the inventory.
Each delete carries the object's uid, so a successor of the same name is never deleted.
"""

from __future__ import annotations

import logging

from api.gpu.v1alpha1 import LABEL_VENDOR, PhysicalGPU
from pkg.framework.client import ApiError
from pkg.nodeagent.internal.service import GPUWriter
from pkg.nodeagent.internal.state import SyncState

logger = logging.getLogger(__name__)


def doomed(state: SyncState) -> list[tuple[PhysicalGPU, str]]:
    """Objects to delete, each with the reason, in name order."""
    present = {gpu.key for gpu in state.gpus} | state.unreadable
    objects = state.objects
    found: list[tuple[PhysicalGPU, str]] = []
    for key, gpu in objects.owner.items():
        if key in present:
            continue
        vendor = (gpu.metadata.labels or {}).get(LABEL_VENDOR)
        if vendor not in state.known_vendors:
            logger.warning(
                "keeping the PhysicalGPU of an unknown vendor: no backend loaded to judge it",
                extra={"node": state.node_name, "physicalgpu": gpu.metadata.name, "vendor": vendor},
            )
            continue
        found.append((gpu, f"card {key} is gone"))
    found += [(gpu, "a second object for the same card") for gpu in objects.duplicates]
    found += [(gpu, "no PCI address") for gpu in objects.unidentified if not gpu.metadata.deletion_timestamp]
    return sorted(found, key=lambda item: str(item[0].metadata.name))


class CleanupHandler:
    name = "cleanup"

    def __init__(self, *, writer: GPUWriter) -> None:
        self._writer = writer

    def handle(self, state: SyncState) -> None:
        for gpu, reason in doomed(state):
            extra = {"node": state.node_name, "physicalgpu": gpu.metadata.name, "reason": reason}
            try:
                state.writes += 1
                deleted = self._writer.delete(gpu)
            except ApiError as exc:
                state.fail(self.name, f"PhysicalGPU {gpu.metadata.name} ({reason})", exc)
                continue
            logger.info("deleted PhysicalGPU" if deleted else "PhysicalGPU was already gone", extra=extra)
