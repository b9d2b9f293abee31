"""The PCIe root and NUMA node of a function, read from sysfs (Kubernetes' computation; the
integration tier compares with Kubernetes' helper itself)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pkg.hardware.pci_topology import PciPlacement, SysfsPciTopology, pcie_root

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"


def test_a_function_behind_a_root_port_and_a_switch_has_the_root_complex_of_its_chain() -> None:
    topology = SysfsPciTopology(FIXTURES / "hgx-h100")
    assert topology.placement("0000:18:00.0") == PciPlacement(pcie_root="pci0000:15", numa_node=0)
    assert topology.placement("0000:19:00.0") == PciPlacement(pcie_root="pci0000:15", numa_node=0)  # its NIC
    assert topology.placement("0000:9a:00.0") == PciPlacement(pcie_root="pci0000:97", numa_node=1)


def _function(root: Path, path: str, address: str, *, link: str | None = None, numa: str = "0\n") -> None:
    (root / "devices" / path).mkdir(parents=True)
    (root / "devices" / path / "numa_node").write_text(numa)
    (root / "bus/pci/devices").mkdir(parents=True, exist_ok=True)
    os.symlink(link or f"../../../devices/{path}", root / "bus/pci/devices" / address)


@pytest.mark.parametrize(
    ("path", "address", "link"),
    [
        ("pci0000:03/0000:03:00.0", "0000:03:00.0", "/sys/devices/pci0000:03/0000:03:00.0"),  # absolute
        ("virtual/0000:04:00.0", "0000:04:00.0", None),  # not under devices/pci…
        ("pci0000:05/0000:05:00.1", "0000:05:00.0", None),  # ends in another address
        ("pci0000:00/0000:00:0e.0/pci10000:e0/10000:e1:00.0", "10000:e1:00.0", None),  # VMD domain
    ],
)
def test_a_link_kubernetes_would_not_resolve_gives_no_root(
    tmp_path: Path, path: str, address: str, link: str | None
) -> None:
    _function(tmp_path, path, address, link=link)
    assert pcie_root(tmp_path, address) is None


def test_no_numa_affinity_and_a_missing_function_give_nothing(tmp_path: Path) -> None:
    _function(tmp_path, "pci0000:01/0000:01:00.0", "0000:01:00.0", numa="-1\n")
    topology = SysfsPciTopology(tmp_path)
    assert topology.placement("0000:01:00.0") == PciPlacement(pcie_root="pci0000:01")
    assert topology.placement("0000:09:00.0") == PciPlacement()


def test_a_broken_numa_file_leaves_the_node_out_and_keeps_the_root(tmp_path: Path) -> None:
    _function(tmp_path, "pci0000:01/0000:01:00.0", "0000:01:00.0", numa="zero\n")
    assert SysfsPciTopology(tmp_path).placement("0000:01:00.0") == PciPlacement(pcie_root="pci0000:01")
