"""GPU vendor backends: who claims which PCI vendor, found through Python entry points.

Today a backend only *identifies* its cards (:class:`~pkg.vendor.registry.VendorIdentity`): the
node agent asks the registry "does any backend claim PCI vendor ``10de``?" and, if one does, how
to name it in labels and which of its drivers mean what. The full backend port (NVML, MIG,
capabilities) extends :class:`~pkg.vendor.registry.VendorBackend` later; adding AMD (``1002``) or
Intel (``8086``) is then a package that declares an entry point in group
``gpu_control_plane.vendors``, not an edit here.
"""

from pkg.vendor.registry import (
    ENTRY_POINT_GROUP,
    KNOWN_DRIVERS,
    VendorBackend,
    VendorIdentity,
    VendorRegistry,
    default_registry,
    driver_type_for,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "KNOWN_DRIVERS",
    "VendorBackend",
    "VendorIdentity",
    "VendorRegistry",
    "default_registry",
    "driver_type_for",
]
