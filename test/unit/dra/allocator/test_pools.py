"""Pool gathering: only complete pools at their newest generation; invalid pools are skipped."""

from __future__ import annotations

import pytest
from alloc_builders import Cluster, a30_pool, claim, device, devices_of, exact, mig_class, resource_slice
from kubernetes.client import V1Device

from pkg.dra.allocator.pools import gather_pools
from pkg.dra.domain import Unschedulable


def test_incomplete_pool_is_skipped() -> None:
    _, devices = a30_pool("node-a")
    cluster = Cluster([devices], [mig_class("1g")])  # the counter slice has not arrived yet

    result = cluster.allocate(claim("c", exact("r", "mig-1g")))

    assert isinstance(result, Unschedulable)
    assert gather_pools([devices], node=None)[0].incomplete


def test_old_generation_is_ignored() -> None:
    old = a30_pool("node-a", card="gpu-old", generation=1)
    new = a30_pool("node-a", card="gpu-old", generation=2)
    new[1].spec.devices = [d for d in new[1].spec.devices if d.name.endswith("mig-1g-3")]
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
