"""Reflector: paged list, watch from the list's RV, resume without re-list, re-list on 410, backoff."""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap

from pkg.framework.cache.reflector import Backoff, Reflector
from pkg.framework.cache.store import Store
from pkg.framework.client import ApiError, GoneError, ResourceKind
from pkg.framework.client.watch import WatchStreamClosedError

RunThread = Callable[[Callable[[threading.Event], None]], threading.Thread]


def name_of(obj: V1ConfigMap) -> str:
    return str(obj.metadata.name) if obj.metadata else ""


class RecordingStore:
    """A real store that also records the reflector's writes."""

    def __init__(self) -> None:
        self.store: Store[V1ConfigMap] = Store()
        self.ops: list[tuple[Any, ...]] = []

    def add(self, obj: V1ConfigMap) -> None:
        self.ops.append(("add", name_of(obj)))
        self.store.add(obj)

    def update(self, obj: V1ConfigMap) -> None:
        self.ops.append(("update", name_of(obj)))
        self.store.update(obj)

    def delete(self, obj: V1ConfigMap) -> None:
        self.ops.append(("delete", name_of(obj)))
        self.store.delete(obj)

    def replace(self, objs: Sequence[V1ConfigMap], resource_version: str) -> None:
        self.ops.append(("replace", sorted(name_of(o) for o in objs), resource_version))
        self.store.replace(objs, resource_version)


