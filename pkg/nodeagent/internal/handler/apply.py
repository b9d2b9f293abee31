"""Step 2, apply: make each discovered card's PhysicalGPU carry what the agent knows.

Per card: find its object by PCI address (:mod:`~pkg.inventory.naming`); create
one under a new name if there is none; then patch the agent's labels and apply the agent's status
fields, each only when the cached object differs. An unchanged card therefore costs no request.

Cards are handled in address order, so names given in one sync are deterministic. The handler
remembers each card's object name (its only state across syncs; it needs no lock because the
sync is a :class:`~pkg.framework.reconcile.SingletonReconciler`, whose template allows one
worker), so an object someone deletes while its card stays comes back under the same name. A card whose
only object is being deleted (someone else's finalizer holds it) is left alone until the deletion
completes; its delete event triggers the sync that recreates it under its freed name. A failure is
recorded with the card and its object, and the other cards proceed.
"""

from __future__ import annotations

import logging

from api.gpu.v1alpha1 import NodeInfo, PhysicalGPU
from pkg.framework.client import AlreadyExistsError, ApiError
from pkg.inventory.desired import (
    gpu_labels,
    gpu_status,
    label_changes,
    node_info,
    stale_vendor_state,
    status_differs,
)
from pkg.inventory.naming import allocate_name
from pkg.nodeagent.internal.service import GPUWriter
from pkg.nodeagent.internal.state import DiscoveredGPU, SyncState

logger = logging.getLogger(__name__)


class ApplyHandler:
    name = "apply"

    def __init__(self, *, writer: GPUWriter) -> None:
        self._writer = writer
        self._names: dict[str, str] = {}  # address key -> the name of the card's last object

    def handle(self, state: SyncState) -> None:
        if state.host is None:
            raise RuntimeError("the apply step needs the host info of the discover step")
        node = node_info(state.node_name, state.host)
        taken = set(state.objects.names)
        cards = sorted(state.gpus, key=lambda gpu: gpu.key)
        # Forget cards that are gone (another card in that slot is a new card), learn current names.
        present = {gpu.key for gpu in cards} | state.unreadable
        self._names = {key: name for key, name in self._names.items() if key in present}
        self._names.update((key, str(obj.metadata.name)) for key, obj in state.objects.owner.items())
        for position, gpu in enumerate(cards):
            obj = state.objects.owner.get(gpu.key)
            if obj is None and gpu.key in state.objects.terminating:
                logger.info(
                    "the card's PhysicalGPU is being deleted; it is recreated once gone",
                    extra={"node": state.node_name, "pci_address": gpu.address},
                )
                continue
            name = str(obj.metadata.name) if obj else self._new_name(state, gpu, position, taken)
            try:
                if obj is None:
                    obj = self._create(state, gpu, name)
                self._update(state, gpu, obj, node)
            except AlreadyExistsError as exc:
                state.fail(self.name, f"PhysicalGPU {name} (PCI {gpu.address})", _name_clash(exc))
            except (ApiError, ValueError) as exc:
                state.fail(self.name, f"PhysicalGPU {name} (PCI {gpu.address})", exc)

    def _new_name(self, state: SyncState, gpu: DiscoveredGPU, position: int, taken: set[str]) -> str:
        name = allocate_name(
            node_name=state.node_name,
            position=position,
            vendor_id=gpu.pci_info.vendor.id,
            device_id=gpu.pci_info.device.id,
            taken=taken,
            previous=self._names.get(gpu.key),
        )
        taken.add(name)
        self._names[gpu.key] = name
        return name

    def _create(self, state: SyncState, gpu: DiscoveredGPU, name: str) -> PhysicalGPU:
        state.writes += 1
        created = self._writer.create(name=name, labels=_labels(state, gpu))
        extra = {"node": state.node_name, "physicalgpu": name, "pci_address": gpu.address}
        logger.info("created PhysicalGPU", extra=extra)
        return created

    def _update(self, state: SyncState, gpu: DiscoveredGPU, obj: PhysicalGPU, node: NodeInfo) -> None:
        changes = label_changes(obj.metadata.labels, _labels(state, gpu))
        if changes:
            state.writes += 1
            obj = self._writer.patch_labels(obj, changes)
        desired = gpu_status(info=gpu.pci_info, node=node, driver_type=gpu.driver_type)
        if not status_differs(obj.status, desired):
            return
        stale = stale_vendor_state(obj.status, desired)
        if stale:
            state.writes += 1
            obj = self._writer.remove_current_state(obj, stale)
        state.writes += 1
        self._writer.apply_status(obj, desired)
        extra = {"node": state.node_name, "physicalgpu": obj.metadata.name, "removed": stale}
        logger.info("applied PhysicalGPU status", extra=extra)


def _labels(state: SyncState, gpu: DiscoveredGPU) -> dict[str, str]:
    return gpu_labels(
        node_label=state.node_label, vendor=gpu.vendor.name, device=gpu.device_label, address=gpu.address
    )


def _name_clash(exc: AlreadyExistsError) -> Exception:
    # Only this agent makes names of this node's pattern, and its cache has seen its own creations
    # (the write barrier), so a clash is almost always an object someone made by hand without this
    # node's label. It is never adopted or overwritten; the sync is retried with backoff.
    return RuntimeError(
        f"{exc.message}: the name is taken by an object without this node's label "
        "(made by hand?); delete or relabel it"
    )
