"""Gathering resource pools: which devices exist, from which slices, with which counters.

A pool (driver + pool name) is published as several ResourceSlices of one generation. As in the
scheduler's ``GatherPools``:

* only the newest generation of a pool counts; older slices are ignored (the driver is replacing
  them);
* a pool is **incomplete** while fewer slices of that generation exist than
  ``pool.resourceSliceCount`` says: nothing is allocated from it (and ``All`` requests fail), but
  other pools stay usable;
* a pool is **invalid** (reported, skipped) when device names or counter-set names repeat, a
  device consumes a counter set or counter that no slice of the pool declares, a quantity cannot
  be read (``1e999999``) or a device breaks a size the API enforces (what CEL selectors may read):
  any driver publishes into the slices we read, and one bad pool never stops the others;
* pools are ordered by driver and name, slices by name, devices as listed — the scheduler's
  first-fit order, which is also our final tie-break.

Every device becomes a :class:`Candidate` with what the hot path needs precomputed once: its
counter consumption as nano integers, parsed capacities, its card (first counter set) and the
bitmask of the card's memory-slice counters it takes (used by best-fit). Building that is the most
expensive part of an allocation, so a :class:`PoolCache` keeps built pools per node until one of
their slices changes (name, resourceVersion or generation); pools are never mutated after build.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import V1Device, V1Node, V1NodeSelector, V1ResourceSlice

from pkg.dra.allocator.capacity import CapacitySpec
from pkg.dra.allocator.cel_env import input_problem
from pkg.dra.allocator.nodes import reachable
from pkg.dra.allocator.quantity import QuantityError, parse_quantity
from pkg.dra.domain import DeviceID, PoolID

MEMORY_COUNTER = "memory"
SLICE_COUNTER_PREFIX = "memory-slice-"


@dataclass(slots=True, eq=False)
class Candidate:
    id: DeviceID
    device: V1Device
    pool: Pool
    slice_name: str
    node_name: str | None
    node_selector: V1NodeSelector | None
    cache_key: tuple[str, str, str, int, str]  # device id + pool generation + slice resourceVersion
    order: tuple[bool, str, str, int]  # first-fit position: pool sort key, then index in the pool
    shared: bool
    consumes: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
    capacity: dict[str, CapacitySpec]
    card: str | None
    slice_mask: int = 0
    slice_count: int = 0
    memory: int = 0
    fits_totals: bool = True  # its counters fit the pool's full totals (best fit's untouched-card path)
    cel_input: Any = None  # cel_env.DeviceInput, built on first selector evaluation


@dataclass(slots=True, eq=False)
class Pool:
    id: PoolID
    generation: int
    incomplete: bool = False
    invalid: str | None = None
    binding_conditions: bool = False
    candidates: list[Candidate] = field(default_factory=list)  # reachable from the node
    others: list[Candidate] = field(default_factory=list)  # not reachable, still consume counters
    devices: dict[str, Candidate] = field(default_factory=dict)  # name -> candidates and others
    multi_set_cards: set[str] = field(default_factory=set)  # cards with a device on more than one set
    counter_sets: dict[str, dict[str, int]] = field(default_factory=dict)  # set -> counter -> nanos
    slice_bits: dict[str, dict[str, int]] = field(default_factory=dict)  # set -> slice counter -> bit
    card_offers: dict[str, list[Candidate]] = field(default_factory=dict)  # set -> devices, largest first
    # Best fit's memo for cards nothing is charged on: members -> (rank key, members in order).
    static_order: dict[tuple[Candidate, ...], tuple[Any, list[Candidate]]] = field(default_factory=dict)
    # Selector verdicts per tuple of expressions: (matching devices, devices whose selectors failed).
    eligible_memo: dict[tuple[tuple[str, int, str], ...], tuple[list[Candidate], dict[Candidate, Any]]] = (
        field(default_factory=dict)
    )

    @property
    def usable(self) -> bool:
        return not self.incomplete and self.invalid is None


class _InvalidPoolError(Exception):
    pass


class PoolCache:
    """Built pools per (pool, node), reused while the pool's slices are unchanged. Thread-safe."""

    def __init__(self, *, max_entries: int = 20_000) -> None:
        self._entries: dict[tuple[PoolID, str | None], tuple[tuple[object, ...], Pool]] = {}
        self._max_entries = max_entries

    def get(self, key: tuple[PoolID, str | None], fingerprint: tuple[object, ...]) -> Pool | None:
        entry = self._entries.get(key)
        return entry[1] if entry is not None and entry[0] == fingerprint else None

    def put(self, key: tuple[PoolID, str | None], fingerprint: tuple[object, ...], pool: Pool) -> None:
        if len(self._entries) >= self._max_entries:
            self._entries.clear()
        self._entries[key] = (fingerprint, pool)


