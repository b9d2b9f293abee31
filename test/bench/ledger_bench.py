"""The allocation ledger at 100,000 open device allocations: does it fit, and what does a pass cost.

In-process, against an in-memory ConfigMap API that keeps what each write sends (the API server's
own cost is the bytes: one PUT of a ConfigMap is a write of that object to etcd). Printed: the
largest part against the 900,000-byte limit of a part (one ConfigMap before the ledger was split
held about 9,000 allocations), the time and bytes of the first save (every part), of a leader's
load (every part read and decoded), and of a pass in which 100 claims' allocations open and 100
close (a burst), and of one with 5 and 5 (a pass of steady churn) — against the one document the
ledger used to be (re-encoded and written whole on every pass).
"""

from __future__ import annotations

import json
import random
import time
import uuid
from typing import Any

from kubernetes.client import V1ConfigMap, V1ObjectMeta

from pkg.dracontroller.accounting.ledger import Ledger, OpenAllocation, Usage
from pkg.dracontroller.accounting.store import MAX_BYTES, LedgerStore, stored_bytes

T0 = 1_700_000_000.0


class Sizes:
    """ConfigMap get/create/update by name, counting the bytes written."""

    def __init__(self) -> None:
        self.stored: dict[str, V1ConfigMap] = {}
        self.written = 0

    def get(self, kind: Any, name: str, namespace: str | None = None) -> V1ConfigMap:
        return self.stored[name]

    def create(self, kind: Any, obj: V1ConfigMap, namespace: str | None = None) -> V1ConfigMap:
        return self._write(obj)

    def update(self, kind: Any, obj: V1ConfigMap, *, subresource: str | None = None) -> V1ConfigMap:
        return self._write(obj)

    def _write(self, obj: V1ConfigMap) -> V1ConfigMap:
        self.written += stored_bytes(obj)
        meta = obj.metadata or V1ObjectMeta()
        stored = V1ConfigMap(
            metadata=V1ObjectMeta(name=meta.name, resource_version=str(len(self.stored) + 1)),
            data=obj.data,
            binary_data=obj.binary_data,
        )
        self.stored[str(meta.name)] = stored
        return stored


def allocation(rng: random.Random, n: int) -> tuple[str, OpenAllocation]:
    uid = uuid.UUID(int=rng.getrandbits(128), version=4)
    node, card = f"node-{n // 224:04d}", f"gpu-0000-{(n // 28) % 8:02x}-00-0"
    device = f"{card}-mig-1g-{n % 7}"
    usage = Usage("gpu-mig-1g", "MIG", node, f"team-{n % 40}")
    held = OpenAllocation(
        usage=usage, start=T0 - n % 86_400, claim=f"claim-{n:06d}", device=device, card=f"{node}-{card}"
    )
    return f"{uid}/gpu/gpus-{node}/{device}", held


def one_document(ledger: Ledger) -> int:
    """Bytes of the ledger as one document (format 1, what every pass wrote before)."""
    return len(json.dumps([ledger.part_json(i) for i in range(ledger.shards)], separators=(",", ":")))


def main(*, quick: bool = False, open_count: int = 100_000) -> None:
    if quick:
        open_count = 5_000
    rng = random.Random(11)
    ledger = Ledger(as_of=T0)
    for n in range(open_count):
        ledger.open_allocation(*allocation(rng, n))
    maps = Sizes()
    store = LedgerStore(client=maps, namespace="bench", name="ledger")
    began = time.perf_counter()
    versions = store.save(ledger, {})
    first = time.perf_counter() - began
    first_bytes, parts = maps.written, [stored_bytes(cm) for cm in maps.stored.values()]
    began = time.perf_counter()
    loaded = LedgerStore(client=maps, namespace="bench", name="ledger").load()
    load = time.perf_counter() - began
    assert loaded.ledger == ledger

    passes = []
    for changes in (100, 5):
        maps.written = 0
        gone = rng.sample(sorted(ledger.open), changes)
        began = time.perf_counter()
        for key in gone:
            ledger.close(key, end=T0 + 10)
        for n in range(len(ledger.open), len(ledger.open) + changes):
            ledger.open_allocation(*allocation(rng, open_count + 1_000_000 + n))
        ledger.advance(T0 + 10)
        dirty = len(ledger.dirty)
        versions = store.save(ledger, versions)
        passes.append((changes, time.perf_counter() - began, maps.written, dirty))
    whole = one_document(ledger)

    print(f"allocation ledger: {open_count:,} open device allocations in {ledger.shards} parts + a head")
    print(f"  largest part {max(parts):>9,} bytes (limit {MAX_BYTES:,}), mean {sum(parts) // len(parts):,}")
    print(f"  first save   {first:>9.2f} s  {first_bytes / 1e6:6.1f} MB written (every part)")
    print(f"  load         {load:>9.2f} s  (a new leader: {len(maps.stored)} ConfigMaps read and decoded)")
    for changes, seconds, written, dirty in passes:
        print(
            f"  one pass     {seconds:>9.2f} s  {written / 1e6:6.2f} MB written "
            f"({changes} opened, {changes} closed: {dirty} parts and the head)"
        )
    print(
        f"  before: one document of {whole / 1e6:.1f} MB "
        "(over a ConfigMap's 1 MiB from ~9,000 open allocations)"
    )


if __name__ == "__main__":
    main()
