"""Event handlers and predicates: which requests an informer event turns into."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import V1ObjectMeta, V1OwnerReference
from pydantic import BaseModel

from pkg.framework.cache.listener import DeletedFinalStateUnknown
from pkg.framework.controller.enqueue import (
    EnqueueingListener,
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
)
from pkg.framework.controller.predicate import (
    Funcs,
    GenerationChangedPredicate,
    LabelChangedPredicate,
    Predicate,
    ResourceVersionChangedPredicate,
    and_,
    or_,
)
from pkg.framework.reconcile.contract import Request


class Obj(BaseModel):
    metadata: V1ObjectMeta


def obj(
    name: str,
    *,
    namespace: str | None = None,
    generation: int = 1,
    rv: str = "1",
    labels: dict[str, str] | None = None,
    owners: list[V1OwnerReference] | None = None,
) -> Obj:
    return Obj(
        metadata=V1ObjectMeta(
            name=name,
            namespace=namespace,
            generation=generation,
            resource_version=rv,
            labels=labels,
            owner_references=owners,
        )
    )


def owner(
    kind: str, name: str, *, api_version: str = "gpu.deckhouse.io/v1alpha1", controller: bool = True
) -> Any:
    return V1OwnerReference(
        api_version=api_version, kind=kind, name=name, uid=f"uid-{name}", controller=controller
    )


class ListQueue:
    def __init__(self) -> None:
        self.items: list[Request] = []

    def add(self, item: Request) -> None:
        self.items.append(item)


def test_for_object_maps_namespaced_and_cluster_objects() -> None:
    handler = EnqueueRequestForObject()
    assert handler.requests_for(obj("a", namespace="ns")) == [Request(name="a", namespace="ns")]
    assert handler.requests_for(obj("gpu-0")) == [Request(name="gpu-0")]


def test_for_owner_maps_only_controller_owners_of_the_right_kind() -> None:
    child = obj(
        "pod",
        namespace="ns",
        owners=[
            owner("GPUPool", "pool-a"),
            owner("GPUPool", "pool-b", controller=False),  # owner, but not the controller
            owner("Node", "pool-c"),  # wrong kind
            owner("GPUPool", "pool-d", api_version="other.io/v1"),  # wrong group
        ],
    )
    handler = EnqueueRequestForOwner(owner_kind="GPUPool", owner_api_group="gpu.deckhouse.io")
    assert handler.requests_for(child) == [Request(name="pool-a", namespace="ns")]


def test_for_owner_without_is_controller_maps_every_owner_of_the_kind() -> None:
    child = obj("c", namespace="ns", owners=[owner("GPUPool", "a"), owner("GPUPool", "b", controller=False)])
    handler = EnqueueRequestForOwner(
        owner_kind="GPUPool", owner_api_group="gpu.deckhouse.io", is_controller=False
    )
    assert handler.requests_for(child) == [Request("a", "ns"), Request("b", "ns")]


def test_for_owner_core_group_and_cluster_scoped_owner() -> None:
    child = obj("gpu", namespace="ns", owners=[owner("Node", "node-1", api_version="v1")])
    handler = EnqueueRequestForOwner(owner_kind="Node", owner_api_group="", owner_namespaced=False)
    assert handler.requests_for(child) == [Request(name="node-1")]
    assert handler.requests_for(obj("orphan", namespace="ns")) == []


def test_map_func() -> None:
    handler = EnqueueRequestsFromMapFunc(
        lambda o: [Request(f"{o.metadata.name}-1"), Request(f"{o.metadata.name}-2")]
    )
    assert handler.requests_for(obj("x")) == [Request("x-1"), Request("x-2")]


def test_queueing_handler_routes_every_event_type() -> None:
    queue = ListQueue()
    adapter = EnqueueingListener(handler=EnqueueRequestForObject(), queue=queue)
    adapter.on_add(obj("a"), is_in_initial_list=True)
    adapter.on_update(obj("b", rv="1"), obj("b", rv="2"))
    adapter.on_delete(obj("c"))
    adapter.on_delete(DeletedFinalStateUnknown(key="d", obj=obj("d")))
    assert queue.items == [Request("a"), Request("b"), Request("c"), Request("d")]


def test_update_maps_old_and_new_once_each() -> None:
    queue = ListQueue()
    adapter = EnqueueingListener(
        handler=EnqueueRequestForOwner(owner_kind="GPUPool", owner_api_group="gpu.deckhouse.io"), queue=queue
    )
    adapter.on_update(obj("c", owners=[owner("GPUPool", "old")]), obj("c", owners=[owner("GPUPool", "new")]))
    adapter.on_update(
        obj("c", owners=[owner("GPUPool", "same")]), obj("c", owners=[owner("GPUPool", "same")])
    )
    assert queue.items == [Request("new"), Request("old"), Request("same")]


def test_predicates_filter_updates_only_by_default() -> None:
    queue = ListQueue()
    adapter = EnqueueingListener(
        handler=EnqueueRequestForObject(), queue=queue, predicates=[GenerationChangedPredicate()]
    )
    adapter.on_add(obj("a"), is_in_initial_list=False)
    adapter.on_update(obj("status-only", generation=1, rv="1"), obj("status-only", generation=1, rv="2"))
    adapter.on_update(obj("spec", generation=1), obj("spec", generation=2))
    adapter.on_delete(DeletedFinalStateUnknown(key="gone", obj=obj("gone")))
    assert queue.items == [Request("a"), Request("spec"), Request("gone")]


def test_predicates_see_the_unwrapped_deleted_object() -> None:
    queue = ListQueue()
    seen: list[Any] = []

    def delete(o: Any) -> bool:
        seen.append(o)
        return bool(o.metadata.name != "skip")

    adapter = EnqueueingListener(
        handler=EnqueueRequestForObject(), queue=queue, predicates=[Funcs(delete=delete)]
    )
    adapter.on_delete(DeletedFinalStateUnknown(key="skip", obj=obj("skip")))
    adapter.on_delete(obj("keep"))
    assert [o.metadata.name for o in seen] == ["skip", "keep"]
    assert queue.items == [Request("keep")]


@pytest.mark.parametrize(
    ("predicate", "old", "new", "passes"),
    [
        (GenerationChangedPredicate(), obj("a", generation=1), obj("a", generation=1, rv="2"), False),
        (GenerationChangedPredicate(), obj("a", generation=1), obj("a", generation=2), True),
        (LabelChangedPredicate(), obj("a", labels=None), obj("a", labels={}), False),
        (LabelChangedPredicate(), obj("a", labels={"x": "1"}), obj("a", labels={"x": "2"}), True),
        (ResourceVersionChangedPredicate(), obj("a", rv="5"), obj("a", rv="5"), False),
        (ResourceVersionChangedPredicate(), obj("a", rv="5"), obj("a", rv="6"), True),
    ],
)
def test_builtin_update_predicates(predicate: Predicate, old: Obj, new: Obj, passes: bool) -> None:
    assert predicate.update(old, new) is passes
    assert predicate.create(new) is True
    assert predicate.delete(new) is True


def test_and_or_combinators() -> None:
    gen, labels = GenerationChangedPredicate(), LabelChangedPredicate()
    old = obj("a", generation=1, labels={"x": "1"})
    only_gen = obj("a", generation=2, labels={"x": "1"})
    assert and_(gen, labels).update(old, only_gen) is False
    assert or_(gen, labels).update(old, only_gen) is True
    assert and_().update(old, old) is True
    assert or_().update(old, old) is False
    never = Funcs(create=lambda o: False)
    assert and_(gen, never).create(old) is False
    assert or_(gen, never).create(old) is True
