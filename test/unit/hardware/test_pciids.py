"""The pci.ids parser: names, classes with fallback, a missing file, and load time on a full-size file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pkg.hardware import pciids
from pkg.hardware.pciids import PciIds, find_default


@pytest.fixture(scope="module")
def db(pci_ids_excerpt: Path) -> PciIds:
    return PciIds.load(pci_ids_excerpt)


def test_vendor_and_device_names(db: PciIds) -> None:
    assert db.vendor_name("10de") == "NVIDIA Corporation"
    assert db.device_name("10de", "20b7") == "GA100GL [A30 PCIe]"
    assert db.device_name("10de", "2330") == "GH100 [H100 SXM5 80GB]"
    assert db.device_name("8086", "2020") == "Sky Lake-E DMI3 Registers"


@pytest.mark.parametrize(("vendor", "device"), [("0x10DE", "0x27B8"), ("10DE", "27b8"), (" 10de ", "27b8\n")])
def test_ids_are_accepted_in_any_spelling(db: PciIds, vendor: str, device: str) -> None:
    assert db.device_name(vendor, device) == "AD104GL [L4]"


def test_unknown_ids_have_no_name(db: PciIds) -> None:
    assert db.vendor_name("1234") is None
    assert db.device_name("10de", "ffff") is None
    assert db.device_name("1234", "20b7") is None


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("0302", "3D controller"),
        ("0300", "VGA compatible controller"),
        ("0403", "Audio device"),
        ("0600", "Host bridge"),
        ("0680", "Bridge"),
        ("0200", "Ethernet controller"),
        ("030200", "3D controller"),
        ("0x030000", "VGA compatible controller"),
        ("0301", "Display controller"),  # unknown subclass: the base class name
        ("03", "Display controller"),
        ("ff00", None),
    ],
)
def test_class_names(db: PciIds, code: str, expected: str | None) -> None:
    assert db.class_name(code) == expected


def test_programming_interfaces_and_comments_do_not_disturb_the_structure() -> None:
    text = (
        "# header\n10de  NVIDIA Corporation\n# a comment inside a vendor\n\t20b7  GA100GL [A30 PCIe]\n"
        "\t\t10de 1532  A30 board\n8086  Intel Corporation\n\n"
        "C 03  Display controller\n\t00  VGA compatible controller\n\t\t00  VGA controller\n"
        "\t02  3D controller\n"
    )

    db = PciIds.parse(text)

    assert db.device_name("10de", "20b7") == "GA100GL [A30 PCIe]"
    assert db.vendor_name("8086") == "Intel Corporation"
    assert db.class_name("0300") == "VGA compatible controller"
    assert db.class_name("0302") == "3D controller"
    assert db.device_name("10de", "02") is None  # a subclass line is no device


def test_missing_file_gives_an_empty_database_and_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="pkg.hardware.pciids"):
        db = PciIds.load(tmp_path / "absent.ids")

    assert db.is_empty
    assert db.vendor_name("10de") is None
    assert db.class_name("0302") is None
    assert len(caplog.records) == 1


def test_unreadable_path_gives_an_empty_database(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pkg.hardware.pciids"):
        db = PciIds.load(tmp_path)  # a directory

    assert db.is_empty
    assert len(caplog.records) == 1


def test_default_path_is_the_first_existing_candidate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    second = tmp_path / "hwdata.ids"
    second.write_text("10de  NVIDIA Corporation\n")
    monkeypatch.setattr(pciids, "DEFAULT_PATHS", (str(tmp_path / "misc.ids"), str(second)))

    assert find_default() == second
    assert PciIds.load(None).vendor_name("10de") == "NVIDIA Corporation"


def test_no_default_file_gives_an_empty_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(pciids, "DEFAULT_PATHS", (str(tmp_path / "none.ids"),))

    with caplog.at_level(logging.WARNING, logger="pkg.hardware.pciids"):
        assert PciIds.load(None).is_empty

    assert len(caplog.records) == 1


def _full_size_pci_ids(path: Path) -> None:
    """A synthetic file shaped like the real one: ~2,300 vendors, ~18,000 devices, ~16,000
    subsystems and the class list, about 1.5 MB."""
    lines = ["# synthetic pci.ids of the real file's size"]
    for vendor in range(2300):
        lines.append(f"{vendor:04x}  Vendor number {vendor} Incorporated")
        for device in range(8):
            lines.append(f"\t{device:04x}  Device family {device} [Marketing name {vendor}-{device}]")
            if device < 7:
                lines.append(f"\t\t{vendor:04x} {device:04x}  Subsystem board {device} of {vendor}")
    for klass in range(0x14):
        lines.append(f"C {klass:02x}  Class {klass}")
        lines.extend(f"\t{sub:02x}  Subclass {sub}\n\t\t00  Interface" for sub in range(6))
    path.write_text("\n".join(lines) + "\n")


def test_a_full_size_file_loads_completely(tmp_path: Path) -> None:
    """The real file's size and shape load whole: the last vendor's last entries are there.
    (How long it takes is a benchmark figure, not a unit-test verdict: make bench.)"""
    path = tmp_path / "pci.ids"
    _full_size_pci_ids(path)
    assert 1_300_000 < path.stat().st_size < 1_600_000

    db = PciIds.load(path)

    assert db.vendor_name("08fb") == "Vendor number 2299 Incorporated"
    assert db.device_name("08fb", "0007") == "Device family 7 [Marketing name 2299-7]"
    assert db.class_name("1305") == "Subclass 5"
