"""Which events the enqueue path marks low priority: the initial list and unchanged updates (resyncs),
as controller-runtime does; everything else overtakes them."""

from __future__ import annotations

from kubernetes.client import V1ObjectMeta
from pydantic import BaseModel

from pkg.framework.controller.enqueue import EnqueueingListener, EnqueueRequestForObject
from pkg.framework.metrics import MetricsProvider
from pkg.framework.reconcile.contract import Request
from pkg.framework.workqueue.priority import PriorityQueue
from pkg.framework.workqueue.queue import RateLimitingQueue

METRICS = MetricsProvider(namespace="gpu")


class Obj(BaseModel):
    metadata: V1ObjectMeta


def obj(name: str, rv: str | None = "1") -> Obj:
    return Obj(metadata=V1ObjectMeta(name=name, resource_version=rv))


def listener_over(queue: RateLimitingQueue[Request]) -> EnqueueingListener:
    return EnqueueingListener(mapper=EnqueueRequestForObject(), queue=queue)


def order(queue: RateLimitingQueue[Request]) -> list[str]:
    names = []
    while len(queue):
        request = queue.get()
        queue.done(request)
        names.append(request.name)
    return names


def test_initial_list_and_resyncs_wait_behind_new_and_changed_objects() -> None:
    queue: PriorityQueue[Request] = PriorityQueue(name="enqueue-priority", metrics=METRICS)
    listener = listener_over(queue)
    listener.on_add(obj("listed-1"), is_in_initial_list=True)
    listener.on_add(obj("listed-2"), is_in_initial_list=True)
    listener.on_update(obj("resynced", rv="7"), obj("resynced", rv="7"))
    listener.on_add(obj("created"), is_in_initial_list=False)
    listener.on_update(obj("changed", rv="7"), obj("changed", rv="8"))
    listener.on_delete(obj("deleted"))
    listener.on_generic(obj("generic"))
    assert order(queue) == ["created", "changed", "deleted", "generic", "listed-1", "listed-2", "resynced"]


def test_an_update_without_resource_versions_is_not_taken_for_a_resync() -> None:
    queue: PriorityQueue[Request] = PriorityQueue(name="enqueue-priority-norv", metrics=METRICS)
    listener = listener_over(queue)
    listener.on_add(obj("listed"), is_in_initial_list=True)
    listener.on_update(obj("unknown", rv=None), obj("unknown", rv=None))
    assert order(queue) == ["unknown", "listed"]


def test_a_plain_queue_keeps_arrival_order() -> None:
    queue: RateLimitingQueue[Request] = RateLimitingQueue(name="enqueue-fifo", metrics=METRICS)
    listener = listener_over(queue)
    listener.on_add(obj("listed"), is_in_initial_list=True)
    listener.on_add(obj("created"), is_in_initial_list=False)
    assert order(queue) == ["listed", "created"]
