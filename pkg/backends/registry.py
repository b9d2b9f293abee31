"""The vendor registry: which backend claims a PCI vendor ID, loaded once from entry points.

Why entry points: the node agent must not import every vendor's code (NVML for NVIDIA, ROCm-SMI
for AMD) just to recognise a card, and a new vendor should arrive as a package rather than as an
edit of this module. Plugins declare themselves in group :data:`ENTRY_POINT_GROUP`; the object an
entry point names needs an ``identity`` (:class:`VendorIdentity`), which is all the node agent
reads, and a ``create(options)`` that builds the full :class:`~pkg.backends.backend.VendorBackend`
(:class:`~pkg.backends.backend.VendorPlugin`), which only the gpu-handler calls. An identity-only
entry point still identifies cards but cannot be chosen as a backend.

Loading is defensive, because a plugin is code we do not control: an entry point that fails to
import, lacks an identity or claims a vendor ID another backend already claimed with a different
identity is logged with its name and skipped; the rest of the registry still works. Two plugins
may share one identity (the real and the simulated NVIDIA backend both claim ``10de`` as
``nvidia``). Entry points are read once per process (:func:`default_registry`), so a sync never
pays for an import.

Driver meaning is two-level. A backend says what *its* drivers mean (``nvidia`` → Nvidia); the
generic table :data:`KNOWN_DRIVERS` covers drivers whose meaning does not depend on who made the
card (``vfio-pci`` → VFIO, ``amdgpu`` → ROCm); any other bound driver is Unknown, and no driver at
all means the field is absent.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, cast

from api.gpu.v1alpha1 import DriverType
from pkg.backends.identity import GPU_CLASS_CODES, VendorIdentity

if TYPE_CHECKING:
    from pkg.backends.backend import VendorPlugin

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP: Final = "gpu_control_plane.vendors"

KNOWN_DRIVERS: Final[Mapping[str, DriverType]] = MappingProxyType(
    {"nvidia": DriverType.NVIDIA, "vfio-pci": DriverType.VFIO, "amdgpu": DriverType.ROCM}
)


def driver_type_for(identity: VendorIdentity | None, driver: str | None) -> DriverType | None:
    """The driver type of a card bound to ``driver``: vendor table, then generic table, else
    Unknown; ``None`` (field absent) when no driver is bound."""
    if not driver:
        return None
    if identity is not None and driver in identity.driver_types:
        return identity.driver_types[driver]
    return KNOWN_DRIVERS.get(driver, DriverType.UNKNOWN)


class VendorRegistry:
    """Vendor identities by PCI vendor ID and backend plugins by entry point name.

    Immutable after construction, so safe to share between threads.
    """

    def __init__(
        self, identities: Iterable[VendorIdentity] = (), *, plugins: Mapping[str, VendorPlugin] | None = None
    ) -> None:
        self._by_vendor_id: dict[str, VendorIdentity] = {}
        self._plugins: dict[str, VendorPlugin] = {}
        for identity in identities:
            self._claim(identity)
        for name, plugin in sorted((plugins or {}).items()):
            if self._claim(plugin.identity, plugin=name):
                self._plugins[name] = plugin

    @classmethod
    def from_entry_points(cls, group: str = ENTRY_POINT_GROUP) -> VendorRegistry:
        """Loads every plugin of ``group`` in entry point name order (the first claim of a vendor ID
        wins); broken ones are skipped."""
        registry = cls()
        for ep in sorted(entry_points(group=group), key=lambda ep: ep.name):
            loaded = _load(ep)
            if isinstance(loaded, VendorIdentity):
                registry._claim(loaded)
            elif loaded is not None and registry._claim(loaded.identity, plugin=ep.name):
                registry._plugins[ep.name] = loaded
        logger.info(
            "vendor backends loaded",
            extra={"vendors": registry.vendor_names(), "backends": registry.backend_names(), "group": group},
        )
        return registry

    def by_pci_vendor(self, pci_vendor_id: str) -> VendorIdentity | None:
        return self._by_vendor_id.get(pci_vendor_id.lower())

    def vendor_names(self) -> list[str]:
        return sorted(identity.name for identity in self._by_vendor_id.values())

    def backend_names(self) -> list[str]:
        """Entry point names of the plugins that can build a backend (``nvidia``, ``simulated-nvidia``)."""
        return sorted(self._plugins)

    def plugin(self, name: str) -> VendorPlugin:
        """The plugin of entry point ``name``; ``KeyError`` listing the known names otherwise."""
        try:
            return self._plugins[name]
        except KeyError:
            raise KeyError(
                f"no vendor backend {name!r}; installed: {', '.join(self.backend_names())}"
            ) from None

    def _claim(self, identity: VendorIdentity, *, plugin: str | None = None) -> bool:
        known = self._by_vendor_id.get(identity.pci_vendor_id)
        if known is None:
            self._by_vendor_id[identity.pci_vendor_id] = identity
            return True
        if known == identity:
            return True
        logger.error(
            "two vendor backends claim one PCI vendor ID; keeping the first",
            extra={
                "pci_vendor_id": identity.pci_vendor_id,
                "kept": known.name,
                "skipped": identity.name,
                "entry_point": plugin,
            },
        )
        return False


def _load(ep: EntryPoint) -> VendorPlugin | VendorIdentity | None:
    """The plugin an entry point names, its bare identity if it cannot ``create``, or ``None``."""
    extra = {"entry_point": ep.name, "target": ep.value, "group": ep.group}
    try:
        loaded = ep.load()
        identity = loaded.identity
    except Exception as exc:  # a plugin may raise anything while importing; it must not stop us
        logger.error("vendor backend failed to load; skipped: %s", exc, exc_info=exc, extra=extra)
        return None
    if not isinstance(identity, VendorIdentity):
        logger.error("vendor backend has no VendorIdentity; skipped", extra=extra)
        return None
    if not callable(getattr(loaded, "create", None)):
        logger.info("vendor plugin only identifies cards (no create)", extra=extra)
        return identity
    return cast("VendorPlugin", loaded)


@functools.cache
def default_registry() -> VendorRegistry:
    """The process-wide registry from installed entry points, loaded on first use."""
    return VendorRegistry.from_entry_points()


__all__ = [  # VendorIdentity and GPU_CLASS_CODES live in pkg.backends.identity, which the port imports too
    "ENTRY_POINT_GROUP",
    "GPU_CLASS_CODES",
    "KNOWN_DRIVERS",
    "VendorIdentity",
    "VendorRegistry",
    "default_registry",
    "driver_type_for",
]
