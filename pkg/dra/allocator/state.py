"""What other claims already hold: the input the scheduler calls ``AllocatedState``.

Built from the allocations of existing claims, as the scheduler's claim tracker does:

* a result with ``adminAccess: true`` holds nothing (admin access never blocks a device);
* a result with a ``shareID`` is one share of a device that allows multiple allocations; its
  ``consumedCapacity`` adds up per device;
* any other result holds its device exclusively.

A device is *allocated* (and so consumes its counters, once) if it is held exclusively or by at
least one share.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kubernetes.client import ResourceV1ResourceClaim

from pkg.dra.allocator.quantity import parse_quantity
from pkg.dra.domain import DeviceID


@dataclass(slots=True)
class AllocatedState:
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
    ) -> AllocatedState:
        state = cls()
        for claim in claims:
            if exclude_uid and claim.metadata is not None and claim.metadata.uid == exclude_uid:
                continue
            allocation = claim.status.allocation if claim.status is not None else None
            if allocation is None or allocation.devices is None:
                continue
            for result in allocation.devices.results or ():
                if result.admin_access:
                    continue
                device = DeviceID(result.driver, result.pool, result.device)
                if result.share_id is None:
                    state.dedicated.add(device)
                    continue
                state.shares.setdefault(device, set()).add(result.share_id)
                if result.consumed_capacity is not None:
                    totals = state.consumed.setdefault(device, {})
                    for name, value in result.consumed_capacity.items():
                        totals[name] = totals.get(name, 0) + parse_quantity(value).nanos
        return state
