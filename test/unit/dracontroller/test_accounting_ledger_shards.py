"""The ledger at cluster scale: 100,000 open allocations in parts that each fit a ConfigMap, written
only where a pass changed them, and never less than what was exported after a restart, a failed
pass or a leader change."""

from __future__ import annotations

import json
import random
import uuid

import pytest
from kubernetes.client import V1ConfigMap, V1ObjectMeta
from testutil.unit.dracontroller.ledger_fakes import MemoryConfigMaps

from pkg.dracontroller.accounting.ledger import SHARDS, Ledger, Made, OpenAllocation, Usage, shard_of
from pkg.dracontroller.accounting.store import DATA_KEY, MAX_BYTES, LedgerStore, stored_bytes
from pkg.framework.client import ApiError, ConflictError

T0 = 1_700_000_000.0
OPEN = 100_000


def usage(n: int) -> Usage:
    return Usage("gpu-mig-1g", "MIG", f"node-{n % 1000:04d}", f"team-{n % 37}")


def key(rng: random.Random, n: int) -> str:
    uid = uuid.UUID(int=rng.getrandbits(128), version=4)
    return f"{uid}/gpu/gpus-node-{n % 1000:04d}/gpu-0000-{n % 8:02x}-00-0-mig-1g-{n % 7}"


def big_ledger(count: int = OPEN) -> Ledger:
    rng = random.Random(7)
    ledger = Ledger(as_of=T0)
    for n in range(count):
        held = OpenAllocation(
            usage=usage(n),
            start=T0 - n % 5000,
            claim=f"claim-{n:06d}",
            device=f"gpu-{n % 8}-mig",
            card=f"pgpu-{n}",
        )
        ledger.open_allocation(key(rng, n), held)
    return ledger


def store(maps: MemoryConfigMaps) -> LedgerStore:
    return LedgerStore(client=maps, namespace="gpu", name="ledger")


def test_a_hundred_thousand_open_allocations_fit_and_come_back_whole() -> None:
    ledger, maps = big_ledger(), MemoryConfigMaps()
    exported = ledger.seconds()
    store(maps).save(ledger, {})
    assert sorted(maps.stored) == sorted(store(maps).names())  # every part got allocations
    sizes = [stored_bytes(cm) for cm in maps.stored.values()]
    assert max(sizes) < MAX_BYTES / 2  # room to grow past 200,000 before a part is full
    assert sum(len(part.open) for part in ledger.parts) == OPEN
    assert max(len(part.open) for part in ledger.parts) < 1.25 * OPEN / SHARDS  # spread evenly

    loaded = store(maps).load().ledger
    assert loaded == ledger
    assert len(loaded.open) == OPEN
    assert loaded.seconds() == exported
    assert loaded.made == {Made("gpu-mig-1g", f"node-{n:04d}", "MIG"): 100 for n in range(1000)}


def test_a_pass_writes_the_parts_it_changed_and_the_head_only() -> None:
    ledger, maps = big_ledger(2_000), MemoryConfigMaps()
    versions = store(maps).save(ledger, {})
    maps.writes.clear()
    first, second = sorted(ledger.open)[:2]
    ledger.close(first, end=T0 + 5)
    ledger.close(second, end=T0 + 5)
    ledger.advance(T0 + 10)
    versions = store(maps).save(ledger, versions)
    changed = {store(maps).part_name(shard_of(k)) for k in (first, second)}
    assert sorted(maps.writes) == sorted([*changed, "ledger"])
    maps.writes.clear()
    ledger.advance(T0 + 20)  # time passes, nothing opens or closes: the head alone
    store(maps).save(ledger, versions)
    assert maps.writes == ["ledger"]


def test_a_pass_that_fails_half_way_never_takes_back_what_was_exported() -> None:
    ledger, maps = big_ledger(5_000), MemoryConfigMaps()
    versions = store(maps).save(ledger, {})
    exported = ledger.seconds()  # what the accountant exports after the save
    for k in sorted(ledger.open)[:500]:  # closes spread over every part
        ledger.close(k, end=T0 + 30)
    ledger.open_allocation("new-claim/gpu/p/d", OpenAllocation(usage=usage(1), start=T0 + 1))
    ledger.advance(T0 + 30)
    maps.fail_after = 10  # the head and nine parts land
    with pytest.raises(ApiError):
        store(maps).save(ledger, versions)
    maps.fail_after = None

    reloaded = store(maps).load().ledger
    assert reloaded is not None
    assert reloaded.as_of == T0 + 30  # the head went first
    now = reloaded.seconds()
    assert all(now.get(u, 0.0) >= seconds for u, seconds in exported.items())
    assert sum(now.values()) > sum(exported.values())


