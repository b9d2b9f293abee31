"""What an allocation consumes, device by device: for ``explain``, so a user sees the cost of a claim.

For each device of an allocation result, against the state *before* the claim (other claims'
allocations):

* **capacity** — for a device that allows multiple allocations, each capacity the share consumes:
  what the claim requested, what the request policy made of it (rounded up to the next valid
  value, the policy's default when nothing was requested, or the whole capacity without a policy),
  what other shares already hold and what is left after this claim. ``sharePercent: requested 25
  → 30`` is a ``validRange`` with ``step: 10`` at work. A device without multiple allocations is
  taken whole; its capacities are not shared, so none is listed;
* **counters** — what the device takes from each counter set it consumes, or that it takes
  nothing because another share of the same device already charged them (counters are charged
  once per device, however many shares it has), and what each of those counter sets — the card —
  still has free after the whole claim.

Pure: computed from the allocator's context and outcome; nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubernetes.client import V1AllocationResult

from pkg.dra.allocator.capacity import CapacitySpec, consumption
from pkg.dra.allocator.context import AllocationContext
from pkg.dra.allocator.pools import Candidate
from pkg.dra.allocator.quantity import Format, Quantity, parse_quantity
from pkg.dra.allocator.requests import Alternative
from pkg.dra.model import DeviceID, PoolID


@dataclass(frozen=True, slots=True)
class CapacityUse:
    name: str
    requested: str | None  # the claim's request; None: nothing requested
    consumed: str  # what the share takes, after the request policy
    rule: str  # how the request policy got from ``requested`` to ``consumed``
    held: str  # held by other claims' shares before this claim
    left: str  # free after this claim
    total: str


@dataclass(frozen=True, slots=True)
class CounterUse:
    counter_set: str
    taken: tuple[tuple[str, str], ...]  # counter, amount; empty when not charged
    charged: bool  # False: another share of the device already charged its counters
    left: tuple[tuple[str, str, str], ...]  # counter, free after this claim, total


@dataclass(frozen=True, slots=True)
class DeviceUse:
    device: str  # driver/pool/device
    request: str
    shared: bool
    capacity: tuple[CapacityUse, ...]
    counters: tuple[CounterUse, ...]


def device_uses(ctx: AllocationContext, outcome: V1AllocationResult) -> tuple[DeviceUse, ...]:
    """Per device of ``outcome`` (in result order), what it consumes; see the module docs."""
    alternatives = {alt.result_name: alt for plan in ctx.plans for alt in plan.alternatives}
    pools = {pool.id: pool for pool in ctx.pools}
    results = (outcome.devices.results if outcome.devices is not None else None) or []
    held: dict[DeviceID, dict[str, int]] = {d: dict(c) for d, c in ctx.allocated.consumed.items()}
    in_use = {*ctx.allocated.shares, *ctx.allocated.consumed}
    tally = ctx.counters  # the state before this claim; charged below as the claim would
    picked: list[tuple[Candidate, str, bool, tuple[CapacityUse, ...]]] = []
    for result in results:
        pool = pools.get(PoolID(result.driver, result.pool))
        cand = pool.devices.get(result.device) if pool is not None else None
        alt = alternatives.get(result.request)
        if cand is None or alt is None:
            continue  # not from this snapshot's pools (cannot happen for the allocator's outcome)
        capacity: tuple[CapacityUse, ...] = ()
        if cand.shared:
            recorded = {k: parse_quantity(v) for k, v in (result.consumed_capacity or {}).items()}
            capacity = _capacity_uses(cand, alt, recorded, held.setdefault(cand.id, {}))
        charged = bool(cand.consumes) and not (cand.shared and cand.id in in_use)
        if charged:
            tally.charge(cand)
        if cand.shared:
            in_use.add(cand.id)
        picked.append((cand, result.request, charged, capacity))
    uses = []
    for cand, request, charged, capacity in picked:
        counters = tuple(
            CounterUse(
                counter_set=counter_set,
                taken=tuple((name, _amount(nanos)) for name, nanos in amounts) if charged else (),
                charged=charged,
                left=_left(tally.available(cand.pool.id, counter_set), cand.pool.counter_sets[counter_set]),
            )
            for counter_set, amounts in cand.consumes
        )
        uses.append(DeviceUse(str(cand.id), request, cand.shared, capacity, counters))
    for cand, _, charged, _ in picked:  # leave the context's counter tally as it was
        if charged:
            tally.refund(cand)
    return tuple(uses)


def _capacity_uses(
    cand: Candidate, alt: Alternative, recorded: dict[str, Quantity], held: dict[str, int]
) -> tuple[CapacityUse, ...]:
    amounts = consumption(alt.capacity, cand.capacity)
    uses = []
    for name, spec in cand.capacity.items():
        consumed = recorded.get(name)
        if consumed is None and isinstance(amounts, dict):
            consumed = amounts.get(name)
        if consumed is None:
            continue
        requested = (alt.capacity or {}).get(name)
        before = held.get(name, 0)
        held[name] = before + consumed.nanos  # a later share of this claim on the same device
        left = spec.value.nanos - held[name]
        fmt = spec.value.format
        uses.append(
            CapacityUse(
                name=name,
                requested=str(requested) if requested is not None else None,
                consumed=str(consumed),
                rule=_rule(requested, consumed, spec),
                held=str(Quantity(before, fmt)),
                left=str(Quantity(left, fmt)),
                total=str(spec.value),
            )
        )
    return tuple(uses)


def _rule(requested: Quantity | None, consumed: Quantity, spec: CapacitySpec) -> str:
    """How the request policy turned the request into the consumed amount, in the API's words."""
    if requested is None:
        if spec.default is not None:
            return f"nothing requested: the policy's default {spec.default}"
        return "nothing requested and no request policy: the whole capacity"
    if not spec.has_policy:
        return "as requested (no request policy)"
    if spec.minimum is not None:
        bounds = [f"min {spec.minimum}"]
        bounds += [f"max {spec.maximum}"] if spec.maximum is not None else []
        bounds += [f"step {spec.step}"] if spec.step is not None else []
        policy = f"validRange {', '.join(bounds)}"
    elif spec.valid_values:
        policy = f"validValues {', '.join(str(v) for v in spec.valid_values)}"
    else:
        policy = f"default {spec.default}"
    return f"rounded up by {policy}" if consumed != requested else f"as requested ({policy})"


def _amount(nanos: int) -> str:
    return str(Quantity(nanos, Format.BINARY_SI))


def _left(free: dict[str, int], totals: dict[str, int]) -> tuple[tuple[str, str, str], ...]:
    return tuple((name, _amount(free.get(name, total)), _amount(total)) for name, total in totals.items())
