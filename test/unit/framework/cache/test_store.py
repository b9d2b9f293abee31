"""Store: ThreadSafeStore + Indexer invariants (keys, index maintenance, replace, add_indexers)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes.client import V1ObjectMeta
from pydantic import BaseModel

from pkg.framework.cache.store import (
    NAMESPACE_INDEX,
    IndexNotFoundError,
    Store,
    label_index,
    namespace_index,
)

NODE_LABEL = "gpu.deckhouse.io/node"


class Gpu(BaseModel):
    metadata: V1ObjectMeta


def gpu(name: str, *, node: str | None = None, namespace: str | None = None, rv: str = "1") -> Gpu:
    labels = {NODE_LABEL: node} if node is not None else None
    return Gpu(metadata=V1ObjectMeta(name=name, namespace=namespace, labels=labels, resource_version=rv))


@pytest.fixture
def store() -> Store[Gpu]:
    return Store(indexers={"node": label_index(NODE_LABEL), NAMESPACE_INDEX: namespace_index})


def names(objs: list[Gpu]) -> list[str]:
    return [str(o.metadata.name) for o in objs]


def test_add_get_list_and_keys(store: Store[Gpu]) -> None:
    a, b = gpu("a", node="n1"), gpu("b", namespace="ns")
    store.add(a)
    store.add(b)
    assert store.get_by_key("a") is a, "the store hands out the stored object itself"
    assert store.get_by_key("ns/b") is b
    assert store.get(gpu("b", namespace="ns")) is b
    assert store.get_by_key("missing") is None
    assert sorted(store.list_keys()) == ["a", "ns/b"]
    assert sorted(names(store.list())) == ["a", "b"]
    assert len(store) == 2


def test_index_lookup_after_add(store: Store[Gpu]) -> None:
    store.add(gpu("a", node="n1"))
    store.add(gpu("b", node="n1"))
    store.add(gpu("c", node="n2"))
    store.add(gpu("unlabelled"))
    assert names(store.by_index("node", "n1")) == ["a", "b"]
    assert store.index_keys("node", "n2") == ["c"]
    assert store.list_index_values("node") == ["n1", "n2"], "unlabelled objects are not indexed"
    assert names(store.index("node", gpu("x", node="n1"))) == ["a", "b"]


def test_update_moves_object_to_new_index_value(store: Store[Gpu]) -> None:
    store.add(gpu("a", node="n1"))
    store.update(gpu("a", node="n2", rv="2"))
    assert store.by_index("node", "n1") == []
    assert names(store.by_index("node", "n2")) == ["a"]
    assert store.list_index_values("node") == ["n2"], "an emptied bucket is dropped"
    assert store.get_by_key("a").metadata.resource_version == "2"  # type: ignore[union-attr]


def test_delete_removes_from_every_index(store: Store[Gpu]) -> None:
    store.add(gpu("a", node="n1", namespace="ns"))
    store.add(gpu("b", node="n1", namespace="ns"))
    store.delete(gpu("a", namespace="ns"))  # the deleted object's labels don't matter
    assert names(store.by_index("node", "n1")) == ["b"]
    assert store.index_keys(NAMESPACE_INDEX, "ns") == ["ns/b"]
    store.delete_key("ns/b")
    store.delete_key("ns/never-there")
    assert store.list_index_values("node") == []
    assert store.list_index_values(NAMESPACE_INDEX) == []
    assert len(store) == 0


def test_removal_uses_the_values_filed_even_if_the_cached_object_was_mutated(store: Store[Gpu]) -> None:
    obj = gpu("a", node="n1")
    store.add(obj)
    obj.metadata.labels = {NODE_LABEL: "elsewhere"}  # the bug the docstring warns about
    store.delete(obj)
    assert store.list_index_values("node") == []


def test_replace_swaps_content_and_rebuilds_indexes(store: Store[Gpu]) -> None:
    store.add(gpu("old", node="n1"))
    store.replace([gpu("a", node="n2"), gpu("b", node="n2")], "42")
    assert sorted(store.list_keys()) == ["a", "b"]
    assert store.by_index("node", "n1") == []
    assert names(store.by_index("node", "n2")) == ["a", "b"]
    assert store.resource_version == "42"


def test_add_indexers_after_data_indexes_existing_objects() -> None:
    store: Store[Gpu] = Store()
    store.add(gpu("a", node="n1", namespace="x"))
    store.add_indexers({"node": label_index(NODE_LABEL)})
    assert names(store.by_index("node", "n1")) == ["a"]
    store.add_indexers({NAMESPACE_INDEX: namespace_index})
    assert store.index_keys(NAMESPACE_INDEX, "x") == ["x/a"]
    assert set(store.get_indexers()) == {"node", NAMESPACE_INDEX}


def test_add_indexers_rejects_a_name_in_use(store: Store[Gpu]) -> None:
    with pytest.raises(ValueError, match="indexer conflict"):
        store.add_indexers({"node": namespace_index})


def test_unknown_index_raises(store: Store[Gpu]) -> None:
    with pytest.raises(IndexNotFoundError):
        store.by_index("nope", "x")
    with pytest.raises(IndexNotFoundError):
        store.list_index_values("nope")


def test_namespace_index_files_cluster_scoped_objects_under_empty_string(store: Store[Gpu]) -> None:
    store.add(gpu("cluster-wide"))
    assert store.index_keys(NAMESPACE_INDEX, "") == ["cluster-wide"]


def test_raising_index_function_leaves_store_unchanged() -> None:
    def broken(obj: Any) -> list[str]:
        if obj.metadata.name == "bad":
            raise RuntimeError("boom")
        return ["v"]

    store: Store[Gpu] = Store(indexers={"broken": broken})
    store.add(gpu("good"))
    with pytest.raises(RuntimeError):
        store.update(gpu("bad"))
    with pytest.raises(RuntimeError):
        store.replace([gpu("bad")], "9")
    assert store.list_keys() == ["good"]
    assert store.index_keys("broken", "v") == ["good"]


def test_concurrent_writers_keep_indexes_consistent(store: Store[Gpu]) -> None:
    def writer(node: str) -> None:
        for i in range(200):
            store.update(gpu(f"g{i % 20}", node=node))

    threads = [threading.Thread(target=writer, args=(f"n{t}",)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    filed = [key for value in store.list_index_values("node") for key in store.index_keys("node", value)]
    assert sorted(filed) == sorted(store.list_keys()), "every object filed exactly once"
    for obj in store.list():
        assert store.index_keys("node", obj.metadata.labels[NODE_LABEL]).count(object_name(obj)) == 1  # type: ignore[index]


def object_name(obj: Gpu) -> str:
    return str(obj.metadata.name)
