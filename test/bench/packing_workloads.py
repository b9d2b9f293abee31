"""Seeded MIG workloads for the packing benchmark and the offer-order search.

A workload is a mix of MIG sizes (``1g`` … ``7g``, each a DeviceClass that takes any profile whose
name starts with it) and a release rate. Its sequence for a seed is a list of arrivals and
releases of a random live arrival. Table 2's workload is :data:`BENCH`; the search
(``packing_order.py``) also trains on the others, because an order tuned to one mix can be poor
for another, and the order we publish serves every user:

* ``bench``: 1g/2g/3g/4g/7g at 40/25/15/10/10 %, 30 % releases (table 2);
* ``all-small``: 1g and 2g only; ``all-large``: 3g, 4g and 7g only; ``bimodal``: 1g and 7g;
* each also without releases (``…, no releases``): the card fills and nothing comes back.

A workload restricted to the sizes a card model has (:meth:`Workload.on`) drops the others and
keeps the remaining weights: an A30 node never sees a 3g it could not serve anyway.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from bench.packing_search import Event


@dataclass(frozen=True)
class Workload:
    name: str
    weights: tuple[tuple[str, int], ...]  # (size, weight), sizes ascending
    release_rate: float

    def on(self, sizes: frozenset[str]) -> Workload | None:
        """The workload on a node whose cards serve only ``sizes``; None when nothing is left."""
        kept = tuple((s, w) for s, w in self.weights if s in sizes)
        return replace(self, weights=kept) if kept else None

    def sequence(self, seed: int, length: int = 200) -> list[Event]:
        """Arrivals and releases; a release names a live arrival (every strategy has satisfied
        all of them until its first failure, so the live set up to then is the same for all).

        For :data:`BENCH` this is, seed for seed, the sequence table 2 has always used."""
        rng = random.Random(seed)
        sizes = [s for s, _ in self.weights]
        weights = [w for _, w in self.weights]
        events: list[Event] = []
        live: list[int] = []
        arrivals = 0
        while len(events) < length:
            if live and rng.random() < self.release_rate:
                events.append(Event(-1, release=live.pop(rng.randrange(len(live)))))
            else:
                events.append(Event(arrivals, size=rng.choices(sizes, weights)[0]))
                live.append(arrivals)
                arrivals += 1
        return events


BENCH = Workload("bench", (("1g", 40), ("2g", 25), ("3g", 15), ("4g", 10), ("7g", 10)), 0.3)
_MIXES = (
    BENCH,
    Workload("all-small", (("1g", 60), ("2g", 40)), 0.3),
    Workload("all-large", (("3g", 40), ("4g", 30), ("7g", 30)), 0.3),
    Workload("bimodal", (("1g", 70), ("7g", 30)), 0.3),
)
WORKLOADS: tuple[Workload, ...] = _MIXES + tuple(
    replace(w, name=f"{w.name}, no releases", release_rate=0.0) for w in _MIXES
)
