"""The committed fixture host trees: they match their builder, and each reads as the host it stands for.

The expectations below are written out by hand rather than taken from the builder's table, so a
mistake in the table shows up here instead of being copied into both sides.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest
from testutil.unit.hardware.host_readings import read_host_info

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
    "t4-vgpu": (True, "ubuntu", [
        ("0000:3b:00.0", "10de:1eb8", "0302", "nvidia", 0, "40"),
        ("0000:d8:00.0", "10de:1eb8", "0302", "nvidia", 1, "120"),
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
    # Behind root ports and PCIe switches (bridges, 0604): each H100 and its NIC share a switch.
    "hgx-h100": (True, "ubuntu", [
        ("0000:05:00.0", "10de:22a3", "0680", "nvidia-nvswitch", 0, "5"),
        ("0000:06:00.0", "10de:22a3", "0680", "nvidia-nvswitch", 0, "6"),
        ("0000:07:00.0", "10de:22a3", "0680", "nvidia-nvswitch", 0, "7"),
        ("0000:08:00.0", "10de:22a3", "0680", "nvidia-nvswitch", 0, "8"),
        ("0000:15:01.0", "8086:352a", "0604", "pcieport", 0, "20"),
        ("0000:16:00.0", "1000:c030", "0604", "pcieport", 0, "21"),
        ("0000:17:00.0", "1000:c030", "0604", "pcieport", 0, "22"),
        ("0000:17:01.0", "1000:c030", "0604", "pcieport", 0, "24"),
        ("0000:18:00.0", "10de:2330", "0302", "nvidia", 0, "23"),
        ("0000:19:00.0", "15b3:1021", "0207", "mlx5_core", 0, "25"),
        ("0000:37:01.0", "8086:352a", "0604", "pcieport", 0, "30"),
        ("0000:38:00.0", "1000:c030", "0604", "pcieport", 0, "31"),
        ("0000:39:00.0", "1000:c030", "0604", "pcieport", 0, "32"),
        ("0000:39:01.0", "1000:c030", "0604", "pcieport", 0, "34"),
        ("0000:3a:00.0", "10de:2330", "0302", "nvidia", 0, "33"),
        ("0000:3b:00.0", "15b3:1021", "0207", "mlx5_core", 0, "35"),
        ("0000:48:01.0", "8086:352a", "0604", "pcieport", 0, "40"),
        ("0000:49:00.0", "1000:c030", "0604", "pcieport", 0, "41"),
        ("0000:4a:00.0", "1000:c030", "0604", "pcieport", 0, "42"),
        ("0000:4a:01.0", "1000:c030", "0604", "pcieport", 0, "44"),
        ("0000:4b:00.0", "10de:2330", "0302", "nvidia", 0, "43"),
        ("0000:4c:00.0", "15b3:1021", "0207", "mlx5_core", 0, "45"),
        ("0000:59:01.0", "8086:352a", "0604", "pcieport", 0, "50"),
        ("0000:5a:00.0", "1000:c030", "0604", "pcieport", 0, "51"),
        ("0000:5b:00.0", "1000:c030", "0604", "pcieport", 0, "52"),
        ("0000:5b:01.0", "1000:c030", "0604", "pcieport", 0, "54"),
        ("0000:5c:00.0", "10de:2330", "0302", "nvidia", 0, "53"),
        ("0000:5d:00.0", "15b3:1021", "0207", "mlx5_core", 0, "55"),
        ("0000:97:01.0", "8086:352a", "0604", "pcieport", 1, "60"),
        ("0000:98:00.0", "1000:c030", "0604", "pcieport", 1, "61"),
        ("0000:99:00.0", "1000:c030", "0604", "pcieport", 1, "62"),
        ("0000:99:01.0", "1000:c030", "0604", "pcieport", 1, "64"),
        ("0000:9a:00.0", "10de:2330", "0302", "nvidia", 1, "63"),
        ("0000:9b:00.0", "15b3:1021", "0207", "mlx5_core", 1, "65"),
        ("0000:b8:01.0", "8086:352a", "0604", "pcieport", 1, "70"),
        ("0000:b9:00.0", "1000:c030", "0604", "pcieport", 1, "71"),
        ("0000:ba:00.0", "1000:c030", "0604", "pcieport", 1, "72"),
        ("0000:ba:01.0", "1000:c030", "0604", "pcieport", 1, "74"),
        ("0000:bb:00.0", "10de:2330", "0302", "nvidia", 1, "73"),
        ("0000:bc:00.0", "15b3:1021", "0207", "mlx5_core", 1, "75"),
        ("0000:c9:01.0", "8086:352a", "0604", "pcieport", 1, "80"),
        ("0000:ca:00.0", "1000:c030", "0604", "pcieport", 1, "81"),
        ("0000:cb:00.0", "1000:c030", "0604", "pcieport", 1, "82"),
        ("0000:cb:01.0", "1000:c030", "0604", "pcieport", 1, "84"),
        ("0000:cc:00.0", "10de:2330", "0302", "nvidia", 1, "83"),
        ("0000:cd:00.0", "15b3:1021", "0207", "mlx5_core", 1, "85"),
        ("0000:da:01.0", "8086:352a", "0604", "pcieport", 1, "90"),
        ("0000:db:00.0", "1000:c030", "0604", "pcieport", 1, "91"),
        ("0000:dc:00.0", "1000:c030", "0604", "pcieport", 1, "92"),
        ("0000:dc:01.0", "1000:c030", "0604", "pcieport", 1, "94"),
        ("0000:dd:00.0", "10de:2330", "0302", "nvidia", 1, "93"),
        ("0000:de:00.0", "15b3:1021", "0207", "mlx5_core", 1, "95"),
    ]),
    "pcie-l4-switches": (True, "debian", [
        ("0000:4a:01.0", "8086:352a", "0604", "pcieport", 0, "50"),
        ("0000:4b:00.0", "1000:c030", "0604", "pcieport", 0, "51"),
        ("0000:4c:00.0", "1000:c030", "0604", "pcieport", 0, "52"),
        ("0000:4c:01.0", "1000:c030", "0604", "pcieport", 0, "54"),
        ("0000:4c:02.0", "1000:c030", "0604", "pcieport", 0, "56"),
        ("0000:4d:00.0", "10de:27b8", "0302", "nvidia", 0, "53"),
        ("0000:4e:00.0", "10de:27b8", "0302", "nvidia", 0, "55"),
        ("0000:4f:00.0", "15b3:101d", "0200", "mlx5_core", 0, "57"),
        ("0000:ca:01.0", "8086:352a", "0604", "pcieport", 1, "150"),
        ("0000:cb:00.0", "1000:c030", "0604", "pcieport", 1, "151"),
        ("0000:cc:00.0", "1000:c030", "0604", "pcieport", 1, "152"),
        ("0000:cc:01.0", "1000:c030", "0604", "pcieport", 1, "154"),
        ("0000:cc:02.0", "1000:c030", "0604", "pcieport", 1, "156"),
        ("0000:cd:00.0", "10de:27b8", "0302", "nvidia", 1, "153"),
        ("0000:ce:00.0", "10de:27b8", "0302", "nvidia", 1, "155"),
        ("0000:cf:00.0", "15b3:101d", "0200", "mlx5_core", 1, "157"),
    ]),
}  # fmt: skip


def _scenario_dirs(sysfs_fixtures: Path) -> list[str]:
    return sorted(p.name for p in sysfs_fixtures.iterdir() if p.is_dir() and p.name != "__pycache__")


def test_committed_trees_match_the_builder(builder: ModuleType, sysfs_fixtures: Path, tmp_path: Path) -> None:
    builder.build(tmp_path)
    amd = {"mi300x-x8", "mi210"}  # built by build_amd.py, compared by test_backend_amd_driver.py

    assert [n for n in _scenario_dirs(sysfs_fixtures) if n not in amd] == _scenario_dirs(tmp_path)
    for name in _scenario_dirs(tmp_path):
        assert builder.snapshot(sysfs_fixtures / name) == builder.snapshot(tmp_path / name), (
            f"test/fixtures/sysfs/{name} differs from build.py; "
            "run PYTHONPATH=test python -m testutil.fixtures.sysfs.build"
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
    # Every GPU names its board; bridges, NVSwitches and NICs of the fixtures name none.
    assert all(d.subsystem_vendor_id is not None for d in devices if d.class_code.startswith("03"))


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
