"""DriverReady from the GPU validator's Pods: the verdict of each Pod state, the handler (taken from
the real container) and its Events, and the watch predicate that keeps probe noise out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dependency_injector import providers
from kubernetes.client import (
    V1Condition,
    V1ContainerState,
    V1ContainerStateRunning,
    V1ContainerStateTerminated,
    V1ContainerStateWaiting,
    V1ContainerStatus,
    V1ObjectMeta,
    V1Pod,
    V1PodCondition,
    V1PodSpec,
    V1PodStatus,
)
from testutil.k8s_fields import spec_of

from api.gpu.v1alpha1 import (
    LABEL_NODE,
    LABEL_VENDOR,
    CurrentState,
    DriverType,
    PciClass,
    PciId,
    PciInfo,
    PhysicalGPU,
    PhysicalGPUStatus,
)
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import Resource
from pkg.framework.reconcile.conditions import ConditionStatus
from pkg.framework.reconcile.contract import Request
from pkg.gpucontroller.physicalgpu.internal.handler.driver_ready import DriverReadyHandler
from pkg.gpucontroller.physicalgpu.internal.indexes import pod_node
from pkg.gpucontroller.physicalgpu.internal.state import state_factory
from pkg.gpucontroller.physicalgpu.internal.validator import Verdict, node_verdict
from pkg.gpucontroller.physicalgpu.internal.watch.validator_pod import verdict_changed
from pkg.gpucontroller.physicalgpu.setup import PhysicalGPUContainer

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
UNKNOWN, TRUE, FALSE = ConditionStatus.UNKNOWN, ConditionStatus.TRUE, ConditionStatus.FALSE


def waiting(reason: str, message: str = "") -> V1ContainerState:
    return V1ContainerState(waiting=V1ContainerStateWaiting(reason=reason, message=message or None))


def exited(code: int, reason: str = "Error", message: str | None = None) -> V1ContainerState:
    return V1ContainerState(
        terminated=V1ContainerStateTerminated(exit_code=code, reason=reason, message=message)
    )


def pod(
    name: str = "validator-x",
    *,
    ready: bool = False,
    phase: str = "Pending",
    init: V1ContainerState | None = None,
    last: V1ContainerState | None = None,
    main: V1ContainerState | None = None,
    deleting: bool = False,
    age: int = 0,
    ready_message: str | None = None,
    reason: str | None = None,
) -> V1Pod:
    statuses = []
    if init is not None:
        statuses.append(
            V1ContainerStatus(
                name="driver-validation",
                image="v",
                image_id="",
                ready=False,
                restart_count=1,
                state=init,
                last_state=last,
            )
        )
    mains = []
    if main is not None:
        mains.append(
            V1ContainerStatus(
                name="validator", image="v", image_id="", ready=ready, restart_count=0, state=main
            )
        )
    return V1Pod(
        metadata=V1ObjectMeta(
            name=name,
            namespace="gpu",
            creation_timestamp=NOW - timedelta(seconds=age),
            deletion_timestamp=NOW if deleting else None,
        ),
        spec=V1PodSpec(node_name="n1", containers=[]),
        status=V1PodStatus(
            phase=phase,
            reason=reason,
            message="the node was low on resource" if reason else None,
            conditions=[
                V1PodCondition(type="Ready", status="True" if ready else "False", message=ready_message)
            ],
            init_container_statuses=statuses or None,
            container_statuses=mains or None,
        ),
    )


RUNNING = V1ContainerState(running=V1ContainerStateRunning(started_at=NOW))


@pytest.mark.parametrize(
    ("pods", "status", "reason", "words"),
    [
        ([], UNKNOWN, "ValidationPending", "no GPU validator Pod on node n1"),
        ([pod(ready=True, phase="Running", main=RUNNING)], TRUE, "Validated", "gpu/validator-x is Ready"),
        ([pod(ready=True, deleting=True)], UNKNOWN, "ValidatorTerminating", "being deleted"),
        (
            [
                pod(
                    init=waiting("CrashLoopBackOff", "back-off 10s"),
                    last=exited(1, message="no /dev/nvidiactl\n"),
                )
            ],
            FALSE,
            "CrashLoopBackOff",
            "init container driver-validation is CrashLoopBackOff: back-off 10s; "
            "last run exited with code 1: no /dev/nvidiactl",
        ),
        (
            [pod(init=exited(1, message="driver missing"))],
            FALSE,
            "Error",
            "exited with code 1: driver missing",
        ),
        (
            [pod(init=waiting("ErrImagePull", "not found"))],
            FALSE,
            "ErrImagePull",
            "is ErrImagePull: not found",
        ),
        ([pod(phase="Failed", reason="Evicted")], FALSE, "Evicted", "failed: the node was low on resource"),
        ([pod(init=exited(2, reason="bad reason!"))], FALSE, "ValidationFailed", "exited with code 2"),
        (
            [pod(phase="Running", main=RUNNING, ready_message="containers with unready status: [validator]")],
            UNKNOWN,
            "ValidationInProgress",
            "containers with unready status: [validator]",
        ),
        ([pod(init=waiting("PodInitializing"))], UNKNOWN, "ValidationInProgress", "phase Pending"),
        (
            # the kubelet retrying a failed validation: still the same failure, not "in progress"
            [pod(init=RUNNING, last=exited(1, message="missing /dev/nvidiactl\n"))],
            FALSE,
            "Error",
            "init container driver-validation is running again; last run exited with code 1: "
            "missing /dev/nvidiactl",
        ),
        (
            # a first run of the validation is in progress
            [pod(init=RUNNING)],
            UNKNOWN,
            "ValidationInProgress",
            "phase Pending",
        ),
    ],
)
def test_each_pod_state_has_its_verdict(
    pods: list[V1Pod], status: ConditionStatus, reason: str, words: str
) -> None:
    verdict = node_verdict(pods, "n1")
    assert (verdict.status, verdict.reason) == (status, reason)
    assert words in verdict.message


def test_during_a_rolling_update_a_ready_live_pod_wins_and_else_the_newest_speaks() -> None:
    old_ready = pod("old", ready=True, phase="Running", main=RUNNING, age=600)
    new_failing = pod("new", init=exited(1), age=5)
    terminating = pod("old", ready=True, deleting=True, age=600)
    assert node_verdict([new_failing, old_ready], "n1").status is TRUE
    assert node_verdict([terminating, new_failing], "n1") == Verdict(
        FALSE, "Error", "validator Pod gpu/new: init container driver-validation exited with code 1"
    )
    older_starting = pod("older", age=60)
    assert "gpu/new" in node_verdict([older_starting, new_failing], "n1").message


def test_messages_are_bounded() -> None:
    verdict = node_verdict([pod(init=exited(1, message="x" * 100_000))], "n1")
    assert len(verdict.message) == 1024


# -- the handler -------------------------------------------------------------------------------


def _gpu(*, vendor: str = "nvidia", driver_ready: str | None = None) -> PhysicalGPU:
    conditions = None
    if driver_ready is not None:
        conditions = [
            V1Condition(
                type="DriverReady", status=driver_ready, reason="R", message="m", last_transition_time=NOW
            )
        ]
    return PhysicalGPU(
        metadata=V1ObjectMeta(
            name="n1-0-10de-20b7", uid="u1", generation=2, labels={LABEL_NODE: "n1", LABEL_VENDOR: vendor}
        ),
        status=PhysicalGPUStatus(conditions=conditions),
    )


def _handler(mocker: Any, recorder: Any) -> DriverReadyHandler:
    container = PhysicalGPUContainer(
        client=mocker.Mock(spec=KubeClient), informers=mocker.Mock(spec=InformerFactory), recorder=recorder
    )
    container.now.override(providers.Object(lambda: NOW))
    [handler] = [h for h in container.handlers() if isinstance(h, DriverReadyHandler)]
    return handler


def _state(mocker: Any, gpu: PhysicalGPU, pods: list[V1Pod]) -> Any:
    resource = Resource(
        Request(name="n1-0-10de-20b7"),
        getter=lambda _r: gpu,
        writer=mocker.Mock(),
        status_type=PhysicalGPUStatus,
    )
    resource.fetch()
    return state_factory(lambda _n: True, lambda node: pods if node == "n1" else [])(resource)


def _stored(state: Any) -> None:
    """What the template's writer does: the working copy becomes what the server holds."""
    state.resource._accept(state.resource.changed())


