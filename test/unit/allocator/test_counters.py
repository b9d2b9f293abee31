"""Shared counters enforce the Physical/MIG/sharing invariant of one card."""

from __future__ import annotations

from alloc_builders import Cluster, a30_pool, claim, exact, mig_class, physical_class

from pkg.dra.domain import Unschedulable


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
