"""Which PhysicalGPU events wake the enrichment of that card.

Creates and deletes always do (a new card to read; a gone card to forget). An update does when it
changes what the enrichment reads or writes: ``pciInfo``, the bound driver, ``DriverReady``, the
device label, or one of the owned fields (someone else edited them, or our own write arrived,
which costs one pass that finds nothing to do). Everything else, a node agent's ``nodeInfo``
refresh or another writer's condition, is ignored; the periodic re-enrichment covers what NVML
changes behind the API's back.
"""

from __future__ import annotations

from typing import Any

from api.gpu.v1alpha1 import LABEL_DEVICE, PhysicalGPU, PhysicalGPUConditionType
from pkg.framework.controller.predicate import Funcs, Predicate
from pkg.framework.reconcile.conditions import condition_status
from pkg.gpuhandler.enrichment.owned import owned_of


def _inputs(gpu: PhysicalGPU) -> tuple[Any, ...]:
    status = gpu.status
    owned = owned_of(gpu)
    return (
        (gpu.metadata.labels or {}).get(LABEL_DEVICE),
        status.pci_info.to_api_dict() if status and status.pci_info else None,
        status.current_state.driver_type if status and status.current_state else None,
        condition_status(status.conditions if status else None, PhysicalGPUConditionType.DRIVER_READY),
        owned.apply_status(),
    )


def gpu_events() -> Predicate:
    return Funcs(update=lambda old, new: _inputs(old) != _inputs(new))
