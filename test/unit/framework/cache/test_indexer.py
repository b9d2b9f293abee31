"""The index registry: declared indexes reach the informers of their kind before the caches start,
an undeclared lookup fails naming the index and the kind, one name means one function."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap, V1Pod

from pkg.framework.cache.indexer import Index, IndexRegistry, indexers_of
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.cache.store import IndexNotFoundError, Store, label_index
from pkg.framework.client import ResourceKind
from pkg.framework.client.builtin_kinds import POD
from pkg.framework.manager.manager import Manager

TEAM = "example.io/team"


def by_team(kind: ResourceKind[Any]) -> Index[Any]:
    return Index(name="by-team", kind=kind, func=label_index(TEAM))


def names(objs: list[Any]) -> list[str]:
    return [o.metadata.name for o in objs]


def test_the_manager_adds_a_declared_index_before_the_informer_lists(
    informer_fake_server: Any,
    informer_kind: ResourceKind[V1ConfigMap],
    informer_stop: threading.Event,
    informer_run_thread: Callable[..., threading.Thread],
    informer_wait_until: Callable[..., bool],
) -> None:
    informer_fake_server.put("a", labels={TEAM: "red"}, event=False)
    informer_fake_server.put("b", labels={TEAM: "blue"}, event=False)
    factory = InformerFactory(informer_fake_server)
    informer = factory.get_informer(informer_kind)
    manager = Manager()
    manager.add(factory)
    manager.indexes.declare(by_team(informer_kind))
    with pytest.raises(IndexNotFoundError):
        informer.store.by_index("by-team", "red")  # declared, not yet added: the manager adds it

    informer_run_thread(manager.run)
    assert informer_wait_until(informer.has_synced)
    assert names(informer.store.by_index("by-team", "red")) == ["a"]
    informer_fake_server.put("c", labels={TEAM: "red"})
    assert informer_wait_until(lambda: names(informer.store.by_index("by-team", "red")) == ["a", "c"])


def test_an_index_reaches_only_the_informers_of_its_kind(informer_kind: ResourceKind[V1ConfigMap]) -> None:
    registry = IndexRegistry()
    pods: SharedInformer[V1Pod] = SharedInformer(client=object(), kind=POD)  # type: ignore[arg-type]
    config_maps: SharedInformer[V1ConfigMap] = SharedInformer(client=object(), kind=informer_kind)  # type: ignore[arg-type]
    registry.declare(by_team(POD))
    registry.index_all([pods, config_maps])
    assert set(pods.store.get_indexers()) == {"by-team"}
    assert config_maps.store.get_indexers() == {}


def test_a_lookup_by_an_undeclared_index_names_the_index_and_the_kind() -> None:
    pods: SharedInformer[V1Pod] = SharedInformer(client=object(), kind=POD)  # type: ignore[arg-type]
    with pytest.raises(IndexNotFoundError) as raised:
        pods.store.by_index("pod-by-node", "n1")
    message = str(raised.value)
    assert message.startswith("index 'pod-by-node' of Pod was never declared")
    with pytest.raises(IndexNotFoundError, match="pod-by-node"):
        pods.store.index_keys("pod-by-node", "n1")


def test_declaring_an_index_twice_is_harmless_but_another_function_under_its_name_is_refused() -> None:
    registry = IndexRegistry()
    index = by_team(POD)
    registry.declare(index)
    registry.declare(index, Index(name="by-team", kind=POD, func=index.func))  # another controller
    assert registry.declared() == [index]

    with pytest.raises(ValueError, match=r"index 'by-team' of Pod is already declared with another"):
        registry.declare(Index(name="by-team", kind=POD, func=label_index("example.io/other")))
    assert registry.of_kind(POD) == {"by-team": index.func}


def test_the_same_name_on_two_kinds_is_two_indexes(informer_kind: ResourceKind[V1ConfigMap]) -> None:
    registry = IndexRegistry()
    registry.declare(by_team(POD), Index(name="by-team", kind=informer_kind, func=label_index("x")))
    assert len(registry.declared()) == 2


def test_a_declaration_after_the_caches_started_is_refused() -> None:
    registry = IndexRegistry()
    registry.index_all([])
    with pytest.raises(RuntimeError, match=r"cannot declare index 'by-team' of Pod: the caches have started"):
        registry.declare(by_team(POD))


def test_indexers_of_gives_a_hand_built_store_what_the_registry_would_add() -> None:
    store: Store[Any] = Store(indexers=indexers_of([by_team(POD)]), kind="Pod")
    assert set(store.get_indexers()) == {"by-team"}
