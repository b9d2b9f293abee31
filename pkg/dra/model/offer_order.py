"""The order we publish MIG offers in: the packing policy of every claim the kube-scheduler allocates.

The scheduler's structured allocator has no device scoring: it walks pools by driver and name, a
pool's slices by name and each slice's devices as listed, and takes the first device that fits
(``GatherPools`` sorts pools and slices "to ensure a deterministic allocation order. Because the
allocator uses a first-fit search, this allows driver authors to influence prioritization
through their naming conventions":
https://github.com/kubernetes/kubernetes/tree/v1.37.1/staging/src/k8s.io/dynamic-resource-allocation/structured).
So for a Pod that asks for a MIG size, which instance it gets — and how well the node's cards
pack after many arrivals and releases — is decided by the order of our devices and slices.

That order is data, found by a search over seeded workloads (``test/bench/packing_order.py``,
docs/allocator.md "The publication order") and generated into :mod:`.offer_order_table`:

* per card model, the MIG offers of one card, first first (:func:`mig_position`). For every
  model shipped the search kept the rule we had (:func:`previous_key`): nothing it found did
  better on seeds it had not trained on;
* the node order of card models and the rule that arranges a node's cards by it
  (:func:`node_order`): the models with the fewest and smallest profiles first (A30, A100 40GB,
  A100 80GB and H100, H200, B200), so small requests fill those and the cards that alone can
  hold a 3g or 7g stay whole. Cards used to go in PCI order, which on a node of H100s, A100s and
  A30s let 1g and 2g requests fragment an H100 first.

A card model is recognised by the names of its MIG profiles (what the search keyed it by,
:func:`signature`): A100 80GB and H100 80GB share their names and so one row. A card no row
matches — a new model, or one whose profiles the driver reports differently — keeps the rule the
search started from (:func:`previous_key`): smallest instances first, each profile's placements
from the highest start down. Adding a model is: add it to the MIG tables, run the search with
``--write``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pkg.dra.model.card import Card, MigProfileSpec, Placement
from pkg.dra.model.offer_order_table import NODE_RULE, ORDER


@dataclass(frozen=True)
class OrderEntry:
    """One row of the table: a card model (``label``), the MIG profile names that identify it,
    and its MIG offers as ``(profile name, placement start)`` in publication order."""

    label: str
    profiles: tuple[str, ...]
    offers: tuple[tuple[str, int], ...]


def signature(card: Card) -> str:
    """The key a card is looked up by: its MIG profile names, sorted, joined by commas."""
    return ",".join(sorted(p.name for p in card.mig_profiles))


@functools.cache
def entries() -> Mapping[str, tuple[int, OrderEntry]]:
    """Rows by signature, with their rank in the node order."""
    rows = [OrderEntry(label, tuple(profiles), tuple(offers)) for label, profiles, offers in ORDER]
    return {",".join(sorted(r.profiles)): (rank, r) for rank, r in enumerate(rows)}


def node_order(cards: Sequence[Card]) -> list[Card]:
    """``cards`` in publication order.

    First the cards without MIG offers (no MIG, or MIG not allowed on the node): a whole-card
    request then takes one of them and leaves the partitionable cards to MIG requests, whose
    packing they cannot disturb since they offer no MIG instance. Then the cards of the models
    the table has, arranged by :data:`NODE_RULE` — ``grouped``: model by model in row order;
    ``round-robin``: the first card of every model in row order, then the second, and so on.
    Last the cards of models it does not have. PCI address order within each of these.
    """
    by_pci = sorted(cards, key=lambda c: c.pci_address)
    nth: dict[str, int] = {}
    keys: list[tuple[int, ...]] = []
    for position, card in enumerate(by_pci):
        found = entries().get(signature(card))
        if not card.mig_allowed or not card.mig_profiles:
            keys.append((0, position))
        elif found is None:
            keys.append((2, position))
        else:
            n = nth[found[1].label] = nth.get(found[1].label, -1) + 1
            keys.append((1, found[0], n) if NODE_RULE == "grouped" else (1, n, found[0]))
    return [c for _, c in sorted(zip(keys, by_pci, strict=True), key=lambda item: item[0])]


def previous_key(profile: MigProfileSpec, placement: Placement) -> tuple[int, ...]:
    """The rule the search started from, and kept for every model it has a row for (and so for
    models without one): smallest instances first (by memory slices, compute slices, memory,
    media engines, profile ID), each profile's placements from the highest start down, so small
    instances pack at the top of the card and keep the low starts, where the only placements of
    the large profiles are, free."""
    return (
        placement.size,
        profile.slice_count,
        profile.memory_mib,
        profile.engines.media(),
        profile.profile_id,
        -placement.start,
    )


MigKey = Callable[[tuple[MigProfileSpec, Placement]], tuple[int, ...]]


def mig_position(card: Card) -> MigKey:
    """A sort key for ``(profile, placement)`` pairs of ``card``: its row's order, offers the row
    does not list after those it does (by :func:`previous_key`)."""
    found = entries().get(signature(card))
    listed = {k: i for i, k in enumerate(found[1].offers)} if found else {}
    return functools.partial(_position, listed)


def previous_position(card: Card) -> MigKey:
    """The sort key of the rule before the search (table 2's "before" row)."""
    return lambda item: previous_key(*item)


def nvml_position(card: Card) -> MigKey:
    """The order of a driver that publishes NVML's list: profiles as :func:`previous_key` has
    them, each profile's placements by ascending start, as NVML lists them (table 2's row)."""
    return lambda item: (*previous_key(*item)[:-1], item[1].start)


def by_pci(cards: Sequence[Card]) -> list[Card]:
    """``cards`` in PCI address order: the node order before the search."""
    return sorted(cards, key=lambda c: c.pci_address)


def _position(
    listed: Mapping[tuple[str, int], int], item: tuple[MigProfileSpec, Placement]
) -> tuple[int, ...]:
    profile, placement = item
    index = listed.get((profile.name, placement.start))
    return (0, index) if index is not None else (1, *previous_key(profile, placement))