class SleepRecorder:
    """Stands in for ``Event.wait``: records each backoff delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, stop: threading.Event, seconds: float) -> bool:
        self.delays.append(round(seconds, 6))
        return stop.is_set()


@pytest.fixture
def sleep() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def store() -> RecordingStore:
    return RecordingStore()


@pytest.fixture
def make_reflector(
    informer_fake_server: Any,
    informer_kind: ResourceKind[V1ConfigMap],
    store: RecordingStore,
    sleep: SleepRecorder,
) -> Callable[..., Reflector[V1ConfigMap]]:
    def make(**kwargs: Any) -> Reflector[V1ConfigMap]:
        options: dict[str, Any] = {
            "backoff": Backoff(jitter=0.0),
            "sleep": sleep,
            "clock": itertools.count(0, 5).__next__,
        }
        options.update(kwargs)
        return Reflector(client=informer_fake_server, kind=informer_kind, store=store, **options)

    return make


def test_list_follows_continue_tokens_then_watches_from_list_rv(
    informer_fake_server: Any, make_reflector: Any, store: RecordingStore, informer_run_thread: RunThread
) -> None:
    for name in "abcde":
        informer_fake_server.put(name, event=False)
    reflector = make_reflector(page_size=2)
    informer_run_thread(reflector.run)
    assert informer_fake_server.wait_for_watches(1)
    tokens = [call["continue_token"] for call in informer_fake_server.list_calls]
    assert tokens == [None, "token-1", "token-2"]
    assert {call["limit"] for call in informer_fake_server.list_calls} == {2}
    assert store.ops == [("replace", list("abcde"), "105")]
    assert informer_fake_server.watch_calls[0]["resource_version"] == "105"
    assert reflector.last_sync_resource_version == "105"


def test_expired_continue_token_restarts_the_whole_list(
    informer_fake_server: Any, make_reflector: Any, store: RecordingStore, informer_run_thread: RunThread
) -> None:
    for name in "abcde":
        informer_fake_server.put(name, event=False)
    informer_fake_server.expire_continue_tokens = 1
    informer_run_thread(make_reflector(page_size=2).run)
    assert informer_fake_server.wait_for_watches(1)
    tokens = [call["continue_token"] for call in informer_fake_server.list_calls]
    assert tokens[0] is None
    assert tokens[1] is not None, "second page asked with a token that expires"
    assert tokens[2] is None, "the list restarted from the first page"
    assert len(tokens) == 5
    assert store.ops == [("replace", list("abcde"), "105")], "only the complete snapshot is stored"


def test_continue_token_expiring_every_time_is_backed_off(
    informer_fake_server: Any, make_reflector: Any, store: RecordingStore, sleep: SleepRecorder,
    informer_run_thread: RunThread,
) -> None:  # fmt: skip
    for name in "abc":
        informer_fake_server.put(name, event=False)
    informer_fake_server.expire_continue_tokens = 3  # the first try and both restarts
    informer_run_thread(make_reflector(page_size=2).run)
    assert informer_fake_server.wait_for_watches(1)
    assert sleep.delays == [0.8]
    assert store.ops == [("replace", list("abc"), "103")]


def test_watch_events_are_applied_and_advance_the_rv(
    informer_fake_server: Any, make_reflector: Any, store: RecordingStore, informer_run_thread: RunThread,
    informer_wait_until: Any,
) -> None:  # fmt: skip
    informer_fake_server.put("a", event=False)
    reflector = make_reflector()
    informer_run_thread(reflector.run)
    assert informer_fake_server.wait_for_watches(1)
    informer_fake_server.put("b")
    informer_fake_server.put("a")
    informer_fake_server.remove("b")
    assert informer_wait_until(lambda: reflector.last_sync_resource_version == "104")
    assert store.ops[1:] == [("add", "b"), ("update", "a"), ("delete", "b")]
    assert store.store.list_keys() == ["default/a"]


def test_watch_end_resumes_from_bookmark_rv_without_relist(
    informer_fake_server: Any, make_reflector: Any, informer_run_thread: RunThread
) -> None:
    informer_run_thread(make_reflector().run)
    assert informer_fake_server.wait_for_watches(1)
    assert informer_fake_server.watch_calls[0]["resource_version"] == "100"
    informer_fake_server.put("a")
    bookmark_rv = informer_fake_server.bookmark()
    informer_fake_server.end_watch()
    assert informer_fake_server.wait_for_watches(2)
    assert informer_fake_server.watch_calls[1]["resource_version"] == bookmark_rv == "102"
    assert len(informer_fake_server.list_calls) == 1, "a normal watch end does not re-list"


def test_watch_stream_closed_resumes_from_last_rv(
    informer_fake_server: Any, make_reflector: Any, sleep: SleepRecorder, informer_run_thread: RunThread
) -> None:
    informer_run_thread(make_reflector().run)
    assert informer_fake_server.wait_for_watches(1)
    informer_fake_server.put("a")
    informer_fake_server.push(WatchStreamClosedError("read timeout"))
    assert informer_fake_server.wait_for_watches(2)
    assert informer_fake_server.watch_calls[1]["resource_version"] == "101"
    assert len(informer_fake_server.list_calls) == 1
    assert sleep.delays == [], "a closed stream is resumed at once"


def test_gone_relists_and_store_converges(
    informer_fake_server: Any, make_reflector: Any, store: RecordingStore, informer_run_thread: RunThread
) -> None:
    informer_fake_server.put("a", event=False)
    informer_fake_server.put("b", event=False)
    informer_run_thread(make_reflector().run)
    assert informer_fake_server.wait_for_watches(1)
    informer_fake_server.remove("b", event=False)  # while the watch "was away"
    informer_fake_server.put("c", event=False)
    informer_fake_server.push(GoneError(status=410, reason="Expired", message="too old resource version"))
    assert informer_fake_server.wait_for_watches(2)
    assert len(informer_fake_server.list_calls) == 2
    assert store.ops[-1] == ("replace", ["a", "c"], "104")
    assert informer_fake_server.watch_calls[1]["resource_version"] == "104"
    assert sorted(store.store.list_keys()) == ["default/a", "default/c"]


def test_errors_back_off_exponentially_up_to_the_cap(
    informer_fake_server: Any, make_reflector: Any, sleep: SleepRecorder, informer_run_thread: RunThread
) -> None:
    informer_fake_server.list_failures.extend(
        ApiError(status=500, reason="InternalError", message="etcd down") for _ in range(7)
    )
    informer_run_thread(make_reflector().run)
    assert informer_fake_server.wait_for_watches(1)
    assert sleep.delays == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0]


def test_backoff_resets_after_a_healthy_watch(
    informer_fake_server: Any, make_reflector: Any, sleep: SleepRecorder, informer_run_thread: RunThread
) -> None:
    error = ApiError(status=503, reason="ServiceUnavailable", message="try later")
    informer_fake_server.watch_failures.extend([error, error])
    informer_run_thread(make_reflector().run)
    assert informer_fake_server.wait_for_watches(3)
    assert sleep.delays == [0.8, 1.6]
    informer_fake_server.watch_failures.append(error)
    informer_fake_server.put("a")
    informer_fake_server.end_watch()
    assert informer_fake_server.wait_for_watches(5)
    assert sleep.delays == [0.8, 1.6, 0.8]


def test_very_short_empty_watch_is_backed_off(
    informer_fake_server: Any, make_reflector: Any, sleep: SleepRecorder, informer_run_thread: RunThread
) -> None:
    informer_run_thread(make_reflector(clock=lambda: 0.0).run)
    assert informer_fake_server.wait_for_watches(1)
    informer_fake_server.end_watch()
    assert informer_fake_server.wait_for_watches(2)
    assert sleep.delays == [0.8]
    assert len(informer_fake_server.list_calls) == 1


def test_quiet_watch_that_lasted_is_resumed_without_backoff(
    informer_fake_server: Any, make_reflector: Any, sleep: SleepRecorder, informer_run_thread: RunThread
) -> None:
    informer_run_thread(make_reflector().run)  # the fake clock advances 5 s per reading
    assert informer_fake_server.wait_for_watches(1)
    informer_fake_server.end_watch()
    assert informer_fake_server.wait_for_watches(2)
    assert sleep.delays == []


def test_backoff_jitter_shortens_delays_within_bounds() -> None:
    backoff = Backoff(jitter=0.2, rng=random.Random(7))
    delays = [backoff.next_delay() for _ in range(10)]
    bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0, 30.0]
    assert all(0.8 * base <= delay <= base for delay, base in zip(delays, bases, strict=True))
    assert len(set(delays[6:])) > 1, "delays at the cap are still spread"
    backoff.reset()
    assert backoff.next_delay() <= 0.8


def test_watch_timeout_is_randomized_and_scope_is_passed(
    informer_fake_server: Any, make_reflector: Any, informer_run_thread: RunThread
) -> None:
    scope = {"namespace": "gpu", "label_selector": "app=x", "field_selector": "metadata.name=y"}
    informer_run_thread(make_reflector(rng=random.Random(1), read_timeout=7.5, **scope).run)
    for count in (1, 2, 3):
        assert informer_fake_server.wait_for_watches(count)
        informer_fake_server.bookmark()
        informer_fake_server.end_watch()
    timeouts = [call["timeout_seconds"] for call in informer_fake_server.watch_calls[:3]]
    assert all(300 <= t < 600 for t in timeouts)
    assert len(set(timeouts)) > 1
    assert {call["read_timeout"] for call in informer_fake_server.watch_calls} == {7.5}
    for call in informer_fake_server.list_calls + informer_fake_server.watch_calls:
        assert {k: call[k] for k in scope} == scope


def test_undecodable_object_is_skipped_but_its_rv_counts(
    informer_fake_server: Any, make_reflector: Any, store: RecordingStore, informer_run_thread: RunThread,
    informer_wait_until: Any,
) -> None:  # fmt: skip
    informer_fake_server.put("bad", data={"k": {"not": "a string"}}, event=False)
    informer_fake_server.put("good", event=False)
    reflector = make_reflector()
    informer_run_thread(reflector.run)
    assert informer_fake_server.wait_for_watches(1)
    assert store.store.list_keys() == ["default/good"]
    informer_fake_server.put("worse", data=["not", "a", "map"])
    assert informer_wait_until(lambda: reflector.last_sync_resource_version == "103")
    assert store.store.list_keys() == ["default/good"]


def test_stop_during_backoff_returns_promptly(
    informer_fake_server: Any, make_reflector: Any, informer_wait_until: Any
) -> None:
    informer_fake_server.list_failures.extend(ApiError(status=500, reason="", message="x") for _ in range(50))
    reflector = make_reflector(sleep=threading.Event.wait)  # really waits (0.8 s) unless stopped
    stop = threading.Event()
    thread = threading.Thread(target=reflector.run, args=(stop,), daemon=True)
    thread.start()
    assert informer_wait_until(lambda: len(informer_fake_server.list_calls) == 1)
    stop.set()
    thread.join(0.5)
    assert not thread.is_alive()


def test_nothing_is_written_after_stop(
    informer_fake_server: Any, make_reflector: Any, store: RecordingStore
) -> None:
    stop = threading.Event()
    thread = threading.Thread(target=make_reflector().run, args=(stop,), daemon=True)
    thread.start()
    assert informer_fake_server.wait_for_watches(1)
    stop.set()
    informer_fake_server.put("late")  # the blocked read returns with an event
    thread.join(0.5)
    assert not thread.is_alive()
    assert store.ops == [("replace", [], "100")]
