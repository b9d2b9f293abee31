"""Reflector read barrier and raw projection.

``wait_for_resource_version`` answers "does the store hold every change up to X": it must not say
yes before the store write for X, must time out (not hang) on a quiet watch, must pass on a
bookmark or a re-list past X, and must refuse versions it cannot compare. ``transform`` projects
each raw object before decoding, for the list and the watch alike.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap
from testutil.k8s_fields import present

from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.cache.reflector import Backoff, Reflector
from pkg.framework.cache.store import Store
from pkg.framework.client import GoneError, ResourceKind

RunThread = Callable[[Callable[[threading.Event], None]], threading.Thread]


class _Store:
    def __init__(self) -> None:
        self.store: Store[V1ConfigMap] = Store()

    def add(self, obj: V1ConfigMap) -> None:
        self.store.update(obj)

    def update(self, obj: V1ConfigMap) -> None:
        self.store.update(obj)

    def delete(self, obj: V1ConfigMap) -> None:
        self.store.delete(obj)

    def replace(self, objs: Sequence[V1ConfigMap], resource_version: str) -> None:
        self.store.replace(objs, resource_version)


Start = Callable[..., tuple[Reflector[V1ConfigMap], _Store]]


@pytest.fixture
def started(
    informer_fake_server: Any, informer_kind: ResourceKind[V1ConfigMap], informer_run_thread: RunThread
) -> Start:
    def start(**kwargs: Any) -> tuple[Reflector[V1ConfigMap], _Store]:
        store = _Store()
        reflector = Reflector(
            client=informer_fake_server, kind=informer_kind, store=store, backoff=Backoff(jitter=0.0),
            sleep=lambda stop, seconds: stop.wait(0.01), **kwargs,
        )  # fmt: skip
        informer_run_thread(reflector.run)
        assert informer_fake_server.wait_for_watches(1)
        return reflector, store

    return start


def _wait_in_thread(reflector: Reflector[Any], rv: str, timeout: float) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []

    def wait() -> None:
        result.append(reflector.wait_for_resource_version(rv, timeout))

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread, result


def test_barrier_passes_once_the_store_holds_the_event(informer_fake_server: Any, started: Start) -> None:
    reflector, store = started()
    assert reflector.wait_for_resource_version("100", 0.0), "the list's version is reached at once"
    thread, result = _wait_in_thread(reflector, "101", 2.0)
    time.sleep(0.05)
    assert result == [], "nothing past the list yet: the barrier waits"
    informer_fake_server.put("a")
    thread.join(2.0)
    assert result == [True]
    assert store.store.get_by_key("default/a") is not None, "the store was written before the barrier opened"


def test_quiet_watch_times_out_then_a_bookmark_passes_it(informer_fake_server: Any, started: Start) -> None:
    reflector, _ = started()
    begun = time.monotonic()
    assert not reflector.wait_for_resource_version("150", 0.1)
    assert 0.09 <= time.monotonic() - begun < 1.0, "bounded by the timeout, not the watch"
    thread, result = _wait_in_thread(reflector, "101", 2.0)
    informer_fake_server.bookmark()  # rv 101, no object changed
    thread.join(2.0)
    assert result == [True]


def test_relist_after_compaction_passes_the_barrier(informer_fake_server: Any, started: Start) -> None:
    reflector, store = started()
    informer_fake_server.put("late", event=False)  # rv 101, missed by the watch
    informer_fake_server.push(GoneError(status=410, reason="Expired", message="too old resource version"))
    assert reflector.wait_for_resource_version("101", 2.0)
    assert store.store.get_by_key("default/late") is not None


def test_versions_that_are_not_integers_fail_at_once(informer_fake_server: Any, started: Start) -> None:
    reflector, _ = started()
    begun = time.monotonic()
    assert not reflector.wait_for_resource_version("abc", 5.0)
    assert not reflector.wait_for_resource_version("", 5.0)
    assert time.monotonic() - begun < 0.5


def test_transform_projects_listed_and_watched_objects(informer_fake_server: Any, started: Start) -> None:
    informer_fake_server.put("listed", data={"keep": "1", "drop": "x" * 100}, event=False)

    def keep_only(raw: dict[str, Any]) -> dict[str, Any]:
        return {**raw, "data": {"keep": (raw.get("data") or {}).get("keep", "")}}

    reflector, store = started(transform=keep_only)
    informer_fake_server.put("watched", data={"keep": "2", "drop": "y"})
    assert reflector.wait_for_resource_version("102", 2.0)
    assert present(store.store.get_by_key("default/listed"), "default/listed").data == {"keep": "1"}
    assert present(store.store.get_by_key("default/watched"), "default/watched").data == {"keep": "2"}


def test_factory_transform_reaches_new_informers_and_refuses_late_ones(
    informer_fake_server: Any, informer_kind: ResourceKind[V1ConfigMap]
) -> None:
    factory = InformerFactory(informer_fake_server)
    factory.set_transform(informer_kind, lambda raw: raw)
    assert factory.get_informer(informer_kind)._reflector._transform is not None
    with pytest.raises(RuntimeError, match="exists already"):
        factory.set_transform(informer_kind, lambda raw: raw)


def test_object_transform_maps_decoded_objects_before_they_are_stored(
    informer_fake_server: Any, started: Start
) -> None:
    informer_fake_server.put("listed", data={"v": "1"}, event=False)
    seen: list[V1ConfigMap] = []

    def mark(obj: V1ConfigMap) -> V1ConfigMap:
        assert isinstance(obj, V1ConfigMap)  # decoded already
        obj.data = {"v": "mapped"}
        seen.append(obj)
        return obj

    reflector, store = started(object_transform=mark)
    informer_fake_server.put("watched", data={"v": "2"})
    assert reflector.wait_for_resource_version("102", 2.0)
    stored = [present(store.store.get_by_key(f"default/{n}"), n) for n in ("listed", "watched")]
    assert [obj.data for obj in stored] == [{"v": "mapped"}] * 2
    assert all(any(obj is s for s in seen) for obj in stored)  # the very objects it returned


def test_factory_object_transform_reaches_new_informers_and_refuses_late_ones(
    informer_fake_server: Any, informer_kind: ResourceKind[V1ConfigMap]
) -> None:
    factory = InformerFactory(informer_fake_server)
    factory.set_object_transform(informer_kind, lambda obj: obj)
    assert factory.get_informer(informer_kind)._reflector._object_transform is not None
    with pytest.raises(RuntimeError, match="exists already"):
        factory.set_object_transform(informer_kind, lambda obj: obj)
