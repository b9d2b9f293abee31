"""An allocation result in words: its devices and its node.

Apart from :mod:`.render` because ``kubectl gpu explain``, answered by gpu-dra-controller, says
what a claim already holds with it and renders nothing else: importing the renderer would import
the whole allocator into a process that starts for one answer (docs/performance.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubernetes.client import V1AllocationResult, V1NodeSelector


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
