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

Decoded, what remains repeats: the spec (always empty), a node's ``nodeInfo`` on each of its
cards, the PCI class and ids, the labels of a node's cards, conditions written in the same second,
and every model's set of field names. :class:`PhysicalGPUInterner` (the decoded-object transform,
``set_object_transform``) replaces each by one shared instance, as gpu-dra-controller's slice
interner does, and :class:`~pkg.framework.cache.transforms.FieldSetSharer` shares the field-name
sets; what stays a card's own is its metadata and its status's shell.

This is safe only because nothing writes a cached object back whole: the PhysicalGPU status is a
server-side apply of gpu-controller's own fields
(:mod:`pkg.gpucontroller.physicalgpu.internal.status_writer`), labels are merge patches of named
keys; and because nothing mutates a cached object (reconcilers edit deep copies), which the
sharing relies on. A controller that comes to read another field must add it here;
``test/unit/gpucontroller/test_projections.py`` checks that every controller decides the same on
projected objects as on whole ones.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.framework.cache.transforms import FieldSetSharer

MAX_VALUES = 200_000
"""Shared values kept before the table is emptied (cards and their conditions change over months);
emptying costs only the sharing of values seen before, never correctness."""

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


class PhysicalGPUInterner:
    """The decoded-object transform of gpu-controller's PhysicalGPU cache: every repeating value of
    a projected card replaced by one shared instance, then the field-name sets shared (see the
    module docs). Runs on the reflector's thread, on a freshly decoded object no one else holds."""

    def __init__(self, *, max_values: int = MAX_VALUES) -> None:
        self._lock = threading.Lock()
        self._values: dict[Any, Any] = {}
        self._max = max_values
        self._field_sets = FieldSetSharer()

    def __call__(self, gpu: PhysicalGPU) -> PhysicalGPU:
        with self._lock:
            if len(self._values) > self._max:
                self._values.clear()
            one = self._one
            _put(gpu, "spec", one(gpu.spec))
            meta = gpu.metadata
            if meta.labels:
                _put(
                    meta,
                    "labels",
                    self._values.setdefault(("labels", frozenset(meta.labels.items())), meta.labels),
                )
            status = gpu.status
            if status is not None:
                _put(status, "node_info", one(status.node_info))
                pci = status.pci_info
                if pci is not None:  # its ids are shared by cards at other addresses too
                    for field in ("class_", "vendor", "device"):
                        _put(pci, field, one(getattr(pci, field)))
                    _put(status, "pci_info", one(pci))
                if status.conditions:
                    _put(status, "conditions", [one(c) for c in status.conditions])
                if status.current_state is not None and status.current_state.nvidia is None:
                    _put(status, "current_state", one(status.current_state))
        return self._field_sets(gpu)  # type: ignore[no-any-return]

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def _one(self, value: Any) -> Any:
        """The shared instance equal to ``value`` (a model of scalars and such models), or
        ``value`` itself when it holds something unhashable."""
        key = _key(value)
        return value if key is None else self._values.setdefault(key, value)


def _put(model: BaseModel, field: str, value: Any) -> None:
    """Replaces a field's value by an equal one: straight into the instance's ``__dict__``, because
    an assignment would validate — copying the shared value — and mark the field as set."""
    model.__dict__[field] = value


def _key(value: Any) -> Any:
    """A model's type and content as a hashable key (nested models by their keys), None if some
    field is not hashable (a list, a dict)."""
    if not isinstance(value, BaseModel):
        return value if isinstance(value, str | int | float | bool | None) or _hashable(value) else None
    parts: list[Any] = [type(value)]
    for field in value.__dict__.values():
        part = _key(field)
        if part is None and field is not None:
            return None
        parts.append(part)
    return tuple(parts)


def _hashable(value: Any) -> bool:
    if isinstance(value, list | dict | set):
        return False
    try:
        hash(value)
    except TypeError:
        return False
    return True


__all__ = ["MAX_VALUES", "PhysicalGPUInterner", "project_node", "project_physical_gpu"]
