"""Pool gathering: only complete pools at their newest generation; invalid pools are skipped."""

from __future__ import annotations

from alloc_builders import Cluster, a30_pool, claim, device, devices_of, exact, mig_class, resource_slice

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


def test_devices_of_other_nodes_are_not_reachable() -> None:
    cluster = Cluster(a30_pool("node-b"), [mig_class("1g")])
    assert isinstance(cluster.allocate(claim("c", exact("r", "mig-1g"))), Unschedulable)
