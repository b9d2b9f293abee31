"""What wakes a Node's reconcile: its own gate labels changing, and its cards' inputs changing."""

from __future__ import annotations

from collections.abc import Callable

from kubernetes.client import V1Node, V1ObjectMeta

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.framework.reconcile import Request
from pkg.gpucontroller.nodelabels.watch import (
    gate_inputs_changed,
    gate_labels_changed,
    node_events,
    node_of_gpu,
)

READY = "gpu.deckhouse.io/driver-ready"

MakeCard = Callable[..., PhysicalGPU]  # the ``card`` fixture (conftest.py)


def node(**labels: str) -> V1Node:
    return V1Node(metadata=V1ObjectMeta(name="n1", labels=labels, resource_version="1"))


def test_a_node_wakes_only_when_its_gate_labels_change() -> None:
    assert not gate_labels_changed(node(a="1"), node(a="2"))  # heartbeats and others' labels
    assert gate_labels_changed(node(**{READY: "true"}), node())  # removed by someone: put it back
    assert node_events().update(node(**{READY: "true"}), node())
    assert not node_events().delete(node())  # nothing is left to label
    assert node_events().create(node())


def test_a_card_wakes_its_node_when_an_input_of_the_gate_changes(card: MakeCard) -> None:
    assert not gate_inputs_changed(card(ready="True"), card(ready="True"))
    assert gate_inputs_changed(card(ready="True"), card(ready="False"))
    assert gate_inputs_changed(card("nvidia"), card("amd"))
    assert gate_inputs_changed(card(node="n1"), card(node="n2"))
    assert node_of_gpu(card(node="n7")) == [Request(name="n7")]
    assert node_of_gpu(PhysicalGPU(metadata=V1ObjectMeta(name="x"))) == []
