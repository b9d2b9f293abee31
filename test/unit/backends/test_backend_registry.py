"""The registry as the gpu-handler uses it: backends by entry point name, broken plugins skipped,
the installed plugins (nvidia, simulated-nvidia and the example package) found."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from api.gpu.v1alpha1 import DriverType
from pkg.backends import BackendError, BackendOptions, VendorIdentity, VendorRegistry, VerdictStatus
from pkg.backends import registry as registry_module
from pkg.backends.nvidia.identity import IDENTITY as NVIDIA
from pkg.backends.nvidia.plugin import NVIDIA as NVIDIA_PLUGIN
from pkg.backends.simulated.backend import SIMULATED_NVIDIA, SimulatedBackend

from testutil.unit.backends.backend_fakes import physical_gpu  # isort: skip


class _EntryPoint:
    def __init__(self, name: str, loaded: Any = None, error: Exception | None = None) -> None:
        self.name, self.value, self.group = name, f"plugins:{name}", registry_module.ENTRY_POINT_GROUP
        self._loaded, self._error = loaded, error

    def load(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._loaded


class _IdentityOnly:
    def __init__(self, identity: Any) -> None:
        self.identity = identity


def _registry(monkeypatch: pytest.MonkeyPatch, found: list[_EntryPoint]) -> VendorRegistry:
    monkeypatch.setattr(registry_module, "entry_points", lambda group: found)
    return VendorRegistry.from_entry_points()


def test_plugins_are_found_by_entry_point_name_and_share_an_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = _registry(
        monkeypatch,
        [_EntryPoint("nvidia", NVIDIA_PLUGIN), _EntryPoint("simulated-nvidia", SIMULATED_NVIDIA)],
    )
    assert registry.backend_names() == ["nvidia", "simulated-nvidia"]
    assert registry.vendor_names() == ["nvidia"]
    assert registry.plugin("simulated-nvidia") is SIMULATED_NVIDIA
    assert registry.by_pci_vendor("10de") == NVIDIA


def test_a_broken_plugin_is_logged_and_skipped(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    class Exploding:
        @property
        def identity(self) -> VendorIdentity:
            raise RuntimeError("NVML headers missing")

    clone = VendorIdentity(name="clone", pci_vendor_id="10de")

    class ClonePlugin:
        identity = clone

        def create(self, options: BackendOptions) -> Any:
            raise AssertionError("never built")

    with caplog.at_level(logging.INFO, logger=registry_module.__name__):
        registry = _registry(
            monkeypatch,
            [
                _EntryPoint("a-broken", error=ImportError("no module named rocm_smi")),
                _EntryPoint("b-exploding", Exploding()),
                _EntryPoint("c-identity-only", _IdentityOnly(VendorIdentity("amd", "1002"))),
                _EntryPoint("nvidia", NVIDIA_PLUGIN),
                _EntryPoint("z-clone", ClonePlugin()),  # claims 10de with another identity
            ],
        )
    assert registry.backend_names() == ["nvidia"]
    assert registry.vendor_names() == ["amd", "nvidia"]
    messages = " ".join(record.getMessage() for record in caplog.records)
    assert "failed to load" in messages
    assert "NVML headers missing" in messages
    assert "only identifies cards" in messages
    assert "two vendor backends claim one PCI vendor ID" in messages
    with pytest.raises(KeyError, match="installed: nvidia"):
        registry.plugin("z-clone")


def test_the_installed_plugins_include_the_example_package() -> None:
    registry = VendorRegistry.from_entry_points()
    assert {"nvidia", "simulated-nvidia", "example"} <= set(registry.backend_names())
    example = registry.by_pci_vendor("abcd")
    assert example is not None
    assert example.name == "example"
    assert isinstance(
        registry.plugin("simulated-nvidia").create(BackendOptions(node_name="n")), SimulatedBackend
    )


def test_the_example_backend_implements_the_port(tmp_path: Path) -> None:
    backend = (
        VendorRegistry.from_entry_points()
        .plugin("example")
        .create(BackendOptions(node_name="n", sysfs_root=tmp_path))
    )
    assert backend.driver_type is DriverType.UNKNOWN
    gpu = physical_gpu("0000:01:00.0", vendor_id="abcd", device_id="0001", driver_type=DriverType.UNKNOWN)
    with pytest.raises(BackendError):
        backend.offer_inputs(gpu)  # not bound to its driver
    device = tmp_path / "bus/pci/devices/0000:01:00.0"
    device.mkdir(parents=True)
    (tmp_path / "drivers/abcd-gpu").mkdir(parents=True)
    (device / "driver").symlink_to(tmp_path / "drivers/abcd-gpu")
    assert backend.enrich(gpu).capabilities is None  # the API's Vendor enum has no "Example"
    assert backend.offer_inputs(gpu).product_name == "Example Accelerator X1"
    assert backend.health(gpu).status is VerdictStatus.TRUE
    events = backend.health_events(["0000:01:00.0"])
    assert events.wait(0.01) == ()  # the example library has no events
    events.close()
    assert events.wait(10) == ()  # closed: returns at once
