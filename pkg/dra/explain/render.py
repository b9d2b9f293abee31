"""Turning an allocator :class:`~pkg.dra.allocator.Explanation` into text for people.

Three shapes, one per reader:

* :func:`render` — the ``explain`` command's report: per request, the counts by verdict, then each
  device the selectors let through with why it was rejected (or ``fits``), in the order the
  allocator tries them; devices the selectors reject are grouped by the selector that rejected
  them (a cluster has thousands, and one line per selector says the same thing) unless
  ``show_all``; then the outcome.
* :func:`summary` — one line for an ``AllocationFailed`` event: per request, the devices by
  verdict and the most frequent rejection with its detail (e.g. the exhausted counter).
* :func:`describe_allocation` — the devices of an allocation result and its node, for the
  ``Allocated`` event and the report's last section.
"""

from __future__ import annotations

from collections import Counter

from kubernetes.client import V1AllocationResult, V1NodeSelector

from pkg.dra.allocator import DeviceVerdict, Explanation, RequestTrace, Unschedulable

SELECTOR_FALSE = "selector false"
FITS = "fits"


def node_of(selector: V1NodeSelector | None) -> str:
    """The node an allocation is pinned to, a description of its node selector, or "any node"."""
    if selector is None:
        return "any node"
    for term in selector.node_selector_terms or ():
        for field in term.match_fields or ():
            if field.key == "metadata.name" and field.operator == "In" and len(field.values or ()) == 1:
                return f"node {(field.values or [''])[0]}"
    return "nodes matching the allocation's node selector"


def describe_allocation(result: V1AllocationResult) -> str:
    """``req -> driver/pool/device, ... on node n`` (shares say so)."""
    parts = []
    for r in (result.devices.results if result.devices is not None else None) or ():
        share = f" (share {r.share_id})" if r.share_id else ""
        parts.append(f"{r.request} -> {r.driver}/{r.pool}/{r.device}{share}")
    return f"{', '.join(parts) or 'no devices'} on {node_of(result.node_selector)}"


def _counts(trace: RequestTrace) -> Counter[str]:
    return Counter(v.reason for v in trace.devices)


def _count_text(counts: Counter[str]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in counts.most_common())


def summary(explanation: Explanation) -> str:
    """One line: why the claim cannot be allocated, per request (for events and logs)."""
    parts = []
    if explanation.problem:
        parts.append(explanation.problem)
    for trace in explanation.requests:
        counts = _counts(trace)
        text = f"request {trace.request}: {sum(counts.values())} devices ({_count_text(counts) or 'none'})"
        detail = Counter(
            f"{v.reason}: {v.detail}" for v in trace.devices if v.reason not in (SELECTOR_FALSE, FITS)
        ).most_common(1)
        if detail:
            text += f"; most often {detail[0][0]}"
        parts.append(text)
    return "; ".join(parts)


def _device_line(verdict: DeviceVerdict) -> str:
    detail = f": {verdict.detail}" if verdict.detail else ""
    return f"    {verdict.reason:<20} {verdict.device}{detail}"


def _trace_lines(trace: RequestTrace, *, show_all: bool, max_devices: int) -> list[str]:
    counts = _counts(trace)
    lines = [f"  request {trace.request}: {sum(counts.values())} devices ({_count_text(counts) or 'none'})"]
    listed = [v for v in trace.devices if show_all or v.reason != SELECTOR_FALSE]
    shown = listed if show_all or max_devices <= 0 else listed[:max_devices]
    lines.extend(_device_line(v) for v in shown)
    if len(shown) < len(listed):
        lines.append(f"    ... {len(listed) - len(shown)} more (--all lists every device)")
    if not show_all:
        grouped = Counter(v.detail for v in trace.devices if v.reason == SELECTOR_FALSE)
        for detail, n in grouped.most_common():
            lines.append(f"    {SELECTOR_FALSE:<20} {n} device(s): {detail}")
    return lines


def render(explanation: Explanation, *, show_all: bool = False, max_devices: int = 40) -> str:
    """The full report of the ``explain`` command (see the module docs)."""
    lines = [f"claim {explanation.claim} (strategy {explanation.strategy})"]
    if explanation.problem:
        lines.append(f"  problem: {explanation.problem}")
    for trace in explanation.requests:
        lines.extend(_trace_lines(trace, show_all=show_all, max_devices=max_devices))
    outcome = explanation.outcome
    if isinstance(outcome, Unschedulable):
        kind = "the claim or a class is broken" if outcome.fatal else "retry when capacity changes"
        lines.append(f"result: NOT allocatable: {outcome.reason} ({kind})")
        lines.extend(f"  - {error}" for error in outcome.errors)
    else:
        lines.append(f"result: allocatable: {describe_allocation(outcome)}")
    return "\n".join(lines) + "\n"
