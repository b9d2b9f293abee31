"""The Node watch: a Node appearing or disappearing wakes the cards on it; no Node update does."""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1Node, V1ObjectMeta

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU
from pkg.domain.indexes import PHYSICAL_GPU_BY_NODE_INDEX
from pkg.framework.cache.indexer import indexers_of
from pkg.framework.cache.store import Store
from pkg.framework.reconcile import Request
from pkg.gpucontroller.physicalgpu.internal.watch import node_watch


def gpu(name: str, node: str) -> PhysicalGPU:
    return PhysicalGPU.model_validate({"metadata": {"name": name, "labels": {LABEL_NODE: node}}})


def node(name: str, **labels: str) -> V1Node:
    return V1Node(metadata=V1ObjectMeta(name=name, labels=labels))


def gpus(*cards: PhysicalGPU) -> Store[Any]:
    store: Store[Any] = Store(indexers=indexers_of([PHYSICAL_GPU_BY_NODE_INDEX]))
    for card in cards:
        store.add(card)
    return store


def test_a_node_maps_to_the_cards_on_it_only() -> None:
    watch = node_watch(gpus(gpu("a", "n1"), gpu("b", "n1"), gpu("c", "n2")))
    assert watch.requests_for(node("n1")) == [Request("a"), Request("b")]
    assert watch.requests_for(node("n3")) == []


def test_creates_and_deletes_pass_and_no_update_does() -> None:
    predicate = node_watch(gpus()).predicate
    assert predicate.create(node("n1"))
    assert predicate.delete(node("n1"))
    assert not predicate.update(node("n1"), node("n1", heartbeat="1"))
