"""How a claim's constraints split the devices that fit: the part of ``explain`` about constraints.

A claim whose every request has fitting devices can still be unallocatable: ``matchAttribute``
wants one common value, and the devices that fit may carry different ones — a GPU free under PCIe
root ``pci0000:4a`` and a NIC free only under ``pci0000:ca``, two cards free in two NVLink domains.
Listing the devices alone does not show that, so for each constraint this groups the fitting
devices of the requests it constrains by their value and says, per group, how many fit per
request against how many the request needs.

Groups are per node as well as per value: topology values such as ``pci0000:15`` are only unique
within a node, and a claim's node-local devices all come from one node anyway. A device without
the attribute is its own group, which never satisfies the constraint (as in the allocator).

* ``matchAttribute`` can be met when some group has, for every request it constrains, as many
  fitting devices as the request needs (for ``firstAvailable``: for one of its subrequests).
* ``distinctAttribute`` can be met when one node has at least as many distinct values as the
  constrained requests need devices together.

This is a diagnosis of the state before the claim takes anything, like the rest of ``explain``:
"can be met" is necessary, not sufficient (the same device cannot serve two requests, and
counters shared by devices of one card run out together); "cannot be met" is certain, and then it
is the reason the claim is pending.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pkg.dra.allocator.constraints import Constraint, DistinctAttribute, MatchAttribute, lookup_attribute
from pkg.dra.allocator.pools import Candidate
from pkg.dra.allocator.requests import Alternative, RequestPlan

MISSING = "(attribute missing)"


@dataclass(frozen=True, slots=True)
class RequestCount:
    request: str  # the request or request/subrequest
    fitting: int
    needed: int


@dataclass(frozen=True, slots=True)
class ValueGroup:
    node: str  # "" for devices that are not node-local
    value: str  # the attribute's value, or MISSING
    counts: tuple[RequestCount, ...]
    enough: bool  # every constrained request has enough fitting devices in this group


@dataclass(frozen=True, slots=True)
class ConstraintTrace:
    index: int
    kind: str  # matchAttribute | distinctAttribute
    attribute: str
    requests: tuple[str, ...]  # the requests it names; empty: all of them
    met: bool
    groups: tuple[ValueGroup, ...]

    @property
    def label(self) -> str:
        scope = ", ".join(self.requests) if self.requests else "all requests"
        return f"constraint #{self.index} {self.kind} {self.attribute} over {scope}"


def trace_constraints(
    constraints: Sequence[Constraint],
    plans: Sequence[RequestPlan],
    fitting: Mapping[str, Sequence[Candidate]],
) -> tuple[ConstraintTrace, ...]:
    """One trace per constraint; ``fitting`` maps an alternative's result name to the devices
    that fit it on their own (explain's ``fits`` verdict)."""
    return tuple(_trace(index, c, plans, fitting) for index, c in enumerate(constraints))


def _trace(
    index: int,
    constraint: Constraint,
    plans: Sequence[RequestPlan],
    fitting: Mapping[str, Sequence[Candidate]],
) -> ConstraintTrace:
    assert isinstance(constraint, MatchAttribute | DistinctAttribute)
    constrained = [
        [alt for alt in plan.alternatives if constraint.applies(alt.request_name, alt.subrequest_name)]
        for plan in plans
    ]
    constrained = [alts for alts in constrained if alts]
    grouped: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for alts in constrained:
        for alt in alts:
            for cand in fitting.get(alt.result_name, ()):
                found = lookup_attribute(cand, constraint.attribute)
                value = MISSING if found is None or found[0] == "unknown" else str(found[1])
                grouped[(cand.node_name or "", value)][alt.result_name] += 1
    groups = tuple(
        _group(node, value, counts, constrained) for (node, value), counts in sorted(grouped.items())
    )
    if isinstance(constraint, MatchAttribute):
        kind, met = "matchAttribute", any(g.enough for g in groups)
    else:
        kind = "distinctAttribute"
        needed = sum(min(_needed(a) for a in alts) for alts in constrained)
        per_node: dict[str, int] = defaultdict(int)
        for g in groups:
            if g.value != MISSING:
                per_node[g.node] += 1
        met = any(n >= needed for n in per_node.values())
    return ConstraintTrace(index, kind, constraint.attribute, tuple(sorted(constraint.requests)), met, groups)


def _group(
    node: str, value: str, counts: Mapping[str, int], constrained: list[list[Alternative]]
) -> ValueGroup:
    rows = tuple(
        RequestCount(alt.result_name, counts.get(alt.result_name, 0), _needed(alt))
        for alts in constrained
        for alt in alts
    )
    enough = value != MISSING and all(
        any(counts.get(alt.result_name, 0) >= _needed(alt) for alt in alts) for alts in constrained
    )
    return ValueGroup(node, value, rows, enough)


def _needed(alt: Alternative) -> int:
    return 1 if alt.all_devices else alt.count
