"""The writer's requests: an apply of only the owned fields, a guarded withdrawal."""

from __future__ import annotations

from typing import Any

import pytest
from testutil.unit.gpuhandler.gpuhandler_fakes import condition, gpu

from api.gpu.v1alpha1 import Capabilities, NvidiaState, Vendor
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient, PatchType
from pkg.framework.client.errors import InvalidError
from pkg.gpuhandler.enrichment.owned import OwnedStatus
from pkg.gpuhandler.enrichment.status_writer import KubeStatusWriter


def client(mocker: Any, manager: str = "gpu-handler") -> Any:
    fake = mocker.Mock(spec=KubeClient)
    fake.field_manager = manager
    return fake


def test_the_writer_refuses_another_field_manager(mocker: Any) -> None:
    with pytest.raises(ValueError, match="gpu-handler"):
        KubeStatusWriter(client(mocker, "gpu-node-agent"))


def test_apply_sends_exactly_the_owned_fields_to_the_status(mocker: Any) -> None:
    kube = client(mocker)
    owned = OwnedStatus(
        capabilities=Capabilities(product_name="NVIDIA A30", memory_mib=24576, vendor=Vendor.NVIDIA),
        nvidia=NvidiaState(driver_version="580.76.05"),
        health=condition("HardwareHealthy", "True", reason="Healthy"),
    )
    KubeStatusWriter(kube).apply(gpu(), owned)
    kube.apply.assert_called_once_with(
        PHYSICAL_GPU,
        {
            "metadata": {"name": "node-1-0-10de-20b7"},
            "status": {
                "capabilities": {"productName": "NVIDIA A30", "memoryMiB": 24576, "vendor": "Nvidia"},
                "currentState": {"nvidia": {"driverVersion": "580.76.05"}},
                "conditions": [
                    {
                        "type": "HardwareHealthy",
                        "status": "True",
                        "reason": "Healthy",
                        "message": "",
                        "lastTransitionTime": "2026-11-21T12:00:00Z",
                    }
                ],
            },
        },
        subresource="status",
        force=True,
    )


def test_withdraw_is_guarded_by_uid_and_tolerates_a_missing_block(mocker: Any) -> None:
    kube = client(mocker)
    writer = KubeStatusWriter(kube)
    writer.withdraw_nvidia(gpu())
    kube.patch.assert_called_once_with(
        PHYSICAL_GPU,
        "node-1-0-10de-20b7",
        [
            {"op": "test", "path": "/metadata/uid", "value": "uid-node-1-0-10de-20b7"},
            {"op": "remove", "path": "/status/currentState/nvidia"},
        ],
        patch_type=PatchType.JSON,
        subresource="status",
    )
    kube.patch.side_effect = InvalidError(status=422, reason="Invalid", message="path not found")
    assert writer.withdraw_nvidia(gpu()) is None


def test_a_validation_failure_of_the_withdrawal_is_raised_not_taken_for_nothing_to_withdraw(
    mocker: Any,
) -> None:
    """A 422 with field causes (the CRD refused the patched object) is a failure to retry; only
    the causeless 422 of a JSON patch that no longer applies means "nothing to withdraw"."""
    kube = client(mocker)
    causes = [{"reason": "FieldValueInvalid", "field": "status.currentState", "message": "Invalid value"}]
    kube.patch.side_effect = InvalidError(
        status=422,
        reason="Invalid",
        message='PhysicalGPU.gpu.deckhouse.io "node-1-0-10de-20b7" is invalid: status.currentState: ...',
        details={"name": "node-1-0-10de-20b7", "causes": causes},
    )
    with pytest.raises(InvalidError, match="is invalid"):
        KubeStatusWriter(kube).withdraw_nvidia(gpu())
