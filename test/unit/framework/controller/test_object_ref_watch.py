"""ObjectRefWatch: a change of a dependency enqueues the controller's objects that reference it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes.client import V1ObjectMeta
from pydantic import BaseModel

from pkg.framework.cache.listener import DeletedFinalStateUnknown, ResourceListener
from pkg.framework.client.kinds import ResourceKind
from pkg.framework.controller.controller import CacheSyncTimeoutError, Controller
from pkg.framework.controller.object_ref import ObjectRefWatch, Watch
from pkg.framework.reconcile.contract import Request, Result


class DeviceClass(BaseModel):
    metadata: V1ObjectMeta


DEVICE_CLASS = ResourceKind(
    group="resource.k8s.io",
    version="v1",
    kind="DeviceClass",
    plural="deviceclasses",
    namespaced=False,
    model=DeviceClass,
)

# Which claims (the controller's objects) reference which device class: what an index would answer.
REFERRERS = {
    "gpu-full": [Request("claim-1", "team-a"), Request("claim-2", "team-b")],
    "gpu-half": [Request("claim-3", "team-a")],
}


def device_class(name: str, *, generation: int = 1, rv: str = "1") -> DeviceClass:
    return DeviceClass(metadata=V1ObjectMeta(name=name, generation=generation, resource_version=rv))


class FakeSource:
    def __init__(self, *, synced: bool = True) -> None:
        self.kind = DEVICE_CLASS
        self.synced = synced
        self.handlers: list[ResourceListener[Any]] = []

    def add_listener(self, handler: ResourceListener[Any]) -> None:
        self.handlers.append(handler)

    def has_synced(self) -> bool:
        return self.synced

    def wait_for_sync(self, timeout: float) -> bool:
        return self.synced


class NoopReconciler:
    def reconcile(self, request: Request) -> Result:
        return Result()


def spec_changed(old: Any, new: Any) -> bool:
    return bool(old.metadata.generation != new.metadata.generation)


def referrers(obj: Any) -> list[Request]:
    return list(REFERRERS.get(obj.metadata.name, []))


def drain(controller: Controller) -> list[Request]:
    """Everything queued so far, in order."""
    items = []
    while len(controller.queue):
        item = controller.queue.get()
        controller.queue.done(item)
        items.append(item)
    return items


@pytest.fixture
def wired() -> tuple[Controller, ResourceListener[Any]]:
    controller = Controller(name="claims", reconciler=NoopReconciler())
    source = FakeSource()
    watcher: Watch = ObjectRefWatch(update_filter=spec_changed, enqueuer=referrers)
    watcher.watch(source, controller)
    assert len(source.handlers) == 1
    return controller, source.handlers[0]


def test_create_enqueues_referrers(wired: tuple[Controller, ResourceListener[Any]]) -> None:
    controller, handler = wired
    handler.on_add(device_class("gpu-full"), is_in_initial_list=True)
    handler.on_add(device_class("unused"), is_in_initial_list=False)
    assert drain(controller) == [Request("claim-1", "team-a"), Request("claim-2", "team-b")]


def test_update_filter_drops_irrelevant_updates(wired: tuple[Controller, ResourceListener[Any]]) -> None:
    controller, handler = wired
    handler.on_update(device_class("gpu-full", rv="1"), device_class("gpu-full", rv="2"))
    assert drain(controller) == []
    handler.on_update(device_class("gpu-full", generation=1), device_class("gpu-full", generation=2))
    assert drain(controller) == [Request("claim-1", "team-a"), Request("claim-2", "team-b")]


def test_update_enqueues_referrers_of_old_and_new(
    wired: tuple[Controller, ResourceListener[Any]],
) -> None:
    controller, handler = wired
    # Not realistic for a name, but the same holds for any reference a dependency can lose.
    handler.on_update(device_class("gpu-half", generation=1), device_class("gpu-full", generation=2))
    assert sorted(drain(controller)) == sorted([*REFERRERS["gpu-full"], *REFERRERS["gpu-half"]])


def test_delete_enqueues_referrers_even_when_final_state_unknown(
    wired: tuple[Controller, ResourceListener[Any]],
) -> None:
    controller, handler = wired
    handler.on_delete(device_class("gpu-half"))
    assert drain(controller) == [Request("claim-3", "team-a")]
    handler.on_delete(DeletedFinalStateUnknown(key="gpu-half", obj=device_class("gpu-half")))
    assert drain(controller) == [Request("claim-3", "team-a")]


def test_controller_waits_for_the_watched_source() -> None:
    controller = Controller(name="claims-unsynced", reconciler=NoopReconciler(), cache_sync_timeout=0.01)
    ObjectRefWatch(update_filter=spec_changed, enqueuer=referrers).watch(FakeSource(synced=False), controller)
    with pytest.raises(CacheSyncTimeoutError, match="DeviceClass"):
        controller.run(threading.Event())
