"""Informer events that should wake a sync, as predicates for the framework's Controller.

* A PhysicalGPU of this node **deleted** (by hand, or by the gpu-controller): the sync recreates it
  if its card is still there. An update that changed the agent's own fields (someone
  edited a label or ``pciInfo``) also wakes it, so the edit is reverted at once instead of at the
  next resync; the agent's own writes wake it too, and that pass finds nothing to do. Creates are
  ignored: the initial list is covered by the start-up sync.
* The agent's **Node** created (start-up, or the Node re-registered) or its agent labels changed.
  Other Node updates, the kubelet's status heartbeats above all, are ignored.
"""

from __future__ import annotations

from typing import Any

from api.gpu.v1alpha1 import LABEL_DEVICE, LABEL_NODE, LABEL_VENDOR
from pkg.framework.controller.predicate import Funcs, Predicate
from pkg.inventory.desired import NODE_LABEL_KEYS, owned_status
from pkg.inventory.naming import ADDRESS_LABEL

_GPU_LABEL_KEYS = (LABEL_NODE, LABEL_VENDOR, LABEL_DEVICE, ADDRESS_LABEL)


def _labels(obj: Any, keys: tuple[str, ...]) -> dict[str, str | None]:
    labels = obj.metadata.labels or {}
    return {key: labels.get(key) for key in keys}


def _gpu_fields_changed(old: Any, new: Any) -> bool:
    if _labels(old, _GPU_LABEL_KEYS) != _labels(new, _GPU_LABEL_KEYS):
        return True
    return owned_status(old.status).to_api_dict() != owned_status(new.status).to_api_dict()


def gpu_events() -> Predicate:
    return Funcs(create=lambda _obj: False, update=_gpu_fields_changed)


def node_events() -> Predicate:
    return Funcs(
        update=lambda old, new: _labels(old, NODE_LABEL_KEYS) != _labels(new, NODE_LABEL_KEYS),
        delete=lambda _obj: False,
    )
