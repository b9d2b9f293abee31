"""The committed fixture host trees: they match their builder, and each reads as the host it stands for.

The expectations below are written out by hand rather than taken from the builder's table, so a
mistake in the table shows up here instead of being copied into both sides.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest
from host_readings import read_host_info

from pkg.hardware.pci import scan_pci

# scenario -> (bare metal, os id, [(address, vendor:device, class, driver, numa node, iommu group)])
EXPECTED: dict[str, tuple[bool, str, list[tuple[str, str, str, str | None, int | None, str | None]]]] = {
    "a30-x2": (True, "ubuntu", [
        ("0000:00:00.0", "8086:2020", "0600", None, 0, "0"),
        ("0000:3b:00.0", "10de:20b7", "0302", "nvidia", 0, "40"),
        ("0000:d8:00.0", "10de:20b7", "0302", "nvidia", 1, "120"),
    ]),
    "a30-x3": (True, "ubuntu", [
        ("0000:3b:00.0", "10de:20b7", "0302", "nvidia", 0, "40"),
        ("0000:5e:00.0", "10de:20b7", "0302", "nvidia", 0, "60"),
        ("0000:d8:00.0", "10de:20b7", "0302", "nvidia", 1, "120"),
    ]),
    "a100-80gb": (True, "ubuntu", [
        ("0000:17:00.0", "10de:20b2", "0302", "nvidia", 0, "31"),
        ("0000:ca:00.0", "10de:20b2", "0302", "nvidia", 1, "148"),
    ]),
    "h100-sxm": (True, "rhel", [
        ("0000:05:00.0", "10de:22a3", "0680", "nvidia-nvswitch", 0, "12"),
        ("0000:18:00.0", "10de:2330", "0302", "nvidia", 0, "30"),
        ("0000:9a:00.0", "10de:2330", "0302", "nvidia", 1, "90"),
    ]),
    "l4": (True, "debian", [
        ("0000:4a:00.0", "10de:27b8", "0302", "nvidia", 0, "50"),
        ("0000:ca:00.0", "10de:27b8", "0302", "vfio-pci", 1, "150"),
    ]),
    "rtx-workstation": (True, "ubuntu", [
        ("0000:00:00.0", "8086:2020", "0600", None, None, "0"),
        ("0000:65:00.0", "10de:2230", "0300", "nvidia", None, "28"),
        ("0000:65:00.1", "10de:1aef", "0403", "snd_hda_intel", None, "28"),
    ]),
    "no-gpu": (True, "rocky", [
        ("0000:00:00.0", "8086:2020", "0600", None, 0, "0"),
        ("0000:18:00.0", "8086:1521", "0200", "igb", 0, "35"),
    ]),
    "vm-dmi": (False, "ubuntu", [
        ("0000:00:00.0", "8086:29c0", "0600", None, None, None),
        ("0000:01:00.0", "10de:27b8", "0302", "nvidia", None, None),
    ]),
    "h100-and-l4": (True, "ubuntu", [
        ("0000:1b:00.0", "10de:2330", "0302", "nvidia", 0, "25"),
        ("0000:ce:00.0", "10de:27b8", "0302", "nvidia", 1, "140"),
    ]),
    "unbound": (True, "debian", [
        ("0000:3b:00.0", "10de:20b7", "0302", None, 0, "40"),
    ]),
}  # fmt: skip


def _scenario_dirs(sysfs_fixtures: Path) -> list[str]:
    return sorted(p.name for p in sysfs_fixtures.iterdir() if p.is_dir() and p.name != "__pycache__")


def test_committed_trees_match_the_builder(builder: ModuleType, sysfs_fixtures: Path, tmp_path: Path) -> None:
    builder.build(tmp_path)

    assert _scenario_dirs(sysfs_fixtures) == _scenario_dirs(tmp_path)
    for name in _scenario_dirs(tmp_path):
        assert builder.snapshot(sysfs_fixtures / name) == builder.snapshot(tmp_path / name), (
            f"test/fixtures/sysfs/{name} differs from build.py; run python test/fixtures/sysfs/build.py"
        )


def test_every_scenario_is_covered_here(builder: ModuleType) -> None:
    assert sorted(s.name for s in builder.SCENARIOS) == sorted(EXPECTED)


def test_links_are_relative(sysfs_fixtures: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(sysfs_fixtures):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                assert not os.path.isabs(os.readlink(path)), path
                assert path.exists(), f"dangling link {path}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_scenario_scans_to_the_expected_devices(sysfs_fixtures: Path, name: str) -> None:
    _, _, expected = EXPECTED[name]

    devices = scan_pci(sysfs_fixtures / name).devices

    assert [
        (d.address, f"{d.vendor_id}:{d.device_id}", d.class_code, d.driver, d.numa_node, d.iommu_group)
        for d in devices
    ] == expected
    assert all(d.subsystem_vendor_id is not None for d in devices if d.device_id != "22a3")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_scenario_host_info(sysfs_fixtures: Path, name: str) -> None:
    bare_metal, os_id, _ = EXPECTED[name]
    root = sysfs_fixtures / name

    info = read_host_info(
        os_release=root / "etc/os-release",
        kernel_osrelease=root / "proc/sys/kernel/osrelease",
        dmi_dir=root / "class/dmi/id",
        cpuinfo=root / "proc/cpuinfo",
    )

    assert (info.bare_metal, info.os_id) == (bare_metal, os_id)
    assert info.os_version
    assert info.os_name
    assert info.kernel_release
