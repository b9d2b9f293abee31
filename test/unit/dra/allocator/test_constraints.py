"""matchAttribute and distinctAttribute across the devices of one claim."""

from __future__ import annotations

from kubernetes.client import V1DeviceConstraint, V1ResourceSlice
from testutil.k8s_fields import attributes_of, slice_devices
from testutil.unit.dra.allocator.alloc_builders import Cluster, a30_pool, claim, devices_of, exact, mig_class

from pkg.dra.model import Unschedulable

PCI = "gpu.deckhouse.io/pciAddress"


def two_cards() -> list[V1ResourceSlice]:
    second = a30_pool(card="gpu-0000-03-00-0", profiles=("1g",))
    for d in slice_devices(second[1]):
        attributes_of(d)["pciAddress"].string = "0000:03:00.0"
    return a30_pool(profiles=("1g",)) + second


def test_match_attribute_keeps_devices_on_one_card() -> None:
    cluster = Cluster(two_cards(), [mig_class("1g")])
    cluster.take("mig-1g", count=3)  # three slices of the first card
    c = claim(
        "c", exact("a", "mig-1g"), exact("b", "mig-1g"), constraints=[V1DeviceConstraint(match_attribute=PCI)]
    )
    assert {d.split("-mig")[0] for d in devices_of(cluster.allocate(c))} == {"gpu-0000-03-00-0"}


def test_distinct_attribute_spreads_devices_over_cards() -> None:
    cluster = Cluster(two_cards(), [mig_class("1g")])
    c = claim("c", exact("r", "mig-1g", count=2), constraints=[V1DeviceConstraint(distinct_attribute=PCI)])
    assert {d.split("-mig")[0] for d in devices_of(cluster.allocate(c))} == {
        "gpu-0000-02-00-0",
        "gpu-0000-03-00-0",
    }


def test_constraint_that_cannot_hold_makes_the_claim_unschedulable() -> None:
    cluster = Cluster(a30_pool(profiles=("1g",)), [mig_class("1g")])
    c = claim("c", exact("r", "mig-1g", count=2), constraints=[V1DeviceConstraint(distinct_attribute=PCI)])
    assert isinstance(cluster.allocate(c), Unschedulable)


def test_constraint_limited_to_named_requests() -> None:
    cluster = Cluster(a30_pool(profiles=("1g",)), [mig_class("1g")])
    c = claim(
        "c",
        exact("a", "mig-1g"),
        exact("b", "mig-1g"),
        exact("x", "mig-1g"),
        constraints=[V1DeviceConstraint(distinct_attribute="gpu.deckhouse.io/migProfile", requests=["a"])],
    )
    assert len(devices_of(cluster.allocate(c))) == 3
