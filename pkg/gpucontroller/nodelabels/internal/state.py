"""The read-only snapshot of one Node's reconcile: its labels and its PhysicalGPUs, from the caches."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.framework.reconcile.handler import Snapshot


@dataclass(frozen=True)
class NodeLabelsState(Snapshot):
    node_name: str
    labels: Mapping[str, str]
    gpus: tuple[PhysicalGPU, ...]
