"""Consumable capacity (KEP-5075): how much of a device's capacity one allocation takes.

For every capacity of a device the allocation consumes (``calculateConsumedCapacity``):

* nothing requested → the policy's ``default``, else the whole ``value``;
* requested, no policy → the request as is;
* ``validRange`` → at least ``min``, then rounded **up** to ``min + k·step``;
* ``validValues`` → rounded up to the first listed value ≥ the request.

The result must then satisfy the policy (≤ ``max``, on a step, one of the values — unless it equals
the default) and, added to what other claims and this attempt already consume, stay within
``value``. A request naming a capacity the device lacks never fits. The same check applies to
devices without ``allowMultipleAllocations`` (a 40Gi request never fits a 24Gi device), but only
shared devices record ``consumedCapacity`` and get a ``shareID`` in the result.

All arithmetic is on exact nano counts (see :mod:`.quantity`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kubernetes.client import V1DeviceCapacity

from pkg.dra.allocator.allocated import AllocatedDevices
from pkg.dra.allocator.quantity import Quantity, parse_quantity
from pkg.dra.model import DeviceID


@dataclass(frozen=True, slots=True)
class CapacitySpec:
    value: Quantity
    default: Quantity | None = None
    minimum: Quantity | None = None
    maximum: Quantity | None = None
    step: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()

    @property
    def has_policy(self) -> bool:
        return self.default is not None or self.minimum is not None or bool(self.valid_values)

    @classmethod
    def from_model(cls, capacity: V1DeviceCapacity) -> CapacitySpec:
        policy = capacity.request_policy
        if policy is None:
            return cls(parse_quantity(capacity.value))
        rng = policy.valid_range
        return cls(
            value=parse_quantity(capacity.value),
            default=parse_quantity(policy.default) if policy.default is not None else None,
            minimum=parse_quantity(rng.min) if rng is not None else None,
            maximum=parse_quantity(rng.max) if rng is not None and rng.max is not None else None,
            step=parse_quantity(rng.step) if rng is not None and rng.step is not None else None,
            valid_values=tuple(parse_quantity(v) for v in policy.valid_values or ()),
        )


def consumed_amount(requested: Quantity | None, spec: CapacitySpec) -> Quantity:
    """What one allocation takes of one capacity, before the policy check."""
    if requested is None:
        return spec.default if spec.default is not None else spec.value
    if not spec.has_policy:
        return requested
    if spec.minimum is not None:
        if requested < spec.minimum:
            return spec.minimum
        if spec.step is None or spec.step.nanos <= 0:
            return requested
        steps = -((spec.minimum.nanos - requested.nanos) // spec.step.nanos)  # ceil division
        return Quantity(spec.minimum.nanos + steps * spec.step.nanos, spec.step.format)
    for valid in spec.valid_values:
        if requested <= valid:
            return valid
    return requested


def violates_policy(amount: Quantity, spec: CapacitySpec) -> bool:
    if spec.default is not None and amount == spec.default:
        return False
    if spec.minimum is not None:
        if spec.maximum is not None and amount > spec.maximum:
            return True
        return (
            spec.step is not None
            and spec.step.nanos > 0
            and (amount.nanos - spec.minimum.nanos) % spec.step.nanos != 0
        )
    return bool(spec.valid_values) and amount not in spec.valid_values


def consumption(
    requests: Mapping[str, Quantity] | None, capacities: Mapping[str, CapacitySpec]
) -> dict[str, Quantity] | str:
    """The consumed amount per capacity, or the reason the request can never fit this device."""
    if requests:
        for name in requests:
            if name not in capacities:
                return f"device has no capacity {name!r}"
    result: dict[str, Quantity] = {}
    for name, spec in capacities.items():
        amount = consumed_amount(requests.get(name) if requests else None, spec)
        if amount.sign() < 0:
            return f"capacity {name!r}: negative amount"
        if violates_policy(amount, spec):
            return f"capacity {name!r}: {amount} is not allowed by the request policy"
        result[name] = amount
    return result


class CapacityTally:
    """Consumed capacity per device: other claims' plus this attempt's shares."""

    def __init__(self, allocated: AllocatedDevices, *, share_id: Callable[[], str] | None = None) -> None:
        self._allocated = allocated
        self._allocating: dict[DeviceID, dict[str, int]] = {}
        self._share_count: dict[DeviceID, int] = {}
        self.new_share_id = share_id or (lambda: str(uuid.uuid4()))

    def exceeded(
        self, device: DeviceID, amounts: Mapping[str, Quantity], capacities: Mapping[str, CapacitySpec]
    ) -> str | None:
        """The first capacity that ``amounts`` would overflow, or None when it fits."""
        held = self._allocated.consumed.get(device)
        pending = self._allocating.get(device)
        for name, amount in amounts.items():
            total = (
                amount.nanos + (held.get(name, 0) if held else 0) + (pending.get(name, 0) if pending else 0)
            )
            if total > capacities[name].value.nanos:
                return name
        return None

    def in_shared_use(self, device: DeviceID) -> bool:
        return self._allocated.is_shared_in_use(device) or device in self._share_count

    def add_share(self, device: DeviceID, amounts: Mapping[str, Quantity]) -> None:
        pending = self._allocating.setdefault(device, {})
        for name, amount in amounts.items():
            pending[name] = pending.get(name, 0) + amount.nanos
        self._share_count[device] = self._share_count.get(device, 0) + 1

    def remove_share(self, device: DeviceID, amounts: Mapping[str, Quantity]) -> None:
        pending = self._allocating[device]
        for name, amount in amounts.items():
            pending[name] -= amount.nanos
        self._share_count[device] -= 1
        if not self._share_count[device]:
            del self._share_count[device]
            del self._allocating[device]
