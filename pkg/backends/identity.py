"""A vendor's identity: how its cards are recognised and named (:class:`VendorIdentity`).

A value of its own, importing nothing of the backend port or the registry, because both name it:
a :class:`~pkg.backends.backend.VendorBackend` has one, and the registry
(:mod:`pkg.backends.registry`, which re-exports it) keeps them by PCI vendor ID. Each vendor
declares its own in its ``identity`` module (``pkg.backends.nvidia.identity``), which the node
agent loads to recognise cards, so it must stay cheap to import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from api.gpu.v1alpha1 import DriverType

# VGA compatible controller, 3D controller: the classes every vendor's GPUs use. A vendor may add
# others its compute cards report (AMD: display controller 0380, processing accelerator 1200).
GPU_CLASS_CODES: Final = frozenset({"0300", "0302"})

_VENDOR_ID = re.compile(r"^[0-9a-f]{4}$")
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")  # a DNS label: also a valid label value


@dataclass(frozen=True)
class VendorIdentity:
    """How a vendor's cards are recognised and named.

    ``name`` is the value of the ``gpu.deckhouse.io/vendor`` label (a DNS label, e.g. ``nvidia``);
    ``driver_types`` maps the kernel drivers this vendor's cards are bound to onto the driver type
    reported in the status; ``class_codes`` are the PCI classes (base class + subclass) under
    which its GPUs appear.
    """

    name: str
    pci_vendor_id: str
    driver_types: Mapping[str, DriverType] = field(default_factory=dict)
    class_codes: frozenset[str] = GPU_CLASS_CODES

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"vendor name {self.name!r} is not a DNS label (lower-case, digits, '-')")
        if not _VENDOR_ID.match(self.pci_vendor_id):
            raise ValueError(f"PCI vendor ID {self.pci_vendor_id!r} is not 4 lower-case hex digits")
        object.__setattr__(self, "driver_types", MappingProxyType(dict(self.driver_types)))
