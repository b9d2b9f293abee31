"""What a claim's status says it holds, read from the raw object (see :mod:`.usage` for why raw).

Only results of our driver count. A claim's node is its pool's (``gpus/<node>``, the pool name
gpu-handler publishes) or, failing that, the node its allocation's node selector names. A result
also carries what sizes a share: the capacity the scheduler consumed for it, and the opaque
parameters of our driver that apply to its request (the class's, then the claim's, the later
winning: the rule gpu-handler plans a claim by, ``pkg.gpuhandler.preparation.plan``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
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
    consumed: Mapping[str, str] = dataclass_field(default_factory=dict)  # consumedCapacity: name -> quantity
    parameters: Any = None  # our driver's opaque parameters for the request, undecoded; None: none


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
    configs = (allocation.get("devices") or {}).get("config") or []
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
            consumed={str(k): str(v) for k, v in (r.get("consumedCapacity") or {}).items()},
            parameters=_parameters_for(str(r.get("request") or ""), configs),
        )
        for r in results
        if isinstance(r, dict) and r.get("driver") == DRIVER
    ]


def node_of_pool(pool: str) -> str:
    return pool.removeprefix(POOL_PREFIX) if pool.startswith(POOL_PREFIX) else ""


def _parameters_for(request: str, configs: Sequence[Any]) -> Any:
    """The opaque parameters of our driver that configure ``request`` (a subrequest ``gpu/mig``
    is configured by ``gpu`` too): class configs first, then claim configs; the last wins."""
    parent = request.split("/", 1)[0]
    best: tuple[tuple[int, int], Any] | None = None
    for position, config in enumerate(configs):
        opaque = config.get("opaque") if isinstance(config, dict) else None
        if not isinstance(opaque, dict) or opaque.get("driver") != DRIVER:
            continue
        requests = config.get("requests") or []
        if requests and request not in requests and parent not in requests:
            continue
        rank = (0 if config.get("source") == "FromClass" else 1, position)
        if best is None or rank > best[0]:
            best = (rank, opaque.get("parameters"))
    return None if best is None else best[1]


def _selected_node(allocation: dict[str, Any]) -> str:
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    for term in terms:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                values = field.get("values") or []
                if len(values) == 1:
                    return str(values[0])
    return ""
