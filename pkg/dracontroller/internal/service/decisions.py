"""Decide-and-write under the decision lock: the only code that takes :attr:`InFlight.lock`.

A decision (allocate a claim; give back a colliding allocation) must see every allocation this
process made before it, including ones the watch has not delivered yet, and two workers deciding
at once from the same view is the race the in-flight record exists to prevent. So the lock is
held from the reads through the write, and it is held *here*, by the service that offers the
locked operations, never by a handler: a handler asks for a decision and acts on its answer
(events, metrics, results) after the lock is released.

Before an allocation is written, the Pods that reference the claim are read afresh
(:class:`~.pod_references.PodReferences`): the decision was taken from caches, and the Pod cache
may not show a Pod created just before the claim. A Pod found there means no write at
all. The read cannot be atomic with the write, so it is repeated once the write has landed: a Pod
created in between (during the write's round trip) makes the service give the allocation back at
once, compare-and-swap on the version it just wrote — so if the scheduler reserved the claim for
that Pod in the meantime (the Pod fits the allocation's node), the release conflicts and the
allocation stays, as it should.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubernetes.client import ResourceV1ResourceClaim, V1AllocationResult

from pkg.dra.allocator import AllocationAttempt, AllocationInputs, Allocator
from pkg.dra.domain import Unschedulable
from pkg.dracontroller.internal.service.claim_writer import ClaimWrites
from pkg.dracontroller.internal.service.inventory import Inventory
from pkg.dracontroller.internal.service.pod_references import PodReferences

YieldCheck = Callable[[ResourceV1ResourceClaim, Inventory], str | None]
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

    @property
    def outcome(self) -> V1AllocationResult | Unschedulable:
        return self.attempt.outcome


@dataclass(frozen=True)
class Release:
    """A collision: why, and the claim as written without its allocation (``None`` when gone)."""

    reason: str
    released: ResourceV1ResourceClaim | None


class Decisions:
    def __init__(
        self, *, inventory: Inventory, writer: ClaimWrites, allocator: Allocator, pods: PodReferences
    ) -> None:
        self._inventory = inventory
        self._writer = writer
        self._allocator = allocator
        self._pods = pods

    def allocate(self, claim: ResourceV1ResourceClaim, *, namespace: str) -> AllocationDecision:
        """Allocates ``claim`` from the in-flight view and writes the allocation unless a Pod
        references the claim (see the module docs); a write conflict propagates as
        :class:`~pkg.framework.reconcile.ConflictRequeue`."""
        inventory = self._inventory
        with inventory.in_flight.lock:
            inputs = AllocationInputs(
                slices=tuple(inventory.slices()),
                classes=inventory.classes(),
                allocated_claims=tuple(inventory.allocated_claims()),
                namespace_labels=inventory.namespace_labels(namespace),
            )
            attempt = self._allocator.attempt(claim, inputs)
            outcome = attempt.outcome
            if isinstance(outcome, Unschedulable):
                return AllocationDecision(attempt)
            pods = self._pods.referencing(claim)
            if pods:
                return AllocationDecision(attempt, referenced_by=tuple(pods))
            written = self._writer.allocate(claim, outcome)
            if written is None:
                return AllocationDecision(attempt)
            late = self._pods.referencing(written)
            if late:
                self._writer.release(written)
                return AllocationDecision(attempt, referenced_by=tuple(late), given_back=True)
        return AllocationDecision(attempt, written=written)

    def release_if_colliding(self, claim: ResourceV1ResourceClaim, *, check: YieldCheck) -> Release | None:
        """Gives ``claim``'s allocation back if ``check`` finds a collision; None when there is none."""
        with self._inventory.in_flight.lock:
            reason = check(claim, self._inventory)
            if reason is None:
                return None
            return Release(reason=reason, released=self._writer.release(claim))


__all__ = ["AllocationDecision", "Decisions", "Release", "YieldCheck"]
