"""Who is in a domain: the nodes of its allocated claims (pure).

A claim is a member when its allocation holds a channel device (``imex-channel-<N>``) of our driver
and its allocation config carries a ComputeDomainChannelConfig with the domain's UID: the UID, not
the name, so a claim left from a deleted domain of the same name is not counted. The claim's node
is the pool of its channel result (``gpus/<node>``), or else the allocation's node selector.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from kubernetes.client import ResourceV1ResourceClaim, V1NodeSelector
from pydantic import ValidationError

from api.gpu.v1alpha1 import COMPUTE_DOMAIN_CHANNEL_CONFIG_KIND, ComputeDomainChannelConfig
from api.gpu.v1alpha1.computedomain import DomainNode

DRIVER: Final = "gpu.deckhouse.io"
CHANNEL_DEVICE_PREFIX: Final = "imex-channel-"
POOL_PREFIX: Final = "gpus/"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"


def _channel_config(parameters: Any) -> ComputeDomainChannelConfig | None:
    if not isinstance(parameters, dict) or parameters.get("kind") != COMPUTE_DOMAIN_CHANNEL_CONFIG_KIND:
        return None
    try:
        return ComputeDomainChannelConfig.model_validate(parameters)
    except ValidationError:
        return None


def spec_channel_config(claim: ResourceV1ResourceClaim) -> ComputeDomainChannelConfig | None:
    """The domain a claim asks to join (its spec), allocated or not: what wakes the domain."""
    devices = claim.spec.devices if claim.spec else None
    for config in (devices.config if devices else None) or []:
        if config.opaque is not None and config.opaque.driver == DRIVER:
            found = _channel_config(config.opaque.parameters)
            if found is not None:
                return found
    return None


def allocated_channel_config(claim: ResourceV1ResourceClaim) -> ComputeDomainChannelConfig | None:
    """The domain an allocated claim holds a channel of, or ``None``."""
    allocation = claim.status.allocation if claim.status else None
    devices = allocation.devices if allocation else None
    if devices is None:
        return None
    if not any(
        r.driver == DRIVER and r.device.startswith(CHANNEL_DEVICE_PREFIX) for r in devices.results or []
    ):
        return None
    for config in devices.config or []:
        if config.opaque is not None and config.opaque.driver == DRIVER:
            found = _channel_config(config.opaque.parameters)
            if found is not None:
                return found
    return None


def _selected_node(selector: V1NodeSelector | None) -> str | None:
    for term in (selector.node_selector_terms if selector else None) or []:
        for field in term.match_fields or []:
            fields = field.values or []
            if field.key == "metadata.name" and field.operator == "In" and len(fields) == 1:
                return str(fields[0])
        for expression in term.match_expressions or []:
            values = expression.values or []
            if expression.key == HOSTNAME_LABEL and expression.operator == "In" and len(values) == 1:
                return str(values[0])
    return None


def member_node(claim: ResourceV1ResourceClaim) -> str | None:
    """The node whose channel an allocated claim holds."""
    allocation = claim.status.allocation if claim.status else None
    if allocation is None or allocation.devices is None:
        return None
    for result in allocation.devices.results or []:
        channel = result.driver == DRIVER and result.device.startswith(CHANNEL_DEVICE_PREFIX)
        if channel and result.pool.startswith(POOL_PREFIX) and len(result.pool) > len(POOL_PREFIX):
            return result.pool.removeprefix(POOL_PREFIX)
    return _selected_node(allocation.node_selector)


def member_nodes(claims: Iterable[ResourceV1ResourceClaim], uid: str) -> set[str]:
    """The nodes of the claims allocated a channel of the domain with ``uid``."""
    nodes = set()
    for claim in claims:
        config = allocated_channel_config(claim)
        node = member_node(claim) if config is not None and config.domain_uid == uid else None
        if node is not None:
            nodes.add(node)
    return nodes


def member_entries(previous: Sequence[DomainNode], nodes: set[str]) -> list[DomainNode]:
    """The new membership: staying nodes keep their entry (index, address, readiness) until the
    ensemble step refreshes it, new nodes get a bare one; sorted by name."""
    kept = {n.name: n.model_copy() for n in previous if n.name in nodes}
    return [kept.get(name) or DomainNode(name=name) for name in sorted(nodes)]
