"""The accountant: the leader's single writer of the allocation ledger (see :mod:`.ledger`).

Level-based like a reconciler: each pass compares the devices our claims hold now (the claim
cache) with the ledger's open allocations, opens what is new, closes what is gone, persists the
ledger, and only then exports it and emits the Events. Passes run when the claim informer reports a
change (coalesced, at most one per ``min_interval``) and every ``period`` while anything is open,
so exported device-seconds trail the truth by at most ``period`` while an allocation is held and
are exact (to the watch's delivery) once it is released.

When things happened is taken as precisely as it is known: a listener on the claim informer stamps
each claim change with the wall clock as it arrives, so a release is charged up to the moment the
watch delivered it, not up to the next pass. Claims we never saw change (allocated or released
while no leader ran) fall back on the API server's timestamps (:mod:`.devices`) and the ledger's
``as_of``.

Failures: a write conflict means someone else wrote the ledger (a leader change raced): reload
and redo. Any other error backs off (0.5 s doubling to 30 s) and redoes the pass from the stored
ledger, so nothing is exported or announced that was not persisted, and nothing twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from kubernetes.client import ResourceV1ResourceClaim

from pkg.dracontroller.accounting.collector import AccountingCollector
from pkg.dracontroller.accounting.devices import (
    DeviceFacts,
    HeldDevice,
    allocated_at,
    last_status_write,
    start_estimate,
)
from pkg.dracontroller.accounting.events import AllocationEvents
from pkg.dracontroller.accounting.ledger import Ledger, OpenAllocation, Usage
from pkg.dracontroller.accounting.store import LedgerStore, Versions
from pkg.framework.cache.listener import DeletedFinalStateUnknown

logger = logging.getLogger(__name__)

_BACKOFF_START, _BACKOFF_MAX = 0.5, 30.0


class Accountant:
    name = "allocation-accountant"
    needs_leader_election = True

    def __init__(
        self,
        *,
        claims: Callable[[], Iterable[ResourceV1ResourceClaim]],
        held: Callable[[Iterable[ResourceV1ResourceClaim]], list[HeldDevice]],
        synced: Callable[[], bool],
        store: LedgerStore,
        events: AllocationEvents,
        collector: AccountingCollector,
        period: float = 10.0,
        min_interval: float = 0.2,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._claims = claims
        self._held = held
        self._synced = synced
        self._store = store
        self._events = events
        self._collector = collector
        self._period = period
        self._min_interval = min_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._changed: dict[str, float] = {}  # claim UID -> wall time its last change arrived
        self._wake = threading.Event()
        self._ledger: Ledger | None = None
        self._versions: Versions = {}
        self._saved_at = 0.0
        self._published = False

    # --- the claim informer's listener -------------------------------------------------------
    def on_add(self, obj: ResourceV1ResourceClaim, *, is_in_initial_list: bool) -> None:
        if not is_in_initial_list:  # the initial list says nothing about when things happened
            self._stamp(obj)

    def on_update(self, old: ResourceV1ResourceClaim, new: ResourceV1ResourceClaim) -> None:
        self._stamp(new)

    def on_delete(
        self, obj: ResourceV1ResourceClaim | DeletedFinalStateUnknown[ResourceV1ResourceClaim]
    ) -> None:
        self._stamp(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)

    def _stamp(self, claim: ResourceV1ResourceClaim) -> None:
        uid = claim.metadata.uid if claim.metadata is not None else None
        if uid:
            with self._lock:
                self._changed[uid] = self._clock()
        self._wake.set()

    # --- the loop ----------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        delay = _BACKOFF_START
        try:
            while not stop.is_set():
                if not self._synced():
                    stop.wait(0.1)
                    continue
                self._wake.clear()
                try:
                    self.sync()
                    delay = _BACKOFF_START
                except Exception as exc:
                    logger.warning(
                        "allocation accounting pass failed, retrying in %.1fs: %s",
                        delay,
                        exc,
                        extra={"configmap": f"{self._store.namespace}/{self._store.name}"},
                    )
                    self._ledger = None  # redo from what is stored: nothing unpersisted survives
                    stop.wait(delay)
                    delay = min(delay * 2, _BACKOFF_MAX)
                    continue
                stop.wait(self._min_interval)
                timeout = self._period if self._ledger is not None and self._ledger.open else None
                self._wait(stop, timeout)
        finally:
            self._collector.publish(None)

    def _wait(self, stop: threading.Event, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not stop.is_set() and not self._wake.is_set():
            left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if left <= 0:
                return
            self._wake.wait(left)

    def sync(self) -> None:
        """One pass: derive, persist, export, announce (in that order)."""
        if self._ledger is None:
            loaded = self._store.load()
            self._ledger = loaded.ledger or Ledger(as_of=self._clock(), shards=self._store.shards)
            self._versions = loaded.versions
            self._saved_at = 0.0  # charge open allocations through the downtime at once
            self._published = False
        ledger = self._ledger
        now = self._clock()
        with self._lock:
            changed = dict(self._changed)
        claims = {c.metadata.uid: c for c in self._claims() if c.metadata is not None and c.metadata.uid}
        current = {d.key: d for d in self._held(claims.values())}
        opened = [d for key, d in sorted(current.items()) if key not in ledger.open]
        gone = [key for key in sorted(ledger.open) if key not in current]
        due = bool(ledger.open) and now - self._saved_at >= self._period
        if not opened and not gone and not due:
            if not self._published:  # what was loaded is persisted: export it as it is
                self._collector.publish(ledger)
                self._published = True
            return
        for device in opened:
            claim = claims[device.claim_uid]
            seen = changed.get(device.claim_uid, now)
            start = start_estimate(written=allocated_at(claim), seen=seen)
            ledger.open_allocation(device.key, _open(device, start))
        released: list[tuple[HeldDevice, float]] = []
        for key in gone:
            uid = key.split("/", 1)[0]
            end = self._release_time(uid, claims.get(uid), changed, ledger.as_of, now)
            held = ledger.open[key]
            released.append((_closed(key, uid, held), ledger.close(key, end=end)))
        ledger.advance(now)
        self._versions = self._store.save(ledger, self._versions)
        self._saved_at = now
        with self._lock:
            for uid, at in changed.items():
                if self._changed.get(uid) == at:
                    del self._changed[uid]
        self._collector.publish(ledger)
        self._published = True
        if opened:
            self._events.created(opened)
        if released:
            self._events.released(released)

    @staticmethod
    def _release_time(
        uid: str, claim: ResourceV1ResourceClaim | None, changed: dict[str, float], as_of: float, now: float
    ) -> float:
        """When the allocation of claim ``uid`` went: as the watch delivered it if we saw it; else
        the claim's last status write (kept, allocation gone), clamped to what is not yet
        exported; else (deleted while nobody watched) the ledger's ``as_of``."""
        if uid in changed:
            return changed[uid]
        if claim is not None and (written := last_status_write(claim)) is not None:
            return min(max(written, as_of), now)
        return as_of


def _open(device: HeldDevice, start: float) -> OpenAllocation:
    f = device.facts
    return OpenAllocation(
        usage=Usage(device.device_class, f.device_type, f.node, device.namespace),
        start=start,
        claim=device.claim,
        device=device.device,
        card=f.physical_gpu,
    )


def _closed(key: str, uid: str, held: OpenAllocation) -> HeldDevice:
    usage = held.usage
    return HeldDevice(
        key=key,
        claim_uid=uid,
        namespace=usage.namespace,
        claim=held.claim,
        request="",
        device=held.device,
        device_class=usage.device_class,
        facts=DeviceFacts(device_type=usage.device_type, node=usage.node, physical_gpu=held.card),
        pods=(),
        allocated_by="",
    )


__all__ = ["Accountant"]
