"""Shared counters enforce the Physical/MIG/sharing invariant of one card."""

from __future__ import annotations

from kubernetes.client import V1ResourceSlice
from testutil.k8s_fields import meta
from testutil.unit.dra.allocator.alloc_builders import (
    Cluster,
    a30_pool,
    claim,
    exact,
    mig_class,
    physical_class,
)

from pkg.dra.allocator import Allocator
from pkg.dra.model import Unschedulable


def test_physical_excludes_mig_on_the_same_card() -> None:
    cluster = Cluster(a30_pool(), [mig_class("1g"), physical_class()])
    assert cluster.take("physical-exclusive") == ["gpu-0000-02-00-0-physical"]
    assert isinstance(cluster.allocate(claim("mig", exact("r", "mig-1g"))), Unschedulable)


def test_mig_excludes_physical_on_the_same_card() -> None:
    cluster = Cluster(a30_pool(), [mig_class("1g"), physical_class()])
    cluster.take("mig-1g")
    assert isinstance(cluster.allocate(claim("phys", exact("r", "physical-exclusive"))), Unschedulable)


def test_mig_profiles_share_a_card_until_its_slices_run_out() -> None:
    cluster = Cluster(a30_pool(), [mig_class("1g"), mig_class("2g")])
    assert len(cluster.take("mig-2g")) == 1
    assert len(cluster.take("mig-1g", count=2)) == 2
    assert isinstance(cluster.allocate(claim("more", exact("r", "mig-1g"))), Unschedulable)


def test_shared_device_charges_its_counters_once() -> None:
    cluster = Cluster(a30_pool(sharing=("timeslicing",)), [physical_class("timeslicing")])
    for i in range(3):
        c = claim(f"s{i}", exact("r", "physical-timeslicing", capacity={"sharePercent": "10"}))
        assert not isinstance(cluster.allocate(c), Unschedulable)


def test_timeslicing_and_mps_never_mix_on_one_card() -> None:
    cluster = Cluster(
        a30_pool(sharing=("timeslicing", "mps")),
        [physical_class("timeslicing"), physical_class("mps"), mig_class("1g")],
    )
    cluster.take("physical-timeslicing")
    assert isinstance(cluster.allocate(claim("mps", exact("r", "physical-mps"))), Unschedulable)
    assert isinstance(cluster.allocate(claim("mig", exact("r", "mig-1g"))), Unschedulable)


def test_mps_cannot_join_a_card_with_mig() -> None:
    cluster = Cluster(a30_pool(sharing=("mps",)), [physical_class("mps"), mig_class("1g")])
    cluster.take("mig-1g")
    assert isinstance(cluster.allocate(claim("mps", exact("r", "physical-mps"))), Unschedulable)


def _versioned(slices: list[V1ResourceSlice]) -> list[V1ResourceSlice]:
    for rs in slices:
        meta(rs).resource_version = "1"  # pools (and best fit's per-card memo) are cached
    return slices


def test_cached_pool_sees_every_change_of_the_allocated_claims() -> None:
    """The counter tally is rebuilt from the claims each call: a release frees the card at once."""
    cluster = Cluster(_versioned(a30_pool()), [mig_class("1g"), mig_class("2g"), physical_class()])
    fresh = Cluster(cluster.slices, cluster.classes)
    for profile in ("mig-1g", "mig-2g", "mig-1g"):
        assert cluster.take(profile) == fresh.take(profile)
        fresh.allocator = Allocator()  # a cold allocator decides the same
    assert isinstance(cluster.allocate(claim("phys", exact("r", "physical-exclusive"))), Unschedulable)
    cluster.claims.clear()  # every claim released: the card is untouched again
    assert cluster.take("physical-exclusive") == ["gpu-0000-02-00-0-physical"]
    cluster.claims.clear()
    assert cluster.take("mig-2g") == Cluster(cluster.slices, cluster.classes).take("mig-2g")
