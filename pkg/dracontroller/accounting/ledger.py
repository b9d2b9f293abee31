"""The allocation ledger: device-seconds and allocation counts that survive restarts.

A Prometheus counter must never go down, or ``increase()`` reads the drop as a reset and counts
the whole value again; and device-seconds must not depend on how long one process ran. So the
counters are not kept in process memory: the ledger holds, per label set, the seconds of
allocations already released, the allocations still open (each with its start), and the time
``as_of`` up to which open allocations have been charged. The exported value is

    released seconds + sum over open allocations of (as_of - start)

and the accountant exports only a ledger it has *persisted* first. Whatever a restarted or new
leader loads is therefore at least what was ever exported, and it continues from there: an
allocation still held is charged from its start, through the downtime; one released while nobody
watched is closed at the best release time known (never before ``as_of``), so the value never drops.

Pure and single-threaded: the accountant owns it; the store serialises it (:meth:`to_json`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

FORMAT_VERSION = 1


@dataclass(frozen=True, order=True)
class Usage:
    """Labels of ``gpu_dra_allocation_seconds_total``."""

    device_class: str
    device_type: str
    node: str
    namespace: str


@dataclass(frozen=True, order=True)
class Made:
    """Labels of ``gpu_dra_allocations_total``."""

    device_class: str
    node: str
    device_type: str


@dataclass(frozen=True)
class OpenAllocation:
    """An allocation still charged; ``claim``, ``device`` and ``card`` name it in the release Event."""

    usage: Usage
    start: float
    claim: str = ""
    device: str = ""
    card: str = ""


@dataclass
class Ledger:
    as_of: float
    open: dict[str, OpenAllocation] = field(default_factory=dict)
    released: dict[Usage, float] = field(default_factory=dict)
    made: dict[Made, int] = field(default_factory=dict)

    def open_allocation(self, key: str, held: OpenAllocation) -> None:
        """Charges ``key`` from ``held.start`` on and counts one allocation made."""
        if key in self.open:
            return
        self.open[key] = held
        usage = held.usage
        made = Made(usage.device_class, usage.node, usage.device_type)
        self.made[made] = self.made.get(made, 0) + 1

    def close(self, key: str, *, end: float) -> float:
        """Moves ``key``'s time up to ``end`` (never before ``as_of``: exported time stays) to the
        released seconds; returns how long it was held."""
        held = self.open.pop(key)
        seconds = max(0.0, max(end, self.as_of) - held.start)
        self.released[held.usage] = self.released.get(held.usage, 0.0) + seconds
        return seconds

    def advance(self, now: float) -> None:
        """Charges open allocations up to ``now`` (a clock stepping back changes nothing)."""
        self.as_of = max(self.as_of, now)

    def seconds(self) -> dict[Usage, float]:
        """Device-seconds per label set, as of ``as_of``."""
        totals = dict(self.released)
        for held in self.open.values():
            totals[held.usage] = totals.get(held.usage, 0.0) + max(0.0, self.as_of - held.start)
        return totals

    def to_json(self) -> str:
        usages = sorted({*self.released, *(held.usage for held in self.open.values())})
        index = {usage: i for i, usage in enumerate(usages)}
        return json.dumps(
            {
                "version": FORMAT_VERSION,
                "asOf": self.as_of,
                "usages": [list(_fields(u)) for u in usages],
                "released": [[index[u], s] for u, s in sorted(self.released.items())],
                "open": [
                    [k, index[h.usage], h.start, h.claim, h.device, h.card]
                    for k, h in sorted(self.open.items())
                ],
                "made": [[*_fields(m), n] for m, n in sorted(self.made.items())],
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> Ledger:
        """The ledger in ``text``; raises ValueError naming what is wrong."""
        try:
            data: dict[str, Any] = json.loads(text)
            if data.get("version") != FORMAT_VERSION:
                raise ValueError(f"format version {data.get('version')!r}, expected {FORMAT_VERSION}")
            usages = [Usage(*map(str, u)) for u in data["usages"]]
            return cls(
                as_of=float(data["asOf"]),
                released={usages[i]: float(s) for i, s in data["released"]},
                open={
                    str(k): OpenAllocation(usage=usages[i], start=float(s), claim=c, device=d, card=g)
                    for k, i, s, c, d, g in data["open"]
                },
                made={Made(str(c), str(n), str(t)): int(count) for c, n, t, count in data["made"]},
            )
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ValueError(f"unreadable allocation ledger: {exc!r}") from exc


def _fields(labels: Usage | Made) -> tuple[str, ...]:
    if isinstance(labels, Usage):
        return (labels.device_class, labels.device_type, labels.node, labels.namespace)
    return (labels.device_class, labels.node, labels.device_type)


__all__ = ["FORMAT_VERSION", "Ledger", "Made", "OpenAllocation", "Usage"]
