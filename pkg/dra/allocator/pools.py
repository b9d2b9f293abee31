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
their slices changes (name, resourceVersion or generation); pools are never mutated after build
(only the memos of selector verdicts and orders, which are derived from immutable data, grow).

Build speed matters at restart (1000 nodes of 8 cards are 224k devices): a device's counter
consumption and capacities are interned by content — the servers of a cluster are mostly alike, so
the same ``(counter, value)`` tuples and capacity specs repeat on every node and are parsed once —
and every per-slice value is read once per slice, not per device.

For best fit each pool also keeps its **cards** (devices grouped by their first counter set, in
first-fit order) and their static rank ``(free memory slices, free memory, position)`` computed
from the counter totals, sorted. A card nothing is charged on ranks by those totals, so best fit
walks the cards of all pools in that precomputed order and looks at a card's devices only when it
gets there (see :mod:`.strategy`). That shortcut needs each card's devices to be one block of the
pool's first-fit order (true for every pool our publisher writes); ``contiguous`` says whether it
holds, and a pool where it does not is ordered the general way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import V1Device, V1Node, V1NodeSelector, V1ResourceSlice

from pkg.dra.allocator.capacity import CapacitySpec
from pkg.dra.allocator.cel_env import input_problem
from pkg.dra.allocator.nodes import reachable
from pkg.dra.allocator.quantity import QuantityError, parse_quantity
from pkg.dra.model import DeviceID, PoolID

MEMORY_COUNTER = "memory"
SLICE_COUNTER_PREFIX = "memory-slice-"


@dataclass(slots=True, eq=False)
class Candidate:
    device: V1Device
    pool: Pool
    node_name: str | None
    node_selector: V1NodeSelector | None
    slice_version: str  # the slice's resourceVersion: with the pool generation, the device's version
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
    cel_plain: bool | None = None  # its CEL input cannot fail as a whole (cel_footprint), once known
    _id: DeviceID | None = None

    @property
    def id(self) -> DeviceID:
        """``driver/pool/device``; made on first use (most devices of a large cluster never need it)."""
        device_id = self._id
        if device_id is None:
            device_id = self._id = DeviceID(self.pool.id.driver, self.pool.id.pool, self.device.name)
        return device_id

    @property
    def cache_key(self) -> tuple[DeviceID, int, str]:
        """Identity and version of the device: selector verdicts are cached under it."""
        return (self.id, self.pool.generation, self.slice_version)


@dataclass(frozen=True, slots=True)
class CardRank:
    """A card's best-fit rank while nothing is charged on it, and its reachable devices.

    ``slices``/``memory`` are the card's total memory slices (those with a non-zero total) and total
    memory; ``start`` is the first-fit position of its first device. ``card`` is None for devices
    that consume no counters (ranked like a card with no slices and no memory).
    """

    slices: int
    memory: int
    start: tuple[bool, str, str, int]
    card: str | None
    members: tuple[Candidate, ...]


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
    cards: dict[str | None, CardRank] = field(default_factory=dict)  # reachable devices by card
    ranked_cards: list[CardRank] = field(default_factory=list)  # by (slices, memory, start)
    contiguous: bool = True  # every card's reachable devices form one block of the first-fit order
    # Best fit's per-card memo: selector key -> card -> (matching devices, their selector errors,
    # and the card's rank key and device order while nothing is charged on it).
    card_memo: dict[tuple[tuple[str, int, str], ...], dict[str | None, Any]] = field(default_factory=dict)
    # Best fit's memo for cards nothing is charged on: members -> (rank key, members in order).
    static_order: dict[tuple[Candidate, ...], tuple[Any, list[Candidate]]] = field(default_factory=dict)
    # Selector verdicts per tuple of expressions: (matching devices, devices whose selectors failed).
    eligible_memo: dict[tuple[tuple[str, int, str], ...], tuple[list[Candidate], dict[Candidate, Any]]] = (
        field(default_factory=dict)
    )

    @property
    def usable(self) -> bool:
        return not self.incomplete and self.invalid is None

    def name_candidates(self) -> None:
        """Makes every reachable device's id now instead of on first use: an explanation names
        every device of the cluster, and making 224,000 ids inside its first request costs the
        requester a fifth of a second (:meth:`~.allocator.Allocator.warm_classes`)."""
        for cand in self.candidates:
            _ = cand.id


class _InvalidPoolError(Exception):
    pass


