"""The host objects the soak reads from a simulated host's own state and a node's files."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from soak.host_state import MPS_PID_FILE, HostObject, NodePaths, read_node

from pkg.backends.simulated.driver_memory import (
    CardRecord,
    ComputeInstanceRecord,
    GpuInstanceRecord,
    SimulatedDriverMemory,
)
from pkg.backends.simulated.mdev_kernel import SimulatedMdevKernel
from pkg.devcluster.gpuhost import SimulatedGpuHost

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
A30 = "0000:01:00.0"
T4 = "0000:3b:00.0"
UUID = "0f4c2f3e-3d8b-4b8a-9d4e-0d9a4ee5b001"


def _paths(tmp_path: Path, fixture: str) -> NodePaths:
    host = SimulatedGpuHost.create(tmp_path / "host", FIXTURES / fixture)
    return NodePaths(
        node="node-a",
        host=host,
        cdi_dir=tmp_path / "cdi",
        kubelet_root=tmp_path / "kubelet",
        mps_root=tmp_path / "mps",
    )


def _of(objects: list[HostObject], kind: str) -> list[HostObject]:
    return [o for o in objects if o.kind == kind]


def test_a_fresh_host_has_nothing_to_own(tmp_path: Path) -> None:
    assert read_node(_paths(tmp_path, "a30-x2")) == []


def test_mig_instances_come_from_the_simulated_drivers_state(tmp_path: Path) -> None:
    paths = _paths(tmp_path, "a30-x2")
    card = sorted((paths.host.root / "bus" / "pci" / "devices").iterdir())[0].name

    def add(record: CardRecord) -> None:
        gi = GpuInstanceRecord(id=5, profile_id=14, start=2, size=1)
        gi.compute_instances.append(ComputeInstanceRecord(id=0, profile_id=0))
        record.gpu_instances.append(gi)

    SimulatedDriverMemory(paths.host.nvml_state / "driver").change(card, add)
    found = read_node(paths)
    assert [(o.kind, o.id, o.card) for o in found] == [
        ("mig-ci", f"{card}@2/gi5/ci0", card),
        ("mig-gi", f"{card}@2/gi5", card),
    ]


def test_an_mdev_names_its_parent_card(tmp_path: Path) -> None:
    paths = _paths(tmp_path, "t4-vgpu")
    types = paths.host.root / "bus" / "pci" / "devices" / T4 / "mdev_supported_types"
    kind = sorted(types.iterdir())[0]
    SimulatedMdevKernel(sysfs_root=paths.host.root, dev_root=paths.host.dev).written(kind / "create", UUID)
    assert _of(read_node(paths), "mdev") == [HostObject("node-a", "mdev", UUID, card=T4)]


def test_a_function_bound_to_vfio_pci_is_a_vfio_binding(tmp_path: Path) -> None:
    found = _of(read_node(_paths(tmp_path, "l4")), "vfio")
    assert [o.id for o in found] == ["0000:ca:00.0"]


def test_claim_specs_and_checkpoint_records_name_their_claim(tmp_path: Path) -> None:
    paths = _paths(tmp_path, "a30-x2")
    paths.cdi_dir.mkdir()
    (paths.cdi_dir / "k8s.gpu.deckhouse.io-claim_uid-1.json").write_text("{}")
    (paths.cdi_dir / "k8s.gpu.deckhouse.io-driver_nvidia.json").write_text("{}")  # the node's, no claim's
    paths.checkpoint.parent.mkdir(parents=True)
    record = {"uid": "uid-2", "devices": [{"card": A30}]}
    paths.checkpoint.write_text(json.dumps({"data": {"bootID": "b", "claims": {"uid-2": record}}}))
    found = read_node(paths)
    assert [(o.kind, o.owner) for o in found] == [("cdi-spec", "uid-1"), ("checkpoint", "uid-2")]
    assert found[1].card == A30


def test_imex_channel_nodes_are_listed(tmp_path: Path) -> None:
    paths = _paths(tmp_path, "a30-x2")
    paths.host.make_device("nvidia-caps-imex-channels/channel3")
    assert [o.id for o in _of(read_node(paths), "imex-channel")] == ["3"]


@pytest.fixture
def daemon() -> Iterator[subprocess.Popen[bytes]]:
    """A process whose command line is the stand-in MPS daemon's (it only sleeps)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "pkg.backends.simulated.mps_daemon"]
    )
    time.sleep(0.1)
    yield proc
    proc.kill()
    proc.wait()


def test_an_mps_daemon_counts_only_while_its_process_lives(
    tmp_path: Path, daemon: subprocess.Popen[bytes]
) -> None:
    paths = _paths(tmp_path, "a30-x2")
    pipe = paths.mps_root / A30 / "pipe"
    pipe.mkdir(parents=True)
    (pipe / MPS_PID_FILE).write_text(f"{daemon.pid}\n")
    assert _of(read_node(paths), "mps-daemon") == [
        HostObject("node-a", "mps-daemon", f"{A30}/pid{daemon.pid}", card=A30)
    ]
    daemon.kill()
    daemon.wait()
    assert _of(read_node(paths), "mps-daemon") == []
