"""NVIDIA's identity: PCI vendor ``10de`` and what its drivers mean.

Importing this module is cheap: the node agent loads it (through the entry point's
:mod:`~pkg.backends.nvidia.plugin`) to recognise cards. The backend imports :data:`IDENTITY` from
here; the plugin that builds the backend lives in :mod:`~pkg.backends.nvidia.plugin`, so this
module needs nothing of the backend.
"""

from __future__ import annotations

from typing import Final

from api.gpu.v1alpha1 import DriverType
from pkg.backends.identity import VendorIdentity

IDENTITY: Final = VendorIdentity(
    name="nvidia",
    pci_vendor_id="10de",
    driver_types={"nvidia": DriverType.NVIDIA, "vfio-pci": DriverType.VFIO},
)
