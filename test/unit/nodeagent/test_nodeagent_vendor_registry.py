"""The vendor registry: identities, entry-point loading (broken plugins skipped), driver meaning."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from api.gpu.v1alpha1 import DriverType
from pkg.backends import KNOWN_DRIVERS, VendorIdentity, VendorRegistry, default_registry, driver_type_for
from pkg.backends import registry as registry_module
from pkg.backends.amd.identity import IDENTITY as AMD_IDENTITY
from pkg.backends.nvidia.identity import IDENTITY as NVIDIA

AMD = VendorIdentity(name="amd", pci_vendor_id="1002", driver_types={})


class _EntryPoint:
    def __init__(self, name: str, loaded: Any = None, error: Exception | None = None) -> None:
        self.name, self.value, self.group = name, f"plugins:{name}", registry_module.ENTRY_POINT_GROUP
        self._loaded, self._error = loaded, error

    def load(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._loaded


class _Backend:
    def __init__(self, identity: Any) -> None:
        self.identity = identity


def test_both_vendors_are_installed_as_entry_points() -> None:
    registry = default_registry()
    assert registry.by_pci_vendor("10de") == NVIDIA
    assert registry.by_pci_vendor("10DE") == NVIDIA  # IDs from people come in any case
    assert registry.by_pci_vendor("1002") == AMD_IDENTITY
    assert {"amd", "simulated-amd", "nvidia", "simulated-nvidia"} <= set(registry.backend_names())
    assert registry.by_pci_vendor("8086") is None  # Intel needs a backend
    assert default_registry() is registry  # loaded once


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "NVIDIA"}, "DNS label"),
        ({"name": "nv_idia"}, "DNS label"),
        ({"pci_vendor_id": "10DE"}, "hex"),
        ({"pci_vendor_id": "0x10de"}, "hex"),
    ],
)
def test_identity_rejects_names_labels_would_reject(kwargs: dict[str, str], message: str) -> None:
    values = {"name": "nvidia", "pci_vendor_id": "10de"} | kwargs
    with pytest.raises(ValueError, match=message):
        VendorIdentity(**values)  # type: ignore[arg-type]


def test_broken_plugins_are_logged_and_skipped(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    found = [
        _EntryPoint("amd", _Backend(AMD)),
        _EntryPoint("broken", error=ImportError("no module named rocm_smi")),
        _EntryPoint("clone", _Backend(VendorIdentity(name="clone", pci_vendor_id="10de"))),
        _EntryPoint("faceless", _Backend("not an identity")),
        _EntryPoint("nvidia", _Backend(NVIDIA)),
    ]
    monkeypatch.setattr(registry_module, "entry_points", lambda group: found)
    with caplog.at_level(logging.ERROR, logger=registry_module.__name__):
        registry = VendorRegistry.from_entry_points()
    assert registry.vendor_names() == ["amd", "clone"]  # "clone" sorts before "nvidia" and wins 10de
    assert registry.by_pci_vendor("10de").name == "clone"  # type: ignore[union-attr]
    messages = " ".join(record.getMessage() for record in caplog.records)
    assert "failed to load" in messages
    assert "no VendorIdentity" in messages
    assert "two vendor backends claim one PCI vendor ID" in messages


@pytest.mark.parametrize(
    ("identity", "driver", "expected"),
    [
        (NVIDIA, "nvidia", DriverType.NVIDIA),
        (NVIDIA, "vfio-pci", DriverType.VFIO),
        (NVIDIA, "nouveau", DriverType.UNKNOWN),
        (NVIDIA, None, None),
        (NVIDIA, "", None),
        (AMD, "amdgpu", DriverType.ROCM),  # from the generic table
        (None, "vfio-pci", DriverType.VFIO),
        (None, "i915", DriverType.UNKNOWN),
    ],
)
def test_driver_type(
    identity: VendorIdentity | None, driver: str | None, expected: DriverType | None
) -> None:
    assert driver_type_for(identity, driver) is expected


def test_known_drivers_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        KNOWN_DRIVERS["nouveau"] = DriverType.NVIDIA  # type: ignore[index]
