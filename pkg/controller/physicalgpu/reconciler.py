"""The thin PhysicalGPU reconciler: fetch → state → handlers → update (spec §10.4 item 2)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUStatus
from pkg.client import KubeClient
from pkg.client.known_kinds import PHYSICAL_GPU
from pkg.controller.physicalgpu.internal.state import PhysicalGPUState, state_factory
from pkg.controller.reconcile import Request
from pkg.controller.reconciler import Handler, KubeResourceWriter, Resource, ResourceReconciler

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
