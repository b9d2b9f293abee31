"""The GPUClass verdict: written into the working copy's status, with an Event only when ``valid``
or the message differs from what the class stored."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytest_mock import MockerFixture, MockType

from api.gpu.v1alpha1 import Generated, GPUClass, GPUClassStatus
from pkg.domain.kinds import GPU_CLASS
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.gpucontroller.gpuclass.internal.state import GPUClassState
from pkg.gpucontroller.gpuclass.internal.status import report

MakeClass = Callable[..., GPUClass]  # the gpu_class and class_state fixtures (conftest.py)
MakeState = Callable[..., GPUClassState]
GENERATED = Generated(device_class_name="a30", extended_resource_name="gpu.deckhouse.io/a30")


@pytest.fixture
def recorder(mocker: MockerFixture) -> MockType:
    recorder: MockType = mocker.Mock(spec=EventRecorderLogger)
    return recorder


def test_a_first_valid_verdict_is_written_with_what_was_generated_and_an_event(
    recorder: MockType, gpu_class: MakeClass, class_state: MakeState
) -> None:
    cls = gpu_class()
    state = class_state(cls)
    report(state, recorder, valid=True, message="fine", generated=GENERATED)
    assert (state.status.valid, state.status.message, state.status.generated) == (True, "fine", GENERATED)
    recorder.event.assert_called_once_with(
        cls, type_="Normal", reason="GPUClassValid", message="fine", kind=GPU_CLASS
    )
    assert cls.status is None  # the stored object is the baseline, never edited


def test_an_invalid_verdict_is_a_warning_and_keeps_what_was_generated_before(
    recorder: MockType, gpu_class: MakeClass, class_state: MakeState
) -> None:
    cls = gpu_class(status=GPUClassStatus(valid=True, message="fine", generated=GENERATED))
    state = class_state(cls)
    report(state, recorder, valid=False, message="broken")
    assert (state.status.valid, state.status.message, state.status.generated) == (False, "broken", GENERATED)
    recorder.event.assert_called_once_with(
        cls, type_="Warning", reason="InvalidGPUClass", message="broken", kind=GPU_CLASS
    )


def test_restating_the_stored_verdict_records_no_event(
    recorder: MockType, gpu_class: MakeClass, class_state: MakeState
) -> None:
    state = class_state(gpu_class(status=GPUClassStatus(valid=False, message="broken")))
    report(state, recorder, valid=False, message="broken")
    recorder.event.assert_not_called()
    assert (state.status.valid, state.status.message) == (False, "broken")


def test_a_new_message_with_the_same_validity_records_an_event(
    recorder: MockType, gpu_class: MakeClass, class_state: MakeState
) -> None:
    state = class_state(gpu_class(status=GPUClassStatus(valid=True, message="fine")))
    report(state, recorder, valid=True, message="fine; cards not read yet (no UUID): n1-1")
    assert recorder.event.call_args.kwargs["message"] == "fine; cards not read yet (no UUID): n1-1"
