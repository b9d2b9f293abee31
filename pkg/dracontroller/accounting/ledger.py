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

Sharded, so that it fits a store of bounded objects at any cluster size: open allocations are
split into :data:`SHARDS` parts by a hash of their claim's UID (a claim's devices stay together),
and each part keeps the released seconds and allocation counts of the allocations it closed and
opened. A part is a unit of persistence (:mod:`.store`): closing an allocation moves its time from
``open`` to ``released`` *within one part*, so one write of that part is atomic for it, and a pass
writes only the parts it changed (:attr:`Ledger.dirty`). ``as_of`` is one number for all parts,
kept in the small head; advancing it changes no part. Why the head and the parts may be written
one by one without breaking the rule above: ``as_of`` only grows, and each part only grows in
what it contributes at a given ``as_of`` (a close moves at least ``as_of - start`` into
``released``, an open adds at least 0), so any mix of old and new parts with any persisted
``as_of`` at least as new as the one exported is at least what was exported before.

Pure and single-threaded: the accountant owns it; the store serialises it (:meth:`part_json`,
:meth:`from_parts`).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any

FORMAT_VERSION = 2
"""2: a head (``as_of``, the shard count) and one document per part; 1: one document for all."""
SHARDS = 256
"""Parts of the ledger. What bounds the count from below is not room but what a pass writes: a
part changed by one allocation is written whole, so a pass touching ``k`` claims writes about
``min(k, SHARDS)`` parts of ``open / SHARDS`` allocations each. At ~200 bytes of JSON per open
device allocation (~45 stored, compressed), 256 parts hold 100,000 open allocations in ~18 KB
each, and room is no limit (each part may take 900,000 bytes). From above: a new leader reads
every part once, and the Role names each one."""


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
class Part:
    """One shard: its open allocations, and what the allocations it opened and closed add up to."""

    open: dict[str, OpenAllocation] = field(default_factory=dict)
    released: dict[Usage, float] = field(default_factory=dict)
    made: dict[Made, int] = field(default_factory=dict)


def shard_of(key: str, shards: int = SHARDS) -> int:
    """The part of an open allocation's key (``<claim UID>/…``): a stable hash of the claim UID,
    the same in every process and Python version (``hash()`` of a str is salted per process)."""
    return zlib.crc32(key.split("/", 1)[0].encode()) % shards


