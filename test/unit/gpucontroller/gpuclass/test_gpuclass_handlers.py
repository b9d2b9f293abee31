"""The GPUClass controller's chain as the container wires it (writer and recorder overridden): the
order of its steps and what the order buys. Each step's own behaviour is tested in its own file
(test_gpuclass_handler_ownership.py, test_gpuclass_handler_apply.py)."""

from __future__ import annotations

from collections.abc import Callable

from dependency_injector import providers
from kubernetes.client import V1DeviceClass, V1ObjectMeta
from pytest_mock import MockerFixture

from api.gpu.v1alpha1 import GPUClass
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import StopHandlerChain
from pkg.gpucontroller.gpuclass.internal.handler.apply import ApplyHandler
from pkg.gpucontroller.gpuclass.internal.handler.ownership import OwnershipHandler
from pkg.gpucontroller.gpuclass.internal.indexes import named_gpus
from pkg.gpucontroller.gpuclass.internal.state import GPUClassState
from pkg.gpucontroller.gpuclass.setup import GPUClassContainer

MakeClass = Callable[..., GPUClass]  # the gpu_class and class_state fixtures (conftest.py)
MakeState = Callable[..., GPUClassState]


class Parts:
    def __init__(self, mocker: MockerFixture) -> None:
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


def test_handlers_run_ownership_first(mocker: MockerFixture) -> None:
    assert [type(h) for h in Parts(mocker).handlers] == [OwnershipHandler, ApplyHandler]


def test_a_new_class_passes_both_steps(
    mocker: MockerFixture, gpu_class: MakeClass, class_state: MakeState
) -> None:
    parts = Parts(mocker)
    current = class_state(gpu_class())
    parts.run(current)
    parts.writer.apply.assert_called_once()
    assert current.status.valid is True
    assert parts.reasons() == ["DeviceClassApplied", "GPUClassValid"]


def test_a_device_class_the_class_does_not_own_is_never_written(
    mocker: MockerFixture, gpu_class: MakeClass, class_state: MakeState
) -> None:
    parts = Parts(mocker)
    foreign = V1DeviceClass(metadata=V1ObjectMeta(name="a30"))
    current = class_state(gpu_class(), foreign)
    parts.run(current)
    parts.writer.apply.assert_not_called()
    assert current.status.valid is False
    assert parts.reasons() == ["InvalidGPUClass"]


def test_classes_are_indexed_by_the_cards_they_name(gpu_class: MakeClass) -> None:
    assert named_gpus(gpu_class(names=["a", "b"])) == ["a", "b"]
    assert named_gpus(gpu_class()) == []
