"""Decide under the decision lock, write outside it: the only code that takes :attr:`InFlight.lock`.

A decision (allocate a claim; give back a colliding allocation) must see every allocation this
process made before it, including ones the watch has not delivered yet, and two workers deciding
at once from the same view is the race the in-flight record exists to prevent. So decisions are
serial: the lock is held from the reads through the allocator's answer, and it is held *here*, by
the service that offers the locked operations, never by a handler. An allocation is *reserved* in
the in-flight record before the lock is released, and its Pod check and two writes (two API round
trips, ten times the decision) run outside it, so the writes of several claims (one per worker)
are on the wire at once while the next decision already sees the reserved devices taken. The
reservation is settled when the write lands (the written claim is recorded) or fails (the devices
are free again; the error requeues the claim with the controller's backoff). A handler asks for a
decision and acts on its answer (events, metrics, results). An explanation takes only a
:meth:`Decisions.snapshot` under the lock and diagnoses outside it.

Before an allocation is written (while it is reserved), the Pods that reference the claim are
checked as of the claim's version (:class:`~.pod_references.PodReferences`: the Pod cache behind a
read barrier, a consistent read if the cache is late): the decision was taken from caches, and the
Pod cache may not show a Pod created just before the claim. A Pod found there means no write at all.

The check cannot be atomic with the write, so it is repeated as of the version written: a Pod
created in between (during the write's round trip) makes the service give the allocation back,
compare-and-swap on the claim as cached — so if the scheduler reserved the claim for that Pod in
the meantime (the Pod fits the allocation's node), the release conflicts or is skipped and the
allocation stays, as it should. That second check is made at once if the Pod cache is already past
the written version, and otherwise *after the lock is released*: the claim is remembered in
:class:`AfterWriteChecks` and the reconciler comes back to it (:meth:`Decisions.check_after_write`)
until the cache has caught up, or, after ``after_write_wait`` seconds, asks the API server. Waiting
under the lock would stall every decision on the Pod watch, which on a quiet cluster advances only
with the API server's bookmarks (about once a minute). A Pod created before the claim is never
at stake here: the first check already saw every one of them.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from kubernetes.client import ResourceV1ResourceClaim, V1AllocationResult, V1Node

from pkg.dra.allocator import AllocationAttempt, AllocationInputs, Allocator
from pkg.dra.model import Unschedulable
from pkg.dracontroller.internal.service.cache_reader import CacheReader
from pkg.dracontroller.internal.service.claim_writer import ClaimWrites, planned
from pkg.dracontroller.internal.service.pod_references import PodReferences
from pkg.framework.keys import object_key
from pkg.framework.reconcile.contract import Request

YieldCheck = Callable[[ResourceV1ResourceClaim, CacheReader], str | None]
"""Why ``claim`` must give its allocation back (a collision), or None; see ``internal/collisions``."""


@dataclass(frozen=True)
class AllocationDecision:
    """The allocator's attempt (its inputs, read under the lock, and its outcome) and, if it
    allocated, the claim as written (``None`` when the claim was deleted before the write, or a Pod
    references it).

    ``referenced_by``: the Pods the fresh read found referencing the claim — before the write
    (nothing was written) or, with ``given_back``, after it (the allocation was released again).
    """

    attempt: AllocationAttempt
    written: ResourceV1ResourceClaim | None = None
    referenced_by: tuple[str, ...] = ()
    given_back: bool = False
    check_pending: bool = False  # written; the check as of the written version comes later

    @property
    def outcome(self) -> V1AllocationResult | Unschedulable:
        return self.attempt.outcome


@dataclass(frozen=True)
class Release:
    """A collision: why, and the claim as written without its allocation (``None`` when gone)."""

    reason: str
    released: ResourceV1ResourceClaim | None


@dataclass(frozen=True)
class AfterWrite:
    """Outcome of a deferred check: ``retry_in`` seconds (still pending), or done — with the Pods
    found and whether the allocation was given back (``released``: the claim as written then)."""

    retry_in: float | None = None
    referenced_by: tuple[str, ...] = ()
    given_back: bool = False
    released: ResourceV1ResourceClaim | None = None


AFTER_WRITE_WAIT_SECONDS = 90.0
"""How long a deferred check waits for the Pod cache before reading from the API server: past the
API server's bookmark interval (about a minute), so a healthy but quiet watch gets there first."""
FIRST_RETRY_SECONDS, MAX_RETRY_SECONDS = 0.05, 2.0


