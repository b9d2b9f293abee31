"""GPU vendor backends: who claims which PCI vendor, and how its cards are read.

A plugin, found through the Python entry point group ``gpu_control_plane.vendors``, has an
*identity* (:class:`~pkg.backends.identity.VendorIdentity`) and builds a *backend*
(:class:`~pkg.backends.backend.VendorBackend`, docs/architecture.md#vendor-backend-port). The node agent asks
the registry only "does any plugin claim PCI vendor ``10de``?" and, if one does, how to name it in labels and
which of its drivers mean what; the gpu-handler builds one backend by entry point name (``nvidia``, or
``simulated-nvidia`` in tests and the demo) and reads its node's cards through it. Adding AMD
(``1002``) or Intel (``8086``) is a package that declares an entry point, not an edit here.
"""

from pkg.backends.backend import (
    BackendError,
    BackendOptions,
    CardVerdict,
    Enrichment,
    VendorBackend,
    VendorPlugin,
    VerdictStatus,
    claimed_gpus,
)
from pkg.backends.registry import (
    ENTRY_POINT_GROUP,
    KNOWN_DRIVERS,
    VendorIdentity,
    VendorRegistry,
    default_registry,
    driver_type_for,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "KNOWN_DRIVERS",
    "BackendError",
    "BackendOptions",
    "CardVerdict",
    "Enrichment",
    "VendorBackend",
    "VendorIdentity",
    "VendorPlugin",
    "VendorRegistry",
    "VerdictStatus",
    "claimed_gpus",
    "default_registry",
    "driver_type_for",
]
