"""SharedInformer: deltas against the store, ordered fan-out on a dispatch thread, sync, resync."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap

from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.store import label_index
from pkg.framework.client import GoneError, ResourceKind, WatchEvent, WatchEventType

RunThread = Callable[[Callable[[threading.Event], None]], threading.Thread]


@pytest.fixture
def make_informer(
    informer_fake_server: Any, informer_kind: ResourceKind[V1ConfigMap]
) -> Callable[..., SharedInformer[V1ConfigMap]]:
    def make(**kwargs: Any) -> SharedInformer[V1ConfigMap]:
        return SharedInformer(client=informer_fake_server, kind=informer_kind, **kwargs)

    return make


def test_handlers_see_initial_adds_then_watch_events_in_order(
    informer_fake_server: Any,
    make_informer: Any,
    informer_listener_factory: Any,
    informer_run_thread: RunThread,
) -> None:
    informer_fake_server.put("a", event=False)
    informer = make_informer()
    first, second = informer_listener_factory(), informer_listener_factory()
    informer.add_listener(first)
    informer.add_listener(second)
    informer_run_thread(informer.run)
    assert informer.wait_for_sync(2.0)
    informer_fake_server.put("b")
    informer_fake_server.put("b")
    informer_fake_server.remove("a")
    assert first.wait_for(4)
    assert second.wait_for(4)
    expected = [
        ("add", "default/a", True),
        ("add", "default/b", False),
        ("update", "default/b", "102", "103"),
        ("delete", "default/a", "V1ConfigMap"),
    ]
    assert first.events == expected
    assert second.events == expected


def test_added_for_known_object_is_an_update_and_unknown_delete_is_dropped(
    informer_fake_server: Any,
    make_informer: Any,
    informer_listener_factory: Any,
    informer_run_thread: RunThread,
) -> None:
    informer_fake_server.put("a", event=False)
    informer = make_informer()
    handler = informer_listener_factory()
    informer.add_listener(handler)
    informer_run_thread(informer.run)
    assert informer.wait_for_sync(2.0)
    raw = informer_fake_server.put("a", event=False)
    informer_fake_server.push(WatchEvent(type=WatchEventType.ADDED, resource_version="102", raw=raw))
    informer_fake_server.put("ghost", event=False)
    informer_fake_server.remove("ghost")  # DELETED of an object this informer never saw
    informer_fake_server.put("c")
    assert handler.wait_for(3)
    assert handler.events[1:] == [("update", "default/a", "101", "102"), ("add", "default/c", False)]


def test_relist_after_gone_converges_with_deleted_final_state_unknown(
    informer_fake_server: Any,
    make_informer: Any,
    informer_listener_factory: Any,
    informer_run_thread: RunThread,
) -> None:
    for name in "abc":
        informer_fake_server.put(name, event=False)
    informer = make_informer()
    handler = informer_listener_factory()
    informer.add_listener(handler)
    informer_run_thread(informer.run)
    assert handler.wait_for(3)
    informer_fake_server.remove("b", event=False)  # deleted while the watch was away
    informer_fake_server.put("c", event=False)
    informer_fake_server.put("d", event=False)
    informer_fake_server.push(GoneError(status=410, reason="Expired", message="too old"))
    assert handler.wait_for(7)
    after = handler.events[3:]
    assert ("delete", "default/b", "DeletedFinalStateUnknown") in after
    assert ("update", "default/a", "101", "101") in after
    assert ("update", "default/c", "103", "105") in after
    assert ("add", "default/d", False) in after
    assert len(after) == 4
    assert sorted(informer.store.list_keys()) == ["default/a", "default/c", "default/d"]
    assert informer.last_sync_resource_version == "106"


def test_blocked_handler_does_not_stop_store_updates(
    informer_fake_server: Any, make_informer: Any, informer_listener_factory: Any,
    informer_run_thread: RunThread, informer_wait_until: Any,
) -> None:  # fmt: skip
    informer = make_informer()
    handler = informer_listener_factory()
    release = threading.Event()
    handler.block = release
    informer.add_listener(handler)
    informer_run_thread(informer.run)
    assert informer.wait_for_sync(2.0)
    informer_fake_server.put("a")
    assert handler.blocked.wait(2.0)
    informer_fake_server.put("b")
    informer_fake_server.put("c")
    assert informer_wait_until(lambda: len(informer.store) == 3), "the watch thread kept going"
    assert handler.events == []
    release.set()
    assert handler.wait_for(3)
    assert [e[1] for e in handler.events] == ["default/a", "default/b", "default/c"]


def test_late_handler_gets_current_objects_then_changes(
    informer_fake_server: Any,
    make_informer: Any,
    informer_listener_factory: Any,
    informer_run_thread: RunThread,
) -> None:
    informer_fake_server.put("a", event=False)
    informer = make_informer()
    informer_run_thread(informer.run)
    assert informer.wait_for_sync(2.0)
    informer_fake_server.put("b")
    late = informer_listener_factory()
    informer.add_listener(late)  # may race the "b" event: it must be seen exactly once
    informer_fake_server.put("c")
    assert late.wait_for(3)
    keys = sorted(event[1] for event in late.events)
    assert keys == ["default/a", "default/b", "default/c"]
    assert late.events[0] == ("add", "default/a", True)


def test_has_synced_only_after_initial_adds_are_delivered(
    informer_fake_server: Any, make_informer: Any, informer_listener_factory: Any,
    informer_run_thread: RunThread, informer_wait_until: Any,
) -> None:  # fmt: skip
    informer_fake_server.put("a", event=False)
    informer = make_informer()
    handler = informer_listener_factory()
    release = threading.Event()
    handler.block = release
    informer.add_listener(handler)
    assert not informer.has_synced()
    informer_run_thread(informer.run)
    assert handler.blocked.wait(2.0)
    assert informer_wait_until(lambda: len(informer.store) == 1)
    assert not informer.has_synced(), "stored but not yet delivered"
    assert not informer.wait_for_sync(0.05)
    release.set()
    assert informer.wait_for_sync(2.0)
    assert informer.has_synced()
    assert handler.events == [("add", "default/a", True)]


def test_raising_handler_is_logged_and_dispatch_goes_on(
    informer_fake_server: Any, make_informer: Any, informer_listener_factory: Any,
    informer_run_thread: RunThread, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    class Exploding:
        def on_add(self, obj: Any, *, is_in_initial_list: bool) -> None:
            raise RuntimeError("handler bug")

        def on_update(self, old: Any, new: Any) -> None:
            raise RuntimeError("handler bug")

        def on_delete(self, obj: Any) -> None:
            raise RuntimeError("handler bug")

    informer = make_informer()
    healthy = informer_listener_factory()
    informer.add_listener(Exploding())
    informer.add_listener(healthy)
    with caplog.at_level(logging.ERROR, logger="pkg.framework.cache.informer"):
        informer_run_thread(informer.run)
        assert informer.wait_for_sync(2.0)
        informer_fake_server.put("a")
        informer_fake_server.put("a")
        assert healthy.wait_for(2)
    assert [e[0] for e in healthy.events] == ["add", "update"]
    failures = [r for r in caplog.records if r.getMessage().startswith("event handler failed")]
    assert len(failures) == 2
    assert failures[0].notification == "add"  # type: ignore[attr-defined]


def test_resync_redelivers_every_object_as_update(
    informer_fake_server: Any,
    make_informer: Any,
    informer_listener_factory: Any,
    informer_run_thread: RunThread,
) -> None:
    informer_fake_server.put("a", event=False)
    informer_fake_server.put("b", event=False)
    informer = make_informer(resync_period=0.05)
    handler = informer_listener_factory()
    informer.add_listener(handler)
    informer_run_thread(informer.run)
    assert handler.wait_for(6)
    resyncs = [e for e in handler.events if e[0] == "update"]
    assert {e[1] for e in resyncs} == {"default/a", "default/b"}
    assert all(e[2] == e[3] for e in resyncs), "resync passes the same object as old and new"
    assert len(informer_fake_server.list_calls) == 1, "resync replays the cache, not the server"


def test_indexers_and_accessors(
    informer_fake_server: Any, make_informer: Any, informer_kind: Any, informer_run_thread: RunThread
) -> None:
    informer_fake_server.put("g1", labels={"gpu.deckhouse.io/node": "n1"}, event=False)
    informer_fake_server.put("g2", labels={"gpu.deckhouse.io/node": "n2"}, event=False)
    informer = make_informer(indexers={"node": label_index("gpu.deckhouse.io/node")})
    assert informer.kind is informer_kind
    assert informer.needs_leader_election is False
    informer_run_thread(informer.run)
    assert informer.wait_for_sync(2.0)
    assert [o.metadata.name for o in informer.store.by_index("node", "n2")] == ["g2"]
    assert informer.last_sync_resource_version == "102"


def test_run_returns_promptly_on_stop_and_cannot_run_twice(
    informer_fake_server: Any, make_informer: Any, informer_wait_until: Any
) -> None:
    informer = make_informer()
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    assert informer.wait_for_sync(2.0)
    with pytest.raises(RuntimeError, match="already started"):
        informer.run(stop)
    stop.set()
    informer_fake_server.close()
    thread.join(0.5)
    assert not thread.is_alive()
