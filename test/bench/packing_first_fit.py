"""The kube-scheduler's first fit on MIG offers, reduced to what decides it, fast enough to search.

For a claim with one request of a MIG size, the scheduler's structured allocator walks the pools
by driver and pool name, a pool's slices by name and each slice's devices as listed, and takes
the first device its class selects whose counters still fit (it has no device scoring). On our
slices that is: the node's devices in publication order, the first of the request's size that fits
its card's counters. :func:`satisfied` replays a sequence on exactly that rule, on integers — each
``memory-slice-N`` counter a bit of a mask, every other counter a small integer — so an order can
be scored over thousands of sequences in seconds where ``pkg.dra.allocator`` takes a
millisecond per claim. ``packing_bench.py`` checks the two agree (table 2 says so if they ever do
not).

A :class:`Node` is read from published slices (:meth:`Node.from_slices`), so whatever order the
publisher writes is the order simulated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kubernetes.client import V1ResourceSlice

from bench.packing_search import Event
from pkg.domain.names import DRIVER
from pkg.dra.allocator import parse_quantity

SLICE_PREFIX = "memory-slice-"


@dataclass(frozen=True)
class SimDevice:
    """One MIG offer: its card (index into :attr:`Node.capacities`), ``(profile, start)``, size."""

    card: int
    profile: str
    start: int
    mask: int  # the memory slices it takes, one bit each
    use: tuple[int, ...]  # every other counter of its card, in the card's counter order
    name: str = ""  # the published device name

    @property
    def size(self) -> str:
        return self.profile.split(".")[0]

    @property
    def key(self) -> tuple[str, int]:
        return (self.profile, self.start)


@dataclass(frozen=True)
class Node:
    """A node's MIG offers in first-fit order, and each card's counter totals."""

    capacities: tuple[tuple[int, ...], ...]
    devices: tuple[SimDevice, ...]
    card_names: tuple[str, ...]  # counter-set names, by card index

    def by_size(self) -> dict[str, list[SimDevice]]:
        out: dict[str, list[SimDevice]] = {}
        for d in self.devices:
            out.setdefault(d.size, []).append(d)
        return out

    def sizes(self) -> frozenset[str]:
        return frozenset(d.size for d in self.devices)

    @classmethod
    def from_slices(cls, slices: Iterable[V1ResourceSlice]) -> Node:
        """The node of one pool's slices, devices in the scheduler's order (slices by name)."""
        ordered = sorted(slices, key=lambda rs: str(rs.metadata.name if rs.metadata else ""))
        counter_sets = {cs.name: cs for rs in ordered for cs in rs.spec.shared_counters or ()}
        names = tuple(counter_sets)
        columns: dict[str, list[str]] = {}
        raw: dict[str, dict[str, int]] = {}
        for name, cs in counter_sets.items():
            raw[name] = {c: parse_quantity(v.value).nanos for c, v in cs.counters.items()}
            columns[name] = [c for c in cs.counters if not c.startswith(SLICE_PREFIX)]
        uses: list[tuple[str, dict[str, int], str, int, str]] = []
        for rs in ordered:
            for device in rs.spec.devices or ():
                attrs = device.attributes or {}
                profile_attr = attrs.get(f"{DRIVER}/migProfile")
                start_attr = attrs.get(f"{DRIVER}/placementStart")
                profile = profile_attr.string if profile_attr else None
                start = start_attr.int if start_attr else None
                if profile is None or start is None:
                    continue
                [consumption] = device.consumes_counters or []
                use = {c: parse_quantity(v.value).nanos for c, v in consumption.counters.items()}
                uses.append((consumption.counter_set, use, profile, int(start), device.name))
        # Scale each counter by the gcd of its values: memory in nanos would be needlessly large.
        scale = {
            (n, c): math.gcd(total, *(u[c] for s, u, *_ in uses if s == n and c in u))
            for n, counters in raw.items()
            for c, total in counters.items()
        }
        capacities = tuple(tuple(raw[n][c] // scale[n, c] for c in columns[n]) for n in names)
        devices = []
        for card_name, use, profile, start, name in uses:
            card = names.index(card_name)
            mask = sum(1 << int(c[len(SLICE_PREFIX) :]) for c in use if c.startswith(SLICE_PREFIX))
            vector = tuple(use.get(c, 0) // scale[card_name, c] for c in columns[card_name])
            devices.append(SimDevice(card, profile, start, mask, vector, name))
        return cls(capacities, tuple(devices), names)


Rank = Callable[[Collection[str]], Mapping[str, tuple[int, ...]]]


def satisfied(
    by_size: Mapping[str, Sequence[SimDevice]],
    capacities: Sequence[tuple[int, ...]],
    events: Sequence[Event],
    *,
    follow: Rank | None = None,
) -> int:
    """Arrivals satisfied before the first failure, first fit in ``by_size``'s order.

    ``follow`` (the fill-following order, :func:`pkg.dra.model.fill_order.fill_rank` on the
    node's offers) re-ranks the devices after every arrival and release, given the names of the
    devices in use, as the gpu-handler republishes them after Prepare and Unprepare (the ranks
    keep each card's offers together, so the slices of that order list the devices in rank
    order; ``packing_bench`` checks this model against the real scheduler on republished slices)."""
    if follow is not None:
        every = [d for size in by_size.values() for d in size]
    masks = [0] * len(capacities)
    used = [[0] * len(c) for c in capacities]
    held: dict[int, SimDevice] = {}
    count = 0
    for e in events:
        if follow is not None:
            rank = follow([d.name for d in held.values()])
            ranked = sorted(every, key=lambda d: rank[d.name])
            lists: dict[str, list[SimDevice]] = {}
            for d in ranked:
                lists.setdefault(d.size, []).append(d)
            by_size = lists
        if e.release is not None:
            d = held.pop(e.release)
            masks[d.card] &= ~d.mask
            u = used[d.card]
            for i, v in enumerate(d.use):
                u[i] -= v
            continue
        for d in by_size.get(e.size, ()):
            if masks[d.card] & d.mask:
                continue
            u, cap = used[d.card], capacities[d.card]
            if all(a + b <= c for a, b, c in zip(u, d.use, cap, strict=True)):
                masks[d.card] |= d.mask
                for i, v in enumerate(d.use):
                    u[i] += v
                held[e.index] = d
                break
        else:
            return count
        count += 1
    return count