@dataclass
class _Pending:
    written: ResourceV1ResourceClaim
    since: float
    delay: float = FIRST_RETRY_SECONDS
    uid: str = field(default="")


class AfterWriteChecks:
    """Claims written whose check as of the written version is still to be made (by claim key).

    Bounded (oldest forgotten first) so claims deleted while pending cannot grow it; a forgotten
    entry, like one lost to a restart, leaves only the window a write's round trip is long, which
    the check before the write had already narrowed to Pods created after the claim."""

    def __init__(self, *, capacity: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._entries: OrderedDict[str, _Pending] = OrderedDict()
        self._lock = threading.Lock()
        self._capacity = capacity
        self._clock = clock

    def add(self, written: ResourceV1ResourceClaim) -> float:
        """Remembers ``written``; returns the delay before the first retry."""
        uid = (written.metadata.uid if written.metadata else None) or ""
        with self._lock:
            self._entries[object_key(written)] = _Pending(written, self._clock(), uid=uid)
            if len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
        return FIRST_RETRY_SECONDS

    def get(self, claim: ResourceV1ResourceClaim) -> _Pending | None:
        uid = (claim.metadata.uid if claim.metadata else None) or ""
        with self._lock:
            entry = self._entries.get(object_key(claim))
        return entry if entry is not None and entry.uid == uid else None

    def elapsed(self, entry: _Pending) -> float:
        return self._clock() - entry.since

    def backoff(self, entry: _Pending) -> float:
        """The next retry's delay: doubling from 50 ms to 2 s."""
        with self._lock:
            delay = entry.delay
            entry.delay = min(delay * 2, MAX_RETRY_SECONDS)
        return delay

    def done(self, claim: ResourceV1ResourceClaim) -> None:
        with self._lock:
            self._entries.pop(object_key(claim), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class Decisions:
    def __init__(
        self,
        *,
        cache_reader: CacheReader,
        writer: ClaimWrites,
        allocator: Allocator,
        pods: PodReferences,
        after_write: AfterWriteChecks | None = None,
        after_write_wait: float = AFTER_WRITE_WAIT_SECONDS,
    ) -> None:
        self._cache_reader = cache_reader
        self._writer = writer
        self._allocator = allocator
        self._pods = pods
        self._after_write = AfterWriteChecks() if after_write is None else after_write  # empty is falsy
        self._after_write_wait = after_write_wait

    def allocate(self, claim: ResourceV1ResourceClaim, *, namespace: str) -> AllocationDecision:
        """Allocates ``claim`` from the in-flight view and writes the allocation unless a Pod
        references the claim (see the module docs); a write conflict propagates as
        :class:`~pkg.framework.reconcile.ConflictRequeue`.

        Only the decision holds the lock; it ends by reserving the claim as it will be written
        (:meth:`~.in_flight.InFlight.reserve`), so the next decision, taken while this claim's
        Pod check and writes are on the wire, sees its devices taken. Whatever happens to the
        write, the reservation is settled: a written claim is recorded first, a failed or refused
        one frees its devices, and the error (a conflict, the API down) propagates for the
        controller's per-claim backoff."""
        in_flight = self._cache_reader.in_flight
        with in_flight.lock:
            attempt = self._decide(claim, namespace)
            outcome = attempt.outcome
            if isinstance(outcome, Unschedulable):
                return AllocationDecision(attempt)
            reservation = planned(claim, outcome)
            in_flight.reserve(reservation)  # before the lock goes: the next decision sees it
        try:
            pods = self._pods.referencing(claim)
            if pods:
                return AllocationDecision(attempt, referenced_by=tuple(pods))
            written = self._writer.allocate(claim, outcome)
        finally:
            in_flight.settle(reservation)
        if written is None:
            return AllocationDecision(attempt)
        late = self._pods.referencing_if_current(written)
        if late:
            with in_flight.lock:  # a release is a decision too: collisions must see it in order
                self._writer.release(written)
            return AllocationDecision(attempt, referenced_by=tuple(late), given_back=True)
        if late is None:
            self._after_write.add(written)
            return AllocationDecision(attempt, written=written, check_pending=True)
        return AllocationDecision(attempt, written=written)

    def _decide(self, claim: ResourceV1ResourceClaim, namespace: str) -> AllocationAttempt:
        """The allocator's attempt from the in-flight view; the caller holds the lock."""
        cache_reader = self._cache_reader
        inputs = AllocationInputs(
            slices=tuple(cache_reader.slices()),
            classes=cache_reader.classes(),
            allocated_claims=tuple(cache_reader.allocated_claims()),
            namespace_labels=cache_reader.namespace_labels(namespace),
        )
        return self._allocator.attempt(claim, inputs)

    def snapshot(
        self, request: Request, *, node: V1Node | None = None
    ) -> tuple[ResourceV1ResourceClaim, AllocationInputs] | None:
        """The claim named by ``request`` and the inputs a decision for it would read *now*, taken
        under the decision lock (None when the claim is not in the cache); for explanations.

        Why under the lock, and only for the reads: the view must be the one the next decision
        sees (in-flight reservations applied, no allocation half-recorded), and copying references
        to the cached objects takes milliseconds; the attempt and its diagnosis (a second and more
        at 1,000 nodes) then run on the frozen inputs *outside* the lock, so an explanation never
        stalls allocations. The inputs may be a few decisions old by the time the report is
        rendered, which is what any explanation of a moving cluster is."""
        cache_reader = self._cache_reader
        with cache_reader.in_flight.lock:
            claim = cache_reader.claim(request)
            if claim is None:
                return None
            key = object_key(claim)
            inputs = AllocationInputs(
                slices=tuple(cache_reader.slices()),
                classes=cache_reader.classes(),
                allocated_claims=tuple(c for c in cache_reader.allocated_claims() if object_key(c) != key),
                namespace_labels=cache_reader.namespace_labels(request.namespace),
                node=node,
            )
        return claim, inputs

    def check_after_write(self, claim: ResourceV1ResourceClaim, *, reserved: bool) -> AfterWrite | None:
        """The deferred check of an allocation written by :meth:`allocate` (see the module docs);
        None when none is pending for ``claim`` (the cached claim, in-flight writes applied)."""
        entry = self._after_write.get(claim)
        if entry is None:
            return None
        if reserved:  # a consumer holds the claim: the scheduler placed it where the allocation is
            self._after_write.done(claim)
            return AfterWrite()
        late = self._pods.referencing_if_current(entry.written)
        if late is None:
            if self._after_write.elapsed(entry) < self._after_write_wait:
                return AfterWrite(retry_in=self._after_write.backoff(entry))
            late = self._pods.referencing(entry.written)  # the cache is late: ask the API server
        if not late:
            self._after_write.done(claim)
            return AfterWrite()
        with self._cache_reader.in_flight.lock:
            released = self._writer.release(claim)  # compare-and-swap: a conflict is retried
        self._after_write.done(claim)
        return AfterWrite(referenced_by=tuple(late), given_back=True, released=released)

    def pending_after_write(self) -> int:
        return len(self._after_write)

    def release_if_colliding(self, claim: ResourceV1ResourceClaim, *, check: YieldCheck) -> Release | None:
        """Gives ``claim``'s allocation back if ``check`` finds a collision; None when there is none."""
        with self._cache_reader.in_flight.lock:
            reason = check(claim, self._cache_reader)
            if reason is None:
                return None
            return Release(reason=reason, released=self._writer.release(claim))


__all__ = ["AfterWrite", "AfterWriteChecks", "AllocationDecision", "Decisions", "Release", "YieldCheck"]
