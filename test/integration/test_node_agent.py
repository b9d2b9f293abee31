"""gpu-node-agent as a process against the real control plane, on copies of the fixture hosts.

Each agent reads a copy of a fixture tree in ``tmp_path`` (as both ``--sysfs-root`` and
``--host-root``), so a test can pull a card (remove its ``bus/pci/devices/<address>`` link), rebind
a driver or upgrade the kernel, and watch the objects follow. Resyncs run every ~2 s; uevents are
off (``--udev=false``), so every change below reaches the agent through a resync, a watch event or
SIGHUP.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from subprocess import Popen

from testutil.integration.dra_objects import create_ready_node
from testutil.integration.process_helpers import eventually, running
from testutil.k8s_fields import meta, present

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.devcluster.processes import free_port
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import NODE

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "test" / "fixtures"
NODE_LABEL = "gpu.deckhouse.io/node"
QUIET_SECONDS = 60.0


class Agent:
    """A running agent: its process, metrics port and host tree."""

    def __init__(self, proc: Popen[bytes], port: int, root: Path) -> None:
        self.proc, self.port, self.root = proc, port, root

    def metrics(self) -> str:
        body: bytes = urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5).read()
        return body.decode()

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        total = 0.0
        for line in self.metrics().splitlines():
            match = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
            if match and all(f'{k}="{v}"' in (match.group(1) or "") for k, v in labels.items()):
                total += float(match.group(2))
        return total

    def writes(self) -> float:
        return self.metric("gpu_node_agent_api_writes_total")

    def syncs(self) -> float:
        return self.metric("gpu_node_agent_sync_duration_seconds_count")


def _host_copy(scenario: str, tmp_path: Path) -> Path:
    root = tmp_path / scenario
    shutil.copytree(FIXTURES / "sysfs" / scenario, root, symlinks=True)
    return root


@contextmanager
def _agent(kubeconfig: str, node: str, root: Path, tmp_path: Path, *, resync: str = "2s") -> Iterator[Agent]:
    port = free_port()
    args = [
        f"--node-name={node}",
        f"--sysfs-root={root}",
        f"--host-root={root}",
        f"--pci-ids={FIXTURES / 'pci.ids'}",
        f"--resync-period={resync}",
        f"--kubeconfig={kubeconfig}",
        f"--metrics-bind-address=127.0.0.1:{port}",
        "--udev=false",
    ]
    with running("pkg.app.gpu_node_agent", args, log_path=tmp_path / f"agent-{node}.log") as proc:
        agent = Agent(proc, port, root)
        eventually(lambda: _answers(agent), timeout=30, what=f"the metrics endpoint of the agent of {node}")
        yield agent


def _answers(agent: Agent) -> bool:
    if agent.proc.poll() is not None:
        raise AssertionError(f"the agent exited with {agent.proc.returncode}")
    try:
        agent.metrics()
    except OSError:
        return False
    return True


def _gpus(kube: KubeClient, node: str) -> dict[str, PhysicalGPU]:
    items, _ = kube.list(PHYSICAL_GPU, label_selector=f"{NODE_LABEL}={node}")
    return {str(gpu.metadata.name): gpu for gpu in items}


def _complete(kube: KubeClient, node: str, count: int) -> dict[str, PhysicalGPU] | None:
    gpus = _gpus(kube, node)
    written = [g for g in gpus.values() if g.status is not None and g.status.pci_info is not None]
    return gpus if len(gpus) == count and len(written) == count else None


def _gone(kube: KubeClient, name: str) -> bool:
    try:
        kube.get(PHYSICAL_GPU, name)
    except NotFoundError:
        return True
    return False


def _status(gpu: PhysicalGPU) -> dict[str, object]:
    assert gpu.status is not None
    return gpu.status.to_api_dict()


def _versions(kube: KubeClient, *nodes: str) -> dict[str, str]:
    versions = {f"node/{n}": str(meta(kube.get(NODE, n)).resource_version) for n in nodes}
    for node in nodes:
        versions |= {name: str(g.metadata.resource_version) for name, g in _gpus(kube, node).items()}
    return versions


def _cleanup(kube: KubeClient, *nodes: str) -> None:
    for node in nodes:
        for name in _gpus(kube, node):
            kube.delete(PHYSICAL_GPU, name)
        kube.delete(NODE, node)


def test_agent_keeps_its_cards_in_sync_and_leaves_other_writers_fields_alone(
    kube: KubeClient, kubeconfig: str, unique: str, tmp_path: Path
) -> None:
    node = f"na-{unique}"
    create_ready_node(kube, node)
    root = _host_copy("a30-x2", tmp_path)
    first, second = f"{node}-0-10de-20b7", f"{node}-1-10de-20b7"
    with _agent(kubeconfig, node, root, tmp_path) as agent:
        gpus = eventually(lambda: _complete(kube, node, 2), what="two PhysicalGPUs with status")
        assert sorted(gpus) == [first, second]
        assert gpus[second].metadata.labels == {
            "gpu.deckhouse.io/node": node,
            "gpu.deckhouse.io/vendor": "nvidia",
            "gpu.deckhouse.io/device": "a30-pcie",
            "gpu.deckhouse.io/pci-address": "0000-d8-00.0",
        }
        assert _status(gpus[second]) == {
            "nodeInfo": {
                "nodeName": node,
                "os": {"id": "ubuntu", "version": "22.04", "name": "Ubuntu"},
                "kernelRelease": "5.15.0-105-generic",
                "bareMetal": True,
            },
            "pciInfo": {
                "address": "0000:d8:00.0",
                "class": {"code": "0302", "name": "3D controller"},
                "vendor": {"id": "10de", "name": "NVIDIA Corporation"},
                "device": {"id": "20b7", "name": "GA100GL [A30 PCIe]"},
            },
            "currentState": {"driverType": "Nvidia"},
        }
        node_labels = eventually(
            lambda: (
                {k: v for k, v in (meta(kube.get(NODE, node)).labels or {}).items() if k.startswith("gpu.")}
                or None
            ),
            what="the Node's agent labels",
        )
        assert node_labels == {
            "gpu.deckhouse.io/baremetal": "true",
            "gpu.deckhouse.io/os.id": "ubuntu",
            "gpu.deckhouse.io/os.version": "22.04",
            "gpu.deckhouse.io/kernel.version": "5.15.0-105-generic",
        }

        # Another component writes driver state and a condition into the second card's status.
        handler = KubeClient(kube.api_client, field_manager="gpu-handler")
        condition = {
            "type": "DriverReady",
            "status": "True",
            "reason": "Validated",
            "message": "ok",
            "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        handler.apply(
            PHYSICAL_GPU,
            {
                "metadata": {"name": second},
                "status": {
                    "currentState": {"nvidia": {"driverVersion": "580.76.05"}},
                    "conditions": [condition],
                },
            },
            subresource="status",
        )
        # A kernel upgrade makes the agent apply its status again; the other writer's fields survive.
        (root / "proc/sys/kernel/osrelease").write_text("5.15.0-106-generic\n")
        eventually(
            lambda: all(
                _status(g)["nodeInfo"]["kernelRelease"] == "5.15.0-106-generic"  # type: ignore[index]
                for g in _gpus(kube, node).values()
            ),
            what="the new kernel release in both statuses",
        )
        stored = kube.get(PHYSICAL_GPU, second)
        assert _status(stored)["currentState"] == {
            "driverType": "Nvidia",
            "nvidia": {"driverVersion": "580.76.05"},
        }
        assert [c.type for c in stored.status.conditions or []] == ["DriverReady"]  # type: ignore[union-attr]
        owners = {
            (m.manager, m.operation, m.subresource): m.fields_v1 for m in stored.metadata.managed_fields or []
        }
        assert "f:nvidia" in present(owners[("gpu-handler", "Apply", "status")])["f:status"]["f:currentState"]
        agent_status = present(owners[("gpu-node-agent", "Apply", "status")])["f:status"]
        assert set(agent_status) == {"f:pciInfo", "f:nodeInfo", "f:currentState"}
        assert set(agent_status["f:currentState"]) == {"f:driverType"}
        eventually(
            lambda: (
                (meta(kube.get(NODE, node)).labels or {}).get("gpu.deckhouse.io/kernel.version")
                == "5.15.0-106-generic"
            ),
            what="the new kernel label on the Node",
        )

        # Rebinding the card to vfio-pci: driverType follows; the stale NVIDIA state, which the
        # CRD forbids next to driverType VFIO, is removed; the condition stays.
        driver = (root / "bus/pci/devices/0000:d8:00.0").resolve() / "driver"
        driver.unlink()
        os.symlink("../../../bus/pci/drivers/vfio-pci", driver)
        eventually(
            lambda: _status(kube.get(PHYSICAL_GPU, second)).get("currentState") == {"driverType": "VFIO"},
            what="driverType VFIO without currentState.nvidia",
        )
        assert [c.type for c in kube.get(PHYSICAL_GPU, second).status.conditions or []] == ["DriverReady"]  # type: ignore[union-attr]

        # Pulling the first card deletes exactly its object; the second keeps name and uid.
        kept_uid = kube.get(PHYSICAL_GPU, second).metadata.uid
        (root / "bus/pci/devices/0000:3b:00.0").unlink()
        eventually(lambda: _gone(kube, first), what=f"{first} to be deleted")
        assert {name: g.metadata.uid for name, g in _gpus(kube, node).items()} == {second: kept_uid}

        # An object deleted by hand comes back (through the watch, not a resync) under its name.
        kube.delete(PHYSICAL_GPU, second)
        recreated = eventually(
            lambda: (_complete(kube, node, 1) or {}).get(second), what=f"{second} to be recreated"
        )
        assert recreated.metadata.uid != kept_uid
        assert _status(recreated)["currentState"] == {"driverType": "VFIO"}
        assert agent.metric("gpu_node_agent_devices", node=node) == 1
        assert agent.metric("gpu_node_agent_api_writes_total", kind="PhysicalGPU", verb="delete") == 1
    _cleanup(kube, node)


def test_sighup_syncs_at_once(kube: KubeClient, kubeconfig: str, unique: str, tmp_path: Path) -> None:
    node = f"hup-{unique}"
    create_ready_node(kube, node)
    root = _host_copy("unbound", tmp_path)
    with _agent(kubeconfig, node, root, tmp_path, resync="1h") as agent:
        gpus = eventually(lambda: _complete(kube, node, 1), what="the unbound card's PhysicalGPU")
        [(name, gpu)] = gpus.items()
        assert "currentState" not in _status(gpu)  # no driver bound: the field is absent
        device = (root / "bus/pci/devices/0000:3b:00.0").resolve()
        os.symlink("../../../bus/pci/drivers/nvidia", device / "driver")
        agent.proc.send_signal(signal.SIGHUP)
        eventually(
            lambda: _status(kube.get(PHYSICAL_GPU, name)).get("currentState") == {"driverType": "Nvidia"},
            timeout=10,
            what="driverType Nvidia after SIGHUP (the resync is an hour away)",
        )
    _cleanup(kube, node)


def test_two_agents_stay_on_their_nodes_and_a_quiet_minute_costs_no_write(
    kube: KubeClient, kubeconfig: str, unique: str, tmp_path: Path
) -> None:
    first, second = f"h100-{unique}", f"l4-{unique}"
    for node in (first, second):
        create_ready_node(kube, node)
    with _agent(kubeconfig, first, _host_copy("h100-sxm", tmp_path), tmp_path) as agent_a:
        eventually(lambda: _complete(kube, first, 2), what="the H100 node's PhysicalGPUs (NVSwitch excluded)")
        eventually(
            lambda: (meta(kube.get(NODE, first)).labels or {}).get("gpu.deckhouse.io/baremetal"),
            what="the H100 Node's labels",
        )
        before_b = _versions(kube, first)

        with _agent(kubeconfig, second, _host_copy("l4", tmp_path), tmp_path) as agent_b:
            gpus_b = eventually(lambda: _complete(kube, second, 2), what="the L4 node's PhysicalGPUs")
            assert {str(g.status.current_state.driver_type) for g in gpus_b.values()} == {"Nvidia", "VFIO"}  # type: ignore[union-attr]
            eventually(lambda: agent_b.syncs() >= 3, what="a few resyncs of the second agent")
            # The second agent wrote its own two cards and its own Node, nothing of the first node.
            assert _versions(kube, first) == before_b
            assert agent_b.metric("gpu_node_agent_api_writes_total", kind="PhysicalGPU") == 4
            assert agent_b.metric("gpu_node_agent_api_writes_total", kind="Node") == 1
            assert all(name.startswith(f"{first}-") for name in _gpus(kube, first))

            # The quiet minute: both agents resync every ~2 s, nobody writes anything.
            versions = _versions(kube, first, second)
            writes = (agent_a.writes(), agent_b.writes())
            syncs = (agent_a.syncs(), agent_b.syncs())
            seconds = agent_a.metric("gpu_node_agent_sync_duration_seconds_sum")
            time.sleep(QUIET_SECONDS)
            assert _versions(kube, first, second) == versions
            assert (agent_a.writes(), agent_b.writes()) == writes
            passes = (agent_a.syncs() - syncs[0], agent_b.syncs() - syncs[1])
            assert min(passes) >= QUIET_SECONDS / 2.4 - 2  # period 2 s ± 20 %
            mean = (agent_a.metric("gpu_node_agent_sync_duration_seconds_sum") - seconds) / passes[0]
            print(
                f"\nquiet {QUIET_SECONDS:.0f}s: syncs {passes}, writes 0, "
                f"mean no-op sync of the H100 host {mean * 1000:.2f} ms"
            )
    _cleanup(kube, first, second)
