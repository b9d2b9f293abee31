"""The soak's invariants over hand-made claims, slices and host objects."""

from __future__ import annotations

from typing import Any

from soak.host_state import HostObject
from soak.invariants import (
    allocation_key,
    bad_allocations,
    double_allocations,
    leaks,
    memory_growth,
    newly_allocated,
    remembered_slices,
    restart_loops,
    unrecovered,
)

DRIVER = "gpu.deckhouse.io"
SLICES_OF = 4


def _counters(*slices: int) -> list[dict[str, Any]]:
    return [{"counterSet": "gpu-0", "counters": {f"memory-slice-{s}": {"value": "1"} for s in slices}}]


def _device(name: str, consumes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": name, "consumesCounters": consumes, **extra}


def _slices(*, taint: dict[str, str] | None = None) -> list[dict[str, Any]]:
    whole = _device("gpu-0", _counters(0, 1, 2, 3))
    if taint is not None:
        whole["taints"] = [taint]
    return [
        {
            "spec": {
                "driver": DRIVER,
                "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 2},
                "nodeName": "node-a",
                "sharedCounters": [
                    {
                        "name": "gpu-0",
                        "counters": {f"memory-slice-{s}": {"value": "1"} for s in range(SLICES_OF)},
                    }
                ],
            }
        },
        {
            "spec": {
                "driver": DRIVER,
                "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 2},
                "nodeName": "node-a",
                "devices": [
                    whole,
                    _device(
                        "gpu-0-mig-1g-0",
                        _counters(0),
                        attributes={
                            f"{DRIVER}/pciAddress": {"string": "0000:01:00.0"},
                            f"{DRIVER}/deviceType": {"string": "MIG"},
                            f"{DRIVER}/placementStart": {"int": 0},
                        },
                    ),
                    _device("gpu-0-mig-2g-0", _counters(0, 1)),
                    _device("gpu-0-timeslicing", _counters(0, 1, 2, 3), allowMultipleAllocations=True),
                ],
            }
        },
    ]


def _claim(name: str, *devices: str, uid: str | None = None) -> dict[str, Any]:
    results = [{"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": d} for d in devices]
    return {
        "metadata": {"namespace": "soak", "name": name, "uid": uid or f"uid-{name}"},
        "status": {"allocation": {"devices": {"results": results}}},
    }


def test_a_whole_card_and_a_mig_device_of_it_at_once_are_a_double_allocation() -> None:
    found = double_allocations([_claim("whole", "gpu-0"), _claim("mig", "gpu-0-mig-1g-0")], _slices(), now=5)
    assert [v.kind for v in found] == ["DoubleAllocation"]
    assert "soak/mig" in found[0].message
    assert "soak/whole" in found[0].message
    assert found[0].at == 5


def test_overlapping_mig_placements_are_a_double_allocation() -> None:
    found = double_allocations(
        [_claim("a", "gpu-0-mig-1g-0"), _claim("b", "gpu-0-mig-2g-0")], _slices(), now=0
    )
    assert len(found) == 1
    assert "memory-slice-0 2 > 1" in found[0].message


def test_two_shares_of_one_card_under_its_counters_are_not_a_double_allocation() -> None:
    claims = [_claim("share-1", "gpu-0-timeslicing"), _claim("share-2", "gpu-0-timeslicing")]
    assert double_allocations(claims, _slices(), now=0) == []


def test_one_exclusive_device_in_two_claims_is_a_double_allocation() -> None:
    found = double_allocations(
        [_claim("a", "gpu-0-mig-1g-0"), _claim("b", "gpu-0-mig-1g-0")], _slices(), now=0
    )
    assert any("allocated to 2 claims" in v.message for v in found)


def test_shares_of_a_pool_withdrawn_for_a_moment_are_no_double_allocation() -> None:
    # A reboot: the node's slices are gone at this look, the previous one still had them.
    shares = [_claim("ts-1", "gpu-0-timeslicing"), _claim("ts-2", "gpu-0-timeslicing")]
    assert double_allocations(shares, [], now=0, before=_slices()) == []
    whole = [_claim("a", "gpu-0"), _claim("b", "gpu-0")]
    assert len(double_allocations(whole, [], now=0, before=_slices())) == 1


def test_shares_of_a_pool_withdrawn_for_several_looks_are_no_double_allocation() -> None:
    # A reboot whose pool stays away for two looks: the memory must outlast one look.
    shares = [_claim("ts-1", "gpu-0-timeslicing"), _claim("ts-2", "gpu-0-timeslicing")]
    remembered = remembered_slices(remembered_slices([], _slices()), [])
    remembered = remembered_slices(remembered, [])
    assert double_allocations(shares, [], now=0, before=remembered) == []
    whole = [_claim("a", "gpu-0"), _claim("b", "gpu-0")]
    assert len(double_allocations(whole, [], now=0, before=remembered)) == 1


def test_remembered_slices_keep_only_pools_this_look_lacks() -> None:
    other = {"spec": {"driver": DRIVER, "pool": {"name": "node-b"}, "nodeName": "node-b"}}
    republished = [{"spec": {"driver": DRIVER, "pool": {"name": "node-a", "generation": 2}}}]
    assert remembered_slices([*_slices(), other], republished) == [*republished, other]


def test_a_device_tainted_noschedule_at_allocation_is_a_bad_allocation() -> None:
    taint = {"key": "gpu.deckhouse.io/unhealthy", "value": "XID79", "effect": "NoSchedule"}
    found = bad_allocations([_claim("whole", "gpu-0")], _slices(taint=taint), now=3)
    assert [v.kind for v in found] == ["BadAllocation"]
    assert "soak/whole" in found[0].message
    assert "NoSchedule" in found[0].message


def test_a_tolerated_or_noneffect_taint_is_no_bad_allocation() -> None:
    taint = {"key": "k", "value": "v", "effect": "None"}
    assert bad_allocations([_claim("whole", "gpu-0")], _slices(taint=taint), now=0) == []
    claim = _claim("whole", "gpu-0")
    claim["status"]["allocation"]["devices"]["results"][0]["tolerations"] = [
        {"key": "k", "operator": "Exists"}
    ]
    noschedule = {"key": "k", "value": "v", "effect": "NoSchedule"}
    assert bad_allocations([claim], _slices(taint=noschedule), now=0) == []


def test_a_device_gone_from_the_slices_is_a_bad_allocation() -> None:
    found = bad_allocations([_claim("ghost", "gpu-9")], _slices(), now=0)
    assert len(found) == 1
    assert "no slice offers" in found[0].message


def _generation(slices: list[dict[str, Any]], generation: int) -> list[dict[str, Any]]:
    """The same slices, published as the pool's ``generation``."""
    return [{"spec": {**s["spec"], "pool": {**s["spec"]["pool"], "generation": generation}}} for s in slices]


def test_a_device_offered_just_before_it_was_first_seen_is_no_bad_allocation() -> None:
    # The node rebooted between the allocation and the first look at it: its slices are gone.
    claim = _claim("mig", "gpu-0-mig-1g-0")
    assert bad_allocations([claim], [], now=5, before=_slices()) == []
    # A taint added after the allocation was not there for the allocator to see.
    taint = {"key": "gpu.deckhouse.io/unhealthy", "value": "XID79", "effect": "NoSchedule"}
    assert bad_allocations([claim], _slices(taint=taint), now=5, before=_slices()) == []


def test_a_device_absent_before_and_after_its_first_sighting_is_a_bad_allocation() -> None:
    found = bad_allocations([_claim("ghost", "gpu-9")], _slices(), now=5, before=_slices())
    assert [v.kind for v in found] == ["BadAllocation"]
    assert "soak/ghost" in found[0].message
    taint = {"key": "gpu.deckhouse.io/unhealthy", "value": "XID79", "effect": "NoSchedule"}
    tainted = bad_allocations(
        [_claim("whole", "gpu-0")], _slices(taint=taint), now=5, before=_slices(taint=taint)
    )
    assert len(tainted) == 1
    assert "NoSchedule" in tainted[0].message


def test_only_a_pool_s_newest_generation_offers_devices() -> None:
    # Mid-republish: generation 2 has no MIG device of the card any more, generation 1 still does.
    republished = _generation(_slices(), 2)
    republished[1]["spec"]["devices"] = [
        d for d in republished[1]["spec"]["devices"] if "mig" not in d["name"]
    ]
    both = _generation(_slices(), 1) + republished
    claim = _claim("mig", "gpu-0-mig-1g-0")
    assert len(bad_allocations([claim], both, now=5, before=both)) == 1
    assert bad_allocations([claim], _generation(_slices(), 1), now=5, before=both) == []


def _mid_republish(generation: int) -> list[dict[str, Any]]:
    """The pool while gpu-handler writes ``generation``: the counter slice is written, the device
    slice still has the generation before."""
    return _generation(_slices(), generation)[:1] + _generation(_slices(), generation - 1)[1:]


def test_a_pool_caught_mid_republish_offers_nothing_and_is_not_remembered() -> None:
    # Smoke run 2 after reboot-node: the kube-scheduler allocated a MIG device and a TimeSlicing
    # share from generation 1 of the rebooted node's pool; the look read the slices while
    # generation 2 was half written, and the look before that one had found the pool wiped.
    mig = _claim("mig", "gpu-0-mig-1g-0")
    shares = [_claim("ts-1", "gpu-0-timeslicing"), _claim("ts-2", "gpu-0-timeslicing")]
    remembered = remembered_slices(remembered_slices([], _slices()), [])  # complete, then wiped
    assert bad_allocations([mig, *shares], _mid_republish(2), now=5, before=remembered) == []
    assert double_allocations(shares, _mid_republish(2), now=5, before=remembered) == []
    assert remembered_slices(remembered, _mid_republish(2)) == remembered
    # Complete again: the newest generation replaces the one remembered.
    complete = _generation(_slices(), 2)
    assert remembered_slices(remembered, complete) == complete
    # A device the pool did not offer complete before, nor offers complete now, stays bad.
    found = bad_allocations([_claim("ghost", "gpu-9")], complete, now=5, before=remembered)
    assert [v.kind for v in found] == ["BadAllocation"]


def test_an_incomplete_pool_s_devices_are_unknown_and_its_exclusive_ones_still_count() -> None:
    mid = _mid_republish(2)
    assert len(bad_allocations([_claim("mig", "gpu-0-mig-1g-0")], mid, now=5, before=mid)) == 1
    whole = [_claim("a", "gpu-0"), _claim("b", "gpu-0")]
    assert len(double_allocations(whole, mid, now=5, before=_slices())) == 1


def test_only_new_allocations_are_handed_on() -> None:
    old, new = _claim("old", "gpu-0"), _claim("new", "gpu-0-mig-1g-0")
    seen = {allocation_key(old) or ""}
    assert newly_allocated([old, new, {"metadata": {"name": "pending"}}], seen) == [new]


MIG = HostObject("node-a", "mig-gi", "0000:01:00.0@0/gi7", card="0000:01:00.0")


def test_a_mig_instance_without_a_claim_past_the_grace_time_is_a_leak() -> None:
    first = leaks([MIG], [], slices=_slices(), now=100, grace=30, unowned_since={})
    assert first.violations == []  # just seen: maybe a Prepare is under way
    within = leaks([MIG], [], slices=_slices(), now=120, grace=30, unowned_since=first.unowned_since)
    assert within.violations == []
    past = leaks([MIG], [], slices=_slices(), now=131, grace=30, unowned_since=within.unowned_since)
    assert [v.kind for v in past.violations] == ["Leak"]
    assert "0000:01:00.0@0/gi7" in past.violations[0].message
    assert "node-a" in past.violations[0].message


def test_a_mig_instance_of_an_allocated_claim_is_no_leak_and_forgets_its_time() -> None:
    found = leaks(
        [MIG],
        [_claim("mig", "gpu-0-mig-1g-0")],
        slices=_slices(),
        now=500,
        grace=30,
        unowned_since={MIG.key: 0},
    )
    assert found.violations == []
    assert MIG.key not in found.unowned_since


def test_objects_naming_their_claim_are_owned_only_by_that_claim_on_their_node() -> None:
    spec = HostObject("node-a", "cdi-spec", "k8s.gpu.deckhouse.io-claim_uid-a.json", owner="uid-a")
    elsewhere = HostObject("node-b", "checkpoint", "uid-a", owner="uid-a")
    found = leaks(
        [spec, elsewhere],
        [_claim("a", "gpu-0")],
        slices=_slices(),
        now=99,
        grace=0,
        unowned_since={spec.key: 0, elsewhere.key: 0},
    )
    assert [v.objects for v in found.violations] == [("node-b/checkpoint/uid-a",)]


def test_what_the_host_had_before_the_workload_is_no_leak() -> None:
    vfio = HostObject("node-a", "vfio", "0000:ca:00.0", card="0000:ca:00.0")
    found = leaks(
        [vfio], [], slices=_slices(), now=99, grace=0, unowned_since={vfio.key: 0}, baseline={vfio.key}
    )
    assert found.violations == []


def _pod(name: str, phase: str, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {
        "metadata": {"namespace": "soak", "name": name, "creationTimestamp": created},
        "status": {"phase": phase},
    }


def test_pods_not_running_past_the_bound_after_the_heal_are_unrecovered() -> None:
    epoch = 1767225600.0  # 2026-01-01T00:00:00Z
    pods = [_pod("ok", "Running"), _pod("done", "Succeeded"), _pod("stuck", "Pending")]
    assert unrecovered(pods, epoch + 100, 60, healed_at=epoch + 50) == []  # the bound is still running
    found = unrecovered(pods, epoch + 111, 60, healed_at=epoch + 50)
    assert [v.objects for v in found] == [("soak/stuck",)]
    young = [_pod("young", "Pending", "2026-01-01T00:01:40Z")]
    assert unrecovered(young, epoch + 111, 60, healed_at=epoch + 50) == []


def test_a_component_restarting_often_within_the_window_is_a_loop() -> None:
    restarts = {"gpu-handler[a]": [10.0, 20.0, 30.0], "gpu-controller": [10.0, 500.0]}
    found = restart_loops(restarts, now=600, window=600, threshold=3)
    assert [v.objects for v in found] == [("gpu-handler[a]",)]
    assert restart_loops(restarts, now=700, window=600, threshold=3) == []


def test_memory_that_grows_with_time_is_reported_and_a_spike_is_not() -> None:
    mib = 2**20
    growing = [(float(t), (100 + 10 * t) * mib) for t in range(12)]
    spike = [(float(t), (400 if t == 6 else 100) * mib) for t in range(12)]
    found = memory_growth({"grows": growing, "spikes": spike}, tolerance=0.25, now=12)
    assert [v.objects for v in found] == [("grows",)]
