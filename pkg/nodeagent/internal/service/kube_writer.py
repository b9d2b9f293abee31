"""The Kubernetes writer service: every request the agent sends, and nothing else.

Each write is shaped so that the agent touches only what it owns (see
:mod:`pkg.inventory.desired`):

* ``create``: a POST with name and labels only. A POST, not an apply, because an apply creates or
  *adopts* whatever has that name, and the agent must never take over an object it did not make;
  AlreadyExists is reported instead. The status subresource ignores a status sent on create.
* ``patch_labels`` / ``patch_node_labels``: a JSON merge patch of just the agent's label keys
  (``null`` removes one). A PhysicalGPU patch carries ``metadata.uid``: the server rejects a patch
  that would change it, so a same-named successor of the object is never patched by mistake.
* ``apply_status``: server-side apply on the status subresource, field manager ``gpu-node-agent``,
  of exactly ``pciInfo``, ``nodeInfo`` and ``currentState.driverType``. Fields of other managers
  (conditions, capabilities, ``currentState.nvidia``) are untouched, and a field the agent stops
  sending (a driver unbound) is removed because the agent is its only owner. An apply to the
  status subresource never creates an object (404 for a deleted one).
* ``remove_current_state``: a JSON patch on the status removing vendor blocks the CRD forbids under
  the new driverType (checked against the real server: applying ``driverType: VFIO`` while
  ``currentState.nvidia`` exists is rejected, 422). Test ops on uid guard it.
* ``delete``: with a uid precondition, so a successor with the same name survives.

Every request is counted in ``gpu_node_agent_api_writes_total`` when sent, and its result is told
to the cache barriers so that the sync can wait for its own writes to reach the caches.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kubernetes.client import V1Node

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUStatus
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient, NotFoundError, PatchType
from pkg.framework.client.builtin_kinds import NODE
from pkg.framework.reconcile.resource_builder import ResourceBuilder
from pkg.nodeagent import metrics
from pkg.nodeagent.internal.service.cache_barrier import CacheBarrier

FIELD_MANAGER = "gpu-node-agent"


class GPUWriter(Protocol):
    def create(self, *, name: str, labels: Mapping[str, str]) -> PhysicalGPU: ...

    def patch_labels(self, gpu: PhysicalGPU, labels: Mapping[str, str | None]) -> PhysicalGPU: ...

    def apply_status(self, gpu: PhysicalGPU, status: PhysicalGPUStatus) -> PhysicalGPU: ...

    def remove_current_state(self, gpu: PhysicalGPU, fields: Sequence[str]) -> PhysicalGPU: ...

    def delete(self, gpu: PhysicalGPU) -> bool:
        """False when the object was already gone."""
        ...


class NodeWriter(Protocol):
    def patch_node_labels(self, node_name: str, labels: Mapping[str, str | None]) -> V1Node: ...


class CacheWaiter(Protocol):
    def wait_for_cache(self, timeout: float) -> bool:
        """Blocks until the caches hold every write made so far (False on timeout)."""
        ...


class KubeWriter:
    """:class:`GPUWriter`, :class:`NodeWriter` and :class:`CacheWaiter` over :class:`KubeClient`."""

    def __init__(
        self, client: KubeClient, *, node_name: str, gpu_barrier: CacheBarrier, node_barrier: CacheBarrier
    ) -> None:
        if client.field_manager != FIELD_MANAGER:
            raise ValueError(f"the node agent writes as {FIELD_MANAGER!r}, not {client.field_manager!r}")
        self._client = client
        self._node = node_name
        self._gpus = gpu_barrier
        self._nodes = node_barrier

    def create(self, *, name: str, labels: Mapping[str, str]) -> PhysicalGPU:
        self._count("PhysicalGPU", "create")
        gpu = self._client.create(
            PHYSICAL_GPU, PhysicalGPU(metadata=ResourceBuilder(name, kind=PHYSICAL_GPU).labels(labels).meta())
        )
        return self._expect(gpu)

    def patch_labels(self, gpu: PhysicalGPU, labels: Mapping[str, str | None]) -> PhysicalGPU:
        body = ResourceBuilder(uid=gpu.metadata.uid).labels(labels).merge_patch()
        self._count("PhysicalGPU", "patch")
        return self._expect(self._client.patch(PHYSICAL_GPU, _name(gpu), body, patch_type=PatchType.MERGE))

    def apply_status(self, gpu: PhysicalGPU, status: PhysicalGPUStatus) -> PhysicalGPU:
        body: dict[str, Any] = {"metadata": {"name": _name(gpu)}, "status": status.to_api_dict()}
        self._count("PhysicalGPU", "apply")
        stored = self._client.apply(PHYSICAL_GPU, body, subresource="status", force=True)
        if stored.metadata.resource_version != gpu.metadata.resource_version:  # a no-op keeps it
            self._expect(stored)
        return stored

    def remove_current_state(self, gpu: PhysicalGPU, fields: Sequence[str]) -> PhysicalGPU:
        ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": gpu.metadata.uid}]
        ops += [{"op": "remove", "path": f"/status/currentState/{field}"} for field in fields]
        self._count("PhysicalGPU", "patch")
        stored = self._client.patch(
            PHYSICAL_GPU, _name(gpu), ops, patch_type=PatchType.JSON, subresource="status"
        )
        return self._expect(stored)

    def delete(self, gpu: PhysicalGPU) -> bool:
        self._count("PhysicalGPU", "delete")
        try:
            self._client.delete(PHYSICAL_GPU, _name(gpu), uid=gpu.metadata.uid)
        except NotFoundError:
            return False
        self._gpus.expect_deleted(gpu.metadata.uid)
        return True

    def patch_node_labels(self, node_name: str, labels: Mapping[str, str | None]) -> V1Node:
        self._count("Node", "patch")
        body = ResourceBuilder().labels(labels).merge_patch()
        stored = self._client.patch(NODE, node_name, body, patch_type=PatchType.MERGE)
        self._nodes.expect_version(node_name, stored.metadata.resource_version if stored.metadata else None)
        return stored

    def wait_for_cache(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        gpus_ok = self._gpus.wait(timeout)
        return self._nodes.wait(max(0.0, deadline - time.monotonic())) and gpus_ok

    def _expect(self, gpu: PhysicalGPU) -> PhysicalGPU:
        self._gpus.expect_version(_name(gpu), gpu.metadata.resource_version)
        return gpu

    def _count(self, kind: str, verb: str) -> None:
        metrics.api_writes.labels(node=self._node, kind=kind, verb=verb).inc()


def _name(gpu: PhysicalGPU) -> str:
    return str(gpu.metadata.name)
