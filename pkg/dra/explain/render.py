"""Turning an allocator :class:`~pkg.dra.allocator.Explanation` into text for people.

Three shapes, one per reader:

* :func:`render` — the ``explain`` command's report: first the verdict (:mod:`.causes`: the cause in
  the user's words and what would change it), then per request the counts by verdict of the
  devices its class selects, each device the selectors let through with why it was rejected (or
  ``fits``), in the order the allocator tries them — a device others hold with who holds it (the
  claim and Pod of the share on its card, the MIG devices that fill it), not the check that
  failed; devices the claim's selectors reject are
  grouped by the selector that rejected them, and those the class never selects are one line (a
  cluster has thousands, and one line says the same thing) unless ``show_all``; then the outcome.
* :func:`summary` — one line for an ``AllocationFailed`` event: per request, the devices by
  verdict and the most frequent rejection with its detail (e.g. the exhausted counter).
* :func:`describe_allocation` — the devices of an allocation result and its node, for the
  ``Allocated`` event and the report's last section (in :mod:`.allocation_text`, which imports
  no allocator, re-exported here).

A claim constraint (``matchAttribute``, ``distinctAttribute``) is reported after the requests:
whether it can be met, and how its attribute splits the devices that fit — per node and value, how
many fit each request against how many it needs — so a claim pending because its GPU and its NIC
sit under different PCIe roots says so; :func:`summary` names a constraint that cannot be met.

A request whose selector does not compile is reported once, with the CEL error, not once per
device. An allocatable claim's report ends with what each chosen device consumes: per capacity of
a shared device the request and what the request policy made of it (``sharePercent: requested 25
-> 30``), what other shares hold and what is left; the counters the device takes (or that another
share already charged them); and what its card has left after the claim, memory slices as the
list of free slice numbers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from pkg.dra.allocator import DeviceVerdict, Explanation, RequestTrace, Unschedulable
from pkg.dra.allocator.constraint_trace import ConstraintTrace, ValueGroup
from pkg.dra.allocator.consumption import CapacityUse, CounterUse, DeviceUse
from pkg.dra.allocator.pools import SLICE_COUNTER_PREFIX
from pkg.dra.explain.allocation_text import describe_allocation, node_of
from pkg.dra.explain.device_words import are, plural
from pkg.dra.explain.verdict import NO_RETRY_NOTE, RETRY_NOTE, Verdict

SELECTOR_FALSE = "selector false"
FITS = "fits"

__all__ = ["describe_allocation", "node_of", "render", "summary"]


def _counts(trace: RequestTrace) -> Counter[str]:
    return Counter(v.reason for v in trace.devices)


def _count_text(counts: Counter[str]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in counts.most_common())


def summary(explanation: Explanation) -> str:
    """One line: why the claim cannot be allocated, per request (for events and logs)."""
    parts = []
    if explanation.problem:
        parts.append(explanation.problem)
    # A constraint no value can meet is the reason when it is there: said first, before the
    # per-request counts, so an event's length limit never cuts it off.
    for constraint in explanation.constraints:
        if not constraint.met:
            parts.append(f"{constraint.label} cannot be met: {_split_text(constraint)}")
    for trace in explanation.requests:
        if trace.problem:
            parts.append(f"request {trace.request}: {trace.problem}")
            continue
        counts = _counts(trace)
        text = (
            f"request {trace.request}: {plural('device', counts.total())} ({_count_text(counts) or 'none'})"
        )
        detail = Counter(
            f"{v.reason}: {v.detail}" for v in trace.devices if v.reason not in (SELECTOR_FALSE, FITS)
        ).most_common(1)
        if detail:
            text += f"; most often {detail[0][0]}"
        parts.append(text)
    return "; ".join(parts)


def _split_text(constraint: ConstraintTrace) -> str:
    # The groups that come closest first: they are what a reader would free up or resize.
    values = sorted(constraint.groups, key=lambda g: -sum(c.fitting for c in g.counts))
    if not values:
        return "no device fits its requests"
    shown = " | ".join(_group_text(g) for g in values[:4])
    more = f" | … {len(values) - 4} more" if len(values) > 4 else ""
    split = plural("value", len(values))
    return f"the fitting devices split into {split}, none serves every request ({shown}{more})"


def _group_text(group: ValueGroup) -> str:
    where = f"{group.node}/" if group.node else ""
    counts = ", ".join(f"{c.request} {c.fitting}/{c.needed}" for c in group.counts)
    return f"{where}{group.value}: {counts}"


def _constraint_lines(constraint: ConstraintTrace) -> list[str]:
    verdict = "can be met" if constraint.met else "CANNOT be met: no value serves every request"
    lines = [f"  {constraint.label}: {verdict} (devices that fit / devices needed, per request)"]
    if not constraint.groups:
        lines.append("    no device fits the requests it constrains")
    for group in constraint.groups:
        mark = "enough" if group.enough else "short"
        lines.append(f"    {mark:<7} {_group_text(group)}")
    return lines


def _device_line(verdict: DeviceVerdict, holds: Mapping[str, str]) -> str:
    text = holds.get(verdict.device, verdict.detail)
    detail = f": {text}" if text else ""
    return f"    {verdict.reason:<20} {verdict.device}{detail}"


def _trace_lines(
    trace: RequestTrace,
    *,
    show_all: bool,
    max_devices: int,
    class_name: str | None = None,
    holds: Mapping[str, str],
) -> list[str]:
    if trace.problem:
        return [
            f"  request {trace.request}: selector does not compile, no device can match",
            f"    {trace.problem}",
        ]
    # Devices the request's class never selects are not part of its story: one line says how many.
    devices = trace.devices if show_all else tuple(v for v in trace.devices if v.of_class)
    counts = Counter(v.reason for v in devices)
    noun = f"device of class {class_name}" if class_name and not show_all else "device"
    lines = [f"  request {trace.request}: {plural(noun, counts.total())} ({_count_text(counts) or 'none'})"]
    listed = [v for v in devices if show_all or v.reason != SELECTOR_FALSE]
    shown = listed if show_all or max_devices <= 0 else listed[:max_devices]
    lines.extend(_device_line(v, holds) for v in shown)
    if len(shown) < len(listed):
        lines.append(f"    ... {len(listed) - len(shown)} more (--all lists every device)")
    if not show_all:
        grouped = Counter(v.detail for v in devices if v.reason == SELECTOR_FALSE)
        for detail, n in grouped.most_common():
            lines.append(f"    {SELECTOR_FALSE:<20} {plural('device', n)}: {detail}")
        others = len(trace.devices) - len(devices)
        if others:
            lines.append(
                f"    {plural('other device', others)} {are(others)} not of class {class_name or '?'} "
                "(--all lists them)"
            )
    return lines


def _class_names(explanation: Explanation) -> dict[str, str]:
    """Each request alternative's device class, from the context the trace was made in."""
    ctx = explanation.context
    if ctx is None:
        return {}
    return {
        alt.result_name: alt.device_class.metadata.name or ""
        for plan in ctx.plans
        for alt in plan.alternatives
        if alt.device_class.metadata is not None
    }