def test_two_leaders_conflict_instead_of_overwriting() -> None:
    maps = MemoryConfigMaps()
    old = store(maps).load()
    assert old.ledger is None
    ledger = Ledger(as_of=T0)
    ledger.open_allocation("a/gpu/p/d", OpenAllocation(usage=usage(0), start=T0))
    store(maps).save(ledger, old.versions)  # the new leader
    stale = Ledger(as_of=T0)
    stale.open_allocation("b/gpu/p/d", OpenAllocation(usage=usage(0), start=T0))
    with pytest.raises(ConflictError):  # the old leader wrote with the versions it read
        store(maps).save(stale, old.versions)
    assert store(maps).load().ledger == ledger


def test_a_format_1_ledger_is_taken_over_whole_and_rewritten_in_parts() -> None:
    maps = MemoryConfigMaps()
    u = ["gpu-physical", "Physical", "n1", "ns"]
    v1 = {
        "version": 1,
        "asOf": T0,
        "usages": [u],
        "released": [[0, 120.0]],
        "open": [[f"uid-{n}/gpu/p/d{n}", 0, T0 - 10, f"c{n}", f"d{n}", "g"] for n in range(300)],
        "made": [["gpu-physical", "n1", "Physical", 305]],
    }
    maps.create(None, _config_map("ledger", json.dumps(v1)))
    loaded = store(maps).load().ledger
    assert loaded is not None
    assert len(loaded.open) == 300
    assert loaded.seconds() == {Usage(*u): 120.0 + 300 * 10}
    assert loaded.made == {Made("gpu-physical", "n1", "Physical"): 305}
    assert loaded.dirty == set(range(SHARDS))  # the next save writes every part
    store(maps).save(loaded, store(maps).load().versions)
    again = store(maps).load().ledger
    assert again == loaded
    assert json.loads((maps.stored["ledger"].data or {})[DATA_KEY])["version"] == 2


def _config_map(name: str, text: str) -> V1ConfigMap:
    return V1ConfigMap(metadata=V1ObjectMeta(name=name, namespace="gpu"), data={DATA_KEY: text})


def test_the_configmaps_are_the_head_and_its_parts_however_many_claims_come_and_go() -> None:
    """The bound: a claim's allocation lands in its part's ConfigMap, never a new one per write,
    per claim or per restart; once every part exists, more claims create nothing."""
    maps, shards = MemoryConfigMaps(), 16
    small = LedgerStore(client=maps, namespace="gpu", name="ledger", shards=shards)
    rng, versions = random.Random(3), small.load().versions
    ledger = Ledger(as_of=T0, shards=shards)
    for n in range(400):
        claim = key(rng, n)
        ledger.open_allocation(claim, OpenAllocation(usage=usage(n), start=T0 + n))
        ledger.advance(T0 + n + 1)
        versions = small.save(ledger, versions)
        ledger.close(claim, end=T0 + n + 2)
        versions = small.save(ledger, versions)
        if n % 100 == 99:  # a restart: a new store continues from what is stored
            small = LedgerStore(client=maps, namespace="gpu", name="ledger", shards=shards)
            loaded = small.load()
            assert loaded.ledger is not None
            ledger, versions = loaded.ledger, loaded.versions
    assert sorted(maps.stored) == sorted(small.names())
    assert len(maps.stored) == shards + 1

    created = len(maps.stored)
    for n in range(400, 600):
        claim = key(rng, n)
        ledger.open_allocation(claim, OpenAllocation(usage=usage(n), start=T0 + n))
        ledger.advance(T0 + n + 1)
        versions = small.save(ledger, versions)
    assert len(maps.stored) == created
    assert set(maps.writes) <= set(small.names())
    assert len(store(maps).names()) == SHARDS + 1 == 257  # the production bound


def test_a_ledger_of_another_shard_count_is_refused_before_anything_is_written() -> None:
    maps = MemoryConfigMaps()
    ledger = Ledger(as_of=T0)  # SHARDS parts: parts 16 and up would be ConfigMaps nobody reads
    ledger.open_allocation("a/gpu/p/d", OpenAllocation(usage=usage(0), start=T0))
    with pytest.raises(ValueError, match="a ledger of 256 parts for a store of 16"):
        LedgerStore(client=maps, namespace="gpu", name="ledger", shards=16).save(ledger, {})
    assert maps.stored == {}
