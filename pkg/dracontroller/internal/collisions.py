"""Collision detection: two claims holding what only one of them may hold.

The API server does not stop two allocators — the kube-scheduler and this controller, or two
replicas across a lease hand-over — from giving one device to two claims. A collision is any of:

* a device without ``allowMultipleAllocations`` in two claims (or exclusively in one, shared in
  another);
* the shares of a shared device consuming more of a capacity than the device has;
* the devices allocated from one counter set consuming more of a counter than it holds (e.g. a
  Physical offer and a MIG offer of the same card).

Who gives way: claims are admitted in priority order into a tally of devices, shares and
counters, and a claim whose admission would over-commit something is a *loser*. Claims that must
keep their allocation come first — anything not allocated by us, and anything a Pod already
reserves (its Pod may be running) — then ours, older first (creation time, then name). Only
ours-and-unreserved claims are ever told to yield; over-commitment among claims we must not touch
is left to NodePrepare, which refuses a device prepared for another claim.

The check for one claim considers only claims allocated from the pools that claim uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kubernetes.client import ResourceV1ResourceClaim, V1DeviceRequestAllocationResult

from pkg.dra.allocator import parse_quantity
from pkg.dra.allocator.pools import Candidate, Pool
from pkg.dra.allocator.requests import claim_label
from pkg.dra.model import DeviceID, PoolID


def results_of(claim: ResourceV1ResourceClaim) -> list[V1DeviceRequestAllocationResult]:
    allocation = claim.status.allocation if claim.status is not None else None
    devices = allocation.devices if allocation is not None else None
    return list((devices.results if devices is not None else None) or ())


def pools_of(claim: ResourceV1ResourceClaim) -> set[PoolID]:
    return {PoolID(r.driver, r.pool) for r in results_of(claim)}


def is_reserved(claim: ResourceV1ResourceClaim) -> bool:
    return bool(claim.status is not None and claim.status.reserved_for)


@dataclass
class _Admission:
    """What the claims admitted so far hold, against the pools' devices and counter totals."""

    devices: dict[DeviceID, Candidate]
    counters: dict[tuple[PoolID, str], dict[str, int]]
    exclusive: dict[DeviceID, str] = field(default_factory=dict)  # device -> holder
    shared: dict[DeviceID, dict[str, int]] = field(default_factory=dict)  # device -> capacity nanos
    charged: set[DeviceID] = field(default_factory=set)

    def admit(self, claim: ResourceV1ResourceClaim, *, force: bool) -> str | None:
        """Adds the claim's holdings unless they collide (``force``: add anyway); the collision."""
        problem: str | None = None
        exclusive: list[DeviceID] = []
        shares: list[tuple[DeviceID, dict[str, int]]] = []
        charges: list[DeviceID] = []
        for result in results_of(claim):
            if result.admin_access:
                continue  # admin access never holds a device
            dev = DeviceID(result.driver, result.pool, result.device)
            cand = self.devices.get(dev)
            if dev in self.exclusive or (result.share_id is None and dev in self.shared):
                holder = self.exclusive.get(dev, "a shared allocation")
                problem = problem or f"device {dev} is also allocated to {holder}"
            if result.share_id is None:
                exclusive.append(dev)
            else:
                consumed = result.consumed_capacity or {}
                amounts = {name: parse_quantity(value).nanos for name, value in consumed.items()}
                shares.append((dev, amounts))
                problem = problem or self._capacity_problem(dev, cand, amounts)
            if cand is not None and cand.consumes and dev not in self.charged and dev not in charges:
                charges.append(dev)
        problem = problem or self._counter_problem(charges)
        if problem is None or force:
            self._commit(claim_label(claim), exclusive, shares, charges)
        return problem

    def _capacity_problem(self, dev: DeviceID, cand: Candidate | None, amounts: dict[str, int]) -> str | None:
        if cand is None:
            return None
        held = self.shared.get(dev, {})
        for name, amount in amounts.items():
            spec = cand.capacity.get(name)
            if spec is not None and held.get(name, 0) + amount > spec.value.nanos:
                return f"capacity {name} of shared device {dev} is over-committed"
        return None

    def _counter_problem(self, charges: list[DeviceID]) -> str | None:
        need: dict[tuple[PoolID, str, str], int] = {}
        for dev in charges:
            cand = self.devices[dev]
            for counter_set, amounts in cand.consumes:
                for name, amount in amounts:
                    key = (cand.pool.id, counter_set, name)
                    need[key] = need.get(key, 0) + amount
        for (pool, counter_set, name), amount in sorted(need.items()):
            free = self.counters.get((pool, counter_set), {}).get(name)
            if free is not None and amount > free:
                return f"counter {name} of counter set {counter_set} in pool {pool} is over-committed"
        return None

    def _commit(
        self,
        holder: str,
        exclusive: list[DeviceID],
        shares: list[tuple[DeviceID, dict[str, int]]],
        charges: list[DeviceID],
    ) -> None:
        for dev in exclusive:
            self.exclusive.setdefault(dev, holder)
        for dev, consumed in shares:
            held = self.shared.setdefault(dev, {})
            for name, amount in consumed.items():
                held[name] = held.get(name, 0) + amount
        for dev in charges:
            self.charged.add(dev)
            cand = self.devices[dev]
            for counter_set, amounts in cand.consumes:
                free = self.counters.get((cand.pool.id, counter_set))
                if free is not None:
                    for name, amount in amounts:
                        free[name] = free.get(name, 0) - amount


def must_yield(
    claim: ResourceV1ResourceClaim,
    *,
    allocated: Iterable[ResourceV1ResourceClaim],
    pools: Iterable[Pool],
    ours: Callable[[ResourceV1ResourceClaim], bool],
) -> str | None:
    """Why ``claim`` (allocated by us, unreserved) must give its allocation back, or None."""
    if not ours(claim) or is_reserved(claim):
        return None
    wanted = pools_of(claim)
    uid = claim.metadata.uid if claim.metadata is not None else None
    others = [c for c in allocated if c.metadata is None or c.metadata.uid != uid]
    relevant = [c for c in others if pools_of(c) & wanted]
    devices: dict[DeviceID, Candidate] = {}
    counters: dict[tuple[PoolID, str], dict[str, int]] = {}
    for pool in pools:
        if pool.id in wanted:
            devices.update((c.id, c) for c in (*pool.candidates, *pool.others))
            counters.update(((pool.id, name), dict(totals)) for name, totals in pool.counter_sets.items())
    admission = _Admission(devices, counters)

    def yieldable(c: ResourceV1ResourceClaim) -> bool:
        return ours(c) and not is_reserved(c)

    def priority(c: ResourceV1ResourceClaim) -> tuple[bool, str, str]:
        created = c.metadata.creation_timestamp if c.metadata is not None else None
        return (yieldable(c), created.isoformat() if created is not None else "", claim_label(c))

    for other in sorted([*relevant, claim], key=priority):
        if other is claim:
            return admission.admit(claim, force=False)
        # A claim that may keep its allocation is counted even if it collides; one of ours that
        # collides with an earlier claim will yield itself, so it holds nothing here.
        admission.admit(other, force=not yieldable(other))
    return None
