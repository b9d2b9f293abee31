"""gpu-controller's status write against the real API server: an apply of its own fields only.

Its cache holds a projection of each PhysicalGPU (``pkg.gpucontroller.projections``), so a write of
the cached object would erase most of what the node agent and gpu-handler wrote. These tests run
the real process beside the other two writers on one card and check that every field and condition
they own survives gpu-controller's writes — including writes they make while it runs — and that the
server records gpu-controller as the owner of exactly ``DriverReady`` and ``observedGeneration``.
The second test checks, on the server, the one conflict the writer forces through: with the
``Update`` entry releases before this one left under the same manager name.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import V1Condition, V1ObjectMeta
from testutil.integration.dra_objects import create_ready_node
from testutil.integration.gpu_controller_helpers import create_validator_pod, gpu_controller, report_validator
from testutil.integration.process_helpers import eventually

from api.gpu.v1alpha1 import (
    LABEL_NODE,
    LABEL_VENDOR,
    Capabilities,
    NvidiaState,
    PhysicalGPU,
    PhysicalGPUStatus,
    Vendor,
)
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import NODE
from pkg.framework.client.errors import ConflictError
from pkg.gpucontroller.physicalgpu.internal.status_writer import ApplyStatusWriter
from pkg.gpuhandler.enrichment.owned import OwnedStatus
from pkg.gpuhandler.enrichment.status_writer import KubeStatusWriter

T0 = datetime(2026, 11, 26, 11, 0, 0, tzinfo=UTC)


def _agent_status(node: str, kernel: str) -> dict[str, Any]:
    """What the node agent applies (``nodeInfo``, ``pciInfo``, ``currentState.driverType``)."""
    return {
        "nodeInfo": {"nodeName": node, "os": {"id": "debian", "version": "12"}, "kernelRelease": kernel},
        "pciInfo": {"address": "0000:02:00.0", "class": {"code": "0302"}, "vendor": {"id": "10de"},
                    "device": {"id": "20b7"}},
        "currentState": {"driverType": "Nvidia"},
    }  # fmt: skip


def _health(status: str, message: str) -> OwnedStatus:
    return OwnedStatus(
        capabilities=Capabilities(product_name="NVIDIA A30", memory_mib=24576, vendor=Vendor.NVIDIA),
        nvidia=NvidiaState(gpu_uuid="GPU-a30", driver_version="580.76.05"),
        health=V1Condition(type="HardwareHealthy", status=status, reason="Checked", message=message,
                           last_transition_time=T0),
    )  # fmt: skip


def _others(gpu: PhysicalGPU) -> dict[str, Any]:
    """Everything in the stored status that gpu-controller does not own."""
    status = dict(PHYSICAL_GPU.encode(gpu).get("status") or {})
    status.pop("observedGeneration", None)
    status["conditions"] = [c for c in status.get("conditions") or [] if c["type"] != "DriverReady"]
    return status


def _owned_by(gpu: PhysicalGPU, manager: str, operation: str) -> str:
    entries = [
        e for e in gpu.metadata.managed_fields or [] if (e.manager, e.operation) == (manager, operation)
    ]
    return json.dumps([e.fields_v1 for e in entries])


def test_other_writers_fields_survive_the_controllers_writes(
    kube: KubeClient, kubeconfig: str, namespace: str, unique: str, tmp_path: Path
) -> None:
    node = f"apply-{unique}"
    create_ready_node(kube, node)
    name = f"{node}-0-10de-20b7"
    labels = {LABEL_NODE: node, LABEL_VENDOR: "nvidia"}
    kube.create(PHYSICAL_GPU, PhysicalGPU(metadata=V1ObjectMeta(name=name, labels=labels)))
    agent = KubeClient(kube.api_client, field_manager="gpu-node-agent")
    handler = KubeStatusWriter(KubeClient(kube.api_client, field_manager="gpu-handler"))
    files = KubeClient(kube.api_client, field_manager="gpu-handler-driver-files")

    def agent_writes(kernel: str) -> None:
        agent.apply(PHYSICAL_GPU, {"metadata": {"name": name}, "status": _agent_status(node, kernel)},
                    subresource="status", force=True)  # fmt: skip

    agent_writes("6.1.0-28-amd64")
    handler.apply(kube.get(PHYSICAL_GPU, name), _health("False", "Xid 79"))
    driver_files = {"type": "DriverFilesReady", "status": "True", "reason": "Found", "message": "ok",
                    "lastTransitionTime": "2026-11-26T11:00:00Z"}  # fmt: skip
    files.apply(PHYSICAL_GPU, {"metadata": {"name": name}, "status": {"conditions": [driver_files]}},
                subresource="status", force=True)  # fmt: skip
    create_validator_pod(kube, namespace, node)
    report_validator(kube, namespace, ready=True)
    before = _others(kube.get(PHYSICAL_GPU, name))
    try:
        with gpu_controller(kubeconfig, namespace, log_path=tmp_path / "gpu-controller.log"):

            def driver_ready() -> str | None:
                gpu = kube.get(PHYSICAL_GPU, name)
                found = [
                    c
                    for c in (gpu.status.conditions if gpu.status else None) or []
                    if c.type == "DriverReady"
                ]
                return found[0].status if found else None

            eventually(lambda: driver_ready() == "True", what="DriverReady True from the validator")
            stored = kube.get(PHYSICAL_GPU, name)
            assert _others(stored) == before
            assert stored.status is not None
            assert stored.status.observed_generation == stored.metadata.generation
            mine = _owned_by(stored, "gpu-controller", "Apply")
            assert "DriverReady" in mine
            assert "HardwareHealthy" not in mine
            assert "pciInfo" not in mine
            assert _owned_by(stored, "gpu-controller", "Update") == "[]"  # never a PUT

            # The other writers write while it runs; its next write (the validator fails) keeps theirs.
            agent_writes("6.1.0-29-amd64")
            handler.apply(kube.get(PHYSICAL_GPU, name), _health("True", "recovered"))
            during = _others(kube.get(PHYSICAL_GPU, name))
            report_validator(kube, namespace, ready=False, init_failure="Error", message="no driver")
            eventually(lambda: driver_ready() == "False", what="DriverReady False from the failed validator")
            assert _others(kube.get(PHYSICAL_GPU, name)) == during
            assert during["nodeInfo"]["kernelRelease"] == "6.1.0-29-amd64"
    finally:
        kube.delete(PHYSICAL_GPU, name)
        kube.delete(NODE, node)


def test_the_fields_its_earlier_updates_wrote_are_taken_over(kube: KubeClient, unique: str) -> None:
    name = f"legacy-{unique}-0-10de-20b7"
    legacy = KubeClient(kube.api_client, field_manager="gpu-controller")
    gpu = kube.create(PHYSICAL_GPU, PhysicalGPU(metadata=V1ObjectMeta(name=name, labels={LABEL_NODE: "n"})))
    pending = V1Condition(type="DriverReady", status="Unknown", reason="ValidationPending", message="wait",
                          last_transition_time=T0)  # fmt: skip
    gpu.status = PhysicalGPUStatus(conditions=[pending], observed_generation=1)
    gpu = legacy.update_status(PHYSICAL_GPU, gpu)  # how releases before this one wrote it
    try:
        ready = V1Condition(type="DriverReady", status="True", reason="Validated", message="ok",
                            last_transition_time=T0)  # fmt: skip
        gpu.status = PhysicalGPUStatus(conditions=[ready], observed_generation=1)
        condition = ready.model_dump(by_alias=True, exclude_none=True, mode="json")
        body = {"metadata": {"name": name}, "status": {"conditions": [condition]}}
        with pytest.raises(ConflictError) as unforced:
            legacy.apply(PHYSICAL_GPU, body, subresource="status", force=False)
        causes = unforced.value.details["causes"]
        assert causes
        assert all(c["message"].startswith('conflict with "gpu-controller" ') for c in causes)
        stored = ApplyStatusWriter(legacy).update_status(gpu)
        assert [(c.type, c.status) for c in stored.status.conditions or []] == [("DriverReady", "True")]  # type: ignore[union-attr]
        assert "DriverReady" in _owned_by(stored, "gpu-controller", "Apply")
    finally:
        kube.delete(PHYSICAL_GPU, name)
