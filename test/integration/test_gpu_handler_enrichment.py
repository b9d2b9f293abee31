"""gpu-handler's enrichment as a process against the real control plane, on a simulated NVIDIA host.

The real node agent and the real gpu-handler (backend ``simulated-nvidia``) run on one copy of the
``h100-and-l4`` fixture host: the agent creates the PhysicalGPUs from sysfs, the test plays the
validator (``DriverReady`` by server-side apply under its own field manager), and the handler
must then fill in ``capabilities``, ``currentState.nvidia`` and ``HardwareHealthy`` through the
real NVIDIA backend code over the simulated NVML, touching nothing else. Re-enrichment runs every
second, so a health file dropped into the simulation's state folder shows within a few seconds.
"""

from __future__ import annotations

import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from testutil.integration.dra_objects import create_ready_node
from testutil.integration.process_helpers import eventually, node_components

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import NODE

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "test" / "fixtures"
H100_ADDRESS, L4_ADDRESS = "0000:1b:00.0", "0000:ce:00.0"


def _status(kube: KubeClient, name: str) -> dict[str, Any]:
    try:
        gpu = kube.get(PHYSICAL_GPU, name)
    except NotFoundError:
        return {}
    return gpu.status.to_api_dict() if gpu.status else {}


def _conditions(kube: KubeClient, name: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in _status(kube, name).get("conditions", [])}


