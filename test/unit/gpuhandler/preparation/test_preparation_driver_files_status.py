"""The DriverFilesReady condition: a server-side apply of the status as its own field manager, on
each of the node's PhysicalGPUs whose condition differs, and one Warning per card and reason."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubernetes.client import V1Condition, V1ObjectMeta
from pytest_mock import MockerFixture

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUStatus
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import ConflictError, KubeClient
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.gpuhandler.preparation.driver_files_status import (
    CONDITION,
    FIELD_MANAGER,
    DriverFilesFinding,
    KubeDriverFilesStatus,
)

MISSING = DriverFilesFinding(ready=False, reason="DriverFilesMissing", message="libcuda.so.1 not found")
FOUND = DriverFilesFinding(ready=True, reason="DriverFilesFound", message="all found")
SINCE = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def gpu(name: str, condition: V1Condition | None = None) -> PhysicalGPU:
    status = PhysicalGPUStatus(conditions=[condition] if condition else None)
    return PhysicalGPU(metadata=V1ObjectMeta(name=name, uid=f"uid-{name}"), status=status)


def service(mocker: MockerFixture, gpus: list[PhysicalGPU]) -> tuple[KubeDriverFilesStatus, Any, Any, Any]:
    client_class = mocker.patch("pkg.gpuhandler.preparation.driver_files_status.KubeClient", autospec=True)
    given = mocker.create_autospec(KubeClient, instance=True)
    recorder = mocker.create_autospec(EventRecorderLogger, instance=True)
    status = KubeDriverFilesStatus(client=given, gpus=lambda: gpus, recorder=recorder)
    return status, client_class, client_class.return_value, recorder


def test_it_writes_as_its_own_field_manager(mocker: MockerFixture) -> None:
    _, client_class, _, _ = service(mocker, [])

    client_class.assert_called_once_with(mocker.ANY, field_manager=FIELD_MANAGER)


def test_a_new_state_is_applied_to_the_status_of_every_card_and_warned_once(mocker: MockerFixture) -> None:
    first, second = gpu("g1"), gpu("g2")
    status, _, client, recorder = service(mocker, [first, second])

    status.report(MISSING)
    status.report(MISSING)  # unchanged: nothing more is written
    status.sync()  # the cards' conditions are still absent (the fake store never changes): re-applied

    assert client.apply.call_count == 4
    kind, body = client.apply.call_args_list[0].args
    assert kind is PHYSICAL_GPU
    assert client.apply.call_args_list[0].kwargs == {"subresource": "status", "force": True}
    assert body["metadata"] == {"name": "g1"}
    (condition,) = body["status"]["conditions"]
    assert {k: condition[k] for k in ("type", "status", "reason", "message")} == {
        "type": CONDITION,
        "status": "False",
        "reason": "DriverFilesMissing",
        "message": "libcuda.so.1 not found",
    }
    assert [call.args[0] for call in recorder.event.call_args_list] == [first, second]
    assert recorder.event.call_args.kwargs == {
        "type_": "Warning",
        "reason": "DriverFilesMissing",
        "message": "libcuda.so.1 not found",
        "kind": PHYSICAL_GPU,
    }


def test_a_card_already_showing_the_state_is_left_alone(mocker: MockerFixture) -> None:
    same = V1Condition(
        type=CONDITION, status="True", reason=FOUND.reason, message=FOUND.message, last_transition_time=SINCE
    )
    status, _, client, _ = service(mocker, [gpu("g1", same)])

    status.report(FOUND)

    client.apply.assert_not_called()


def test_the_transition_time_is_kept_while_the_status_holds(mocker: MockerFixture) -> None:
    older = V1Condition(type=CONDITION, status="True", reason="Old", message="m", last_transition_time=SINCE)
    status, _, client, recorder = service(mocker, [gpu("g1", older)])

    status.report(FOUND)

    (condition,) = client.apply.call_args.args[1]["status"]["conditions"]
    assert condition["lastTransitionTime"] == "2026-01-02T03:04:05Z"
    recorder.event.assert_not_called()  # a ready state warns no one


def test_a_refused_write_is_retried_next_round_and_not_warned(mocker: MockerFixture) -> None:
    status, _, client, recorder = service(mocker, [gpu("g1")])
    client.apply.side_effect = ConflictError(status=409, reason="Conflict", message="conflict")

    status.report(MISSING)

    recorder.event.assert_not_called()
    client.apply.side_effect = None
    status.sync()
    assert client.apply.call_count == 2
    recorder.event.assert_called_once()
