"""The offline optimum of a MIG arrival/release sequence, as an integer program solved by HiGHS.

Given the whole sequence in advance (arrivals of a MIG size, releases of an earlier arrival), the
optimum is the longest prefix of arrivals for which *some* choice of one device per arrival keeps
every card within its counters at every moment — the counters the scheduler and our allocator
enforce (``memory``, ``memory-slice-N``, the engine counters), read from the offers as published.
A device, once chosen, stays until its release (MIG instances do not move), which is what makes
the online problem hard and the offline one an assignment over time:

* ``x[r, d]`` = arrival ``r`` holds device ``d`` (one of its size's devices), ``z[r]`` = ``r`` is
  satisfied; ``sum_d x[r, d] = z[r]``; ``z[r + 1] <= z[r]`` (a prefix); maximise ``sum z``;
* at each arrival's moment, for each card and counter: what the live arrivals' devices consume
  stays within the card's value.

The live set only grows at arrivals, so checking those moments checks every moment. Solved to
proven optimality (HiGHS's MIP gap 0); :func:`optimum` reports whether it was.

One reduction keeps the program small without changing its optimum: of two devices on one card
where one consumes at most what the other does on every counter, the larger is left out. Swapping
it for the smaller in any solution stays feasible, because every MIG device holds at least one
``memory-slice-N`` (value 1), the smaller's slices are among the larger's, so no other live
arrival can hold the smaller device while one holds the larger.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import highspy

from pkg.dra.allocator import parse_quantity
from pkg.dra.model.offers import CardOffers


@dataclass(frozen=True)
class Event:
    """An arrival (``index`` its number, ``size`` like ``"3g"``) or the release of arrival ``release``."""

    index: int  # arrival number, or -1 for a release
    size: str = ""
    release: int | None = None


@dataclass(frozen=True)
class Device:
    card: int
    name: str
    use: dict[str, int]  # counter -> amount, in the counter's own unit (see _units)


@dataclass(frozen=True)
class Optimum:
    satisfied: int  # arrivals satisfied before the first failure
    exact: bool  # HiGHS proved it optimal
    arrivals: int  # arrivals the program looked at (the horizon)


def _units(cards: Sequence[CardOffers]) -> list[dict[str, tuple[int, int]]]:
    """Per card, each counter's capacity and the divisor that makes its values small integers
    (memory is counted in nano-units; the greatest common divisor keeps the program well scaled)."""
    out = []
    for c in cards:
        values: dict[str, list[int]] = {
            n: [parse_quantity(v.value).nanos] for n, v in c.counter_set.counters.items()
        }
        for offer in c.offers:
            for usage in offer.device.consumes_counters or ():
                for n, v in usage.counters.items():
                    values[n].append(parse_quantity(v.value).nanos)
        out.append({n: (vs[0], math.gcd(*vs)) for n, vs in values.items()})
    return out


def devices_by_size(cards: Sequence[CardOffers], sizes: Sequence[str]) -> dict[str, list[Device]]:
    """Per MIG size, the devices that serve it, minus those another device on the card dominates."""
    units = _units(cards)
    found: dict[str, list[Device]] = {s: [] for s in sizes}
    for index, c in enumerate(cards):
        for offer in c.offers:
            size = offer.profile.name.split(".")[0] if offer.profile else ""
            if size in found:
                [usage] = offer.device.consumes_counters or []
                use = {
                    n: parse_quantity(v.value).nanos // units[index][n][1] for n, v in usage.counters.items()
                }
                found[size].append(Device(index, offer.name, use))
    return {size: [d for d in ds if not _dominated(d, ds)] for size, ds in found.items()}


def _dominated(d: Device, others: Sequence[Device]) -> bool:
    def at_most(a: Device, b: Device) -> bool:
        return (
            a.card == b.card
            and all(a.use.get(n, 0) <= v for n, v in b.use.items())
            and set(a.use) <= set(b.use)
        )

    return any(o is not d and at_most(o, d) and (not at_most(d, o) or o.name < d.name) for o in others)


def optimum(
    cards: Sequence[CardOffers], events: Sequence[Event], *, horizon: int, time_limit: float = 120.0
) -> Optimum:
    """The longest satisfiable prefix among the first ``horizon`` arrivals."""
    arrivals = [e for e in events if e.release is None][:horizon]
    sizes = sorted({e.size for e in arrivals})
    candidates = devices_by_size(cards, sizes)
    units = _units(cards)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("time_limit", time_limit)
    z = [h.addBinary() for _ in arrivals]
    x = {(a.index, d.name): (d, h.addBinary()) for a in arrivals for d in candidates[a.size]}
    for a in arrivals:
        h.addConstr(sum(var for (r, _), (_, var) in x.items() if r == a.index) == z[a.index])
    for r in range(1, len(arrivals)):
        h.addConstr(z[r] <= z[r - 1])
    live: list[int] = []
    last = arrivals[-1].index if arrivals else -1
    for e in events:
        if e.release is not None:
            live.remove(e.release)
            continue
        if e.index > last:
            break
        live.append(e.index)
        for card, counters in enumerate(units):
            held = [(d, var) for (r, _), (d, var) in x.items() if r in live and d.card == card]
            for counter, (capacity, unit) in counters.items():
                terms = [d.use[counter] * var for d, var in held if d.use.get(counter)]
                if terms and sum(d.use[counter] for d, _ in held if d.use.get(counter)) > capacity // unit:
                    h.addConstr(sum(terms) <= capacity // unit)
    h.maximize(sum(z))
    status = h.getModelStatus()
    satisfied = round(sum(h.val(v) for v in z))
    return Optimum(satisfied, status == highspy.HighsModelStatus.kOptimal, len(arrivals))