@dataclass
class Ledger:
    as_of: float
    shards: int = SHARDS
    parts: list[Part] = field(default_factory=list)
    dirty: set[int] = field(default_factory=set, compare=False)  # parts changed since the last save
    open: dict[str, OpenAllocation] = field(default_factory=dict, init=False, compare=False)

    def __post_init__(self) -> None:
        if not self.parts:
            self.parts = [Part() for _ in range(self.shards)]
        if len(self.parts) != self.shards:
            raise ValueError(f"{len(self.parts)} parts for {self.shards} shards")
        self.open = {key: held for part in self.parts for key, held in part.open.items()}

    @property
    def released(self) -> dict[Usage, float]:
        return _sum(part.released for part in self.parts)

    @property
    def made(self) -> dict[Made, int]:
        return _sum(part.made for part in self.parts)

    def open_allocation(self, key: str, held: OpenAllocation) -> None:
        """Charges ``key`` from ``held.start`` on and counts one allocation made."""
        if key in self.open:
            return
        i = shard_of(key, self.shards)
        part = self.parts[i]
        self.open[key] = part.open[key] = held
        usage = held.usage
        made = Made(usage.device_class, usage.node, usage.device_type)
        part.made[made] = part.made.get(made, 0) + 1
        self.dirty.add(i)

    def close(self, key: str, *, end: float) -> float:
        """Moves ``key``'s time up to ``end`` (never before ``as_of``: exported time stays) to the
        released seconds of its part; returns how long it was held."""
        i = shard_of(key, self.shards)
        part = self.parts[i]
        held = part.open.pop(key)
        del self.open[key]
        seconds = max(0.0, max(end, self.as_of) - held.start)
        part.released[held.usage] = part.released.get(held.usage, 0.0) + seconds
        self.dirty.add(i)
        return seconds

    def advance(self, now: float) -> None:
        """Charges open allocations up to ``now`` (a clock stepping back changes nothing)."""
        self.as_of = max(self.as_of, now)

    def seconds(self) -> dict[Usage, float]:
        """Device-seconds per label set, as of ``as_of``."""
        totals = self.released
        for held in self.open.values():
            totals[held.usage] = totals.get(held.usage, 0.0) + max(0.0, self.as_of - held.start)
        return totals

    # --- persistence -------------------------------------------------------------------------
    def head_json(self) -> str:
        return json.dumps({"version": FORMAT_VERSION, "asOf": self.as_of, "shards": self.shards})

    def part_json(self, i: int) -> str:
        part = self.parts[i]
        usages = sorted({*part.released, *(held.usage for held in part.open.values())})
        index = {usage: n for n, usage in enumerate(usages)}
        return json.dumps(
            {
                "version": FORMAT_VERSION,
                "shard": i,
                "usages": [list(_fields(u)) for u in usages],
                "released": [[index[u], s] for u, s in sorted(part.released.items())],
                "open": [
                    [k, index[h.usage], h.start, h.claim, h.device, h.card]
                    for k, h in sorted(part.open.items())
                ],
                "made": [[*_fields(m), n] for m, n in sorted(part.made.items())],
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_parts(cls, head: str, parts: list[str | None], *, shards: int = SHARDS) -> Ledger:
        """The ledger of a head and its parts' documents (None: a part never written) — or of a
        head in format 1, which held everything (``parts`` is then ignored). Parts are spread over
        ``shards`` anew when the stored count differs, and marked dirty then, as after format 1,
        so the next save writes them all. Raises ValueError naming what is wrong."""
        try:
            data: dict[str, Any] = json.loads(head)
            version = data.get("version")
            if version == 1:
                loaded = [_part(data)]
            elif version == FORMAT_VERSION:
                if int(data["shards"]) != len(parts):
                    raise ValueError(f"{len(parts)} parts read, the head names {data['shards']}")
                loaded = [_part(json.loads(text)) if text else Part() for text in parts]
            else:
                raise ValueError(f"format version {version!r}, expected {FORMAT_VERSION}")
            as_of = float(data["asOf"])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ValueError(f"unreadable allocation ledger: {exc!r}") from exc
        if len(loaded) == shards:
            return cls(as_of=as_of, shards=shards, parts=loaded)
        ledger = cls(as_of=as_of, shards=shards)
        for old in loaded:
            for key, held in old.open.items():
                ledger.parts[shard_of(key, shards)].open[key] = held
            for n, (usage, seconds) in enumerate(old.released.items()):  # totals stay where they land
                part = ledger.parts[n % shards].released
                part[usage] = part.get(usage, 0.0) + seconds
            for n, (made, count) in enumerate(old.made.items()):
                part_made = ledger.parts[n % shards].made
                part_made[made] = part_made.get(made, 0) + count
        ledger.open = {key: held for part in ledger.parts for key, held in part.open.items()}
        ledger.dirty = set(range(shards))
        return ledger


def head_format(head: str) -> object:
    """The format version a head document says it is in (None when it says none or is unreadable)."""
    try:
        data = json.loads(head)
    except ValueError:
        return None
    return data.get("version") if isinstance(data, dict) else None


def _part(data: dict[str, Any]) -> Part:
    usages = [Usage(*map(str, u)) for u in data["usages"]]
    return Part(
        released={usages[i]: float(s) for i, s in data["released"]},
        open={
            str(k): OpenAllocation(usage=usages[i], start=float(s), claim=c, device=d, card=g)
            for k, i, s, c, d, g in data["open"]
        },
        made={Made(str(c), str(n), str(t)): int(count) for c, n, t, count in data["made"]},
    )


def _sum(maps: Any) -> dict[Any, Any]:
    totals: dict[Any, Any] = {}
    for values in maps:
        for key, value in values.items():
            totals[key] = totals.get(key, 0) + value
    return totals


def _fields(labels: Usage | Made) -> tuple[str, ...]:
    if isinstance(labels, Usage):
        return (labels.device_class, labels.device_type, labels.node, labels.namespace)
    return (labels.device_class, labels.node, labels.device_type)


__all__ = [
    "FORMAT_VERSION",
    "SHARDS",
    "Ledger",
    "Made",
    "OpenAllocation",
    "Part",
    "Usage",
    "head_format",
    "shard_of",
]