class PoolCache:
    """Built pools per (pool, node), reused while the pool's slices are unchanged. Thread-safe.

    It also remembers the last answer of :func:`gather_pools`: a controller asks again and again
    with the very same slice objects from its informer (an informer replaces an object when it
    changes, never mutates it), and comparing their identities is ~100x cheaper than fingerprinting
    2000 slices per decision. The remembered slices are kept alive, so their ids cannot be reused.
    """

    def __init__(self, *, max_entries: int = 20_000) -> None:
        # Held while pools are gathered past a recall miss, so two threads asking at once (a
        # decision and the selector warmer after a restart) build a cluster's pools once, not twice.
        self.building = threading.Lock()
        self._entries: dict[tuple[PoolID, str | None], tuple[tuple[object, ...], Pool]] = {}
        self._max_entries = max_entries
        self._last: tuple[str | None, tuple[int, ...], tuple[V1ResourceSlice, ...], list[Pool]] | None = None
        self.built_devices = 0  # devices built into pools so far (see Allocator.settle_heap)

    def recall(self, node_key: str | None, slices: tuple[V1ResourceSlice, ...]) -> list[Pool] | None:
        """The pools of the last gather if it was asked about these very objects for this node."""
        last = self._last
        if last is None or last[0] != node_key or len(last[1]) != len(slices):
            return None
        return last[3] if last[1] == tuple(map(id, slices)) else None

    def remember(self, node_key: str | None, slices: tuple[V1ResourceSlice, ...], pools: list[Pool]) -> None:
        self._last = (node_key, tuple(map(id, slices)), slices, pools)

    def get(self, key: tuple[PoolID, str | None], fingerprint: tuple[object, ...]) -> Pool | None:
        entry = self._entries.get(key)
        return entry[1] if entry is not None and entry[0] == fingerprint else None

    def put(self, key: tuple[PoolID, str | None], fingerprint: tuple[object, ...], pool: Pool) -> None:
        if len(self._entries) >= self._max_entries:
            self._entries.clear()
        self._entries[key] = (fingerprint, pool)
        self.built_devices += len(pool.devices)


def gather_pools(
    slices: Iterable[V1ResourceSlice], *, node: V1Node | None, cache: PoolCache | None = None
) -> list[Pool]:
    """Pools with at least one slice reachable from ``node`` (None: any node), in first-fit order.

    The list may be the cache's own (see :class:`PoolCache`): callers never mutate it.
    """
    slices = tuple(slices)
    node_key = node.metadata.name if node is not None and node.metadata is not None else None
    if cache is None:
        return _gather(slices, node, node_key, None)
    recalled = cache.recall(node_key, slices)
    if recalled is not None:
        return recalled
    with cache.building:
        recalled = cache.recall(node_key, slices)  # another thread may have built them meanwhile
        return recalled if recalled is not None else _gather(slices, node, node_key, cache)


def _gather(
    slices: tuple[V1ResourceSlice, ...], node: V1Node | None, node_key: str | None, cache: PoolCache | None
) -> list[Pool]:
    newest: dict[PoolID, list[V1ResourceSlice]] = {}
    for rs in slices:
        pool_id = PoolID(rs.spec.driver, rs.spec.pool.name)
        current = newest.get(pool_id)
        if current is None or rs.spec.pool.generation > current[0].spec.pool.generation:
            newest[pool_id] = [rs]
        elif rs.spec.pool.generation == current[0].spec.pool.generation:
            current.append(rs)
    pools = []
    all_versioned = True
    for pool_id, pool_slices in newest.items():
        versions = sorted((_slice_name(rs), _resource_version(rs)) for rs in pool_slices)
        versioned = all(version for _, version in versions)
        all_versioned = all_versioned and versioned
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
        _rank_cards(pool)
        if cache is not None and versioned:
            cache.put((pool_id, node_key), fingerprint, pool)
        pools.append(pool)
    pools.sort(key=lambda p: (p.binding_conditions, p.id.driver, p.id.pool))
    if cache is not None and all_versioned:
        cache.remember(node_key, slices, pools)
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
            pool.counter_sets[counter_set.name] = _totals(counter_set.counters)
            slice_names = sorted(n for n in counter_set.counters if n.startswith(SLICE_COUNTER_PREFIX))
            pool.slice_bits[counter_set.name] = {n: i for i, n in enumerate(slice_names)}
    devices = pool.devices
    for rs in slices:
        spec = rs.spec
        per_device = bool(spec.per_device_node_selection)
        slice_relevant = per_device or _slice_relevant(rs, node)
        source = _SliceSource(_slice_name(rs), _resource_version(rs), spec.node_name, spec.node_selector)
        for device in spec.devices or ():
            if device.name in devices:
                raise _InvalidPoolError(f"duplicate device name {device.name}")
            cand = _candidate(pool, source, device, per_device)
            pool.binding_conditions |= bool(device.binding_conditions)
            relevant = _device_reachable(device, node) if per_device else slice_relevant
            (pool.candidates if relevant else pool.others).append(cand)
            devices[device.name] = cand
            if cand.card is not None:
                pool.card_offers.setdefault(cand.card, []).append(cand)
                if len(cand.consumes) > 1:
                    pool.multi_set_cards.add(cand.card)
    for offers in pool.card_offers.values():
        offers.sort(key=lambda c: (-c.slice_count, -c.memory))


def _rank_cards(pool: Pool) -> None:
    """Groups the reachable devices by card and ranks the cards by their totals (see the module docs)."""
    members: dict[str | None, list[Candidate]] = {}
    last: str | object | None = _NO_CARD
    seen_cards: set[str | None] = set()
    for cand in pool.candidates:
        if cand.card != last:
            if cand.card in seen_cards:
                pool.contiguous = False
            seen_cards.add(cand.card)
            last = cand.card
        members.setdefault(cand.card, []).append(cand)
    for card, group in members.items():
        if card is None:
            slices, memory = 0, 0
        else:
            totals = pool.counter_sets[card]
            slices = sum(1 for name in pool.slice_bits[card] if totals[name] > 0)
            memory = totals.get(MEMORY_COUNTER, 0)
        pool.cards[card] = CardRank(slices, memory, group[0].order, card, tuple(group))
    pool.ranked_cards = sorted(pool.cards.values(), key=lambda r: (r.slices, r.memory, r.start))


