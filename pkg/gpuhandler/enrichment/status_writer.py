"""The Kubernetes writes of the enrichment, and nothing else.

* ``apply``: server-side apply on the status subresource under field manager ``gpu-handler`` of
  exactly :class:`~pkg.gpuhandler.enrichment.owned.OwnedStatus` (capabilities,
  ``currentState.nvidia`` or ``currentState.amd``, the ``HardwareHealthy`` condition). Forced,
  because the gpu-controller seeds ``HardwareHealthy`` as Unknown (its own apply) and the handler
  is meant to take it over; fields of other managers (``pciInfo``, ``currentState.driverType``,
  ``DriverReady``) are not sent and therefore untouched. The API server checks the merged object
  against the CRD's CEL rules: ``currentState.nvidia`` next to a ``driverType`` other than Nvidia
  (``amd`` other than ROCm) is refused (422), which the readiness rule prevents. An apply to the
  status of a deleted object fails with 404; it never creates one.
* ``withdraw_nvidia``: removes ``currentState.nvidia`` with a JSON patch guarded by a ``test`` of
  ``metadata.uid``, when a card is no longer readable. A patch rather than an apply that omits the
  block, because an apply must restate every other owned field, and a card that is not readable is
  exactly when they should be left as they are. The API server answers a JSON patch that does
  not apply — the block is already gone, or the ``test`` of the uid failed because the object was
  replaced — with a 422 that carries no field causes ("the server rejected our request due to an
  error in our request"): nothing to withdraw. A 422 *with* causes is the patched object failing
  the CRD's validation, a real failure that is raised (and retried with backoff), never taken for
  "nothing to withdraw". ``withdraw_amd`` does the same for ``currentState.amd``.
"""

from __future__ import annotations

import logging
from typing import Any, Final, Protocol

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient, PatchType
from pkg.framework.client.errors import InvalidError
from pkg.gpuhandler.enrichment.owned import OwnedStatus

logger = logging.getLogger(__name__)

FIELD_MANAGER: Final = "gpu-handler"


class StatusWriter(Protocol):
    def apply(self, gpu: PhysicalGPU, owned: OwnedStatus) -> PhysicalGPU: ...

    def withdraw_nvidia(self, gpu: PhysicalGPU) -> PhysicalGPU | None:
        """``None`` when there was nothing to withdraw."""
        ...

    def withdraw_amd(self, gpu: PhysicalGPU) -> PhysicalGPU | None:
        """``None`` when there was nothing to withdraw."""
        ...


class KubeStatusWriter:
    """:class:`StatusWriter` over :class:`KubeClient`; the client must write as ``gpu-handler``."""

    def __init__(self, client: KubeClient) -> None:
        if client.field_manager != FIELD_MANAGER:
            raise ValueError(f"the gpu-handler writes as {FIELD_MANAGER!r}, not {client.field_manager!r}")
        self._client = client

    def apply(self, gpu: PhysicalGPU, owned: OwnedStatus) -> PhysicalGPU:
        body: dict[str, Any] = {"metadata": {"name": _name(gpu)}, "status": owned.apply_status()}
        return self._client.apply(PHYSICAL_GPU, body, subresource="status", force=True)

    def withdraw_nvidia(self, gpu: PhysicalGPU) -> PhysicalGPU | None:
        return self._withdraw(gpu, "nvidia")

    def withdraw_amd(self, gpu: PhysicalGPU) -> PhysicalGPU | None:
        return self._withdraw(gpu, "amd")

    def _withdraw(self, gpu: PhysicalGPU, block: str) -> PhysicalGPU | None:
        """Remove ``currentState.<block>`` (see the module docs)."""
        ops = [
            {"op": "test", "path": "/metadata/uid", "value": gpu.metadata.uid},
            {"op": "remove", "path": f"/status/currentState/{block}"},
        ]
        try:
            return self._client.patch(
                PHYSICAL_GPU, _name(gpu), ops, patch_type=PatchType.JSON, subresource="status"
            )
        except InvalidError as exc:
            if exc.details.get("causes"):
                raise
            logger.debug(
                "nothing to withdraw: the patch no longer applies (currentState.%s already gone, "
                "or the object was replaced): %s",
                block,
                exc.message,
                extra={"physical_gpu": _name(gpu)},
            )
            return None


def _name(gpu: PhysicalGPU) -> str:
    return str(gpu.metadata.name)
