"""Event handlers and predicates: which requests an informer event turns into."""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1ObjectMeta, V1OwnerReference
from pydantic import BaseModel

from pkg.framework.cache.listener import DeletedFinalStateUnknown
from pkg.framework.controller.enqueue import (
    EnqueueingListener,
    EnqueueRequestForObject,
    EnqueueRequestsFromMapFunc,
)
from pkg.framework.controller.predicate import Funcs
from pkg.framework.reconcile.contract import Request

# The predicate controllers use when they act on the spec only: a status write bumps resourceVersion
# but not generation.
GENERATION_CHANGED = Funcs(update=lambda old, new: old.metadata.generation != new.metadata.generation)


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


def test_map_func() -> None:
    handler = EnqueueRequestsFromMapFunc(
        lambda o: [Request(f"{o.metadata.name}-1"), Request(f"{o.metadata.name}-2")]
    )
    assert handler.requests_for(obj("x")) == [Request("x-1"), Request("x-2")]


def test_queueing_handler_routes_every_event_type() -> None:
    queue = ListQueue()
    adapter = EnqueueingListener(mapper=EnqueueRequestForObject(), queue=queue)
    adapter.on_add(obj("a"), is_in_initial_list=True)
    adapter.on_update(obj("b", rv="1"), obj("b", rv="2"))
    adapter.on_delete(obj("c"))
    adapter.on_delete(DeletedFinalStateUnknown(key="d", obj=obj("d")))
    assert queue.items == [Request("a"), Request("b"), Request("c"), Request("d")]


def test_update_maps_old_and_new_once_each() -> None:
    queue = ListQueue()
    adapter = EnqueueingListener(
        mapper=EnqueueRequestsFromMapFunc(
            lambda o: [Request(ref.name) for ref in o.metadata.owner_references or ()]
        ),
        queue=queue,
    )
    adapter.on_update(obj("c", owners=[owner("GPUPool", "old")]), obj("c", owners=[owner("GPUPool", "new")]))
    adapter.on_update(
        obj("c", owners=[owner("GPUPool", "same")]), obj("c", owners=[owner("GPUPool", "same")])
    )
    assert queue.items == [Request("new"), Request("old"), Request("same")]


def test_predicates_filter_updates_only_by_default() -> None:
    queue = ListQueue()
    adapter = EnqueueingListener(
        mapper=EnqueueRequestForObject(), queue=queue, predicates=[GENERATION_CHANGED]
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
        mapper=EnqueueRequestForObject(), queue=queue, predicates=[Funcs(delete=delete)]
    )
    adapter.on_delete(DeletedFinalStateUnknown(key="skip", obj=obj("skip")))
    adapter.on_delete(obj("keep"))
    assert [o.metadata.name for o in seen] == ["skip", "keep"]
    assert queue.items == [Request("keep")]


def test_generic_events_of_a_source_pass_generic_predicates() -> None:
    queue = ListQueue()
    adapter = EnqueueingListener(
        mapper=EnqueueRequestsFromMapFunc(lambda _obj: [Request("sync")]),
        queue=queue,
        predicates=[Funcs(generic=lambda o: o != "skip")],
    )
    adapter.on_generic(None)
    adapter.on_generic("skip")
    assert queue.items == [Request("sync")]