class _Validator:
    """Plays the GPU validator: applies its conditions under its own field manager. An apply owns
    exactly what it sends, so every apply restates all of this validator's conditions of a card."""

    def __init__(self, kube: KubeClient) -> None:
        self._client = KubeClient(kube.api_client, field_manager="gpu-validator")
        self._sent: dict[str, dict[str, dict[str, str]]] = {}

    def report(self, name: str, condition_type: str, status: str = "True") -> None:
        conditions = self._sent.setdefault(name, {})
        conditions[condition_type] = {
            "type": condition_type,
            "status": status,
            "reason": "Validated",
            "message": "set by the test as the validator would",
            "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        body = {"metadata": {"name": name}, "status": {"conditions": list(conditions.values())}}
        self._client.apply(PHYSICAL_GPU, body, subresource="status")


def _owners(gpu: PhysicalGPU) -> dict[tuple[str | None, str | None], Any]:
    return {(m.manager, m.operation): m.fields_v1 for m in gpu.metadata.managed_fields or []}


def _assert_h100_enriched(status: dict[str, Any]) -> dict[str, Any]:
    """The H100's capabilities and state as the NVIDIA backend reads them from the simulation."""
    caps: dict[str, Any] = status["capabilities"]
    assert (caps["productName"], caps["memoryMiB"], caps["vendor"]) == (
        "NVIDIA H100 80GB HBM3",
        81559,
        "Nvidia",
    )
    nvidia_caps = caps["nvidia"]
    assert (nvidia_caps["computeCap"], nvidia_caps["productArchitecture"]) == ("9.0", "Hopper")
    assert (nvidia_caps["powerLimitMinW"], nvidia_caps["powerLimitMaxW"]) == (200, 700)
    assert nvidia_caps["mig"]["totalSlices"] == 7
    profiles = {p["name"]: p for p in nvidia_caps["mig"]["profiles"]}
    assert profiles["3g.40gb"]["placements"] == [{"start": 0, "size": 4}, {"start": 4, "size": 4}]
    assert profiles["1g.10gb"]["profileID"] == 19
    current = status["currentState"]
    assert current["driverType"] == "Nvidia"  # still the agent's
    assert current["nvidia"]["gpuUUID"].startswith("GPU-")
    assert {k: v for k, v in current["nvidia"].items() if k != "gpuUUID"} == {
        "driverVersion": "580.76.05",
        "cudaVersion": "13.0",
        "powerLimitCurrentW": 700,
        "powerLimitEnforcedW": 700,
        "mig": {"mode": "Disabled"},
    }
    return caps


def _assert_each_writer_owns_its_fields(kube: KubeClient, name: str) -> None:
    conditions = eventually(
        lambda: (c := _conditions(kube, name)).get("HardwareHealthy") and c, what="HardwareHealthy"
    )
    assert set(conditions) == {"DriverReady", "Burnin", "HardwareHealthy"}
    healthy = conditions["HardwareHealthy"]
    assert (healthy["status"], healthy["reason"]) == ("True", "Healthy")
    owners = _owners(kube.get(PHYSICAL_GPU, name))
    handler_fields = owners[("gpu-handler", "Apply")]["f:status"]
    assert set(handler_fields) == {"f:capabilities", "f:currentState", "f:conditions"}
    assert set(handler_fields["f:currentState"]) == {"f:nvidia"}
    assert set(handler_fields["f:conditions"]) == {'k:{"type":"HardwareHealthy"}'}
    validator_conditions = owners[("gpu-validator", "Apply")]["f:status"]["f:conditions"]
    assert set(validator_conditions) == {'k:{"type":"DriverReady"}', 'k:{"type":"Burnin"}'}
    agent_fields = owners[("gpu-node-agent", "Apply")]["f:status"]
    assert set(agent_fields) == {"f:pciInfo", "f:nodeInfo", "f:currentState"}
    assert set(agent_fields["f:currentState"]) == {"f:driverType"}


def _make_sick(kube: KubeClient, name: str, state: Path, caps: dict[str, Any]) -> None:
    (state / f"{H100_ADDRESS}.health").write_text("False RowRemappingFailed row remapping failed on bank 3\n")
    sick = eventually(
        lambda: (c := _conditions(kube, name))["HardwareHealthy"]["status"] == "False" and c,
        what="HardwareHealthy False",
    )
    health = sick["HardwareHealthy"]
    assert (health["reason"], health["message"]) == ("RowRemappingFailed", "row remapping failed on bank 3")
    assert sick["DriverReady"]["status"] == "True"
    assert sick["Burnin"]["status"] == "True"
    assert _status(kube, name)["capabilities"] == caps


def test_enrichment_follows_driver_ready_and_leaves_other_writers_alone(
    kube: KubeClient, kubeconfig: str, unique: str, tmp_path: Path
) -> None:
    node = f"gh-{unique}"
    create_ready_node(kube, node)
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "sysfs" / "h100-and-l4", root, symlinks=True)
    state = tmp_path / "sim-state"
    state.mkdir()
    h100, l4 = f"{node}-0-10de-2330", f"{node}-1-10de-27b8"
    validator = _Validator(kube)
    with node_components(kubeconfig, node, root=root, state=state, logs=tmp_path):
        eventually(
            lambda: all(_status(kube, n).get("pciInfo") for n in (h100, l4)),
            what="both PhysicalGPUs from the agent",
        )
        time.sleep(3)  # three re-enrichment periods: nothing may appear before DriverReady
        assert "capabilities" not in _status(kube, h100)
        assert _status(kube, h100)["currentState"] == {"driverType": "Nvidia"}

        # The validator reports the H100 ready; the handler reads it through the NVIDIA backend.
        validator.report(h100, "DriverReady")
        validator.report(h100, "Burnin")  # another condition of another writer
        status = eventually(
            lambda: (s := _status(kube, h100)).get("capabilities") and s, what="the H100's capabilities"
        )
        caps = _assert_h100_enriched(status)
        _assert_each_writer_owns_its_fields(kube, h100)
        assert "capabilities" not in _status(kube, l4)  # not validated yet

        # The L4 has no MIG: no mig block anywhere.
        validator.report(l4, "DriverReady")
        l4_status = eventually(
            lambda: (s := _status(kube, l4)).get("capabilities") and s, what="the L4's capabilities"
        )
        assert l4_status["capabilities"]["nvidia"]["migSupported"] is False
        assert "mig" not in l4_status["capabilities"]["nvidia"]
        assert "mig" not in l4_status["currentState"]["nvidia"]

        # A quiet spell: re-enrichment every second, nothing changes, so nothing is written.
        versions = {n: kube.get(PHYSICAL_GPU, n).metadata.resource_version for n in (h100, l4)}
        time.sleep(4)
        assert {n: kube.get(PHYSICAL_GPU, n).metadata.resource_version for n in (h100, l4)} == versions

        # The card turns sick: HardwareHealthy follows, everything else stays.
        _make_sick(kube, h100, state, caps)

        # The agent re-applies its own status (a kernel upgrade); the handler's fields survive.
        (root / "proc/sys/kernel/osrelease").write_text("5.15.0-106-generic\n")
        eventually(
            lambda: _status(kube, h100)["nodeInfo"]["kernelRelease"] == "5.15.0-106-generic",
            what="the agent's new kernel release",
        )
        assert _status(kube, h100)["capabilities"] == caps
        assert _conditions(kube, h100)["HardwareHealthy"]["status"] == "False"

        # The validator withdraws the L4's DriverReady: its live NVIDIA state is withdrawn by the
        # handler (driverType stays Nvidia); the capability snapshot and health stay.
        l4_caps = l4_status["capabilities"]
        validator.report(l4, "DriverReady", "False")
        eventually(
            lambda: _status(kube, l4).get("currentState") == {"driverType": "Nvidia"},
            what="the L4 without currentState.nvidia",
        )
        assert _status(kube, l4)["capabilities"] == l4_caps
        assert _conditions(kube, l4)["HardwareHealthy"]["status"] == "True"

        # Rebound to vfio-pci for a VM: the live NVIDIA state goes and does not come back;
        # the capability snapshot stays.
        driver = (root / f"bus/pci/devices/{H100_ADDRESS}").resolve() / "driver"
        driver.unlink()
        os.symlink("../../../bus/pci/drivers/vfio-pci", driver)
        eventually(
            lambda: _status(kube, h100).get("currentState") == {"driverType": "VFIO"},
            what="driverType VFIO without currentState.nvidia",
        )
        time.sleep(3)
        vfio = _status(kube, h100)
        assert vfio["currentState"] == {"driverType": "VFIO"}
        assert vfio["capabilities"] == caps
    for name in (h100, l4):
        kube.delete(PHYSICAL_GPU, name)
    kube.delete(NODE, node)
