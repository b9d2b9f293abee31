"""The node-labels reconcile: the gate labels a node's cards make, the one step that patches only
what differs, and the snapshot the template builds from the caches."""

from __future__ import annotations

from collections.abc import Callable

from dependency_injector import providers
from kubernetes.client import V1Node, V1ObjectMeta
from pytest_mock import MockerFixture, MockType

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.domain.indexes import PHYSICAL_GPU_BY_NODE
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.reconcile import Request, Result
from pkg.gpucontroller.nodelabels.reconciler import (
    GateLabelsHandler,
    NodeLabelsState,
    gate_labels,
    new_reconciler,
)
from pkg.gpucontroller.nodelabels.setup import NodeLabelsContainer

PRESENT, READY = "gpu.deckhouse.io/nvidia.present", "gpu.deckhouse.io/driver-ready"
AMD = "gpu.deckhouse.io/amd.present"

MakeCard = Callable[..., PhysicalGPU]  # the ``card`` fixture (conftest.py)


def test_labels_follow_the_cards(card: MakeCard) -> None:
    both = ["amd", "nvidia"]
    assert gate_labels([], both) == {PRESENT: None, AMD: None, READY: None}
    assert gate_labels([card("amd", "True")], both) == {PRESENT: None, AMD: "true", READY: "true"}
    assert gate_labels([card(ready="Unknown")], both) == {PRESENT: "true", AMD: None, READY: None}
    assert gate_labels([card(ready="False"), card("amd")], both) == {
        PRESENT: "true",
        AMD: "true",
        READY: None,
    }
    assert {PRESENT, AMD, READY} <= set(gate_labels([]))  # by default every installed vendor
    assert gate_labels([card(ready="True")], vendors=["nvidia"]) == {PRESENT: "true", READY: "true"}


def step_with_writer(mocker: MockerFixture) -> tuple[GateLabelsHandler, MockType]:
    """The step as the real container builds it, its writer replaced."""
    writer = mocker.Mock()
    container = NodeLabelsContainer(
        client=mocker.Mock(spec=KubeClient), informers=mocker.Mock(spec=InformerFactory)
    )
    container.writer.override(providers.Object(writer))
    [step] = container.handlers()
    assert isinstance(step, GateLabelsHandler)
    return step, writer


def test_only_the_labels_that_differ_are_patched(mocker: MockerFixture, card: MakeCard) -> None:
    step, writer = step_with_writer(mocker)
    labels = {PRESENT: "true", READY: "true", "gpu.deckhouse.io/os.id": "debian"}
    step.handle(NodeLabelsState(node_name="n1", labels=labels, gpus=(card(ready="Unknown"),)))
    writer.patch_labels.assert_called_once_with("n1", {READY: None})  # amd.present is absent already
    writer.reset_mock()
    step.handle(NodeLabelsState(node_name="n1", labels={PRESENT: "true"}, gpus=(card(ready="Unknown"),)))
    writer.patch_labels.assert_not_called()


def test_the_snapshot_is_the_node_and_its_cards_from_the_caches(
    mocker: MockerFixture, card: MakeCard
) -> None:
    node = V1Node(metadata=V1ObjectMeta(name="n1", labels={PRESENT: "true"}))
    nodes, gpus = mocker.Mock(), mocker.Mock()
    nodes.store.get_by_key.side_effect = lambda key: node if key == "n1" else None
    gpus.store.by_index.return_value = [card(ready="True")]
    seen: list[NodeLabelsState] = []
    step = mocker.Mock()
    step.name = "record"
    step.handle.side_effect = seen.append

    reconciler = new_reconciler(gpus=gpus, nodes=nodes, handlers=[step])

    assert reconciler.reconcile(Request(name="n1")) == Result()
    [state] = seen
    assert (state.node_name, dict(state.labels), state.gpus) == (
        "n1",
        {PRESENT: "true"},
        (card(ready="True"),),
    )
    gpus.store.by_index.assert_called_once_with(PHYSICAL_GPU_BY_NODE, "n1")
    reconciler.reconcile(Request(name="gone"))  # a deleted Node: no step runs
    assert len(seen) == 1
