"""The validator Pod watch: a Pod wakes the cards on its node when its verdict or node changes."""

from __future__ import annotations

from typing import Any

from kubernetes.client import (
    V1ContainerState,
    V1ContainerStateRunning,
    V1ContainerStatus,
    V1ObjectMeta,
    V1Pod,
    V1PodSpec,
    V1PodStatus,
)

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU
from pkg.domain.indexes import PHYSICAL_GPU_BY_NODE_INDEX
from pkg.framework.cache.indexer import indexers_of
from pkg.framework.cache.store import Store
from pkg.framework.reconcile import Request
from pkg.gpucontroller.physicalgpu.internal.watch import validator_pod_watch


def gpu(name: str, node: str) -> PhysicalGPU:
    return PhysicalGPU.model_validate({"metadata": {"name": name, "labels": {LABEL_NODE: node}}})


def pod(node: str | None, *, ready: bool, restarts: int = 0) -> V1Pod:
    running = V1ContainerState(running=V1ContainerStateRunning())
    main = V1ContainerStatus(
        name="main", image="v", image_id="", ready=ready, restart_count=restarts, state=running
    )
    return V1Pod(
        metadata=V1ObjectMeta(name="validator", namespace="gpu"),
        spec=V1PodSpec(containers=[], node_name=node),
        status=V1PodStatus(phase="Running", container_statuses=[main]),
    )


def store() -> Store[Any]:
    cards: Store[Any] = Store(indexers=indexers_of([PHYSICAL_GPU_BY_NODE_INDEX]))
    for card in (gpu("a", "n1"), gpu("b", "n2")):
        cards.add(card)
    return cards


def test_a_pod_maps_to_the_cards_on_its_node_and_an_unscheduled_one_to_none() -> None:
    watch = validator_pod_watch(store())
    assert watch.requests_for(pod("n1", ready=True)) == [Request("a")]
    assert watch.requests_for(pod(None, ready=False)) == []


def test_an_update_passes_when_the_pod_moves_and_not_when_it_says_the_same() -> None:
    predicate = validator_pod_watch(store()).predicate
    assert not predicate.update(pod("n1", ready=True), pod("n1", ready=True, restarts=0))
    assert predicate.update(pod("n1", ready=True), pod("n2", ready=True))
    assert predicate.create(pod("n1", ready=False))
    assert predicate.delete(pod("n1", ready=False))
