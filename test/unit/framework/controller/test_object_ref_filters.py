"""ObjectRefWatch's filters: creates and deletes pass unless a filter says otherwise, updates only
through the update filter; the mapping is the enqueuer's."""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1ObjectMeta, V1Pod

from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile.contract import Request


def pod(name: str, *, node: str | None = None) -> V1Pod:
    return V1Pod(metadata=V1ObjectMeta(name=name, namespace="ns", labels={"node": node} if node else None))


def node_changed(old: Any, new: Any) -> bool:
    return bool(old.metadata.labels != new.metadata.labels)


def owner(obj: Any) -> list[Request]:
    return [Request(name=f"owner-of-{obj.metadata.name}", namespace="ns")]


def test_without_create_or_delete_filters_both_pass_and_updates_follow_the_update_filter() -> None:
    watch = ObjectRefWatch(update_filter=node_changed, enqueuer=owner)
    assert watch.predicate.create(pod("a"))
    assert watch.predicate.delete(pod("a"))
    assert not watch.predicate.update(pod("a"), pod("a"))
    assert watch.predicate.update(pod("a"), pod("a", node="n1"))
    assert watch.requests_for(pod("a")) == [Request("owner-of-a", "ns")]


def test_create_and_delete_filters_drop_what_they_refuse() -> None:
    scheduled = ObjectRefWatch(
        update_filter=node_changed,
        enqueuer=owner,
        create_filter=lambda obj: bool(obj.metadata.labels),
        delete_filter=lambda _obj: False,
    )
    assert not scheduled.predicate.create(pod("a"))
    assert scheduled.predicate.create(pod("a", node="n1"))
    assert not scheduled.predicate.delete(pod("a", node="n1"))
