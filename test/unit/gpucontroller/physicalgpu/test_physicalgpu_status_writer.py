"""gpu-controller's status write sends exactly its own fields, and forces only over itself."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client import V1Condition, V1ObjectMeta

from api.gpu.v1alpha1 import (
    CurrentState,
    DriverType,
    NodeInfo,
    PciClass,
    PciId,
    PciInfo,
    PhysicalGPU,
    PhysicalGPUStatus,
)
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient
from pkg.framework.client.errors import ConflictError
from pkg.gpucontroller.physicalgpu.internal.status_writer import ApplyStatusWriter

T = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)


def condition(kind: str, status: str, reason: str) -> V1Condition:
    return V1Condition(type=kind, status=status, reason=reason, message="m", last_transition_time=T)


def gpu(*conditions: V1Condition) -> PhysicalGPU:
    return PhysicalGPU(
        metadata=V1ObjectMeta(name="n1-0-10de-20b7", uid="u", resource_version="9", generation=1),
        status=PhysicalGPUStatus(
            node_info=NodeInfo(node_name="n1"),
            pci_info=PciInfo(address="0000:02:00.0", class_=PciClass(code="0302"), vendor=PciId(id="10de"),
                             device=PciId(id="20b7")),
            current_state=CurrentState(driver_type=DriverType.NVIDIA),
            conditions=list(conditions),
            observed_generation=1,
        ),
    )  # fmt: skip


def client(mocker: Any) -> Any:
    kube = mocker.Mock(spec=KubeClient)
    kube.field_manager = "gpu-controller"
    return kube


def conflict(*managers: str) -> ConflictError:
    causes = [
        {"reason": "FieldManagerConflict", "message": f'conflict with "{m}" using gpu.deckhouse.io/v1alpha1',
         "field": '.status.conditions[type="DriverReady"].status'}
        for m in managers
    ]  # fmt: skip
    return ConflictError(status=409, reason="Conflict", message="Apply failed", details={"causes": causes})


def applied(kube: Any) -> list[tuple[dict[str, Any], bool]]:
    return [(call.args[1], call.kwargs["force"]) for call in kube.apply.call_args_list]


def test_the_apply_holds_driver_ready_and_observed_generation_only(mocker: Any) -> None:
    kube = client(mocker)
    ApplyStatusWriter(kube).update_status(
        gpu(condition("DriverReady", "True", "Validated"), condition("HardwareHealthy", "False", "XidError"))
    )
    [(body, force)] = applied(kube)
    assert body == {
        "metadata": {"name": "n1-0-10de-20b7"},
        "status": {
            "conditions": [{"type": "DriverReady", "status": "True", "reason": "Validated", "message": "m",
                            "lastTransitionTime": "2026-11-26T12:00:00Z"}],
            "observedGeneration": 1,
        },
    }  # fmt: skip
    assert force is False
    assert kube.apply.call_args.kwargs["subresource"] == "status"
    assert kube.apply.call_args.args[0] is PHYSICAL_GPU


def test_the_hardware_healthy_seed_is_ours_until_gpu_handler_writes_it(mocker: Any) -> None:
    kube = client(mocker)
    writer = ApplyStatusWriter(kube)
    seed = condition("HardwareHealthy", "Unknown", "ValidationPending")
    writer.update_status(gpu(condition("DriverReady", "Unknown", "ValidationPending"), seed))
    assert [c["type"] for c in applied(kube)[0][0]["status"]["conditions"]] == [
        "DriverReady",
        "HardwareHealthy",
    ]


def test_a_conflict_with_our_own_earlier_updates_is_forced_through(mocker: Any) -> None:
    kube = client(mocker)
    stored = gpu()
    kube.apply.side_effect = [conflict("gpu-controller"), stored]
    assert ApplyStatusWriter(kube).update_status(gpu(condition("DriverReady", "True", "Validated"))) is stored
    assert [force for _, force in applied(kube)] == [False, True]


@pytest.mark.parametrize("managers", [("gpu-handler",), ("gpu-controller", "gpu-handler"), ()])
def test_a_conflict_with_another_writer_is_never_forced(mocker: Any, managers: tuple[str, ...]) -> None:
    kube = client(mocker)
    kube.apply.side_effect = conflict(*managers)
    with pytest.raises(ConflictError):
        ApplyStatusWriter(kube).update_status(
            gpu(condition("HardwareHealthy", "Unknown", "ValidationPending"))
        )
    assert [force for _, force in applied(kube)] == [False]