def test_a_ready_validator_makes_the_card_driver_ready_with_one_event(mocker: Any) -> None:
    recorder = mocker.Mock(spec=EventRecorderLogger)
    handler = _handler(mocker, recorder)
    state = _state(mocker, _gpu(), [pod(ready=True, phase="Running", main=RUNNING)])
    handler.handle(state)
    [condition] = state.status.conditions
    assert (condition.type, condition.status, condition.reason) == ("DriverReady", "True", "Validated")
    assert condition.observed_generation == 2
    assert condition.last_transition_time == NOW
    _stored(state)
    handler.after_write(state)
    assert recorder.event.call_args.kwargs["reason"] == "DriverReady"
    assert recorder.event.call_args.kwargs["type_"] == "Normal"
    assert "Unknown -> True" in recorder.event.call_args.kwargs["message"]


def test_a_failed_validation_is_a_warning_and_an_unchanged_status_no_event(mocker: Any) -> None:
    recorder = mocker.Mock(spec=EventRecorderLogger)
    handler = _handler(mocker, recorder)
    state = _state(mocker, _gpu(driver_ready="True"), [pod(init=exited(1, message="no driver"))])
    handler.handle(state)
    _stored(state)
    handler.after_write(state)
    assert recorder.event.call_args.kwargs["reason"] == "DriverNotReady"
    assert recorder.event.call_args.kwargs["type_"] == "Warning"
    recorder.reset_mock()
    again = _state(mocker, state.resource.original, [pod(init=exited(1, message="no driver"))])
    handler.handle(again)
    assert again.resource.changed().status == again.resource.original.status
    _stored(again)
    handler.after_write(again)
    recorder.event.assert_not_called()


