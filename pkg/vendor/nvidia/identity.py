"""NVIDIA's identity: PCI vendor ``10de`` and the meaning of the drivers a card may be bound to.

Declared in ``pyproject.toml`` as the entry point ``nvidia`` of group ``gpu_control_plane.vendors``,
so the registry finds it the same way it would find a third-party backend.
"""

from __future__ import annotations

from typing import Final

from api.gpu.v1alpha1 import DriverType
from pkg.vendor.registry import VendorIdentity

IDENTITY: Final = VendorIdentity(
    name="nvidia",
    pci_vendor_id="10de",
    display_name="Nvidia",
    driver_types={"nvidia": DriverType.NVIDIA, "vfio-pci": DriverType.VFIO},
)


class NvidiaBackend:
    """The NVIDIA backend; the NVML-based parts of the port will be added to this class."""

    @property
    def identity(self) -> VendorIdentity:
        return IDENTITY


NVIDIA: Final = NvidiaBackend()
