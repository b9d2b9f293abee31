"""Writes of the PhysicalGPU controller beyond the status/metadata update of the reconciler."""

from __future__ import annotations

from typing import Protocol

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient, NotFoundError


class GPUDeleter(Protocol):
    def delete(self, gpu: PhysicalGPU) -> bool: ...


class PhysicalGPUService:
    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def delete(self, gpu: PhysicalGPU) -> bool:
        """Deletes exactly this object (uid precondition), so a same-named successor a node agent
        created in the meantime survives. Returns False when it was already gone."""
        try:
            self._client.delete(PHYSICAL_GPU, str(gpu.metadata.name), uid=gpu.metadata.uid)
        except NotFoundError:
            return False
        return True