def test_a_node_whose_validator_disappears_goes_back_to_unknown(mocker: Any) -> None:
    handler = _handler(mocker, mocker.Mock(spec=EventRecorderLogger))
    state = _state(mocker, _gpu(driver_ready="True"), [])
    handler.handle(state)
    [condition] = state.status.conditions
    assert (condition.status, condition.reason) == ("Unknown", "ValidationPending")


def test_cards_no_validator_judges_are_left_alone(mocker: Any) -> None:
    handler = _handler(mocker, mocker.Mock(spec=EventRecorderLogger))
    state = _state(mocker, _gpu(vendor="amd"), [pod(ready=True, phase="Running", main=RUNNING)])
    handler.handle(state)
    assert state.status.conditions is None


def test_only_a_moved_pod_or_a_new_verdict_wakes_the_controller() -> None:
    starting = pod(phase="Running", main=RUNNING, ready_message="containers with unready status: [validator]")
    probed = pod(phase="Running", main=RUNNING, ready_message="containers with unready status: [validator]")
    assert not verdict_changed(starting, probed)
    assert verdict_changed(starting, pod(ready=True, phase="Running", main=RUNNING))
    moved = pod(phase="Running", main=RUNNING, ready_message="containers with unready status: [validator]")
    spec_of(moved).node_name = "n2"
    assert verdict_changed(starting, moved)
    assert pod_node(V1Pod(spec=V1PodSpec(containers=[]))) == []


def _amd_gpu(driver: DriverType | None) -> PhysicalGPU:
    gpu = _gpu(vendor="amd")
    assert gpu.status is not None
    gpu.status.pci_info = PciInfo(
        address="0000:05:00.0", class_=PciClass(code="1200"), vendor=PciId(id="1002"), device=PciId(id="74a1")
    )
    gpu.status.current_state = CurrentState(driver_type=driver)
    return gpu


@pytest.mark.parametrize(
    ("driver", "status", "reason"),
    [
        (DriverType.ROCM, "True", "DriverBound"),
        (DriverType.VFIO, "False", "DriverNotBound"),
        (None, "False", "DriverNotBound"),
    ],
)
def test_a_card_of_a_vendor_without_a_validator_is_ready_when_bound_to_its_driver(
    mocker: Any, driver: DriverType | None, status: str, reason: str
) -> None:
    recorder = mocker.Mock(spec=EventRecorderLogger)
    handler = _handler(mocker, recorder)
    state = _state(mocker, _amd_gpu(driver), [])  # no validator Pod: none runs for AMD
    handler.handle(state)
    [condition] = state.status.conditions
    assert (condition.type, condition.status, condition.reason) == ("DriverReady", status, reason)
    _stored(state)
    handler.after_write(state)
    assert recorder.event.call_args.kwargs["reason"] == (
        "DriverReady" if status == "True" else "DriverNotReady"
    )
