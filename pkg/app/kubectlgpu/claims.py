"""What a claim's status says it holds, read from the raw object (see :mod:`.usage` for why raw).

Only results of our driver count. A claim's node is its pool's (``gpus/<node>``, the pool name
gpu-handler publishes) or, failing that, the node its allocation's node selector names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pkg.domain.names import DRIVER

POOL_PREFIX = "gpus/"


@dataclass(frozen=True)
class Held:
    """One of our devices a claim holds."""

    namespace: str
    claim: str
    request: str
    pool: str
    device: str
    share_id: str | None
    node: str
    pods: tuple[str, ...]  # the Pods the claim is reserved for, by name


def key(claim: dict[str, Any]) -> tuple[str, str]:
    meta = claim.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def reserved_pods(claim: dict[str, Any]) -> tuple[str, ...]:
    consumers = (claim.get("status") or {}).get("reservedFor") or []
    return tuple(
        str(c.get("name"))
        for c in consumers
        if isinstance(c, dict) and c.get("resource") == "pods" and not c.get("apiGroup")
    )


def held(claim: dict[str, Any]) -> list[Held]:
    """Our devices in ``status.allocation.devices.results``; empty while unallocated."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    namespace, name = key(claim)
    pods = reserved_pods(claim)
    selected = _selected_node(allocation)
    return [
        Held(
            namespace=namespace,
            claim=name,
            request=str(r.get("request") or ""),
            pool=str(r.get("pool") or ""),
            device=str(r.get("device") or ""),
            share_id=r.get("shareID"),
            node=node_of_pool(str(r.get("pool") or "")) or selected,
            pods=pods,
        )
        for r in results
        if isinstance(r, dict) and r.get("driver") == DRIVER
    ]


def node_of_pool(pool: str) -> str:
    return pool.removeprefix(POOL_PREFIX) if pool.startswith(POOL_PREFIX) else ""


def _selected_node(allocation: dict[str, Any]) -> str:
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    for term in terms:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                values = field.get("values") or []
                if len(values) == 1:
                    return str(values[0])
    return ""
