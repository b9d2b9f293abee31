"""What other claims already hold: the input the scheduler calls ``AllocatedState``.

Built from the allocations of existing claims, as the scheduler's claim tracker does:

* a result with ``adminAccess: true`` holds nothing (admin access never blocks a device);
* a result with a ``shareID`` is one share of a device that allows multiple allocations; its
  ``consumedCapacity`` adds up per device;
* any other result holds its device exclusively.

A device is *allocated* (and so consumes its counters, once) if it is held exclusively or by at
least one share.

Every decision rebuilds this from all allocated claims, so what one allocation holds (device IDs,
parsed capacity) is memoised per allocation object: a claim's ``status.allocation`` from an
informer is replaced, never mutated, when the claim changes. The memo keeps the object alive, so
its id cannot be reused while the entry exists.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kubernetes.client import ResourceV1ResourceClaim, V1AllocationResult

from pkg.dra.allocator.quantity import parse_quantity
from pkg.dra.model import DeviceID


@dataclass(slots=True)
class AllocatedDevices:
    """The devices other claims hold, whole or in shares. Named for what it holds: in this project
    *state* is a reconcile's state, so the scheduler's name is only quoted above."""

    dedicated: set[DeviceID] = field(default_factory=set)
    shares: dict[DeviceID, set[str]] = field(default_factory=dict)
    consumed: dict[DeviceID, dict[str, int]] = field(default_factory=dict)  # capacity name -> nanos

    def is_allocated(self, device: DeviceID) -> bool:
        return device in self.dedicated or device in self.shares or device in self.consumed

    def is_shared_in_use(self, device: DeviceID) -> bool:
        return device in self.shares or device in self.consumed

    @classmethod
    def from_claims(
        cls, claims: Iterable[ResourceV1ResourceClaim], *, exclude_uid: str | None = None
    ) -> AllocatedDevices:
        allocated = cls()
        for claim in claims:
            if exclude_uid and claim.metadata is not None and claim.metadata.uid == exclude_uid:
                continue
            allocation = claim.status.allocation if claim.status is not None else None
            if allocation is None or allocation.devices is None:
                continue
            for device, share_id, consumed in _held(allocation):
                if share_id is None:
                    allocated.dedicated.add(device)
                    continue
                allocated.shares.setdefault(device, set()).add(share_id)
                if consumed is not None:
                    totals = allocated.consumed.setdefault(device, {})
                    for name, nanos in consumed:
                        totals[name] = totals.get(name, 0) + nanos
        return allocated


_Held = tuple[DeviceID, str | None, tuple[tuple[str, int], ...] | None]
_MAX_MEMO = 50_000
_memo: dict[int, tuple[V1AllocationResult, tuple[_Held, ...]]] = {}


def _held(allocation: V1AllocationResult) -> tuple[_Held, ...]:
    """What one allocation holds: device, share ID, consumed capacity in nanos (admin access: nothing)."""
    entry = _memo.get(id(allocation))
    if entry is not None and entry[0] is allocation:
        return entry[1]
    held: list[_Held] = []
    for result in (allocation.devices.results if allocation.devices is not None else None) or ():
        if result.admin_access:
            continue
        consumed = result.consumed_capacity
        held.append(
            (
                DeviceID(result.driver, result.pool, result.device),
                result.share_id,
                tuple((name, parse_quantity(value).nanos) for name, value in consumed.items())
                if result.share_id is not None and consumed is not None
                else None,
            )
        )
    if len(_memo) >= _MAX_MEMO:
        _memo.clear()
    _memo[id(allocation)] = (allocation, tuple(held))
    return tuple(held)
