"""Allocation accounting: the ledger's arithmetic and persistence, the timestamps a claim gives,
and the accountant's passes (open, charge, release, restart) over an in-memory ConfigMap store."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1DeviceAllocationResult,
    V1DeviceClaim,
    V1DeviceRequest,
    V1DeviceRequestAllocationResult,
    V1ExactDeviceRequest,
    V1ManagedFieldsEntry,
    V1ObjectMeta,
    V1ResourceClaimConsumerReference,
    V1ResourceClaimSpec,
    V1ResourceClaimStatus,
)
from pytest_mock import MockerFixture
from testutil.k8s_fields import allocation_of
from testutil.unit.dracontroller.ledger_fakes import MemoryConfigMaps

from pkg.dracontroller.accounting.accountant import Accountant
from pkg.dracontroller.accounting.collector import AccountingCollector
from pkg.dracontroller.accounting.devices import (
    DeviceFacts,
    HeldDevice,
    allocated_at,
    held_devices,
    last_status_write,
    start_estimate,
)
from pkg.dracontroller.accounting.events import AllocationEvents
from pkg.dracontroller.accounting.ledger import SHARDS, Ledger, Made, OpenAllocation, Usage, shard_of
from pkg.dracontroller.accounting.store import LedgerStore
from pkg.framework.client import ConflictError

DRIVER = "gpu.deckhouse.io"
MARK = "gpu.deckhouse.io/allocated-by"
T0 = 1_700_000_000.0
FACTS = {
    ("pool-n1", "gpu-0"): DeviceFacts(device_type="Physical", node="n1", physical_gpu="n1-0", uuid="GPU-1")
}
USAGE = Usage("gpu-physical", "Physical", "n1", "ns")


def claim(
    name: str = "c1",
    *,
    allocated: float | None = T0,
    pods: tuple[str, ...] = ("p1",),
    status_write: float | None = None,
) -> ResourceV1ResourceClaim:
    fields = []
    if allocated is not None:
        fields.append(_entry(allocated, {"f:status": {"f:allocation": {}}}))
    if status_write is not None:
        fields.append(_entry(status_write, {"f:status": {"f:reservedFor": {}}}))
    allocation = None
    if allocated is not None:
        result = V1DeviceRequestAllocationResult(request="gpu", driver=DRIVER, pool="pool-n1", device="gpu-0")
        allocation = V1AllocationResult(devices=V1DeviceAllocationResult(results=[result]))
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}", managed_fields=fields),
        spec=V1ResourceClaimSpec(
            devices=V1DeviceClaim(
                requests=[
                    V1DeviceRequest(
                        name="gpu", exactly=V1ExactDeviceRequest(device_class_name="gpu-physical")
                    )
                ]
            )
        ),
        status=V1ResourceClaimStatus(
            allocation=allocation,
            reserved_for=[V1ResourceClaimConsumerReference(resource="pods", name=p, uid=p) for p in pods],
        ),
    )


def _entry(at: float, fields: dict[str, Any]) -> V1ManagedFieldsEntry:
    return V1ManagedFieldsEntry(
        manager="kube-scheduler",
        operation="Update",
        subresource="status",
        time=datetime.fromtimestamp(at, UTC),
        fields_type="FieldsV1",
        fields_v1=fields,
    )


# -- the ledger ---------------------------------------------------------------------------------------


def test_open_allocations_are_charged_up_to_as_of_and_released_ones_keep_their_time() -> None:
    ledger = Ledger(as_of=T0)
    ledger.open_allocation("k1", OpenAllocation(usage=USAGE, start=T0 - 30))
    ledger.open_allocation("k1", OpenAllocation(usage=USAGE, start=T0))  # already open: ignored
    ledger.advance(T0 + 30)
    assert ledger.seconds() == {USAGE: 60.0}
    assert ledger.close("k1", end=T0 + 45) == 75.0
    ledger.advance(T0 + 1000)
    assert ledger.seconds() == {USAGE: 75.0}
    assert ledger.made == {Made("gpu-physical", "n1", "Physical"): 1}


def test_closing_before_as_of_never_takes_back_exported_time_and_the_clock_never_steps_back() -> None:
    ledger = Ledger(as_of=T0)
    ledger.open_allocation("k1", OpenAllocation(usage=USAGE, start=T0 - 10))
    ledger.advance(T0 - 100)
    assert ledger.as_of == T0
    assert ledger.close("k1", end=T0 - 5) == 10.0  # closed at as_of: the exported 10 s stay


def test_the_ledger_survives_its_json_and_bad_json_is_named() -> None:
    ledger = Ledger(as_of=T0)
    ledger.open_allocation(
        "k1", OpenAllocation(usage=USAGE, start=T0 - 10, claim="c1", device="gpu-0", card="n1-0")
    )
    ledger.open_allocation("k2", OpenAllocation(usage=USAGE, start=T0 - 5))
    ledger.close("k2", end=T0)
    again = Ledger.from_parts(ledger.head_json(), [ledger.part_json(i) for i in range(ledger.shards)])
    assert again == ledger
    assert again.open == ledger.open
    assert again.seconds() == ledger.seconds()
    assert again.made == ledger.made
    with pytest.raises(ValueError, match="unreadable allocation ledger"):
        Ledger.from_parts('{"version": 1, "asOf": 1}', [])
    with pytest.raises(ValueError, match="format version 7"):
        Ledger.from_parts('{"version": 7}', [])
    with pytest.raises(ValueError, match="2 parts read, the head names 256"):
        Ledger.from_parts(ledger.head_json(), [None, None])


# -- what a claim holds and when ----------------------------------------------------------------------


def test_held_devices_name_class_pods_and_who_allocated() -> None:
    [held] = held_devices(claim(pods=("p2", "p1")), FACTS, driver=DRIVER, allocated_by_annotation=MARK)
    assert (held.device_class, held.pods, held.allocated_by, held.facts.uuid) == (
        "gpu-physical",
        ("p1", "p2"),
        "kube-scheduler",
        "GPU-1",
    )
    assert held_devices(claim(allocated=None), FACTS, driver=DRIVER, allocated_by_annotation=MARK) == []


def test_allocation_time_comes_from_the_timestamp_else_the_owner_of_status_allocation() -> None:
    c = claim(allocated=T0, status_write=T0 + 50)
    assert allocated_at(c) == T0
    assert last_status_write(c) == T0 + 50
    allocation_of(c).allocation_timestamp = datetime.fromtimestamp(T0 - 3, UTC)
    assert allocated_at(c) == T0 - 3
    assert allocated_at(claim(allocated=None)) is None


@pytest.mark.parametrize(
    ("written", "seen", "start"),
    [(None, T0, T0), (T0, T0 + 0.3, T0 + 0.3), (T0, T0 + 40, T0 + 0.5), (T0 + 5, T0, T0)],
)
def test_start_estimate(written: float | None, seen: float, start: float) -> None:
    assert start_estimate(written=written, seen=seen) == start


# -- the accountant -----------------------------------------------------------------------------------


class Recorded:
    def __init__(self) -> None:
        self.created: list[str] = []
        self.released: list[tuple[str, object]] = []  # object: compared with pytest.approx

    def created_(self, devices: list[HeldDevice]) -> None:
        self.created += [d.claim for d in devices]

    def released_(self, devices: list[tuple[HeldDevice, float]]) -> None:
        self.released += [(d.claim, s) for d, s in devices]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def accountant(
    claims: dict[str, ResourceV1ResourceClaim],
    maps: MemoryConfigMaps,
    clock: Clock,
    events: Recorded,
    *,
    shards: int = SHARDS,
) -> tuple[Accountant, AccountingCollector]:
    def held(cs: Any) -> list[HeldDevice]:
        return [d for c in cs for d in held_devices(c, FACTS, driver=DRIVER, allocated_by_annotation=MARK)]

    collector = AccountingCollector(held=lambda: held(claims.values()))
    sink: Any = type(
        "Events", (), {"created": staticmethod(events.created_), "released": staticmethod(events.released_)}
    )()
    return (
        Accountant(
            claims=lambda: list(claims.values()),
            held=held,
            synced=lambda: True,
            store=LedgerStore(client=maps, namespace="gpu", name="ledger", shards=shards),
            events=sink,
            collector=collector,
            period=10.0,
            clock=clock,
        ),
        collector,
    )


def exported(collector: AccountingCollector) -> dict[str, float]:
    return {
        s.name: s.value for family in collector.collect() for s in family.samples if s.name.endswith("_total")
    }


def test_a_watched_allocation_is_charged_from_its_start_to_the_moment_its_release_arrived() -> None:
    maps, clock, events = MemoryConfigMaps(), Clock(), Recorded()
    claims: dict[str, ResourceV1ResourceClaim] = {}
    acct, collector = accountant(claims, maps, clock, events)
    acct.sync()
    assert exported(collector) == {}  # nothing held yet, but exported (this process leads)

    clock.now = T0 + 0.4
    claims["c1"] = claim(allocated=T0)
    acct.on_update(claims["c1"], claims["c1"])
    acct.sync()
    assert events.created == ["c1"]
    assert exported(collector)["gpu_dra_allocations_total"] == 1

    clock.now = T0 + 25  # a periodic pass charges the held time
    acct.sync()
    assert exported(collector)["gpu_dra_allocation_seconds_total"] == pytest.approx(24.6)

    clock.now = T0 + 30.4
    released = claim(allocated=None)
    acct.on_update(claims["c1"], released)  # the watch delivered the release at T0 + 30.4
    claims["c1"] = released
    clock.now = T0 + 31  # the pass runs a bit later
    acct.sync()
    assert exported(collector)["gpu_dra_allocation_seconds_total"] == pytest.approx(30.0)
    assert events.released == [("c1", pytest.approx(30.0))]
    assert [s.labels["pod"] for f in collector.collect() for s in f.samples if s.name.endswith("_info")] == []


def test_a_restart_continues_from_the_ledger_without_repeating_events_or_losing_downtime() -> None:
    maps, clock, events = MemoryConfigMaps(), Clock(), Recorded()
    claims = {"c1": claim(allocated=T0), "c2": claim("c2", allocated=T0)}
    first, collector = accountant(claims, maps, clock, events)
    clock.now = T0 + 10
    first.sync()
    assert sorted(events.created) == ["c1", "c2"]
    before = exported(collector)["gpu_dra_allocation_seconds_total"]
    assert before == pytest.approx(2 * 9.5)  # seen late: from the middle of the allocation's second

    # Down from T0 + 10 to T0 + 100: c1 still held; c2 released at T0 + 40 (its status write) and kept.
    claims["c2"] = claim("c2", allocated=None, status_write=T0 + 40)
    clock.now = T0 + 100
    second, collector2 = accountant(claims, maps, clock, events)
    second.sync()
    assert sorted(events.created) == ["c1", "c2"]  # not announced again
    assert events.released == [("c2", pytest.approx(39.5))]
    after = exported(collector2)["gpu_dra_allocation_seconds_total"]
    assert after == pytest.approx(99.5 + 39.5)
    assert after >= before


def test_a_claim_deleted_while_nobody_watched_is_closed_at_the_last_persisted_time() -> None:
    maps, clock, events = MemoryConfigMaps(), Clock(), Recorded()
    claims = {"c1": claim(allocated=T0)}
    first, _ = accountant(claims, maps, clock, events)
    clock.now = T0 + 20
    first.sync()
    del claims["c1"]
    clock.now = T0 + 500
    second, collector = accountant(claims, maps, clock, events)
    second.sync()
    assert exported(collector)["gpu_dra_allocation_seconds_total"] == pytest.approx(19.5)


def test_nothing_is_exported_or_announced_that_was_not_persisted() -> None:
    maps, clock, events = MemoryConfigMaps(), Clock(), Recorded()
    claims = {"c1": claim(allocated=T0)}
    acct, collector = accountant(claims, maps, clock, events)
    maps.fail_next = ConflictError(status=409, reason="Conflict", message="someone else wrote")
    with pytest.raises(ConflictError):
        acct.sync()
    assert events.created == []
    assert list(collector.collect()) == []
    acct._ledger = None  # what run() does after a failure: redo from the store
    acct.sync()
    assert events.created == ["c1"]
    assert exported(collector)["gpu_dra_allocations_total"] == 1


def test_passes_and_leader_terms_keep_one_configmap_per_part_their_claims_use() -> None:
    """Periodic passes, releases and a new leader write into the ConfigMaps of the parts the claims
    hash to: the namespace holds the head and those parts, nothing per pass or per term."""
    maps, clock, events = MemoryConfigMaps(), Clock(), Recorded()
    claims = {f"c{n}": claim(f"c{n}", allocated=T0) for n in range(6)}
    first, _ = accountant(claims, maps, clock, events)
    for step in range(1, 6):  # five periodic passes while the claims are held
        clock.now = T0 + 10 * step
        first.sync()
    for n in range(3):
        released = claim(f"c{n}", allocated=None)
        first.on_update(claims[f"c{n}"], released)
        claims[f"c{n}"] = released
    clock.now = T0 + 61
    first.sync()

    claims |= {f"c{n}": claim(f"c{n}", allocated=T0 + 70) for n in range(6, 8)}
    clock.now = T0 + 80
    second, _ = accountant(claims, maps, clock, events)  # the next leader's term
    second.sync()
    clock.now = T0 + 95
    second.sync()

    store = LedgerStore(client=maps, namespace="gpu", name="ledger")
    parts = {store.part_name(shard_of(f"uid-c{n}")) for n in range(8)}
    assert sorted(maps.stored) == sorted({"ledger", *parts})
    assert len(maps.writes) > len(maps.stored)  # written many times, each into its own ConfigMap


def test_a_first_ledger_has_as_many_parts_as_its_store() -> None:
    """With nothing stored, the accountant starts a ledger the store can write and read back."""
    maps, clock, events = MemoryConfigMaps(), Clock(), Recorded()
    claims = {"c1": claim(allocated=T0)}
    acct, collector = accountant(claims, maps, clock, events, shards=8)
    acct.sync()
    assert exported(collector)["gpu_dra_allocations_total"] == 1
    assert sorted(maps.stored) == ["ledger", f"ledger-{shard_of('uid-c1', 8)}"]


def test_only_the_leader_exports() -> None:
    collector = AccountingCollector(held=list)
    assert list(collector.collect()) == []
    collector.publish(Ledger(as_of=T0))
    assert [f.name for f in collector.collect()] == [
        "gpu_dra_allocation_seconds",
        "gpu_dra_allocations",
        "gpu_dra_allocation_info",
    ]
    collector.publish(None)
    assert list(collector.collect()) == []


# -- Events ---------------------------------------------------------------------------------------------


def test_one_event_per_claim_and_one_per_card_it_holds(mocker: MockerFixture) -> None:
    recorder = mocker.MagicMock()
    events = AllocationEvents(recorder=recorder)
    facts = {
        ("pool-n1", "gpu-0"): DeviceFacts(device_type="MIG", node="n1", physical_gpu="n1-0"),
    }
    c = claim(pods=("p1",))
    c.status.allocation.devices.results.append(  # type: ignore[union-attr]
        V1DeviceRequestAllocationResult(
            request="gpu", driver=DRIVER, pool="pool-n1", device="gpu-0", share_id="s2"
        )
    )
    held = held_devices(c, facts, driver=DRIVER, allocated_by_annotation=MARK)
    events.created(held)
    kinds = [
        (call.args[0].kind, call.args[0].metadata.name, call.kwargs["reason"])
        for call in recorder.event.call_args_list
    ]
    assert kinds == [
        ("ResourceClaim", "c1", "AllocationCreated"),
        ("PhysicalGPU", "n1-0", "AllocationCreated"),
    ]
    assert "by kube-scheduler for pod p1" in recorder.event.call_args_list[0].kwargs["message"]
    recorder.reset_mock()
    events.released([(d, 61.0) for d in held])
    notes = [call.kwargs["message"] for call in recorder.event.call_args_list]
    assert len(notes) == 2
    assert "after 61s" in notes[0]
