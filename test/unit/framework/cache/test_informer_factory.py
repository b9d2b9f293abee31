"""InformerFactory: one informer per watch, started together or on demand, cache sync, failures."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap, V1Secret

from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import ApiError, ResourceKind

RunThread = Callable[[Callable[[threading.Event], None]], threading.Thread]
SECRETS: ResourceKind[V1Secret] = ResourceKind(
    group="", version="v1", kind="Secret", plural="secrets", namespaced=True, model=V1Secret
)


def test_same_watch_shares_one_informer(informer_fake_server: Any, informer_kind: Any) -> None:
    factory = InformerFactory(informer_fake_server)
    first = factory.get_informer(informer_kind, namespace="gpu", label_selector="app=x")
    assert factory.get_informer(informer_kind, namespace="gpu", label_selector="app=x") is first
    others = {
        id(factory.get_informer(informer_kind)),
        id(factory.get_informer(informer_kind, namespace="other", label_selector="app=x")),
        id(factory.get_informer(informer_kind, namespace="gpu", label_selector="app=y")),
        id(
            factory.get_informer(informer_kind, namespace="gpu", label_selector="app=x", field_selector="a=b")
        ),
        id(factory.get_informer(SECRETS, namespace="gpu", label_selector="app=x")),
    }
    assert id(first) not in others
    assert len(others) == 5
    assert len(factory.informers()) == 6
    assert first.name == "informer-configmap[gpu][app=x]"


def test_start_runs_informers_and_late_requests_start_at_once(
    informer_fake_server: Any, informer_kind: ResourceKind[V1ConfigMap], informer_stop: threading.Event
) -> None:
    informer_fake_server.put("a", event=False)
    factory = InformerFactory(informer_fake_server)
    early = factory.get_informer(informer_kind)
    assert not factory.wait_for_cache_sync(0.05), "nothing runs before start"
    assert not factory.has_synced()
    factory.start(informer_stop)
    assert factory.wait_for_cache_sync(2.0)
    assert factory.has_synced()
    assert early.store.list_keys() == ["default/a"]
    late = factory.get_informer(informer_kind, namespace="default")
    assert late.wait_for_sync(2.0), "an informer requested after start is started"
    assert factory.wait_for_cache_sync(2.0)
    assert len(informer_fake_server.list_calls) == 2


def test_wait_for_cache_sync_times_out_while_an_informer_cannot_list(
    informer_fake_server: Any, informer_kind: Any, informer_stop: threading.Event
) -> None:
    informer_fake_server.list_failures.extend(
        ApiError(status=403, reason="Forbidden", message="rbac") for _ in range(5)
    )
    factory = InformerFactory(informer_fake_server)
    factory.get_informer(informer_kind)
    factory.start(informer_stop)
    assert not factory.wait_for_cache_sync(0.1)


def test_run_blocks_until_stop(
    informer_fake_server: Any,
    informer_kind: Any,
    informer_run_thread: RunThread,
    informer_stop: threading.Event,
) -> None:
    factory = InformerFactory(informer_fake_server, name="cache")
    assert factory.name == "cache"
    assert factory.needs_leader_election is False
    factory.get_informer(informer_kind)
    thread = informer_run_thread(factory.run)
    assert factory.wait_for_cache_sync(2.0)
    assert thread.is_alive()
    informer_stop.set()
    informer_fake_server.close()
    thread.join(1.0)
    assert not thread.is_alive()


def test_run_raises_when_an_informer_fails(informer_fake_server: Any, informer_kind: Any) -> None:
    factory = InformerFactory(informer_fake_server)
    informer = factory.get_informer(informer_kind)
    stop = threading.Event()
    threading.Thread(target=informer.run, args=(stop,), daemon=True).start()
    assert informer.wait_for_sync(2.0)
    try:
        with pytest.raises(RuntimeError, match="an informer failed") as caught:
            factory.run(stop)  # starting the informer a second time is a fatal bug
        assert "already started" in str(caught.value.__cause__)
    finally:
        stop.set()
