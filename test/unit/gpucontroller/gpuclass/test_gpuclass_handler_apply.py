"""Step 2 of the GPUClass controller, apply: the DeviceClass is written only when the cached one
differs from the rendering, a refusal makes the class invalid without a retry, and the verdict with
what the class generated lands in the status."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytest_mock import MockerFixture, MockType
from testutil.k8s_fields import spec_of

from api.gpu.v1alpha1 import GPUClass, GPUClassStatus
from pkg.domain.kinds import GPU_CLASS
from pkg.framework.client.errors import ApiError, InvalidError
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.gpucontroller.gpuclass.internal.handler.apply import ApplyHandler
from pkg.gpucontroller.gpuclass.internal.state import GPUClassState
from pkg.gpucontroller.gpuclass.render import device_class

MakeClass = Callable[..., GPUClass]  # the gpu_class and class_state fixtures (conftest.py)
MakeState = Callable[..., GPUClassState]
EXTENDED = "gpu.deckhouse.io/a30"


@pytest.fixture
def writer(mocker: MockerFixture) -> MockType:
    writer: MockType = mocker.Mock()
    writer.apply.side_effect = lambda dc: dc
    return writer


@pytest.fixture
def recorder(mocker: MockerFixture) -> MockType:
    recorder: MockType = mocker.Mock(spec=EventRecorderLogger)
    return recorder


@pytest.fixture
def handler(writer: MockType, recorder: MockType) -> ApplyHandler:
    return ApplyHandler(writer=writer, recorder=recorder)


def reasons(recorder: MockType) -> list[str]:
    return [call.kwargs["reason"] for call in recorder.event.call_args_list]


def test_a_new_class_creates_its_device_class_and_reports_it(
    handler: ApplyHandler, writer: MockType, recorder: MockType, gpu_class: MakeClass, class_state: MakeState
) -> None:
    cls = gpu_class()
    state = class_state(cls)
    assert handler.handle(state) is None
    writer.apply.assert_called_once_with(device_class(cls, uuids=None, extended_resource=EXTENDED))
    assert recorder.event.call_args_list[0] == (
        (cls,),
        {
            "type_": "Normal",
            "reason": "DeviceClassApplied",
            "message": "created DeviceClass a30",
            "kind": GPU_CLASS,
        },
    )
    assert reasons(recorder) == ["DeviceClassApplied", "GPUClassValid"]
    status = state.status
    assert status.valid is True
    assert status.message == f"DeviceClass a30 selects these devices; request them as {EXTENDED}"
    assert status.generated is not None
    assert (status.generated.device_class_name, status.generated.extended_resource_name) == ("a30", EXTENDED)


def test_an_unchanged_device_class_costs_no_request_and_no_event(
    handler: ApplyHandler, writer: MockType, recorder: MockType, gpu_class: MakeClass, class_state: MakeState
) -> None:
    message = f"DeviceClass a30 selects these devices; request them as {EXTENDED}"
    cls = gpu_class(status=GPUClassStatus(valid=True, message=message))
    existing = device_class(cls, uuids=None, extended_resource=EXTENDED)
    state = class_state(cls, existing)
    handler.handle(state)
    writer.apply.assert_not_called()
    recorder.event.assert_not_called()
    assert (state.status.valid, state.status.message) == (True, message)


def test_a_hand_edited_device_class_is_put_back(
    handler: ApplyHandler, writer: MockType, recorder: MockType, gpu_class: MakeClass, class_state: MakeState
) -> None:
    cls = gpu_class()
    edited = device_class(cls, uuids=None, extended_resource=EXTENDED)
    spec_of(edited).extended_resource_name = "gpu.deckhouse.io/other"
    handler.handle(class_state(cls, edited))
    [applied] = [call.args[0] for call in writer.apply.call_args_list]
    assert applied.spec.extended_resource_name == EXTENDED
    assert recorder.event.call_args_list[0].kwargs["message"] == "updated DeviceClass a30"


def test_a_device_class_the_server_refuses_makes_the_class_invalid_without_retrying(
    handler: ApplyHandler, writer: MockType, recorder: MockType, gpu_class: MakeClass, class_state: MakeState
) -> None:
    writer.apply.side_effect = InvalidError(
        status=422, reason="Invalid", message="spec.extendedResourceName: Invalid value"
    )
    state = class_state(gpu_class(extendedResourceName="kubernetes.io/gpu"))
    assert handler.handle(state) is None  # no exception: the same spec would be refused again
    assert state.status.valid is False
    assert (state.status.message or "").startswith(
        "the API server refused DeviceClass a30: 422 Invalid: spec.extendedResourceName"
    )
    assert state.status.generated is None
    assert reasons(recorder) == ["InvalidGPUClass"]


def test_other_api_errors_propagate_for_a_retry(
    handler: ApplyHandler, writer: MockType, recorder: MockType, gpu_class: MakeClass, class_state: MakeState
) -> None:
    writer.apply.side_effect = ApiError(status=500, reason="InternalError", message="etcd timeout")
    state = class_state(gpu_class())
    with pytest.raises(ApiError):
        handler.handle(state)
    recorder.event.assert_not_called()
    assert state.resource.changed().status is None


def test_named_cards_select_their_uuids_and_those_not_read_yet_are_listed(
    handler: ApplyHandler, writer: MockType, gpu_class: MakeClass, class_state: MakeState
) -> None:
    state = class_state(gpu_class(names=["n1-0", "n1-1"]), uuids=("GPU-a",), unresolved=("n1-1",))
    handler.handle(state)
    assert state.status.valid is True
    assert (state.status.message or "").endswith("; cards not read yet (no UUID): n1-1")
    assert 'uuid in ["GPU-a"]' in writer.apply.call_args.args[0].spec.selectors[0].cel.expression
