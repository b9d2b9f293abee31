"""What the kubelet plugin's calls tell the status book, with each prepared device's identity.

The plugin (:mod:`pkg.gpuhandler.preparation.driver`) reports through the
:class:`~pkg.gpuhandler.preparation.services.DeviceStatusReports` port; this is its implementation:
it turns a claim's checkpoint record into the identity its entries carry and hands everything to
the :class:`~.status_book.DeviceStatusBook`, which only marks the claim for the status loop — the
kubelet's call never waits for the API server.

Identity per kind, from what the node recorded: every device names its card (``pciBusID``, and the
PhysicalGPU); a MIG device its own UUID (it exists only once the node made it), another device on
the host the card's UUID; a vGPU its mdev UUID (the guest sees its own UUID, the host none); a
share the limits the node holds it to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from api.gpu.v1alpha1 import DeviceStatusData, PhysicalGPU, ShareLimits
from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.attribution.status_book import DeviceIdentity, DeviceStatusBook
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimRecord, DeviceRecord, PreparePhase
from pkg.gpuhandler.preparation.kinds.mig import mig_record
from pkg.gpuhandler.preparation.kinds.share.card_sharing import share_of
from pkg.gpuhandler.preparation.kinds.vm.records import vgpu_of
from pkg.gpuhandler.preparation.services import DeviceKey


@dataclass(frozen=True)
class CardName:
    """A card of this node: its PhysicalGPU's name and, where the driver reported it, its UUID."""

    physical_gpu: str
    uuid: str | None = None


def card_names(gpus: Iterable[PhysicalGPU]) -> dict[str, CardName]:
    """This node's cards by PCI address."""
    found = {}
    for gpu in gpus:
        status = gpu.status
        if status is None or status.pci_info is None or not gpu.metadata.name:
            continue
        nvidia = status.current_state.nvidia if status.current_state is not None else None
        found[status.pci_info.address] = CardName(gpu.metadata.name, nvidia.gpu_uuid if nvidia else None)
    return found


def device_identity(device: DeviceRecord, card: CardName | None) -> DeviceIdentity:
    mig, share, vgpu = mig_record(device), share_of(device), vgpu_of(device)
    if mig is not None:
        uuid = mig.uuid
    elif vgpu is not None:
        uuid = None
    else:
        uuid = card.uuid if card is not None else None
    limits = None
    if share is not None:
        limits = ShareLimits(
            strategy=share.strategy,
            share_percent=share.share_percent,
            memory_mib=share.memory_mib,
            interval=share.interval if share.strategy == "TimeSlicing" else None,
        )
    data = DeviceStatusData(
        device_type=device.device_type,
        physical_gpu=card.physical_gpu if card is not None else None,
        uuid=uuid,
        pci_bus_id=device.pci_address,
        mdev_uuid=vgpu.mdev_uuid if vgpu is not None else None,
        share=limits,
    )
    return DeviceIdentity(
        key=DeviceKey(device.pool, device.device, device.share_id), card=device.card, data=data
    )


class BookStatusReports:
    """The port's implementation over the book; ``cards`` reads this node's cards (the informer)."""

    def __init__(self, *, book: DeviceStatusBook, cards: Callable[[], Mapping[str, CardName]]) -> None:
        self._book = book
        self._cards = cards

    def prepared(self, record: ClaimRecord) -> None:
        self._prepared(record, since=None)

    def failed(
        self, claim: ClaimRef, devices: Sequence[DeviceKey] | None, *, reason: str, message: str
    ) -> None:
        self._book.failed(
            namespace=claim.namespace,
            name=claim.name,
            uid=claim.uid,
            devices=devices,
            reason=reason,
            message=message,
        )

    def unprepared(self, claim: ClaimRef) -> None:
        self._book.unprepared(uid=claim.uid)

    def seed(self, checkpoint: CheckpointData) -> None:
        """The claims prepared before this process started, ``Ready`` since their record says."""
        for record in checkpoint.claims.values():
            if record.state is PreparePhase.PREPARE_COMPLETED:
                self._prepared(record, since=record.updated.replace(microsecond=0))

    def _prepared(self, record: ClaimRecord, *, since: datetime | None) -> None:
        cards = self._cards()
        self._book.prepared(
            namespace=record.namespace,
            name=record.name,
            uid=record.uid,
            devices=[device_identity(d, cards.get(d.card)) for d in record.devices],
            since=since,
        )
