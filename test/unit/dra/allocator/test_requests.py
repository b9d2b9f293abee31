"""Request kinds: firstAvailable falls through, All takes every match, admin access needs a label."""

from __future__ import annotations

from testutil.k8s_fields import allocation_results
from testutil.unit.dra.allocator.alloc_builders import (
    Cluster,
    a30_pool,
    allocated,
    claim,
    device,
    device_class,
    devices_of,
    exact,
    first_available,
    mig_class,
    physical_class,
    resource_slice,
)

from pkg.dra.model import Unschedulable


def test_first_available_falls_through_to_the_next_subrequest() -> None:
    cluster = Cluster(a30_pool(profiles=("1g",)), [physical_class(), mig_class("1g")])
    cluster.take("mig-1g")  # the card is now MIG: the Physical subrequest cannot be met

    result = cluster.allocate(
        claim("c", first_available("gpu", ("whole", "physical-exclusive"), ("slice", "mig-1g")))
    )

    assert allocation_results(allocated(result))[0].request == "gpu/slice"
    assert devices_of(result) == ["gpu-0000-02-00-0-mig-1g-1"]


def test_first_available_prefers_the_first_subrequest() -> None:
    cluster = Cluster(a30_pool(), [physical_class(), mig_class("1g")])
    result = cluster.allocate(
        claim("c", first_available("gpu", ("whole", "physical-exclusive"), ("slice", "mig-1g")))
    )
    assert allocation_results(allocated(result))[0].request == "gpu/whole"


def test_all_takes_every_matching_device() -> None:
    cluster = Cluster(a30_pool(profiles=("1g",)), [mig_class("1g")])
    result = cluster.allocate(claim("c", exact("r", "mig-1g", all_devices=True)))
    assert len(devices_of(result)) == 4


def test_all_fails_when_one_matching_device_is_taken() -> None:
    cluster = Cluster(a30_pool(profiles=("1g",)), [mig_class("1g")])
    cluster.take("mig-1g")
    assert isinstance(cluster.allocate(claim("c", exact("r", "mig-1g", all_devices=True))), Unschedulable)


def test_all_fails_while_a_pool_is_incomplete() -> None:
    cluster = Cluster(a30_pool(profiles=("1g",)) + a30_pool("node-a", card="gpu-b")[1:], [mig_class("1g")])
    result = cluster.allocate(claim("c", exact("r", "mig-1g", all_devices=True)))
    assert isinstance(result, Unschedulable)
    assert "being updated" in str(result)
    assert not result.fatal  # the driver is republishing: retry later


def test_admin_access_only_in_a_labelled_namespace() -> None:
    gpu = device("gpu", attributes={"deviceType": "Physical"})
    cluster = Cluster([resource_slice("s", pool="p", devices=[gpu])], [device_class("any", "true")])
    cluster.take("any")  # held exclusively by another claim
    request = exact("r", "any", admin=True)

    refused = cluster.allocate(claim("admin", request, namespace="team"), namespace_labels={})
    granted = cluster.allocate(
        claim("admin", request, namespace="ops"),
        namespace_labels={"resource.kubernetes.io/admin-access": "true"},
    )

    assert isinstance(refused, Unschedulable)
    assert refused.fatal
    assert devices_of(granted) == ["gpu"]  # admin access does not care who holds the device
    assert allocation_results(allocated(granted))[0].admin_access is True


def test_unknown_class_is_a_fatal_error() -> None:
    result = Cluster(a30_pool(), []).allocate(claim("c", exact("r", "nope")))
    assert isinstance(result, Unschedulable)
    assert result.fatal
    assert "device class nope not found" in str(result)
