"""The node gate labels: what a node's PhysicalGPUs make them, one merge patch of only what differs,
and the watches that wake a node only when its gate can change."""

from __future__ import annotations

from typing import Any

from dependency_injector import providers
from kubernetes.client import V1Condition, V1Node, V1ObjectMeta

from api.gpu.v1alpha1 import LABEL_NODE, LABEL_VENDOR, PhysicalGPU, PhysicalGPUStatus
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.reconcile.contract import Request
from pkg.gpucontroller.nodelabels.internal.handler.gate_labels import GateLabelsHandler, gate_labels
from pkg.gpucontroller.nodelabels.internal.state import NodeLabelsState
from pkg.gpucontroller.nodelabels.setup import (
    NodeLabelsContainer,
    gate_inputs_changed,
    gate_labels_changed,
    node_of_gpu,
)

PRESENT, READY = "gpu.deckhouse.io/nvidia.present", "gpu.deckhouse.io/driver-ready"
AMD = "gpu.deckhouse.io/amd.present"


def gpu(vendor: str = "nvidia", ready: str | None = None, node: str = "n1") -> PhysicalGPU:
    conditions = (
        [
            V1Condition(
                type="DriverReady",
                status=ready,
                reason="R",
                message="",
                last_transition_time="2026-01-01T00:00:00Z",
            )
        ]
        if ready
        else None
    )
    return PhysicalGPU(
        metadata=V1ObjectMeta(name=f"{node}-0", labels={LABEL_NODE: node, LABEL_VENDOR: vendor}),
        status=PhysicalGPUStatus(conditions=conditions),
    )


def test_labels_follow_the_cards() -> None:
    both = ["amd", "nvidia"]
    assert gate_labels([], both) == {PRESENT: None, AMD: None, READY: None}
    assert gate_labels([gpu("amd", "True")], both) == {PRESENT: None, AMD: "true", READY: "true"}
    assert gate_labels([gpu(ready="Unknown")], both) == {PRESENT: "true", AMD: None, READY: None}
    assert gate_labels([gpu(ready="False"), gpu("amd")], both) == {PRESENT: "true", AMD: "true", READY: None}
    assert {PRESENT, AMD, READY} <= set(gate_labels([]))  # by default every installed vendor
    assert gate_labels([gpu(ready="True")], vendors=["nvidia"]) == {PRESENT: "true", READY: "true"}


def handler(mocker: Any) -> tuple[GateLabelsHandler, Any]:
    writer = mocker.Mock()
    container = NodeLabelsContainer(
        client=mocker.Mock(spec=KubeClient), informers=mocker.Mock(spec=InformerFactory)
    )
    container.writer.override(providers.Object(writer))
    [step] = container.handlers()
    return step, writer


def test_only_the_labels_that_differ_are_patched(mocker: Any) -> None:
    step, writer = handler(mocker)
    labels = {PRESENT: "true", READY: "true", "gpu.deckhouse.io/os.id": "debian"}
    step.handle(NodeLabelsState(node_name="n1", labels=labels, gpus=(gpu(ready="Unknown"),)))
    writer.patch_labels.assert_called_once_with("n1", {READY: None})  # amd.present is absent already
    writer.reset_mock()
    step.handle(NodeLabelsState(node_name="n1", labels={PRESENT: "true"}, gpus=(gpu(ready="Unknown"),)))
    writer.patch_labels.assert_not_called()


def test_a_node_wakes_only_when_its_gate_can_change() -> None:
    def node(**labels: str) -> V1Node:
        return V1Node(metadata=V1ObjectMeta(name="n1", labels=labels, resource_version="1"))

    assert not gate_labels_changed(node(a="1"), node(a="2"))
    assert gate_labels_changed(node(**{READY: "true"}), node())
    assert not gate_inputs_changed(gpu(ready="True"), gpu(ready="True"))
    assert gate_inputs_changed(gpu(ready="True"), gpu(ready="False"))
    assert gate_inputs_changed(gpu("nvidia"), gpu("amd"))
    assert node_of_gpu(gpu(node="n7")) == [Request(name="n7")]
    assert node_of_gpu(PhysicalGPU(metadata=V1ObjectMeta(name="x"))) == []
