"""The vendor registry: which backend claims a PCI vendor ID, loaded once from entry points.

Why entry points: the node agent must not import every vendor's code (NVML for NVIDIA, ROCm-SMI
for AMD) just to recognise a card, and a new vendor should arrive as a package rather than as an
edit of this module. Backends declare themselves in group :data:`ENTRY_POINT_GROUP`; the object an
entry point names only needs an ``identity`` (:class:`VendorBackend`).

Loading is defensive, because a plugin is code we do not control: an entry point that fails to
import, lacks an identity or claims a vendor ID another backend already claimed is logged with its
name and skipped; the rest of the registry still works. Entry points are read once per process
(:func:`default_registry`), so a sync never pays for an import.

Driver meaning is two-level. A backend says what *its* drivers mean (``nvidia`` → Nvidia); the
generic table :data:`KNOWN_DRIVERS` covers drivers whose meaning does not depend on who made the
card (``vfio-pci`` → VFIO, ``amdgpu`` → ROCm); any other bound driver is Unknown, and no driver at
all means the field is absent (spec §4.2.1).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType
from typing import Final, Protocol

from api.gpu.v1alpha1 import DriverType

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP: Final = "gpu_control_plane.vendors"

KNOWN_DRIVERS: Final[Mapping[str, DriverType]] = MappingProxyType(
    {"nvidia": DriverType.NVIDIA, "vfio-pci": DriverType.VFIO, "amdgpu": DriverType.ROCM}
)

_VENDOR_ID = re.compile(r"^[0-9a-f]{4}$")
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")  # a DNS label: also a valid label value


@dataclass(frozen=True)
class VendorIdentity:
    """How a vendor's cards are recognised and named.

    ``name`` is the value of the ``gpu.deckhouse.io/vendor`` label (a DNS label, e.g. ``nvidia``);
    ``display_name`` the spelling of the API's Vendor enum (``Nvidia``); ``driver_types`` maps the
    kernel drivers this vendor's cards are bound to onto the driver type reported in the status.
    """

    name: str
    pci_vendor_id: str
    display_name: str
    driver_types: Mapping[str, DriverType] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"vendor name {self.name!r} is not a DNS label (lower-case, digits, '-')")
        if not _VENDOR_ID.match(self.pci_vendor_id):
            raise ValueError(f"PCI vendor ID {self.pci_vendor_id!r} is not 4 lower-case hex digits")
        object.__setattr__(self, "driver_types", MappingProxyType(dict(self.driver_types)))


class VendorBackend(Protocol):
    """The discovery part of a vendor backend: enough to recognise its cards."""

    @property
    def identity(self) -> VendorIdentity: ...


def driver_type_for(identity: VendorIdentity | None, driver: str | None) -> DriverType | None:
    """The driver type of a card bound to ``driver``: vendor table, then generic table, else
    Unknown; ``None`` (field absent) when no driver is bound."""
    if not driver:
        return None
    if identity is not None and driver in identity.driver_types:
        return identity.driver_types[driver]
    return KNOWN_DRIVERS.get(driver, DriverType.UNKNOWN)


class VendorRegistry:
    """Vendor identities by PCI vendor ID. Immutable after construction, so safe to share."""

    def __init__(self, identities: Iterable[VendorIdentity] = ()) -> None:
        self._by_vendor_id: dict[str, VendorIdentity] = {}
        for identity in identities:
            known = self._by_vendor_id.get(identity.pci_vendor_id)
            if known is not None:
                logger.error(
                    "two vendor backends claim one PCI vendor ID; keeping the first",
                    extra={
                        "pci_vendor_id": identity.pci_vendor_id,
                        "kept": known.name,
                        "skipped": identity.name,
                    },
                )
                continue
            self._by_vendor_id[identity.pci_vendor_id] = identity

    @classmethod
    def from_entry_points(cls, group: str = ENTRY_POINT_GROUP) -> VendorRegistry:
        """Loads every backend of ``group`` (in entry point name order); broken ones are skipped."""
        found = sorted(entry_points(group=group), key=lambda ep: ep.name)
        registry = cls(identity for ep in found if (identity := _load(ep)) is not None)
        logger.info("vendor backends loaded", extra={"vendors": registry.vendor_names(), "group": group})
        return registry

    def by_pci_vendor(self, pci_vendor_id: str) -> VendorIdentity | None:
        return self._by_vendor_id.get(pci_vendor_id.lower())

    def vendor_names(self) -> list[str]:
        return sorted(identity.name for identity in self._by_vendor_id.values())


def _load(ep: EntryPoint) -> VendorIdentity | None:
    extra = {"entry_point": ep.name, "target": ep.value, "group": ep.group}
    try:
        identity = ep.load().identity
    except Exception as exc:  # a plugin may raise anything while importing; it must not stop us
        logger.error("vendor backend failed to load; skipped: %s", exc, exc_info=exc, extra=extra)
        return None
    if not isinstance(identity, VendorIdentity):
        logger.error("vendor backend has no VendorIdentity; skipped", extra=extra)
        return None
    return identity


@functools.cache
def default_registry() -> VendorRegistry:
    """The process-wide registry from installed entry points, loaded on first use."""
    return VendorRegistry.from_entry_points()
