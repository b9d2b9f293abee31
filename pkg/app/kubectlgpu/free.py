"""What nobody holds, card by card: the ``<free>`` rows of ``kubectl gpu who``.

A card is in one of four states, by what its held devices are (the mode invariant,
docs/architecture.md#offers-and-the-mode-invariant), and what is free follows from it:

* nothing held: the whole card is free (it may still become any of its offers); one row, its
  whole-card device;
* shares held: only more shares of the same strategy fit, up to 100 % of the card; one row with
  the percentage left and, for MPS, the memory left;
* the whole card held: nothing;
* other devices held (MIG devices, partitions): each further exclusive device whose counter
  consumption still fits beside theirs (the card's memory and memory slices, as the scheduler
  counts them); one row per device type, naming one device of that type that fits. Types compete
  for the same slices, so each row says that *one more* of its type fits, not how many.

A node's IMEX channels (on no card; a compute domain's claims share one) are one row per node:
``imex-channel-*``, with how many no claim holds of how many are offered.

The cost is one pass over the catalogue's cards and, for a card with MIG devices held, over that
card's devices: linear in the devices read, so a 1,000-node cluster costs what reading its slices
costs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from pkg.app.kubectlgpu.catalogue import Catalogue, DeviceFacts, nanos
from pkg.app.kubectlgpu.claims import Held, node_of_pool
from pkg.app.kubectlgpu.shares import held_share_size
from pkg.dra.model.share_size import ShareSizeError

WHOLE: Final = "Physical"  # the deviceType of a whole card's offer
CHANNELS: Final = "imex-channel-*"  # the one row of a node's free IMEX channels


@dataclass(frozen=True)
class Free:
    """One thing nobody holds: a device that can be allocated now, and for a share how much."""

    node: str
    device: str
    facts: DeviceFacts
    percent: int | None = None  # a share: the percentage of the card left
    memory: int | None = None  # an MPS share: the card's memory left, in bytes
    channels: tuple[int, int] | None = None  # IMEX channels: (held by no claim, offered)


def free_capacity(
    catalogue: Catalogue, holdings: Sequence[Held], *, node: str | None = None
) -> Iterator[Free]:
    """The free capacity of every card in the catalogue (on ``node`` only, when given), given
    what ``holdings`` hold; a card whose shares cannot be sized is left out rather than guessed."""
    held_by_card: dict[tuple[str, str], list[tuple[Held, DeviceFacts]]] = {}
    for h in holdings:
        facts = catalogue.facts(h.pool, h.device)
        if facts is not None:
            held_by_card.setdefault((h.pool, facts.card), []).append((h, facts))
    channels: dict[str, tuple[set[str], DeviceFacts]] = {}  # pool -> (channel devices, one's facts)
    for (pool, card), devices in catalogue.by_card.items():
        where = node_of_pool(pool)
        if node is not None and where != node:
            continue
        if devices[0][1].channel:
            channels.setdefault(pool, (set(), devices[0][1]))[0].update(name for name, _ in devices)
            continue
        holds = held_by_card.get((pool, card))
        if not holds:
            name, facts = _whole(devices)
            yield Free(where, name, facts)
        elif any(facts.kind == WHOLE and not facts.shared for _, facts in holds):
            continue  # the whole card is held
        elif any(facts.shared for _, facts in holds):
            yield from _shares_left(where, devices, holds)
        else:
            yield from _devices_that_fit(where, pool, devices, holds, catalogue)
    for pool, (offered, facts) in channels.items():
        held = {h.device for h in holdings if h.pool == pool}
        left = len(offered - held)
        if left:
            yield Free(node_of_pool(pool), CHANNELS, facts, channels=(left, len(offered)))


def _whole(devices: Sequence[tuple[str, DeviceFacts]]) -> tuple[str, DeviceFacts]:
    for name, facts in devices:
        if facts.kind == WHOLE and not facts.shared:
            return name, facts
    return devices[0]


def _shares_left(
    node: str, devices: Sequence[tuple[str, DeviceFacts]], holds: Sequence[tuple[Held, DeviceFacts]]
) -> Iterator[Free]:
    strategy = next(facts.strategy for _, facts in holds if facts.shared)
    offer = next(((n, f) for n, f in devices if f.strategy == strategy), None)
    if offer is None:
        return
    try:
        sizes = [
            held_share_size(f.strategy, h.consumed, h.parameters, f.memory) for h, f in holds if f.shared
        ]
    except ShareSizeError:
        return
    left = 100 - sum(size.percent for size in sizes)
    if left <= 0:
        return
    memory = None
    if offer[1].memory is not None and all(size.memory_limit_bytes is not None for size in sizes):
        memory = max(0, offer[1].memory - sum(size.memory_limit_bytes or 0 for size in sizes))
    yield Free(node, offer[0], offer[1], percent=left, memory=memory)


def _devices_that_fit(
    node: str,
    pool: str,
    devices: Sequence[tuple[str, DeviceFacts]],
    holds: Sequence[tuple[Held, DeviceFacts]],
    catalogue: Catalogue,
) -> Iterator[Free]:
    used: dict[tuple[str, str], int] = {}
    for _, facts in holds:
        for consumption in facts.consumes:
            for counter, value in (consumption.counters or {}).items():
                key = (str(consumption.counter_set), counter)
                used[key] = used.get(key, 0) + (nanos(value.value) or 0)
    taken = {h.device for h, _ in holds}
    kinds: set[str] = set()
    for name, facts in devices:
        if facts.shared or facts.kind == WHOLE or name in taken or facts.kind in kinds:
            continue
        if _fits(facts, pool, used, catalogue):
            kinds.add(facts.kind)
            yield Free(node, name, facts)


def _fits(facts: DeviceFacts, pool: str, used: dict[tuple[str, str], int], catalogue: Catalogue) -> bool:
    """Whether the device's counters fit beside what is used; a counter set or counter the
    slices do not publish (an unreadable slice) counts as full."""
    for consumption in facts.consumes:
        capacity = catalogue.counters.get((pool, str(consumption.counter_set)))
        for counter, value in (consumption.counters or {}).items():
            need = nanos(value.value)
            limit = None if capacity is None else capacity.get(counter)
            if need is None or limit is None:
                return False
            if used.get((str(consumption.counter_set), counter), 0) + need > limit:
                return False
    return True