def gather_pools(
    slices: Iterable[V1ResourceSlice], *, node: V1Node | None, cache: PoolCache | None = None
) -> list[Pool]:
    """Pools with at least one slice reachable from ``node`` (None: any node), in first-fit order."""
    newest: dict[PoolID, list[V1ResourceSlice]] = {}
    for rs in slices:
        pool_id = PoolID(rs.spec.driver, rs.spec.pool.name)
        current = newest.get(pool_id)
        if current is None or rs.spec.pool.generation > current[0].spec.pool.generation:
            newest[pool_id] = [rs]
        elif rs.spec.pool.generation == current[0].spec.pool.generation:
            current.append(rs)
    pools = []
    node_key = node.metadata.name if node is not None and node.metadata is not None else None
    for pool_id, pool_slices in newest.items():
        versions = sorted((_slice_name(rs), _resource_version(rs)) for rs in pool_slices)
        versioned = all(version for _, version in versions)
        fingerprint: tuple[object, ...] = (*versions, pool_slices[0].spec.pool.generation, node_key)
        cached = cache.get((pool_id, node_key), fingerprint) if cache is not None and versioned else None
        if cached is not None:
            pools.append(cached)
            continue
        if not any(_slice_relevant(rs, node) for rs in pool_slices):
            continue
        generation = pool_slices[0].spec.pool.generation
        pool = Pool(pool_id, generation)
        if len(pool_slices) != pool_slices[0].spec.pool.resource_slice_count:
            pool.incomplete = True
        else:
            try:
                _build(pool, sorted(pool_slices, key=_slice_name), node)
            except (_InvalidPoolError, ValueError, ArithmeticError) as err:
                pool.invalid = str(err)
                pool.candidates, pool.others, pool.devices = [], [], {}
                pool.multi_set_cards = set()
        for index, cand in enumerate(pool.candidates):
            cand.order = (pool.binding_conditions, pool_id.driver, pool_id.pool, index)
        if cache is not None and versioned:
            cache.put((pool_id, node_key), fingerprint, pool)
        pools.append(pool)
    pools.sort(key=lambda p: (p.binding_conditions, p.id.driver, p.id.pool))
    return pools


def _slice_name(rs: V1ResourceSlice) -> str:
    return (rs.metadata.name if rs.metadata is not None else None) or ""


def _resource_version(rs: V1ResourceSlice) -> str:
    return (rs.metadata.resource_version if rs.metadata is not None else None) or ""


def _slice_relevant(rs: V1ResourceSlice, node: V1Node | None) -> bool:
    spec = rs.spec
    if spec.node_name or spec.all_nodes or spec.node_selector is not None:
        return reachable(
            node, name=spec.node_name, all_nodes=bool(spec.all_nodes), selector=spec.node_selector
        )
    if spec.per_device_node_selection:
        return any(_device_reachable(d, node) for d in spec.devices or ())
    return False  # some future node selection we do not understand


def _device_reachable(device: V1Device, node: V1Node | None) -> bool:
    return reachable(
        node, name=device.node_name, all_nodes=bool(device.all_nodes), selector=device.node_selector
    )