_NO_CARD = object()


@dataclass(frozen=True, slots=True)
class _SliceSource:
    """What every device of one slice shares."""

    name: str
    version: str
    node_name: str | None
    node_selector: V1NodeSelector | None


# Interning by content (see the module docs); bounded, cleared when full.
_MAX_INTERNED = 50_000
_consumptions: dict[tuple[tuple[str, str], ...], tuple[tuple[str, int], ...]] = {}
_capacities: dict[tuple[object, ...], dict[str, CapacitySpec]] = {}
_counter_sets: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}


_checked: dict[tuple[int, int], tuple[dict[str, int], tuple[tuple[str, int], ...], bool]] = {}


def _totals(counters: dict[str, Any]) -> dict[str, int]:
    """A counter set's totals in nanos, interned by content (never mutated: counter tallies copy them)."""
    amounts = _consumption(counters)
    totals = _counter_sets.get(amounts)
    if totals is None:
        if len(_counter_sets) >= _MAX_INTERNED:
            _counter_sets.clear()
        totals = _counter_sets[amounts] = dict(amounts)
    return totals


def _fits(totals: dict[str, int], amounts: tuple[tuple[str, int], ...], counter_set: str) -> bool:
    """Whether ``amounts`` fit ``totals``; raises when a counter is missing. Memoised per interned pair
    (the entry keeps both objects alive, so their ids cannot be reused while it exists)."""
    key = (id(totals), id(amounts))
    entry = _checked.get(key)
    if entry is not None and entry[0] is totals and entry[1] is amounts:
        return entry[2]
    fits = True
    for name, amount in amounts:
        total = totals.get(name)
        if total is None:
            raise _InvalidPoolError(f"counter {name} not found in counter set {counter_set}")
        fits = fits and total >= amount
    if len(_checked) >= _MAX_INTERNED:
        _checked.clear()
    _checked[key] = (totals, amounts, fits)
    return fits


def _consumption(counters: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """``(counter, nanos)`` pairs of one counter consumption, interned by content."""
    key = tuple([(name, counter.value) for name, counter in counters.items()])
    amounts = _consumptions.get(key)
    if amounts is None:
        try:
            amounts = tuple([(name, parse_quantity(value).nanos) for name, value in key])
        except QuantityError as err:
            raise _InvalidPoolError(str(err)) from None
        if len(_consumptions) >= _MAX_INTERNED:
            _consumptions.clear()
        _consumptions[key] = amounts
    return amounts


def _capacity(device: V1Device) -> dict[str, CapacitySpec]:
    """The device's parsed capacities, interned by content (callers never mutate them)."""
    capacities = device.capacity or {}
    key = tuple([(name, c.value, _policy_key(c.request_policy)) for name, c in capacities.items()])
    capacity = _capacities.get(key)
    if capacity is None:
        try:
            capacity = {name: CapacitySpec.from_model(c) for name, c in capacities.items()}
        except QuantityError as err:
            raise _InvalidPoolError(f"device {device.name}: {err}") from None
        if len(_capacities) >= _MAX_INTERNED:
            _capacities.clear()
        _capacities[key] = capacity
    return capacity


def _policy_key(policy: Any) -> tuple[object, ...] | None:
    if policy is None:
        return None
    rng = policy.valid_range
    bounds = (rng.min, rng.max, rng.step) if rng is not None else None
    return (policy.default, bounds, tuple(policy.valid_values or ()))


_EMPTY_CAPACITY: dict[str, CapacitySpec] = {}


def _candidate(pool: Pool, source: _SliceSource, device: V1Device, per_device: bool) -> Candidate:
    if (problem := input_problem(pool.id.driver, device)) is not None:
        raise _InvalidPoolError(f"device {device.name}: {problem}")
    consumes = []
    fits_totals = True
    for usage in device.consumes_counters or ():
        totals = pool.counter_sets.get(usage.counter_set)
        if totals is None:
            raise _InvalidPoolError(f"counter set {usage.counter_set} not found")
        amounts = _consumption(usage.counters)
        fits_totals = _fits(totals, amounts, usage.counter_set) and fits_totals
        consumes.append((usage.counter_set, amounts))
    capacity = _capacity(device) if device.capacity else _EMPTY_CAPACITY
    card = consumes[0][0] if consumes else None
    cand = Candidate(
        device=device,
        pool=pool,
        node_name=device.node_name if per_device else source.node_name,
        node_selector=device.node_selector if per_device else source.node_selector,
        slice_version=source.version,
        order=(False, "", "", 0),
        shared=bool(device.allow_multiple_allocations),
        consumes=tuple(consumes),
        capacity=capacity,
        card=card,
        fits_totals=fits_totals,
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
