"""Which informer events wake a publish, as predicates for the framework's Controller.

Every event only adds the single ``publish`` request (level-based: the publish reads everything
from the caches), so a predicate's job is to keep the queue quiet when nothing the offers depend
on changed:

* **PhysicalGPU** of this node: creates and deletes, and updates that change ``DriverReady``,
  ``HardwareHealthy``, the bound driver or the deletion mark. Capability changes arrive through
  the card specs' subscription instead, which holds the description offers are built from.
* **Node** (this one, by field selector): created (the owner of the slices exists now), deleted,
  marked for deletion, or its MIG decision (label ``gpu.deckhouse.io/allow-mig``) changed.
  The kubelet's status heartbeats and every other label are ignored.
* **ResourceSlice** of this node and driver: a delete, or a change of spec or owners, by anyone.
  The kubelet wipes a node's slices when it starts, and a person may edit or delete one; the
  publish restores them at once instead of at the next resync. Our own writes wake one publish
  that finds nothing to do (one LIST, no write). Creates are ignored: the start-up publish covers
  the initial list, and a create by someone else shows in the next resync.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1ResourceSlice

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUConditionType
from pkg.dra.publisher import content
from pkg.framework.controller.predicate import Funcs, Predicate
from pkg.framework.reconcile.conditions import condition_status
from pkg.gpuhandler.publishing.selection import mig_allowed_on


def _offer_inputs(gpu: PhysicalGPU) -> tuple[Any, ...]:
    status = gpu.status
    conditions = status.conditions if status else None
    return (
        condition_status(conditions, PhysicalGPUConditionType.DRIVER_READY),
        condition_status(conditions, PhysicalGPUConditionType.HARDWARE_HEALTHY),
        status.current_state.driver_type if status and status.current_state else None,
        gpu.metadata.deletion_timestamp is not None,
    )


def gpu_events() -> Predicate:
    return Funcs(update=lambda old, new: _offer_inputs(old) != _offer_inputs(new))


def node_events() -> Predicate:
    return Funcs(
        update=lambda old, new: (
            mig_allowed_on(old) != mig_allowed_on(new)
            or (old.metadata.deletion_timestamp is None) != (new.metadata.deletion_timestamp is None)
        )
    )


def _changed(old: V1ResourceSlice, new: V1ResourceSlice) -> bool:
    return bool(content(old) != content(new) or old.spec.pool.generation != new.spec.pool.generation)


def slice_events() -> Predicate:
    return Funcs(create=lambda _obj: False, update=_changed)
