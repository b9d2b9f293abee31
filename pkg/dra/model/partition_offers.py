"""Offers of a card that is partitioned by a card-wide mode, and the counters that keep modes apart.

Some cards are not cut instance by instance (MIG) but switched, as a whole, into a *mode* that
splits them into equal partitions: the card is one partition, or two halves, or four quarters,
and so on. Every partition of every mode is offered at once, like MIG placements, so a claim can
get "a quarter" of any free card. What the counters must then guarantee, whoever allocates:

* partitions of one mode fit together (all of them at once);
* partitions of two different modes never do, even where they would not overlap — the card
  cannot be in two modes at once;
* the whole card (the Physical offer) excludes every partition, and the reverse.

Slot counters alone (one per compute slot, as MIG's memory slices) stop only overlapping
partitions. Additive counters cannot express "any number of the same kind, none of another"
with a single counter either. What works is one counter per slot, ``partition-slot-<i>`` of
capacity ``G``, that *every* partition consumes: ``w`` on the slots it holds and ``u`` on the
others, both chosen per mode.

With modes sorted by partition count ``N_1 < N_2 < ...``: ``u_1 = 1``,
``u_j = max((N_i - 1) * u_i for i < j) + 1``, ``G = max((N_m - 1) * u_m) + 1`` and
``w_m = G - (N_m - 1) * u_m``. Then on any slot, a full set of one mode sums to
``w_m + (N_m - 1) * u_m = G`` (they fit); and a partition ``a`` of mode ``i`` with one ``b`` of a
mode ``j`` with more partitions meet on a slot that ``a`` holds and ``b`` does not (``a`` is
bigger, so such a slot exists): ``w_i + u_j = G - (N_i - 1) * u_i + u_j > G``. A mode of one
partition is the whole card and is offered as the Physical offer, which consumes ``G`` of every
slot. For 2, 4 and 8 partitions (``u`` = 1, 2, 7) ``G`` is 50; the numbers stay small.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pkg.dra.model.card import Card, PartitionMode
from pkg.dra.model.limits import SliceLimitError

SLOT_COUNTER = "partition-slot-{}"


@dataclass(frozen=True)
class ModeWeights:
    """What one partition of ``mode`` consumes of a slot counter: ``held`` on its own slots,
    ``other`` on the rest."""

    mode: PartitionMode
    held: int
    other: int


@dataclass(frozen=True)
class PartitionCounters:
    """The slot counters of a card (``slots`` of capacity ``capacity``) and each mode's weights."""

    slots: int
    capacity: int
    weights: tuple[ModeWeights, ...]

    def counters(self) -> dict[str, str]:
        """The card's slot counters at full capacity: what the whole card consumes."""
        return {SLOT_COUNTER.format(i): str(self.capacity) for i in range(self.slots)}

    def uses(self, weights: ModeWeights, index: int) -> dict[str, str]:
        """What partition ``index`` of ``weights.mode`` consumes of the slot counters."""
        start = index * weights.mode.slots
        held = range(start, start + weights.mode.slots)
        return {
            SLOT_COUNTER.format(i): str(weights.held if i in held else weights.other)
            for i in range(self.slots)
        }


def partition_counters(card: Card) -> PartitionCounters | None:
    """The counters of ``card``'s partition modes; ``None`` when it has no mode of two or more
    partitions. Raises :class:`SliceLimitError` for modes that cannot share one card (different
    slot totals, two modes of the same count)."""
    modes = sorted((m for m in card.partition_modes if m.count > 1), key=lambda m: m.count)
    if not modes:
        return None
    where = f"card {card.pci_address}"
    slots = {m.count * m.slots for m in modes}
    if len(slots) != 1 or min(m.slots for m in modes) < 1:
        raise SliceLimitError(where, f"partition modes cover different slot totals {sorted(slots)}")
    if len({m.count for m in modes}) != len(modes):
        raise SliceLimitError(where, "two partition modes have the same number of partitions")
    other: list[int] = []
    for j, _mode in enumerate(modes):
        other.append(max(((modes[i].count - 1) * other[i] for i in range(j)), default=0) + 1)
    capacity = max((m.count - 1) * u for m, u in zip(modes, other, strict=True)) + 1
    weights = tuple(
        ModeWeights(mode=m, held=capacity - (m.count - 1) * u, other=u)
        for m, u in zip(modes, other, strict=True)
    )
    return PartitionCounters(slots=slots.pop(), capacity=capacity, weights=weights)


def fits(counters: PartitionCounters, chosen: Sequence[tuple[ModeWeights, int]]) -> bool:
    """Whether partitions ``chosen`` (weights, index) fit the slot counters together: what the
    scheduler checks, for tests and the allocator's explanations."""
    totals = [0] * counters.slots
    for weights, index in chosen:
        for name, value in counters.uses(weights, index).items():
            totals[int(name.rsplit("-", 1)[1])] += int(value)
    return all(t <= counters.capacity for t in totals)
