"""gpu-controller's status write: server-side apply of exactly the fields it owns.

A PhysicalGPU's status has three writers: the node agent (``nodeInfo``, ``pciInfo``,
``currentState.driverType``), gpu-handler (``capabilities``, ``currentState.nvidia``,
``HardwareHealthy``, ``DriverFilesReady``) and gpu-controller. A PUT of the whole status would
restate — and, from a cache that keeps only part of the object, erase — the others' fields, so
gpu-controller applies under its own field manager, on the status subresource, a body that holds
only what it owns (:func:`owned_status`):

* ``DriverReady`` (the validator's verdict, or Unknown ``ValidationPending`` where no validator
  judges the card);
* ``HardwareHealthy`` only while it is the Unknown ``ValidationPending`` seed gpu-controller put
  there: gpu-handler takes the condition over with a forced apply and never uses that reason, and
  from then on gpu-controller leaves it out, which hands it to gpu-handler for good (an apply
  drops a field only when no other manager owns it);
* ``observedGeneration``.

The apply is **not forced**. A conflict means another manager owns one of these fields with
another value — gpu-handler took ``HardwareHealthy`` over after the cache was read — and the
request is retried from the next cache version (the template's ``ConflictRequeue``), so a stale
seed never overwrites gpu-handler's word. The one conflict that is forced through is with
gpu-controller's own earlier *updates*: releases before this one wrote the status with PUT, which
the API server records under the same manager name with operation ``Update``; those fields are
ours, and without taking them over the first changed ``DriverReady`` after an upgrade would
conflict forever.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUConditionType, PhysicalGPUStatus
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient
from pkg.framework.client.errors import ConflictError
from pkg.framework.client.patch import PatchOp
from pkg.framework.reconcile import KubeResourceWriter
from pkg.gpucontroller.physicalgpu.internal.handler.default_conditions import REASON_VALIDATION_PENDING

logger = logging.getLogger(__name__)

_CONFLICT_MANAGER = re.compile(r'conflict with "([^"]*)"')


def owned_status(status: PhysicalGPUStatus) -> dict[str, Any]:
    """The part of ``status`` gpu-controller owns, as the JSON of an apply (see the module docs)."""
    dumped = status.to_api_dict()
    owned: dict[str, Any] = {
        "conditions": [
            condition
            for condition in dumped.get("conditions") or []
            if condition.get("type") == PhysicalGPUConditionType.DRIVER_READY
            or (
                condition.get("type") == PhysicalGPUConditionType.HARDWARE_HEALTHY
                and condition.get("reason") == REASON_VALIDATION_PENDING
            )
        ]
    }
    if status.observed_generation is not None:
        owned["observedGeneration"] = status.observed_generation
    return owned


def only_own_conflicts(exc: ConflictError, manager: str) -> bool:
    """Whether every field an apply conflicted on belongs to ``manager`` itself (its updates).

    The API server lists each conflicting field as a cause, ``conflict with "<manager>" ...``; a
    conflict without causes is not understood and never forced."""
    causes: Sequence[Any] = exc.details.get("causes") or []
    managers = [_CONFLICT_MANAGER.search(str(cause.get("message", ""))) for cause in causes]
    return bool(managers) and all(found is not None and found.group(1) == manager for found in managers)


class ApplyStatusWriter:
    """The :class:`~pkg.framework.reconcile.writer.ResourceWriter` of the PhysicalGPU controller:
    ``update_status`` applies :func:`owned_status` of the object it is given (its resourceVersion
    is not sent: an apply merges by field owner, not by version); metadata patches are the
    template's guarded JSON patch. Raises ``ConflictError`` when another manager owns a field with
    another value, ``NotFoundError`` when the object is gone."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._metadata = KubeResourceWriter(client, PHYSICAL_GPU)

    def update_status(self, obj: PhysicalGPU) -> PhysicalGPU:
        name = str(obj.metadata.name)
        body: dict[str, Any] = {
            "metadata": {"name": name},
            "status": owned_status(obj.status or PhysicalGPUStatus()),
        }
        try:
            return self._client.apply(PHYSICAL_GPU, body, subresource="status", force=False)
        except ConflictError as exc:
            if not only_own_conflicts(exc, self._client.field_manager):
                raise
            logger.info(
                "taking over the status fields this controller wrote with updates before",
                extra={"physical_gpu": name, "conflicts": exc.message},
            )
            return self._client.apply(PHYSICAL_GPU, body, subresource="status", force=True)

    def patch_metadata(self, *, name: str, namespace: str | None, ops: Sequence[PatchOp]) -> PhysicalGPU:
        return self._metadata.patch_metadata(name=name, namespace=namespace, ops=ops)
