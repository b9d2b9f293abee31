"""The sysfs PCI reader: parsing, optional attributes, broken and vanishing devices, ordering."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from pkg.hardware import pci
from pkg.hardware.pci import PciDevice, iommu_group_members, read_pci_device, scan_pci


def _device(root: Path, address: str, **files: str) -> Path:
    """A device folder linked from bus/pci/devices, with the given attribute files."""
    path = root / "devices" / f"pci{address[:-5]}" / address
    path.mkdir(parents=True)
    for name, text in {"vendor": "0x10de\n", "device": "0x20b7\n", "class": "0x030200\n", **files}.items():
        (path / name).write_text(text)
    link = root / "bus" / "pci" / "devices" / address
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(Path("../../..") / path.relative_to(root))
    return path


def test_reads_every_attribute_of_a_fixture_card(sysfs_fixtures: Path) -> None:
    device = read_pci_device(sysfs_fixtures / "a30-x2", "0000:D8:00.0")

    assert device == PciDevice(
        address="0000:d8:00.0",
        vendor_id="10de",
        device_id="20b7",
        class_code="0302",
        subsystem_vendor_id="10de",
        subsystem_device_id="1532",
        driver="nvidia",
        numa_node=1,
        iommu_group="120",
        sriov_totalvfs=None,
        sriov_numvfs=None,
    )


def test_ids_are_normalised_to_lower_case_hex_without_prefix(tmp_path: Path) -> None:
    _device(tmp_path, "0000:02:00.0", vendor="0x10DE\n", device="0x20B7", **{"class": "0x030000\n"})

    device = read_pci_device(tmp_path, "0000:02:00.0")

    assert device is not None
    assert (device.vendor_id, device.device_id, device.class_code) == ("10de", "20b7", "0300")


def test_unbound_device_has_no_driver(sysfs_fixtures: Path) -> None:
    (device,) = scan_pci(sysfs_fixtures / "unbound").devices

    assert device.driver is None
    assert device.device_id == "20b7"


def test_driver_is_the_name_of_the_bound_driver(sysfs_fixtures: Path) -> None:
    drivers = {d.address: d.driver for d in scan_pci(sysfs_fixtures / "l4").devices}

    assert drivers == {"0000:4a:00.0": "nvidia", "0000:ca:00.0": "vfio-pci"}


@pytest.mark.parametrize(("text", "expected"), [("-1\n", None), ("0\n", 0), ("3\n", 3), (None, None)])
def test_numa_node(tmp_path: Path, text: str | None, expected: int | None) -> None:
    _device(tmp_path, "0000:02:00.0", **({"numa_node": text} if text is not None else {}))

    device = read_pci_device(tmp_path, "0000:02:00.0")

    assert device is not None
    assert device.numa_node == expected


def test_missing_optional_attributes_read_as_none(tmp_path: Path) -> None:
    _device(tmp_path, "0000:02:00.0")

    device = read_pci_device(tmp_path, "0000:02:00.0")

    assert device is not None
    assert (device.subsystem_vendor_id, device.subsystem_device_id, device.driver) == (None, None, None)
    assert (device.iommu_group, device.sriov_totalvfs, device.sriov_numvfs) == (None, None, None)


def test_sriov_counts(sysfs_fixtures: Path) -> None:
    nic = read_pci_device(sysfs_fixtures / "no-gpu", "0000:18:00.0")

    assert nic is not None
    assert (nic.sriov_totalvfs, nic.sriov_numvfs) == (7, 0)


@pytest.mark.parametrize(
    "files",
    [
        pytest.param({"vendor": "nonsense\n"}, id="malformed-vendor"),
        pytest.param({"class": "0x1030200\n"}, id="class-too-wide"),
        pytest.param({"device": "0x120b7\n"}, id="device-too-wide"),
        pytest.param({"numa_node": "x\n"}, id="malformed-numa"),
    ],
)
def test_unreadable_device_is_skipped_with_a_warning_naming_it(
    tmp_path: Path, files: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    _device(tmp_path, "0000:02:00.0", **files)
    _device(tmp_path, "0000:03:00.0")

    with caplog.at_level(logging.WARNING, logger="pkg.hardware.pci"):
        devices = scan_pci(tmp_path).devices

    assert [d.address for d in devices] == ["0000:03:00.0"]
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.__dict__["pci_address"] == "0000:02:00.0"
    assert "0000:02:00.0" in record.getMessage()


def test_device_without_a_required_file_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (_device(tmp_path, "0000:02:00.0") / "vendor").unlink()

    with caplog.at_level(logging.WARNING, logger="pkg.hardware.pci"):
        assert scan_pci(tmp_path).devices == []

    assert [r.__dict__["pci_address"] for r in caplog.records] == ["0000:02:00.0"]


def test_device_vanishing_mid_read_is_skipped_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    doomed = _device(tmp_path, "0000:02:00.0")
    _device(tmp_path, "0000:03:00.0")
    real_text = pci._text

    def unplug_then_read(path: Path) -> str:
        if path.parent.name == doomed.name and doomed.exists():
            shutil.rmtree(doomed)  # hot unplug between listing and reading
        return real_text(path)

    monkeypatch.setattr(pci, "_text", unplug_then_read)
    with caplog.at_level(logging.WARNING, logger="pkg.hardware.pci"):
        devices = scan_pci(tmp_path).devices

    assert [d.address for d in devices] == ["0000:03:00.0"]
    assert caplog.records == []


def test_device_vanishing_after_its_ids_were_read_is_not_reported_half_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doomed = _device(tmp_path, "0000:02:00.0", numa_node="0\n", subsystem_vendor="0x10de\n")
    real_numa_node = pci._numa_node

    def unplug_then_read(path: Path) -> int | None:
        shutil.rmtree(doomed)  # the optional attributes now read as absent
        return real_numa_node(path)

    monkeypatch.setattr(pci, "_numa_node", unplug_then_read)

    assert scan_pci(tmp_path).devices == []


def test_scan_is_sorted_by_address(tmp_path: Path) -> None:
    for address in ("0000:d8:00.0", "0001:00:00.0", "0000:3b:00.1", "0000:3b:00.0", "0000:00:1f.3"):
        _device(tmp_path, address)

    addresses = [d.address for d in scan_pci(tmp_path).devices]

    assert addresses == ["0000:00:1f.3", "0000:3b:00.0", "0000:3b:00.1", "0000:d8:00.0", "0001:00:00.0"]


def test_entry_with_a_foreign_name_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _device(tmp_path, "0000:02:00.0")
    (tmp_path / "bus" / "pci" / "devices" / "stray").mkdir()

    with caplog.at_level(logging.WARNING, logger="pkg.hardware.pci"):
        assert [d.address for d in scan_pci(tmp_path).devices] == ["0000:02:00.0"]

    assert len(caplog.records) == 1


def test_missing_devices_directory_raises_instead_of_reporting_no_devices(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        scan_pci(tmp_path)


def test_absent_device_reads_as_none(sysfs_fixtures: Path) -> None:
    assert read_pci_device(sysfs_fixtures / "a30-x2", "0000:99:00.0") is None


def test_iommu_group_members_include_sibling_functions(sysfs_fixtures: Path) -> None:
    root = sysfs_fixtures / "rtx-workstation"
    gpu = read_pci_device(root, "0000:65:00.0")

    assert gpu is not None
    assert gpu.iommu_group == "28"
    assert iommu_group_members(root, gpu.iommu_group) == ["0000:65:00.0", "0000:65:00.1"]


def test_missing_iommu_group_raises(sysfs_fixtures: Path) -> None:
    with pytest.raises(FileNotFoundError):
        iommu_group_members(sysfs_fixtures / "rtx-workstation", "999")


@pytest.mark.parametrize("group", ["../../etc", "", "1/devices", "\u00b2"])
def test_iommu_group_must_be_a_number(sysfs_fixtures: Path, group: str) -> None:
    with pytest.raises(ValueError, match="decimal number"):
        iommu_group_members(sysfs_fixtures / "rtx-workstation", group)


def test_trees_are_relocatable(sysfs_fixtures: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(sysfs_fixtures / "rtx-workstation", copy, symlinks=True)

    assert scan_pci(copy).devices == scan_pci(sysfs_fixtures / "rtx-workstation").devices


def test_fixture_builder_table_and_reader_agree_on_a_custom_tree(tmp_path: Path, builder: ModuleType) -> None:
    function = builder.Function("0000:41:00.0", "10de:2330", "030200", "10de:16c1", "vfio-pci", 1, 7)
    builder.build(tmp_path, (builder.Scenario("custom", ("Acme", "X1"), "ID=x\n", "6.1", (function,)),))

    (device,) = scan_pci(tmp_path / "custom").devices

    assert (device.address, device.device_id, device.driver, device.numa_node, device.iommu_group) == (
        "0000:41:00.0",
        "2330",
        "vfio-pci",
        1,
        "7",
    )
