"""What keeps the matching devices of a request from being free, per kind of blocker.

A request can have enough devices that match it on a node and still get none: other claims hold
them, the card they sit on is used as another kind of device (a whole card wanted where MIG
devices are), a taint is not tolerated, or the request asks more capacity than a device offers.
The allocator's trace names the check (``counters exhausted: counter copy-engines of counter set
gpu-0000-d8-00-0``); here that becomes the devices and claims behind it, read from the same
context: the allocated devices that draw on the same counter set, and the claims that hold them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.client import ResourceV1ResourceClaim

from pkg.dra.allocator import DeviceVerdict
from pkg.dra.allocator.context import AllocationContext
from pkg.dra.allocator.pools import Candidate
from pkg.dra.allocator.requests import Alternative
from pkg.dra.allocator.taints import blocking_taint
from pkg.dra.explain.device_holds import card_users
from pkg.dra.explain.device_words import (
    Readable,
    are,
    card_of,
    holders_text,
    holdings,
    mode_of,
    noun,
    plural,
    whole_card,
)
from pkg.dra.explain.verdict import Cause, CauseKind, Facts
from pkg.dra.model import DeviceID, PoolID

Blocked = list[tuple[Candidate, DeviceVerdict]]
_HOLD_REMEDY = "wait for those claims to be released, or free them"
_MAX_CARDS = 3


@dataclass(frozen=True)
class Shortfall:
    """A request whose devices match but are not free enough: what its blocker causes share."""

    ctx: AllocationContext
    alt: Alternative
    claims: Sequence[ResourceV1ResourceClaim]
    readable: Readable
    what: str  # the matching devices in words ("whole card")
    facts: Facts

    @property
    def name(self) -> str:
        return self.alt.result_name

    @property
    def head(self) -> str:
        """The counts every blocker sentence starts with."""
        f = self.facts
        return f"{f.asked} asked, {f.matching} match, {f.free_on_one_node} free on one node"

    def cause(self, kind: CauseKind, text: str, remedy: str, *, retry: bool, **facts: Any) -> Cause:
        return Cause(
            kind, self.name, f"{self.head}; {text}", remedy, retry=retry, facts=self.facts.with_(**facts)
        )

    def holders(self, holds: Iterable[Candidate]) -> tuple[str, list[str], int]:
        devices = {c.id: c for c in holds}
        who = holdings(self.claims, set(devices))
        pairs = ((h, noun(devices[d])) for d, hs in who.items() for h in hs)
        return holders_text(pairs, readable=self.readable)


def blockers(
    short: Shortfall, eligible: Sequence[Candidate], verdicts: dict[str, DeviceVerdict]
) -> list[Cause]:
    """One cause per kind of blocker among the matching devices that do not fit."""
    blocked: dict[str, Blocked] = defaultdict(list)
    for cand in eligible:
        verdict = verdicts.get(str(cand.id))
        if verdict is not None and verdict.reason != "fits":
            blocked[verdict.reason].append((cand, verdict))
    capacity = blocked.get("capacity", [])
    causes: list[Cause] = []
    held = blocked.get("already allocated", []) + [b for b in capacity if "exhausted" in b[1].detail]
    if held:
        phrase, named, hidden = short.holders(c for c, _ in held)
        causes.append(
            short.cause(
                CauseKind.HELD,
                f"{plural(short.what, len(held))} {are(len(held))} held by {phrase}",
                _HOLD_REMEDY,
                retry=True,
                blocked=len(held),
                holders=tuple(named),
                hidden_holders=hidden,
            )
        )
    causes.extend(_counters(short, blocked.get("counters exhausted", [])))
    if blocked.get("taint"):
        causes.append(_tainted(short, blocked["taint"]))
    too_large = [b for b in capacity if "exhausted" not in b[1].detail]
    if too_large:
        detail = too_large[0][1].detail
        causes.append(
            short.cause(
                CauseKind.TOO_LARGE,
                f"{plural(short.what, len(too_large))} cannot hold what the request asks: {detail}",
                "ask for less capacity per device",
                retry=False,
                problem=detail,
            )
        )
    problems = list(_pool_problems(short.ctx))
    if problems and not causes:
        causes.append(
            short.cause(
                CauseKind.POOL_UNAVAILABLE,
                problems[0],
                "wait for the driver to finish publishing its devices",
                retry=True,
            )
        )
    if not causes:  # the free devices are spread over nodes
        causes.append(
            short.cause(
                CauseKind.TOO_FEW,
                "the free ones are on different nodes",
                f"ask for at most {short.facts.free_on_one_node}, or free devices on one node",
                retry=True,
            )
        )
    return causes


def _pool_problems(ctx: AllocationContext) -> Iterable[str]:
    for pool in ctx.pools:
        if pool.incomplete:
            yield f"pool {pool.id} is being republished (generation {pool.generation})"
        elif pool.invalid is not None:
            yield f"pool {pool.id} is invalid: {pool.invalid}"


def _counters(short: Shortfall, blocked: Blocked) -> list[Cause]:
    """Devices whose card's counters are used up: by devices of another mode (a whole card wanted
    where MIG devices are), or by devices of the same mode (held: a MIG placement overlapping one
    that is taken, a share's card held by a whole-card claim of the same mode)."""
    if not blocked:
        return []
    consumers = card_users(short.ctx, {(c.pool.id, v.counter_set) for c, v in blocked if v.counter_set})
    # Keyed by pool too: card names (their PCI addresses) repeat from node to node.
    other: dict[tuple[PoolID, str], tuple[Candidate, list[Candidate]]] = {}
    same: dict[DeviceID, Candidate] = {}
    for cand, verdict in blocked:
        users = consumers.get((cand.pool.id, verdict.counter_set or ""), [])
        if any(mode_of(u) != mode_of(cand) for u in users):
            other.setdefault((cand.pool.id, card_of(cand)), (cand, users))
        else:
            same.update((u.id, u) for u in users)
    causes = []
    if other:
        shown = list(other.items())[:_MAX_CARDS]
        cards = []
        for (_, card), (wanted, users) in shown:
            held = ", ".join(plural(n, k) for n, k in Counter(noun(u) for u in users).most_common())
            where = f" on node {wanted.node_name}" if wanted.node_name else ""
            cards.append(f"card {card}{where} holds {held}")
        more = f" (and {plural('more card', len(other) - _MAX_CARDS)})" if len(other) > _MAX_CARDS else ""
        wanted = shown[0][1][0]
        needs = "the card free" if whole_card(wanted) else "its part of the card free"
        phrase, named, hidden = short.holders(u for _, (_, users) in shown for u in users)
        causes.append(
            short.cause(
                CauseKind.OTHER_MODE,
                f"{'; '.join(cards)}{more}; a {noun(wanted)} needs {needs} (held by {phrase})",
                "release those devices, or ask for the kind of device the card is used as",
                retry=True,
                cards=tuple(card for (_, card), _ in shown),
                holders=tuple(named),
                hidden_holders=hidden,
            )
        )
    rest = [c for c, _ in blocked if (c.pool.id, card_of(c)) not in other]
    if rest:
        phrase, named, hidden = short.holders(same.values())
        causes.append(
            short.cause(
                CauseKind.HELD,
                f"{plural(short.what, len(rest))} {are(len(rest))} blocked by {phrase} on the same card",
                _HOLD_REMEDY,
                retry=True,
                blocked=len(rest),
                holders=tuple(named),
                hidden_holders=hidden,
            )
        )
    return causes


def _tainted(short: Shortfall, tainted: Blocked) -> Cause:
    taints: dict[str, str | None] = {}
    for cand, _ in tainted:
        taint = blocking_taint(cand.device.taints, short.alt.tolerations)
        if taint is not None:
            since = taint.time_added.isoformat() if taint.time_added is not None else None
            taints.setdefault(f"{taint.key}={taint.value or ''}:{taint.effect}", since)
    listed = "; ".join(f"{label} (since {since})" if since else label for label, since in taints.items())
    key = next(iter(taints), "").split("=", 1)[0]
    return short.cause(
        CauseKind.TAINTED,
        f"{plural(short.what, len(tainted))} {are(len(tainted))} tainted {listed}, "
        "which the request does not tolerate",
        f"wait for the taint to be removed, or tolerate {key} in the request",
        retry=True,
        blocked=len(tainted),
        taints=tuple(f"{t} since {s}" if s else t for t, s in taints.items()),
    )
