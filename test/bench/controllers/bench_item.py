"""The benchmark's object: ``spec.value`` (and ``spec.sentAt``, when the driver changed it), and
per controller ``status.<controller>``: the value it observed and when its reconcile began."""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1ObjectMeta
from pydantic import BaseModel, ConfigDict, Field

from pkg.framework.client.kinds import ResourceKind

GROUP, VERSION, PLURAL, NAMESPACE = "bench.gpu.deckhouse.io", "v1", "benchitems", "bench"


class BenchItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: V1ObjectMeta = Field(default_factory=V1ObjectMeta)
    spec: dict[str, Any] = Field(default_factory=dict)
    status: dict[str, Any] = Field(default_factory=dict)


BENCH_ITEM = ResourceKind(GROUP, VERSION, "BenchItem", PLURAL, True, BenchItem)


def needs_reconcile(spec: dict[str, Any], status: dict[str, Any], controller: str) -> bool:
    return (status.get(controller) or {}).get("observedValue") != spec.get("value")


def observed(spec: dict[str, Any], started: float) -> dict[str, Any]:
    return {"observedValue": spec.get("value"), "reconciledAt": started}
