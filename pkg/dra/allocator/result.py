"""Turning the search's choices into ``status.allocation`` exactly as the scheduler writes it.

* ``devices.results``: one entry per device in allocation order — request name (``req`` or
  ``req/sub``), driver, pool, device; ``adminAccess: true`` for admin requests; the request's
  tolerations; for devices that allow multiple allocations a fresh ``shareID`` and the
  ``consumedCapacity`` (canonical quantity strings).
* ``devices.config``: first each used class's configs once (``FromClass``) listing the requests
  that used the class, then the claim's configs (``FromClaim``) that apply to an allocated request
  or chosen subrequest; a config that ends up naming every request lists none ("applies to all").
* ``nodeSelector``: see :func:`.nodes.allocation_node_selector`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubernetes.client import (
    V1AllocationResult,
    V1DeviceAllocationConfiguration,
    V1DeviceAllocationResult,
    V1DeviceRequestAllocationResult,
    V1Node,
)

from pkg.dra.allocator.context import AllocationContext
from pkg.dra.allocator.nodes import allocation_node_selector, node_name
from pkg.dra.allocator.pools import Candidate
from pkg.dra.allocator.quantity import Quantity
from pkg.dra.allocator.requests import Alternative


@dataclass(frozen=True, slots=True)
class Chosen:
    alt: Alternative
    cand: Candidate
    share_id: str | None
    consumed: dict[str, Quantity]


def build_result(
    ctx: AllocationContext, chosen: list[Chosen], *, node: V1Node | None, bound_node: str | None
) -> V1AllocationResult:
    results = [
        V1DeviceRequestAllocationResult(
            request=c.alt.result_name,
            driver=c.cand.id.driver,
            pool=c.cand.id.pool,
            device=c.cand.id.device,
            admin_access=True if c.alt.admin_access else None,
            tolerations=list(c.alt.tolerations) or None,
            share_id=c.share_id,
            consumed_capacity={k: str(v) for k, v in c.consumed.items()} or None,
        )
        for c in chosen
    ]
    local = next((c.cand for c in chosen if c.cand.node_name or c.cand.device.binds_to_node), None)
    selector = allocation_node_selector(
        local_node=(node_name(node) or bound_node or local.node_name) if local is not None else None,
        selectors=[c.cand.node_selector for c in chosen if c.cand.node_selector is not None],
    )
    config = _configs(ctx)
    return V1AllocationResult(
        devices=V1DeviceAllocationResult(results=results, config=config or None),
        node_selector=selector,
    )


def _configs(ctx: AllocationContext) -> list[V1DeviceAllocationConfiguration]:
    chosen_names = [(plan.name, plan.alternatives[plan.chosen]) for plan in ctx.plans]
    config: list[V1DeviceAllocationConfiguration] = []
    class_ranges: dict[str, range] = {}
    for _, alt in chosen_names:
        cls = alt.device_class
        name = (cls.metadata.name if cls.metadata is not None else None) or ""
        if name in class_ranges:
            for i in class_ranges[name]:
                requests = config[i].requests
                assert requests is not None
                requests.append(alt.result_name)
            continue
        start = len(config)
        for class_config in (cls.spec.config if cls.spec is not None else None) or ():
            config.append(
                V1DeviceAllocationConfiguration(
                    source="FromClass", requests=[alt.result_name], opaque=class_config.opaque
                )
            )
        class_ranges[name] = range(start, len(config))
    devices = ctx.claim.spec.devices if ctx.claim.spec is not None else None
    for claim_config in (devices.config if devices is not None else None) or ():
        requests = claim_config.requests
        if not requests or any(_named(requests, req, alt) for req, alt in chosen_names):
            config.append(
                V1DeviceAllocationConfiguration(
                    source="FromClaim",
                    requests=list(requests) if requests else None,
                    opaque=claim_config.opaque,
                )
            )
    for entry in config:
        if entry.requests and all(_named(entry.requests, req, alt) for req, alt in chosen_names):
            entry.requests = None
    return config


def _named(requests: list[str], request: str, alt: Alternative) -> bool:
    return request in requests or (alt.parent is not None and alt.result_name in requests)
