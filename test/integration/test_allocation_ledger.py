"""The allocation ledger's ConfigMaps on the real API server: more open allocations than one
ConfigMap ever held, back whole after a "restart" (a new store), a pass writing only what it
changed, a leader that lost the lead stopped before it writes a part, and no ConfigMap of the ledger
but the head and its parts."""

from __future__ import annotations

import time

import pytest

from pkg.dracontroller.accounting.ledger import SHARDS, Ledger, OpenAllocation, Usage, shard_of
from pkg.dracontroller.accounting.store import LedgerStore, stored_bytes
from pkg.framework.client import ConflictError, KubeClient
from pkg.framework.client.builtin_kinds import CONFIG_MAP

OPEN = 20_000  # one ConfigMap held about 9,000; 100,000 is the unit tier's and the bench's size
T0 = 1_700_000_000.0


def filled(count: int) -> Ledger:
    ledger = Ledger(as_of=T0)
    for n in range(count):
        usage = Usage("gpu-mig-1g", "MIG", f"node-{n % 500:03d}", f"team-{n % 11}")
        held = OpenAllocation(
            usage=usage, start=T0 - n % 900, claim=f"c-{n}", device="gpu-0-mig-1g-0", card="g"
        )
        ledger.open_allocation(f"{n:08d}-0000-4000-8000-000000000000/gpu/gpus-n/gpu-0-mig-1g-0", held)
    return ledger


def test_ledger_beyond_one_configmap_survives_a_restart_and_stale_leaders(
    kube: KubeClient, namespace: str
) -> None:
    ledger = filled(OPEN)
    store = LedgerStore(client=kube, namespace=namespace, name="ledger")
    started = time.monotonic()
    versions = store.save(ledger, store.load().versions)
    first_save = time.monotonic() - started
    exported = ledger.seconds()

    restarted = LedgerStore(client=kube, namespace=namespace, name="ledger").load()
    assert restarted.ledger == ledger
    assert restarted.ledger is not None
    assert len(restarted.ledger.open) == OPEN
    assert restarted.ledger.seconds() == exported

    # One pass: two allocations go, time advances; the head and at most two parts are written.
    before = {name: kube.get(CONFIG_MAP, name, namespace).metadata.resource_version for name in store.names()}  # type: ignore[union-attr]
    gone = sorted(ledger.open)[:2]
    for key in gone:
        ledger.close(key, end=T0 + 60)
    ledger.advance(T0 + 60)
    versions = store.save(ledger, versions)
    after = {name: kube.get(CONFIG_MAP, name, namespace).metadata.resource_version for name in store.names()}  # type: ignore[union-attr]
    assert {name for name in before if before[name] != after[name]} == {
        "ledger",
        *(store.part_name(shard_of(key)) for key in gone),
    }

    # The process that led before (it still holds the versions it read) is stopped at the head.
    stale = restarted.ledger
    stale.open_allocation("stale-uid/gpu/p/d", OpenAllocation(usage=Usage("x", "MIG", "n", "ns"), start=T0))
    with pytest.raises(ConflictError):
        LedgerStore(client=kube, namespace=namespace, name="ledger").save(stale, restarted.versions)
    current = LedgerStore(client=kube, namespace=namespace, name="ledger").load().ledger
    assert current == ledger
    assert "stale-uid/gpu/p/d" not in (current.open if current else {})
    # The bound: the namespace holds the head and its parts, nothing per pass, restart or leader.
    ledger_maps, _ = kube.list(
        CONFIG_MAP, namespace=namespace, label_selector="app.kubernetes.io/component=gpu-dra-controller"
    )
    assert sorted(str(cm.metadata.name) for cm in ledger_maps if cm.metadata) == sorted(store.names())
    assert len(ledger_maps) == SHARDS + 1
    sizes = [stored_bytes(kube.get(CONFIG_MAP, name, namespace)) for name in store.names()]
    print(f"{OPEN} open allocations: first save {first_save:.1f}s, largest ConfigMap {max(sizes)} bytes")
