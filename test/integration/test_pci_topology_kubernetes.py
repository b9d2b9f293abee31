"""Our PCIe root and NUMA node equal Kubernetes' own, on every fixture host tree and on odd shapes.

``resource.kubernetes.io/pcieRoot`` and ``resource.kubernetes.io/numaNode`` are only useful if every
driver computes them alike (a GPU and a NIC of another driver are matched by equal values), so the
reference is Kubernetes' helper package, not our reading of it: ``k8s_deviceattribute/main.go``
calls ``GetPCIeRootAttributeByPCIBusID`` and ``GetNUMANodeAttributeByPCIBusID`` of
``k8s.io/dynamic-resource-allocation/deviceattribute`` and is built here against the go.mod and
go.sum of ``hack/tools/kubernetes`` — the Kubernetes release the control plane of these tests runs,
from the module cache that ``make tools`` filled (no network: ``GOPROXY=off``).

Why built here rather than as a tool of ``hack/tools``: it is a test oracle, not something the
project ships or runs, and adding a binary to ``hack/tools/kubernetes`` would change that tool's
cache key and rebuild every Kubernetes binary. Sharing the go.mod keeps the release pinned in one
place; with warm Go caches the build takes a few seconds.

This lives in the integration tier because it needs the Go toolchain and the modules that tier's
tools were built from.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pkg.hardware.pci_topology import SysfsPciTopology

ROOT = Path(__file__).resolve().parents[2]
PINNED = ROOT / "hack" / "tools" / "kubernetes"
SOURCE = Path(__file__).resolve().parent / "k8s_deviceattribute" / "main.go"
FIXTURES = ROOT / "test" / "fixtures" / "sysfs"
SCENARIOS = sorted(p.name for p in FIXTURES.iterdir() if (p / "bus" / "pci" / "devices").is_dir())


@pytest.fixture(scope="module")
def kubernetes_helper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The oracle binary, built from the pinned Kubernetes modules."""
    go = shutil.which("go")
    assert go is not None, "the Go toolchain is needed to build the Kubernetes oracle (README: requirements)"
    work = tmp_path_factory.mktemp("k8s-deviceattribute")
    go_mod = (PINNED / "go.mod").read_text(encoding="utf-8")
    go_mod = re.sub(r"(?m)^module .*$", "module gpu-control-plane/test/k8s-deviceattribute", go_mod)
    go_mod = re.sub(r"(?ms)^tool \(.*?^\)\n", "", go_mod)  # the Kubernetes binaries: not built here
    (work / "go.mod").write_text(go_mod, encoding="utf-8")
    shutil.copy(PINNED / "go.sum", work / "go.sum")
    shutil.copy(SOURCE, work / "main.go")
    env = os.environ | {
        "CGO_ENABLED": "0",
        "GOTOOLCHAIN": "local",
        "GOFLAGS": "-mod=readonly -buildvcs=false -trimpath",
        "GOPROXY": "off",
    }
    binary = work / "k8s-deviceattribute"
    subprocess.run([go, "build", "-o", str(binary), "."], cwd=work, env=env, check=True, timeout=600)
    return binary


def kubernetes_says(helper: Path, sysfs: Path, addresses: list[str]) -> dict[str, dict[str, object]]:
    done = subprocess.run(
        [str(helper), str(sysfs), *addresses], capture_output=True, text=True, check=True, timeout=60
    )
    answers: dict[str, dict[str, object]] = json.loads(done.stdout)
    return answers


def ours(sysfs: Path, addresses: list[str]) -> dict[str, dict[str, object]]:
    topology = SysfsPciTopology(sysfs)
    result: dict[str, dict[str, object]] = {}
    for address in addresses:
        placement = topology.placement(address)
        answer: dict[str, object] = {}
        if placement.pcie_root is not None:
            answer["pcieRoot"] = placement.pcie_root
        if placement.numa_node is not None:
            answer["numaNode"] = placement.numa_node
        result[address] = answer
    return result


def values_only(answers: dict[str, dict[str, object]]) -> dict[str, dict[str, object]]:
    """Kubernetes' answers without its error texts: an error means "no attribute"."""
    return {a: {k: v for k, v in answer.items() if not k.endswith("Error")} for a, answer in answers.items()}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_function_of_every_fixture_tree_matches_kubernetes(
    kubernetes_helper: Path, scenario: str
) -> None:
    sysfs = FIXTURES / scenario
    addresses = sorted(os.listdir(sysfs / "bus" / "pci" / "devices"))
    theirs = kubernetes_says(kubernetes_helper, sysfs, addresses)
    assert ours(sysfs, addresses) == values_only(theirs)


def test_the_topology_scenarios_have_roots_shared_by_a_gpu_and_its_nic(kubernetes_helper: Path) -> None:
    """The comparison above is not vacuous: behind switches, a GPU and its NIC share one root."""
    sysfs = FIXTURES / "hgx-h100"
    theirs = kubernetes_says(kubernetes_helper, sysfs, ["0000:18:00.0", "0000:19:00.0", "0000:dd:00.0"])
    assert theirs["0000:18:00.0"] == {"pcieRoot": "pci0000:15", "numaNode": 0}
    assert theirs["0000:19:00.0"] == {"pcieRoot": "pci0000:15", "numaNode": 0}
    assert theirs["0000:dd:00.0"] == {"pcieRoot": "pci0000:da", "numaNode": 1}


def _odd_tree(root: Path) -> list[str]:
    """Shapes the fixtures lack: links that point elsewhere, NUMA files that say nothing."""
    devices, bus = root / "devices", root / "bus" / "pci" / "devices"
    bus.mkdir(parents=True)

    def function(path: str, address: str, *, link: str | None = None, numa: str | None = "0\n") -> str:
        folder = devices / path
        folder.mkdir(parents=True)
        if numa is not None:
            (folder / "numa_node").write_text(numa)
        os.symlink(link or f"../../../devices/{path}", bus / address)
        return address

    return [
        function("pci0000:00/0000:00:01.0/0000:01:00.0", "0000:01:00.0", numa="-1\n"),  # no affinity
        function("pci0000:02/0000:02:00.0", "0000:02:00.0", numa=None),  # no numa_node file
        function("pci0000:03/0000:03:00.0", "0000:03:00.0", link=str(devices / "pci0000:03/0000:03:00.0")),
        function("virtual/0000:04:00.0", "0000:04:00.0"),  # not under devices/pci…
        function("pci0000:05/0000:05:00.1", "0000:05:00.0"),  # the link ends in another address
        function("pci0000:00/0000:00:0e.0/pci10000:e0/10000:e1:00.0", "10000:e1:00.0"),  # behind VMD
        function("pci0000:06/0000:06:00.0", "0000:06:00.0", numa="3\n"),
    ]


def test_odd_shapes_match_kubernetes(kubernetes_helper: Path, tmp_path: Path) -> None:
    addresses = _odd_tree(tmp_path)
    theirs = kubernetes_says(kubernetes_helper, tmp_path, addresses)
    assert ours(tmp_path, addresses) == values_only(theirs)
    assert ours(tmp_path, ["0000:06:00.0"]) == {"0000:06:00.0": {"pcieRoot": "pci0000:06", "numaNode": 3}}
