"""Pool gathering: only complete pools at their newest generation; invalid pools are skipped."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes.client import V1Device
from testutil.k8s_fields import counter_sets, meta, slice_devices
from testutil.unit.dra.allocator.alloc_builders import (
    Cluster,
    a30_pool,
    claim,
    device,
    devices_of,
    exact,
    mig_class,
    resource_slice,
)

from pkg.dra.allocator import pools as pools_module
from pkg.dra.allocator.pools import Pool, PoolCache, gather_pools
from pkg.dra.model import Unschedulable


def test_incomplete_pool_is_skipped() -> None:
    _, devices = a30_pool("node-a")
    cluster = Cluster([devices], [mig_class("1g")])  # the counter slice has not arrived yet

    result = cluster.allocate(claim("c", exact("r", "mig-1g")))

    assert isinstance(result, Unschedulable)
    assert gather_pools([devices], node=None)[0].incomplete


def test_old_generation_is_ignored() -> None:
    old = a30_pool("node-a", card="gpu-old", generation=1)
    new = a30_pool("node-a", card="gpu-old", generation=2)
    new[1].spec.devices = [d for d in slice_devices(new[1]) if d.name.endswith("mig-1g-3")]
    cluster = Cluster([*old, *new], [mig_class("1g")])

    assert cluster.take("mig-1g") == ["gpu-old-mig-1g-3"]
    assert isinstance(cluster.allocate(claim("c2", exact("r", "mig-1g"))), Unschedulable)


def test_invalid_pool_is_reported_and_other_pools_still_serve() -> None:
    broken = resource_slice(
        "broken",
        pool="broken",
        devices=[
            device("dup", attributes={"deviceType": "MIG", "migProfile": "1g"}),
            device("dup", attributes={"deviceType": "MIG", "migProfile": "1g"}),
        ],
    )
    cluster = Cluster([broken], [mig_class("1g")])
    result = cluster.allocate(claim("c", exact("r", "mig-1g")))
    assert isinstance(result, Unschedulable)
    assert "invalid resource pools" in result.reason
    assert "duplicate device name dup" in str(result)

    cluster.slices += a30_pool("node-a")
    assert devices_of(cluster.allocate(claim("c2", exact("r", "mig-1g")))) == ["gpu-0000-02-00-0-mig-1g-0"]


@pytest.mark.parametrize(
    ("broken_device", "reason"),
    [
        (device("huge", capacity={"memory": "1e999999"}), "larger than the maximum"),
        (device("long", attributes={"name": "x" * 65}), "longer than 64 bytes"),
    ],
)
def test_a_pool_another_driver_broke_is_skipped_and_reported(broken_device: V1Device, reason: str) -> None:
    broken = resource_slice("other", pool="other", devices=[broken_device], driver="other.example.com")
    cluster = Cluster([broken, *a30_pool("node-a")], [mig_class("1g")])

    assert devices_of(cluster.allocate(claim("c", exact("r", "mig-1g")))) == ["gpu-0000-02-00-0-mig-1g-0"]
    pool = next(p for p in gather_pools(cluster.slices, node=None) if p.id.driver == "other.example.com")
    assert pool.invalid is not None
    assert reason in pool.invalid


def test_devices_of_other_nodes_are_not_reachable() -> None:
    cluster = Cluster(a30_pool("node-b"), [mig_class("1g")])
    assert isinstance(cluster.allocate(claim("c", exact("r", "mig-1g"))), Unschedulable)


def test_same_slice_objects_reuse_the_last_answer_and_new_objects_do_not() -> None:
    slices = a30_pool("node-a")
    cache = PoolCache()
    first = gather_pools(slices, node=None, cache=cache)
    assert gather_pools(list(slices), node=None, cache=cache) is first
    changed = [slices[0], slices[1].model_copy(deep=True)]
    meta(changed[1]).resource_version = "2"
    again = gather_pools(changed, node=None, cache=cache)
    assert again is not first
    assert again[0] is not first[0]  # rebuilt: a slice of the pool changed
    unversioned = [s.model_copy(deep=True) for s in slices]
    for rs in unversioned:
        meta(rs).resource_version = None
    assert gather_pools(unversioned, node=None, cache=cache) is not gather_pools(
        unversioned, node=None, cache=cache
    )


def test_two_threads_asking_at_once_build_the_pools_once(monkeypatch: pytest.MonkeyPatch) -> None:
    slices = [rs for n in range(3) for rs in a30_pool(f"node-{n}")]
    cache = PoolCache()
    building, release = threading.Event(), threading.Event()
    original = pools_module._build

    def slow_build(*args: Any) -> None:
        building.set()
        release.wait(5)
        original(*args)

    monkeypatch.setattr(pools_module, "_build", slow_build)
    answers: dict[str, list[Pool]] = {}
    first = threading.Thread(target=lambda: answers.update(a=gather_pools(slices, node=None, cache=cache)))
    first.start()
    assert building.wait(5)  # the first thread is building
    second = threading.Thread(
        target=lambda: answers.update(b=gather_pools(list(slices), node=None, cache=cache))
    )
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waits for the build under way instead of making its own
    release.set()
    first.join(5)
    second.join(5)
    assert answers["a"] is answers["b"]
    assert cache.built_devices == sum(len(p.devices) for p in answers["a"])  # each pool built once


def test_unknown_counter_makes_the_pool_invalid_even_when_its_consumption_was_seen_before() -> None:
    good = a30_pool("node-a")
    bad = a30_pool("node-b")
    counter_sets(bad[0])[0].counters.pop("memory-slice-3")  # a 1g offer consumes it
    pools = {str(p.id): p for p in gather_pools([*good, *bad], node=None)}
    assert pools["gpu.deckhouse.io/gpus-node-a-gpu-0000-02-00-0"].invalid is None
    invalid = pools["gpu.deckhouse.io/gpus-node-b-gpu-0000-02-00-0"].invalid
    assert invalid == "counter memory-slice-3 not found in counter set gpu-0000-02-00-0"
