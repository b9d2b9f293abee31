"""A vGPU for a VM: a mediated device of a card in vGPU mode, created with the recorded UUID.

A vGPU is a device only a VM can use (its guest runs NVIDIA's vGPU driver; a container has
nothing to open), so it follows the opt-in of VFIO passthrough: the Pods reserving the claim
carry ``gpu.deckhouse.io/vfio: "true"``. A claim with a vGPU for any other Pod is refused with
``VgpuNotAllowed``.

The UUID is chosen while planning, so ``record-started`` writes it to the checkpoint before this
kind writes it to ``create``: whatever a crash leaves — no mdev, or the mdev — is named by a
record. A retry of a claim whose ``PrepareStarted`` record is still there (its rollback could not
remove the mdev) keeps the recorded UUID, so it finds and owns the mdev instead of making a second
one. This kind only ever creates and removes the mdev with that UUID: a crash before ``create``
leaves nothing, one after it leaves an mdev a record owns, and start-up releases it
(:mod:`~pkg.gpuhandler.preparation.startup`). An mdev gpu-handler did not record is never touched.

Prepare writes the UUID to the type's ``create`` (unless that mdev exists already: a repeated
Prepare), refusing first with ``VgpuTypeConflict`` when the kernel says the card cannot take one
more of the type (``available_instances`` 0: the vGPU manager's default equal-size mode allows
only more of the type already on the card). It then waits for the mdev's VFIO group node and
writes the claim's device metadata with ``mdevUUID``
(:mod:`.files`). A container of the device — a VM's launcher —
gets ``/dev/vfio/vfio``, ``/dev/vfio/<the mdev's group>`` and the metadata; the card stays on the
NVIDIA driver. Release removes the mdev (idempotent: one that is gone is success) and the files.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from pkg.backends.preparation import ContainerEdits
from pkg.gpuhandler.preparation.checkpoint import DeviceRecord
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.kinds import (
    VFIO_ANNOTATION,
    ClaimWork,
    Conflict,
    Consumer,
    DeviceKind,
    Offer,
    OfferMatch,
    PlanContext,
    PlanError,
    attribute,
    record_of,
)
from pkg.gpuhandler.preparation.kinds.vm.devices import vfio_nodes, vm_mounts
from pkg.gpuhandler.preparation.kinds.vm.files import VmFiles
from pkg.gpuhandler.preparation.kinds.vm.records import VGPU_FIELD, VgpuRecord, vgpu_of
from pkg.gpuhandler.preparation.services import OfferIndex
from pkg.hardware.mdev import MdevHost, new_mdev_uuid

logger = logging.getLogger(__name__)

REASON_CREATE: Final = "VgpuCreateFailed"
REASON_TYPE_CONFLICT: Final = "VgpuTypeConflict"
REASON_NOT_ALLOWED: Final = "VgpuNotAllowed"
_MDEV_TYPE: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class VgpuKind(DeviceKind):
    name = "vGPU"
    offers = OfferMatch("VGPU")
    record_field = VGPU_FIELD
    record_model = VgpuRecord
    reader_version = 5  # an older reader would leave the mdev behind
    consumer = Consumer.VM

    def __init__(
        self,
        *,
        mdevs: MdevHost,
        files: VmFiles,
        offers: OfferIndex,
        dev_root: Path,
        settle_timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._mdevs = mdevs
        self._files = files
        self._offers = offers
        self._dev = dev_root
        self._settle_timeout = settle_timeout
        self._clock = clock

    def plan(self, offer: Offer, context: PlanContext) -> VgpuRecord:
        if not context.for_vm:
            raise PrepareFailedError(
                REASON_NOT_ALLOWED,
                f"{context.label}: device {offer.name} is a vGPU, which only a VM can use; the Pod "
                f'must be a VM\'s launcher annotated {VFIO_ANNOTATION}: "true"',
            )
        mdev_type = attribute(offer.device, "mdevType", str, offer.where)
        if not _MDEV_TYPE.fullmatch(mdev_type):
            raise PlanError(
                f"{offer.where} has mdevType {mdev_type[:80]!r}, not a type ID of mdev_supported_types"
            )
        earlier = context.earlier_device(offer.name)
        recorded = vgpu_of(earlier) if earlier is not None else None
        uuid = recorded.mdev_uuid if recorded is not None else new_mdev_uuid()
        return VgpuRecord(mdev_type=mdev_type, mdev_uuid=uuid)

    def conflict(self, device: DeviceRecord, held: DeviceRecord) -> Conflict | None:
        """vGPUs fit together unless they are the same offer: the kernel refuses a type the card
        cannot take next to the others (``available_instances``)."""
        return Conflict("DoubleAllocation", "is already prepared") if device.device == held.device else None

    def prepare(self, device: DeviceRecord, work: ClaimWork) -> ContainerEdits:
        vgpu = record_of(device, VgpuKind, VgpuRecord)
        label = f"claim {work.record.namespace}/{work.record.name}"
        found = self._mdevs.parent_and_type(vgpu.mdev_uuid)
        if found is None:
            self._create(device, label)
        elif found != (device.card, vgpu.mdev_type):
            raise PrepareFailedError(
                REASON_CREATE,
                f"{label}: mdev {vgpu.mdev_uuid} is of type {found[1]} on card {found[0]}, "
                f"not {vgpu.mdev_type} on {device.card}",
            )
        try:
            group = self._mdevs.iommu_group(vgpu.mdev_uuid)
        except OSError as exc:
            raise PrepareFailedError(REASON_CREATE, f"{label}: {exc}") from None
        nodes = vfio_nodes(
            self._dev,
            group,
            timeout=self._settle_timeout,
            clock=self._clock,
            what=f"{label}: vGPU {vgpu.mdev_uuid} on card {device.card}",
        )
        return ContainerEdits(device_nodes=nodes, mounts=vm_mounts(self._files, self._offers, device, work))

    def release(self, device: DeviceRecord, work: ClaimWork) -> None:
        vgpu = record_of(device, VgpuKind, VgpuRecord)
        if self._mdevs.remove(vgpu.mdev_uuid):
            logger.info(
                "removed a vGPU",
                extra={"mdev_uuid": vgpu.mdev_uuid, "pci_address": device.card, "claim": str(work.record)},
            )
        self._files.remove(work.record.uid)

    def _create(self, device: DeviceRecord, label: str) -> None:
        vgpu = record_of(device, VgpuKind, VgpuRecord)
        available = {t.type_id: t.available_instances for t in self._mdevs.types(device.card)}
        if vgpu.mdev_type not in available:
            raise PrepareFailedError(
                REASON_CREATE, f"{label}: card {device.card} lists no vGPU type {vgpu.mdev_type}"
            )
        if available[vgpu.mdev_type] <= 0:
            raise PrepareFailedError(
                REASON_TYPE_CONFLICT,
                f"{label}: card {device.card} cannot take another vGPU of type {vgpu.mdev_type} "
                "(available_instances is 0: the vGPUs on it are of another type, or it is full)",
            )
        try:
            self._mdevs.create(device.card, vgpu.mdev_type, vgpu.mdev_uuid)
        except (OSError, ValueError) as exc:
            raise PrepareFailedError(
                REASON_CREATE,
                f"{label}: creating vGPU {vgpu.mdev_uuid} of type {vgpu.mdev_type} "
                f"on card {device.card}: {exc}",
            ) from None
        logger.info(
            "created a vGPU",
            extra={"mdev_uuid": vgpu.mdev_uuid, "mdev_type": vgpu.mdev_type, "pci_address": device.card},
        )
