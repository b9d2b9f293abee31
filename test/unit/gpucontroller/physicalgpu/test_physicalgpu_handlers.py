"""The PhysicalGPU controller's state and its chain as the container wires it. Each step's own
behaviour is tested in its own file (test_physicalgpu_handler_orphan_cleanup.py,
test_physicalgpu_driver_ready.py, test_physicalgpu_handler_default_conditions.py)."""

from __future__ import annotations

from collections.abc import Callable

from pytest_mock import MockerFixture

from api.gpu.v1alpha1 import NodeInfo, PhysicalGPU, PhysicalGPUStatus
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import Resource
from pkg.gpucontroller.physicalgpu.internal.state import state_factory
from pkg.gpucontroller.physicalgpu.setup import PhysicalGPUContainer

MakeGPU = Callable[..., PhysicalGPU]  # the physical_gpu and gpu_resource fixtures (conftest.py)
MakeResource = Callable[[PhysicalGPU], Resource[PhysicalGPU, PhysicalGPUStatus]]


def test_state_reports_whether_the_node_exists(physical_gpu: MakeGPU, gpu_resource: MakeResource) -> None:
    build = state_factory(lambda name: name == "n1")
    assert build(gpu_resource(physical_gpu(node="n1"))).node_exists is True
    assert build(gpu_resource(physical_gpu(node="n2"))).node_exists is False
    unlabelled = build(gpu_resource(physical_gpu(node=None)))
    assert unlabelled.node_name is None
    assert unlabelled.node_exists is False


def test_state_prefers_the_full_node_name_from_status(
    physical_gpu: MakeGPU, gpu_resource: MakeResource
) -> None:
    long_name = "n" * 70
    gpu = physical_gpu(node="n" * 54 + "-0123abcd")  # the shortened label value
    gpu.status = PhysicalGPUStatus(node_info=NodeInfo(node_name=long_name))
    state = state_factory(lambda name: name == long_name)(gpu_resource(gpu))
    assert state.node_name == long_name
    assert state.node_exists is True


def test_the_container_wires_the_chain_in_order(mocker: MockerFixture) -> None:
    container = PhysicalGPUContainer(
        client=mocker.Mock(spec=KubeClient),
        informers=mocker.Mock(spec=InformerFactory),
        recorder=mocker.Mock(spec=EventRecorderLogger),
    )
    assert [h.name for h in container.handlers()] == ["orphan-cleanup", "driver-ready", "default-conditions"]
