"""The default-conditions step: every PhysicalGPU gets both conditions, Unknown/ValidationPending
until their owners report, and a condition someone wrote is never touched."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes.client import V1Condition

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUStatus
from pkg.framework.reconcile import Resource
from pkg.gpucontroller.physicalgpu.internal.handler.default_conditions import DefaultConditionsHandler
from pkg.gpucontroller.physicalgpu.internal.state import state_factory

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
MakeGPU = Callable[..., PhysicalGPU]  # the physical_gpu and gpu_resource fixtures (conftest.py)
MakeResource = Callable[[PhysicalGPU], Resource[PhysicalGPU, PhysicalGPUStatus]]


def handle(resource: Resource[PhysicalGPU, PhysicalGPUStatus]) -> None:
    state = state_factory(lambda _n: True)(resource)
    assert DefaultConditionsHandler(now=lambda: NOW).handle(state) is None


def validated(condition_type: str) -> V1Condition:
    return V1Condition(
        type=condition_type, status="True", reason="Validated", message="ok", last_transition_time=NOW
    )


def test_missing_conditions_become_unknown_validation_pending(
    physical_gpu: MakeGPU, gpu_resource: MakeResource
) -> None:
    resource = gpu_resource(physical_gpu())
    handle(resource)
    conditions = {c.type: c for c in resource.status().conditions or []}
    assert set(conditions) == {"DriverReady", "HardwareHealthy"}
    for condition in conditions.values():
        assert (condition.status, condition.reason) == ("Unknown", "ValidationPending")
        assert condition.message == "waiting for the GPU validator to report"
        assert condition.observed_generation == 3
        assert condition.last_transition_time == NOW


def test_a_reported_condition_is_never_overwritten(physical_gpu: MakeGPU, gpu_resource: MakeResource) -> None:
    resource = gpu_resource(physical_gpu(conditions=[validated("DriverReady")]))
    handle(resource)
    by_type = {c.type: (c.status, c.reason) for c in resource.status().conditions or []}
    assert by_type == {
        "DriverReady": ("True", "Validated"),
        "HardwareHealthy": ("Unknown", "ValidationPending"),
    }


def test_complete_conditions_leave_the_status_untouched(
    physical_gpu: MakeGPU, gpu_resource: MakeResource
) -> None:
    resource = gpu_resource(physical_gpu(conditions=[validated("DriverReady"), validated("HardwareHealthy")]))
    handle(resource)
    assert resource.changed().status == resource.original.status
