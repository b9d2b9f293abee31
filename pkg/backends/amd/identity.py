"""How AMD cards are recognised: PCI vendor ``1002``, driver ``amdgpu``, and the PCI classes of
Instinct cards. The backend imports :data:`IDENTITY` from here; the entry points' plugins that
build it live in :mod:`~pkg.backends.amd.plugin`, so this module needs nothing of the backend."""

from __future__ import annotations

from typing import Final

from api.gpu.v1alpha1 import DriverType
from pkg.backends.identity import GPU_CLASS_CODES, VendorIdentity

IDENTITY: Final = VendorIdentity(
    name="amd",
    pci_vendor_id="1002",
    driver_types={"amdgpu": DriverType.ROCM, "vfio-pci": DriverType.VFIO},
    # MI200 cards are display controllers, MI300 cards processing accelerators.
    class_codes=GPU_CLASS_CODES | {"0380", "1200"},
)
