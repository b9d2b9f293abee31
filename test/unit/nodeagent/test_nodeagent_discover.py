"""The discover step through its services: which PCI functions are GPUs, what is kept from a scan."""

from __future__ import annotations

from pathlib import Path

import pytest
from testutil.unit.nodeagent.nodeagent_fakes import SYSFS, device, host, sync_state

from api.gpu.v1alpha1 import DriverType
from pkg.backends import VendorRegistry
from pkg.hardware.hostinfo import HostInfo
from pkg.hardware.pci import PciDevice
from pkg.hardware.pciids import PciIds
from pkg.inventory.host_info import FileHostInfoReader
from pkg.inventory.pci_scanner import PciScan, SysfsPciScanner
from pkg.nodeagent import metrics
from pkg.nodeagent.internal.handler import DiscoverHandler


class _Scanner:
    def __init__(self, devices: list[PciDevice], unreadable: frozenset[str] = frozenset()) -> None:
        self.result = PciScan(devices=devices, unreadable=unreadable)

    def scan(self) -> PciScan:
        return self.result


class _BrokenScanner:
    def scan(self) -> PciScan:
        raise FileNotFoundError("/host/sys/bus/pci/devices")


class _Host:
    def read(self) -> HostInfo:
        return host()


def _discover(scanner: object, vendors: VendorRegistry, names: PciIds):  # type: ignore[no-untyped-def]
    return DiscoverHandler(scanner=scanner, host_info=_Host(), vendors=vendors, names=names)  # type: ignore[arg-type]


def test_only_display_class_functions_of_a_claimed_vendor_are_gpus(
    vendors: VendorRegistry, pci_ids: PciIds
) -> None:
    devices = [
        device(
            "0000:00:00.0", vendor_id="8086", device_id="2020", class_code="0600", driver=None
        ),  # host bridge
        device("0000:05:00.0", device_id="22a3", class_code="0680", driver="nvidia-nvswitch"),  # NVSwitch
        device("0000:65:00.0", device_id="2230", class_code="0300"),  # RTX A6000, VGA
        device("0000:65:00.1", device_id="1aef", class_code="0403", driver="snd_hda_intel"),  # its HDMI audio
        device("0000:66:00.0", device_id="1ad8", class_code="0604", driver="pcieport"),  # NVIDIA bridge
        device(
            "0000:80:00.0", vendor_id="1002", device_id="740f", class_code="0302", driver="amdgpu"
        ),  # no backend
        device(
            "0000:81:00.0", vendor_id="8086", device_id="56c0", class_code="0300", driver="i915"
        ),  # no backend
        device("0000:ca:00.0", device_id="27b8", driver="vfio-pci"),
        device("0000:cb:00.0", device_id="27b8", driver=None),
    ]
    state = sync_state()
    _discover(_Scanner(devices), vendors, pci_ids).handle(state)
    assert [(gpu.address, gpu.driver_type) for gpu in state.gpus] == [
        ("0000:65:00.0", DriverType.NVIDIA),
        ("0000:ca:00.0", DriverType.VFIO),
        ("0000:cb:00.0", None),
    ]
    assert [gpu.device_label for gpu in state.gpus] == ["rtx-a6000", "l4", "l4"]
    assert state.host == host()
    assert state.known_vendors == {"nvidia"}
    assert metrics.devices.labels(node=state.node_name)._value.get() == 3


def test_a_failed_scan_raises_so_nothing_is_deleted(vendors: VendorRegistry, pci_ids: PciIds) -> None:
    with pytest.raises(FileNotFoundError):
        _discover(_BrokenScanner(), vendors, pci_ids).handle(sync_state())


def test_unreadable_and_unrepresentable_cards_are_kept_out_and_remembered(
    vendors: VendorRegistry, pci_ids: PciIds
) -> None:
    vmd = device("10000:01:00.0")  # a VMD domain: pkg.hardware reads it, the CRD's address pattern does not
    state = sync_state()
    _discover(_Scanner([vmd, device()], frozenset({"0000:d8:00.0"})), vendors, pci_ids).handle(state)
    assert [gpu.address for gpu in state.gpus] == ["0000:3b:00.0"]
    assert state.unreadable == {"0000-d8-00.0", "10000-01-00.0"}
    assert [(f.step, f.subject) for f in state.failures] == [("discover", "PCI device 10000:01:00.0")]


@pytest.mark.parametrize(
    ("scenario", "gpus"),
    [
        (
            "a30-x2",
            [
                ("0000:3b:00.0", "a30-pcie", DriverType.NVIDIA),
                ("0000:d8:00.0", "a30-pcie", DriverType.NVIDIA),
            ],
        ),
        (
            "h100-sxm",
            [
                ("0000:18:00.0", "h100-sxm5-80gb", DriverType.NVIDIA),
                ("0000:9a:00.0", "h100-sxm5-80gb", DriverType.NVIDIA),
            ],
        ),
        ("rtx-workstation", [("0000:65:00.0", "rtx-a6000", DriverType.NVIDIA)]),
        ("l4", [("0000:4a:00.0", "l4", DriverType.NVIDIA), ("0000:ca:00.0", "l4", DriverType.VFIO)]),
        ("unbound", [("0000:3b:00.0", "a30-pcie", None)]),
        ("no-gpu", []),
    ],
)
def test_fixture_hosts(
    scenario: str, gpus: list[tuple[str, str, DriverType | None]], vendors: VendorRegistry, pci_ids: PciIds
) -> None:
    root = SYSFS / scenario
    handler = DiscoverHandler(
        scanner=SysfsPciScanner(root),
        host_info=FileHostInfoReader(host_root=root, sysfs_root=root),
        vendors=vendors,
        names=pci_ids,
    )
    state = sync_state()
    handler.handle(state)
    assert [(g.address, g.device_label, g.driver_type) for g in state.gpus] == gpus
    assert state.unreadable == set()
    assert not state.failures


def test_a_device_present_but_unreadable_is_reported(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "sys"
    shutil.copytree(SYSFS / "a30-x2", root, symlinks=True)
    (root / "bus/pci/devices/0000:d8:00.0/class").resolve().unlink()  # a read that fails
    scan = SysfsPciScanner(root).scan()
    assert [d.address for d in scan.devices] == ["0000:00:00.0", "0000:3b:00.0"]
    assert scan.unreadable == {"0000:d8:00.0"}
