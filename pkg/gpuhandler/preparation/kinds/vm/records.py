"""What the checkpoint records of a VM's devices: a passed-through card's IOMMU group and functions,
a vGPU's mdev type and UUID. Kept apart from the kinds, so the VM files (:mod:`.files`) read them
as the kinds (:mod:`.vfio`, :mod:`.vgpu`) do."""

from __future__ import annotations

from typing import Final

from pydantic import Field

from pkg.gpuhandler.preparation.checkpoint import DeviceRecord, KindRecord

VFIO_FIELD: Final = "vfio"
VGPU_FIELD: Final = "vgpu"


class VfioFunctionRecord(KindRecord):
    """A function bound to ``vfio-pci`` for a claim, and the driver to give it back to."""

    address: str
    driver: str | None = None  # None: it was unbound


class VfioRecord(KindRecord):
    """VFIO passthrough of a card: its IOMMU group and every function bound with it (card first)."""

    iommu_group: str = Field(alias="iommuGroup")
    functions: list[VfioFunctionRecord] = Field(default_factory=list)


class VgpuRecord(KindRecord):
    """A vGPU (mediated device) made for a claim: its mdev type and the UUID chosen for it before
    ``create`` was written, which is what makes an mdev on the node this claim's."""

    mdev_type: str = Field(alias="mdevType")
    mdev_uuid: str = Field(alias="mdevUUID")


def vfio_of(device: DeviceRecord) -> VfioRecord | None:
    """``device``'s passthrough record, or None for a device of another kind."""
    return device.kind_record(VFIO_FIELD, VfioRecord)


def vgpu_of(device: DeviceRecord) -> VgpuRecord | None:
    """``device``'s vGPU record, or None for a device of another kind."""
    return device.kind_record(VGPU_FIELD, VgpuRecord)


def for_vm(device: DeviceRecord) -> bool:
    """Whether ``device`` is a VM's (a passed-through card or a vGPU)."""
    return vfio_of(device) is not None or vgpu_of(device) is not None
