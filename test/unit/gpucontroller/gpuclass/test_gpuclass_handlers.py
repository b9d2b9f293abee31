"""The GPUClass controller's steps, taken from the real container with the writer and the recorder
overridden: ownership, apply only when different, the status verdict and its Events."""

from __future__ import annotations

from typing import Any

import pytest
from dependency_injector import providers
from kubernetes.client import V1DeviceClass, V1ObjectMeta, V1OwnerReference
from testutil.k8s_fields import spec_of

from api.gpu.v1alpha1 import GPUClass, GPUClassStatus
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.client.errors import InvalidError
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import Resource, StopHandlerChain
from pkg.framework.reconcile.contract import Request
from pkg.gpucontroller.gpuclass.internal.handler.apply import ApplyHandler
from pkg.gpucontroller.gpuclass.internal.handler.ownership import OwnershipHandler
from pkg.gpucontroller.gpuclass.internal.indexes import named_gpus
from pkg.gpucontroller.gpuclass.internal.state import GPUClassState
from pkg.gpucontroller.gpuclass.render import device_class
from pkg.gpucontroller.gpuclass.setup import GPUClassContainer


class Parts:
    def __init__(self, mocker: Any) -> None:
        self.writer = mocker.Mock()
        self.writer.apply.side_effect = lambda dc: dc
        self.recorder = mocker.Mock(spec=EventRecorderLogger)
        container = GPUClassContainer(
            client=mocker.Mock(spec=KubeClient),
            informers=mocker.Mock(spec=InformerFactory),
            recorder=self.recorder,
        )
        container.writer.override(providers.Object(self.writer))
        self.handlers = container.handlers()

    def run(self, state: GPUClassState) -> None:
        for handler in self.handlers:
            try:
                handler.handle(state)
            except StopHandlerChain:
                return

    def reasons(self) -> list[str]:
        return [call.kwargs["reason"] for call in self.recorder.event.call_args_list]


def gpu_class(name: str = "a30", status: GPUClassStatus | None = None, **spec: Any) -> GPUClass:
    cls = GPUClass.from_api_dict(
        {
            "metadata": {"name": name, "uid": "u-1", "generation": 1},
            "spec": {"vendor": "Nvidia", "deviceType": "Physical", **spec},
        }
    )
    cls.status = status
    return cls


def state(
    cls: GPUClass,
    existing: V1DeviceClass | None = None,
    uuids: tuple[str, ...] | None = None,
    unresolved: tuple[str, ...] = (),
) -> GPUClassState:
    resource = Resource(
        Request(name=str(cls.metadata.name)),
        getter=lambda _r: cls,
        writer=None,  # type: ignore[arg-type]  # handlers only read the object; nothing is written
        status_type=GPUClassStatus,
    )
    resource.fetch()
    return GPUClassState(resource=resource, existing=existing, uuids=uuids, unresolved=unresolved)


def test_a_new_class_creates_its_device_class_and_reports_it(mocker: Any) -> None:
    parts = Parts(mocker)
    current = state(gpu_class())
    parts.run(current)
    [applied] = [call.args[0] for call in parts.writer.apply.call_args_list]
    assert applied.metadata.name == "a30"
    status = current.status
    assert status.valid is True
    assert status.generated is not None
    assert (status.generated.device_class_name, status.generated.extended_resource_name) == (
        "a30",
        "gpu.deckhouse.io/a30",
    )
    assert "request them as gpu.deckhouse.io/a30" in (status.message or "")
    assert parts.reasons() == ["DeviceClassApplied", "GPUClassValid"]


def test_an_unchanged_device_class_costs_no_request_and_no_event(mocker: Any) -> None:
    parts = Parts(mocker)
    cls = gpu_class()
    existing = device_class(cls, uuids=None, extended_resource="gpu.deckhouse.io/a30")
    first = state(cls, existing)
    parts.run(first)
    stored = first.resource.changed()
    parts.recorder.reset_mock()
    parts.run(state(stored, existing))
    parts.writer.apply.assert_not_called()
    assert parts.reasons() == []


def test_a_hand_edited_device_class_is_put_back(mocker: Any) -> None:
    parts = Parts(mocker)
    cls = gpu_class()
    edited = device_class(cls, uuids=None, extended_resource="gpu.deckhouse.io/a30")
    spec_of(edited).extended_resource_name = "gpu.deckhouse.io/other"
    parts.run(state(cls, edited))
    assert parts.writer.apply.call_args.args[0].spec.extended_resource_name == "gpu.deckhouse.io/a30"


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
)
def test_a_device_class_the_class_does_not_own_is_never_taken_over(mocker: Any, owners: Any) -> None:
    parts = Parts(mocker)
    foreign = V1DeviceClass(metadata=V1ObjectMeta(name="a30", owner_references=owners))
    current = state(gpu_class(), foreign)
    parts.run(current)
    parts.writer.apply.assert_not_called()
    assert current.status.valid is False
    assert "DeviceClass a30 exists and was not generated from this GPUClass" in (current.status.message or "")
    assert parts.reasons() == ["InvalidGPUClass"]


def test_a_name_too_long_for_the_default_extended_resource_needs_one_set(mocker: Any) -> None:
    parts = Parts(mocker)
    long = state(gpu_class("x" * 64))
    parts.run(long)
    assert long.status.valid is False
    assert "set spec.extendedResourceName" in (long.status.message or "")
    named = state(gpu_class("x" * 64, extendedResourceName="example.com/x"))
    parts.run(named)
    assert named.status.valid is True


def test_a_device_class_the_server_refuses_makes_the_class_invalid_without_retrying(mocker: Any) -> None:
    parts = Parts(mocker)
    parts.writer.apply.side_effect = InvalidError(
        status=422, reason="Invalid", message="spec.extendedResourceName: Invalid value"
    )
    current = state(gpu_class(extendedResourceName="kubernetes.io/gpu"))
    parts.run(current)  # no exception: the same spec would be refused again
    assert current.status.valid is False
    assert "the API server refused DeviceClass a30: 422 Invalid: spec.extendedResourceName" in (
        current.status.message or ""
    )


def test_named_cards_not_read_yet_are_listed_in_the_message(mocker: Any) -> None:
    parts = Parts(mocker)
    current = state(gpu_class(names=["n1-0", "n1-1"]), uuids=("GPU-a",), unresolved=("n1-1",))
    parts.run(current)
    assert current.status.valid is True
    assert "cards not read yet (no UUID): n1-1" in (current.status.message or "")
    assert 'uuid in ["GPU-a"]' in parts.writer.apply.call_args.args[0].spec.selectors[0].cel.expression


def test_classes_are_indexed_by_the_cards_they_name() -> None:
    assert named_gpus(gpu_class(names=["a", "b"])) == ["a", "b"]
    assert named_gpus(gpu_class()) == []


def test_handlers_run_ownership_first(mocker: Any) -> None:
    assert [type(h) for h in Parts(mocker).handlers] == [OwnershipHandler, ApplyHandler]
