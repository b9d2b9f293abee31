"""What gpu-controller keeps of the cluster-sized kinds it caches: PhysicalGPUs and Nodes.

At 5,000 nodes x 8 cards the PhysicalGPU and Node caches are most of the process, and a decoded
object costs several times its JSON (the client's pydantic models, one per nested object). Its
controllers read a small part of each, so the informers keep a projection, cut from the raw JSON
before decoding (:meth:`~pkg.framework.cache.informer_factory.InformerFactory.set_transform`; the
discarded fields are never decoded). Informers are shared by the process's four controllers, so
the projection is the union of what they read:

* **PhysicalGPU** — ``metadata``: name, uid (the orphan delete's precondition, Events),
  resourceVersion, generation (``observedGeneration``, condition ``observedGeneration``),
  deletionTimestamp, labels (node, vendor, device: indexes, orphan cleanup, gate labels,
  ``gpu_physicalgpu_info``); ``status``: ``nodeInfo.nodeName`` (the full node name),
  ``conditions`` (DriverReady, the defaults, gate labels, metrics), ``pciInfo`` (the metric's
  ``pci_address``; kept whole because its model requires the class and ids),
  ``currentState.driverType`` (the metric), ``currentState.nvidia.gpuUUID`` (GPUClass names) and
  ``observedGeneration`` (whether a status write is due).
* **Node** — ``metadata`` only: name (orphan cleanup, the node-labels controller), uid,
  resourceVersion, deletionTimestamp and labels (the gate labels it keeps). A Node's status
  (images, conditions, addresses) is what makes it large, and no controller here reads it.

This is safe only because nothing writes a cached object back whole: the PhysicalGPU status is a
server-side apply of gpu-controller's own fields
(:mod:`pkg.gpucontroller.physicalgpu.internal.status_writer`), labels are merge patches of named
keys. A controller that comes to read another field must add it here;
``test/unit/gpucontroller/test_projections.py`` checks that every controller decides the same on
projected objects as on whole ones.
"""

from __future__ import annotations

from typing import Any

_METADATA = ("name", "uid", "resourceVersion", "generation", "deletionTimestamp", "labels")


def _envelope(raw: dict[str, Any]) -> dict[str, Any]:
    """apiVersion and kind where the server sent them (list items may lack them), and the metadata."""
    meta = raw.get("metadata") or {}
    envelope = {key: raw[key] for key in ("apiVersion", "kind") if raw.get(key)}
    envelope["metadata"] = {key: meta[key] for key in _METADATA if meta.get(key) is not None}
    return envelope


def project_physical_gpu(raw: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``raw`` (a PhysicalGPU as JSON) gpu-controller reads; see the module docs."""
    status = raw.get("status") or {}
    projected: dict[str, Any] = {}
    node_name = (status.get("nodeInfo") or {}).get("nodeName")
    if node_name:
        projected["nodeInfo"] = {"nodeName": node_name}
    for key in ("pciInfo", "conditions", "observedGeneration"):
        if status.get(key) is not None:
            projected[key] = status[key]
    state = status.get("currentState") or {}
    current: dict[str, Any] = {}
    if state.get("driverType"):
        current["driverType"] = state["driverType"]
    uuid = (state.get("nvidia") or {}).get("gpuUUID")
    if state.get("nvidia") is not None:
        current["nvidia"] = {"gpuUUID": uuid} if uuid else {}
    if current:
        projected["currentState"] = current
    projected_gpu = _envelope(raw)
    if raw.get("status") is not None:
        projected_gpu["status"] = projected
    return projected_gpu


def project_node(raw: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``raw`` (a Node as JSON) gpu-controller reads: its metadata, without managed
    fields and annotations; see the module docs."""
    return _envelope(raw)


__all__ = ["project_node", "project_physical_gpu"]