def _build(pool: Pool, slices: list[V1ResourceSlice], node: V1Node | None) -> None:
    for rs in slices:
        for counter_set in rs.spec.shared_counters or ():
            if counter_set.name in pool.counter_sets:
                raise _InvalidPoolError(f"duplicate counter set name {counter_set.name}")
            pool.counter_sets[counter_set.name] = _nanos(counter_set.counters)
            slice_names = sorted(n for n in counter_set.counters if n.startswith(SLICE_COUNTER_PREFIX))
            pool.slice_bits[counter_set.name] = {n: i for i, n in enumerate(slice_names)}
    seen: set[str] = set()
    for rs in slices:
        per_device = bool(rs.spec.per_device_node_selection)
        slice_relevant = per_device or _slice_relevant(rs, node)
        for device in rs.spec.devices or ():
            if device.name in seen:
                raise _InvalidPoolError(f"duplicate device name {device.name}")
            seen.add(device.name)
            cand = _candidate(pool, rs, device, per_device)
            pool.binding_conditions |= bool(device.binding_conditions)
            relevant = _device_reachable(device, node) if per_device else slice_relevant
            (pool.candidates if relevant else pool.others).append(cand)
            pool.devices[device.name] = cand
            if cand.card is not None:
                pool.card_offers.setdefault(cand.card, []).append(cand)
    for offers in pool.card_offers.values():
        offers.sort(key=lambda c: (-c.slice_count, -c.memory))
    for cand in pool.devices.values():
        if len(cand.consumes) > 1 and cand.card is not None:
            pool.multi_set_cards.add(cand.card)
        cand.fits_totals = all(
            pool.counter_sets[counter_set][name] >= amount
            for counter_set, amounts in cand.consumes
            for name, amount in amounts
        )


def _nanos(counters: dict[str, Any]) -> dict[str, int]:
    try:
        return {name: parse_quantity(counter.value).nanos for name, counter in counters.items()}
    except QuantityError as err:
        raise _InvalidPoolError(str(err)) from None


def _candidate(pool: Pool, rs: V1ResourceSlice, device: V1Device, per_device: bool) -> Candidate:
    if (problem := input_problem(pool.id.driver, device)) is not None:
        raise _InvalidPoolError(f"device {device.name}: {problem}")
    consumes = []
    for usage in device.consumes_counters or ():
        totals = pool.counter_sets.get(usage.counter_set)
        if totals is None:
            raise _InvalidPoolError(f"counter set {usage.counter_set} not found")
        amounts = _nanos(usage.counters)
        for name in amounts:
            if name not in totals:
                raise _InvalidPoolError(f"counter {name} not found in counter set {usage.counter_set}")
        consumes.append((usage.counter_set, tuple(amounts.items())))
    try:
        capacity = {name: CapacitySpec.from_model(c) for name, c in (device.capacity or {}).items()}
    except QuantityError as err:
        raise _InvalidPoolError(f"device {device.name}: {err}") from None
    card = consumes[0][0] if consumes else None
    cand = Candidate(
        id=DeviceID(pool.id.driver, pool.id.pool, device.name),
        device=device,
        pool=pool,
        slice_name=_slice_name(rs),
        node_name=device.node_name if per_device else rs.spec.node_name,
        node_selector=device.node_selector if per_device else rs.spec.node_selector,
        cache_key=(
            pool.id.driver,
            pool.id.pool,
            device.name,
            pool.generation,
            _resource_version(rs),
        ),
        order=(False, "", "", 0),
        shared=bool(device.allow_multiple_allocations),
        consumes=tuple(consumes),
        capacity=capacity,
        card=card,
    )
    if card is not None:
        bits = pool.slice_bits[card]
        for name, amount in consumes[0][1]:
            if name in bits and amount > 0:
                cand.slice_mask |= 1 << bits[name]
            elif name == MEMORY_COUNTER:
                cand.memory = amount
        cand.slice_count = cand.slice_mask.bit_count()
    return cand
