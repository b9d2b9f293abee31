"""Whether the backend may read a card now: the rules for when the handler's fields may be filled,
as one verdict.

``capabilities`` and ``currentState.nvidia`` are written only while ``DriverReady=True`` and the
card is bound to the backend's driver (``driverType: Nvidia`` for NVIDIA): before that NVML
cannot see the card, and a card on ``vfio-pci`` belongs to a VM. The verdict has four values
because the "no" answers are handled differently:

* ``FOREIGN``: not this backend's card at all (another vendor, or no ``pciInfo`` yet). Nothing is
  read or written.
* ``NOT_READY``: this backend's card, but not readable now. Nothing is read; the live driver state
  (``currentState.nvidia``), which would now be stale, is withdrawn. Capabilities describe the
  hardware and stay as last read, and so does ``HardwareHealthy``.
* ``READY``: read everything and write what changed.
* ``HELD``: this backend's card, bound to ``vfio-pci`` on purpose for a claim (:class:`Holds`,
  which the kubelet plugin's VFIO holds implement): allocated, not broken. Nothing is read (NVML
  cannot see it), ``HardwareHealthy`` and the offer description stay as they were; the live
  driver state is withdrawn as for ``NOT_READY`` (the CRD allows it only on the NVIDIA driver).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Protocol

from api.gpu.v1alpha1 import DriverType, PhysicalGPU, PhysicalGPUConditionType
from pkg.framework.reconcile.conditions import is_true


class Readiness(Enum):
    FOREIGN = "foreign"
    NOT_READY = "not-ready"
    READY = "ready"
    HELD = "held"


class Holds(Protocol):
    def held(self, card: str, *, reported_vfio: bool) -> bool: ...


def readiness(
    gpu: PhysicalGPU, *, pci_vendor_id: str, driver_type: DriverType, holds: Holds | None = None
) -> Readiness:
    """The verdict for ``gpu`` and a backend of vendor ``pci_vendor_id`` reading ``driver_type``;
    ``holds`` knows the cards passed through on purpose."""
    status = gpu.status
    if status is None or status.pci_info is None or status.pci_info.vendor.id != pci_vendor_id:
        return Readiness.FOREIGN
    bound = status.current_state.driver_type if status.current_state else None
    if holds is not None and holds.held(status.pci_info.address, reported_vfio=bound is DriverType.VFIO):
        return Readiness.HELD
    if bound is not driver_type or not is_true(status.conditions, PhysicalGPUConditionType.DRIVER_READY):
        return Readiness.NOT_READY
    return Readiness.READY


def readable_by(*, pci_vendor_id: str, driver_type: DriverType) -> Callable[[PhysicalGPU], bool]:
    """Whether a backend of vendor ``pci_vendor_id`` reading ``driver_type`` may read a card now
    (:attr:`Readiness.READY`; a card held for a claim is not readable)."""
    return lambda gpu: readiness(gpu, pci_vendor_id=pci_vendor_id, driver_type=driver_type) is Readiness.READY
