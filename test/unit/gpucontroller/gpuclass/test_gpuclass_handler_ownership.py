"""Step 1 of the GPUClass controller, ownership: it stops the chain, with the class made invalid,
before anything is written that the class may not write; otherwise it lets the pass go on."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes.client import V1DeviceClass, V1ObjectMeta, V1OwnerReference
from pytest_mock import MockerFixture, MockType

from api.gpu.v1alpha1 import GPUClass
from pkg.domain.kinds import GPU_CLASS
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import StopHandlerChain
from pkg.gpucontroller.gpuclass.internal.handler.ownership import OwnershipHandler
from pkg.gpucontroller.gpuclass.internal.state import GPUClassState
from pkg.gpucontroller.gpuclass.render import device_class

MakeClass = Callable[..., GPUClass]  # the gpu_class and class_state fixtures (conftest.py)
MakeState = Callable[..., GPUClassState]


@pytest.fixture
def recorder(mocker: MockerFixture) -> MockType:
    recorder: MockType = mocker.Mock(spec=EventRecorderLogger)
    return recorder


@pytest.mark.parametrize(
    "owners",
    [
        None,
        [
            V1OwnerReference(
                api_version="gpu.deckhouse.io/v1alpha1", kind="GPUClass", name="a30", uid="old-uid"
            )
        ],
    ],
    ids=["no-owner", "a-deleted-class-of-the-same-name"],
)
def test_a_device_class_the_class_does_not_own_stops_the_chain_and_makes_it_invalid(
    recorder: MockType, gpu_class: MakeClass, class_state: MakeState, owners: list[V1OwnerReference] | None
) -> None:
    cls = gpu_class()
    foreign = V1DeviceClass(metadata=V1ObjectMeta(name="a30", owner_references=owners))
    state = class_state(cls, foreign)
    with pytest.raises(StopHandlerChain) as stop:
        OwnershipHandler(recorder=recorder).handle(state)
    assert state.status.valid is False
    assert (state.status.message or "").startswith(
        "DeviceClass a30 exists and was not generated from this GPUClass"
    )
    assert stop.value.reason == state.status.message
    recorder.event.assert_called_once_with(
        cls, type_="Warning", reason="InvalidGPUClass", message=state.status.message, kind=GPU_CLASS
    )


def test_a_name_too_long_for_the_default_extended_resource_stops_the_chain(
    recorder: MockType, gpu_class: MakeClass, class_state: MakeState
) -> None:
    state = class_state(gpu_class("x" * 64))
    with pytest.raises(StopHandlerChain):
        OwnershipHandler(recorder=recorder).handle(state)
    assert state.status.valid is False
    assert "set spec.extendedResourceName" in (state.status.message or "")
    assert recorder.event.call_args.kwargs["reason"] == "InvalidGPUClass"


def test_a_long_name_with_its_own_extended_resource_goes_on(
    recorder: MockType, gpu_class: MakeClass, class_state: MakeState
) -> None:
    state = class_state(gpu_class("x" * 64, extendedResourceName="example.com/x"))
    assert OwnershipHandler(recorder=recorder).handle(state) is None
    recorder.event.assert_not_called()
    assert state.resource.changed().status is None  # the verdict is the apply step's


@pytest.mark.parametrize("existing", ["none", "owned"])
def test_a_new_or_owned_device_class_goes_on_untouched(
    recorder: MockType, gpu_class: MakeClass, class_state: MakeState, existing: str
) -> None:
    cls = gpu_class()
    owned = device_class(cls, uuids=None, extended_resource="gpu.deckhouse.io/a30")
    state = class_state(cls, owned if existing == "owned" else None)
    assert OwnershipHandler(recorder=recorder).handle(state) is None
    recorder.event.assert_not_called()
    assert state.resource.changed().status is None