def render(
    explanation: Explanation,
    *,
    show_all: bool = False,
    max_devices: int = 40,
    verdict: Verdict | None = None,
    holds: Mapping[str, str] | None = None,
) -> str:
    """The full report of the ``explain`` command (see the module docs); ``holds`` says in words
    what holds a blocked device (:func:`~pkg.dra.explain.device_holds.hold_words`), by its
    ``driver/pool/device``, instead of the check that failed."""
    lines = [f"claim {explanation.claim} (strategy {explanation.strategy})"]
    if verdict is not None and not verdict.allocatable:
        lines.extend(verdict.lines())
        lines.append("details:")
    if explanation.problem:
        lines.append(f"  problem: {explanation.problem}")
    classes = _class_names(explanation)
    for trace in explanation.requests:
        lines.extend(
            _trace_lines(
                trace,
                show_all=show_all,
                max_devices=max_devices,
                class_name=classes.get(trace.request),
                holds=holds or {},
            )
        )
    if explanation.constraints:
        lines.append("constraints:")
        for constraint in explanation.constraints:
            lines.extend(_constraint_lines(constraint))
    outcome = explanation.outcome
    if isinstance(outcome, Unschedulable):
        if outcome.fatal:
            kind = "the claim or a class is broken"
        else:
            kind = RETRY_NOTE if verdict is None or verdict.retry else NO_RETRY_NOTE
        lines.append(f"result: NOT allocatable: {outcome.reason} ({kind})")
        lines.extend(f"  - {error}" for error in outcome.errors)
    else:
        lines.append(f"result: allocatable: {describe_allocation(outcome)}")
        if explanation.uses:
            lines.append("consumes:")
            for use in explanation.uses:
                lines.extend(_use_lines(use))
    return "\n".join(lines) + "\n"


def _use_lines(use: DeviceUse) -> list[str]:
    lines = [f"  {use.request} -> {use.device}" + (" (shared)" if use.shared else " (exclusive)")]
    lines.extend(f"    {_capacity_text(c)}" for c in use.capacity)
    for counters in use.counters:
        if counters.charged:
            taken = ", ".join(f"{name} {amount}" for name, amount in counters.taken)
            lines.append(f"    takes from counter set {counters.counter_set}: {taken}")
        else:
            lines.append(
                f"    takes nothing from counter set {counters.counter_set}: another share of the device "
                "already holds its counters"
            )
        lines.append(f"    left on {counters.counter_set}: {_left_text(counters)}")
    return lines


def _capacity_text(use: CapacityUse) -> str:
    asked = f"requested {use.requested} -> {use.consumed}" if use.requested is not None else use.consumed
    return f"{use.name}: {asked} ({use.rule}); other shares hold {use.held}; {use.left} of {use.total} left"


def _left_text(counters: CounterUse) -> str:
    slices = [(name, free) for name, free, _ in counters.left if name.startswith(SLICE_COUNTER_PREFIX)]
    parts = [
        f"{name} {free}/{total}"
        for name, free, total in counters.left
        if not name.startswith(SLICE_COUNTER_PREFIX)
    ]
    if slices:
        free = [name.removeprefix(SLICE_COUNTER_PREFIX) for name, amount in slices if amount != "0"]
        listed = ", ".join(sorted(free, key=int)) if free else "none"
        parts.insert(1 if parts else 0, f"memory slices free: {listed} (of {len(slices)})")
    return ", ".join(parts)
