"""The thin PhysicalGPU reconciler: fetch → state → handlers → update (spec §10.4 item 2)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUStatus
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient
from pkg.framework.reconcile import Handler, KubeResourceWriter, Resource, ResourceReconciler
from pkg.framework.reconcile.contract import Request
from pkg.gpucontroller.physicalgpu.internal.state import PhysicalGPUState, state_factory

PhysicalGPUReconciler = ResourceReconciler[PhysicalGPU, PhysicalGPUStatus, PhysicalGPUState]


def new_reconciler(
    *,
    client: KubeClient,
    get_gpu: Callable[[Request], PhysicalGPU | None],
    node_exists: Callable[[str], bool],
    handlers: Sequence[Handler[PhysicalGPUState]],
) -> PhysicalGPUReconciler:
    writer = KubeResourceWriter(client, PHYSICAL_GPU)

    def resource_factory(request: Request) -> Resource[PhysicalGPU, PhysicalGPUStatus]:
        return Resource(request, getter=get_gpu, writer=writer, status_type=PhysicalGPUStatus)

    return ResourceReconciler(
        resource_factory=resource_factory, state_factory=state_factory(node_exists), handlers=handlers
    )
