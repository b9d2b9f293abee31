"""What holds each blocked device of a report's details, in the words the verdict uses.

The verdict says per request who holds the devices it wants (:mod:`.blockers`); the report's
details list the devices one by one, and a device's line said only the allocator's check
(``counter copy-engines of counter set gpu-0000-d8-00-0``) — true, but a reader has to know that a
card's offers share counters to learn from it that an MPS share sits on the card. Here each such
line gets the same facts the verdict is made of: the claims holding the device itself, or the
devices on its card that use up its counters, with the Pods behind them where the caller may read
them. A device nobody else holds (its own claim's other request took it) keeps the check's words.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from kubernetes.client import ResourceV1ResourceClaim

from pkg.dra.allocator import DeviceVerdict, RequestTrace
from pkg.dra.allocator.context import AllocationContext
from pkg.dra.allocator.pools import Candidate
from pkg.dra.explain.device_words import (
    Holding,
    Readable,
    card_of,
    holders_text,
    holdings,
    noun,
    plural,
    whole_card,
)
from pkg.dra.model import DeviceID, PoolID

ALLOCATED = "already allocated"
COUNTERS = "counters exhausted"
CAPACITY = "capacity"
_CAPACITY_NAME = re.compile(r"'([^']+)'")


def is_held(verdict: DeviceVerdict) -> bool:
    """Whether the verdict is about other devices or claims taking the device: held itself, its
    shared capacity used up, or its card's counters used up."""
    return verdict.reason in (ALLOCATED, COUNTERS) or (
        verdict.reason == CAPACITY and "exhausted" in verdict.detail
    )


def card_users(
    ctx: AllocationContext, sets: set[tuple[PoolID, str | None]]
) -> dict[tuple[PoolID, str], list[Candidate]]:
    """The allocated devices that draw on each of ``sets`` (pool, counter set): bounded by the
    allocated devices of the pools concerned."""
    pools = {p.id: p for p in ctx.pools if p.id in {pool for pool, _ in sets}}
    found: dict[tuple[PoolID, str], list[Candidate]] = defaultdict(list)
    allocated = ctx.allocated
    for device in {*allocated.dedicated, *allocated.shares, *allocated.consumed}:
        pool = pools.get(PoolID(device.driver, device.pool))
        cand = pool.devices.get(device.device) if pool is not None else None
        if cand is None:
            continue
        for counter_set, _ in cand.consumes:
            if (cand.pool.id, counter_set) in sets:
                found[(cand.pool.id, counter_set)].append(cand)
    return found


def hold_words(
    ctx: AllocationContext | None,
    traces: Iterable[RequestTrace],
    claims: Sequence[ResourceV1ResourceClaim],
    readable: Readable,
) -> dict[str, str]:
    """Each held device of ``traces`` (``driver/pool/device``) → what holds it, in words."""
    if ctx is None:
        return {}
    pools = {str(p.id): p for p in ctx.pools}
    blocked: list[tuple[Candidate, DeviceVerdict]] = []
    for trace in traces:
        for verdict in trace.devices:
            if not is_held(verdict):
                continue
            pool_name, _, device = verdict.device.rpartition("/")
            pool = pools.get(pool_name)
            cand = pool.devices.get(device) if pool is not None else None
            if cand is not None:
                blocked.append((cand, verdict))
    users = card_users(ctx, {(c.pool.id, v.counter_set) for c, v in blocked if v.reason == COUNTERS})
    involved = {c for c, v in blocked if v.reason != COUNTERS}
    involved.update(u for found in users.values() for u in found)
    held = holdings(claims, {c.id for c in involved})
    words: dict[str, str] = {}
    for cand, verdict in blocked:
        if verdict.reason == COUNTERS:
            text = _card_text(cand, users.get((cand.pool.id, verdict.counter_set or ""), []), held, readable)
        else:
            text = _device_text(cand, verdict, held, readable)
        if text:
            words[verdict.device] = text
    return words


def _phrase(
    devices: Iterable[Candidate], held: Mapping[DeviceID, Sequence[Holding]], readable: Readable
) -> str | None:
    by_id = {d.id: d for d in devices}
    pairs = [(h, noun(by_id[d])) for d in by_id for h in held.get(d, ())]
    if not pairs:
        return None
    phrase, _, _ = holders_text(pairs, readable=readable)
    return phrase


def _device_text(
    cand: Candidate, verdict: DeviceVerdict, held: Mapping[DeviceID, Sequence[Holding]], readable: Readable
) -> str | None:
    phrase = _phrase([cand], held, readable)
    if phrase is None:
        return None
    if verdict.reason == CAPACITY:
        name = _CAPACITY_NAME.search(verdict.detail)
        return f"no {name.group(1) if name else 'capacity'} left: held by {phrase}"
    return f"held by {phrase}"


def _card_text(
    cand: Candidate,
    users: Sequence[Candidate],
    held: Mapping[DeviceID, Sequence[Holding]],
    readable: Readable,
) -> str | None:
    phrase = _phrase(users, held, readable)
    if phrase is None:
        return None
    card = f"card {card_of(cand)}"
    if all(whole_card(u) for u in users):
        return f"{card} is held by {phrase}"
    if not whole_card(cand):  # a part of the card wanted where other parts are
        return f"its part of {card} is held by {phrase}"
    counts = ", ".join(plural(n, k) for n, k in Counter(noun(u) for u in users).most_common())
    return f"{card} holds {counts} ({phrase}); a whole card needs it free"
