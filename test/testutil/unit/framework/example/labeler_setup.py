"""Composition root of the labeler: its parts, and its registration with the manager."""

from __future__ import annotations

from collections.abc import Sequence

from dependency_injector import containers, providers

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUStatus
from pkg.domain.informers import physical_gpus
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile import Handler, KubeResourceWriter, ResourceReconciler
from testutil.unit.framework.example.labeler_handlers import LabelerState, SeenLabelHandler


def new_reconciler(
    *, client: KubeClient, gpus: SharedInformer[PhysicalGPU], handlers: Sequence[Handler[LabelerState]]
) -> ResourceReconciler[PhysicalGPU, PhysicalGPUStatus, LabelerState]:
    return ResourceReconciler.over_cache(
        cache=gpus.store,
        writer=KubeResourceWriter(client, PHYSICAL_GPU),
        status_type=PhysicalGPUStatus,
        state_factory=LabelerState,
        handlers=handlers,
    )


class LabelerContainer(containers.DeclarativeContainer):
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)

    gpus = providers.Singleton(physical_gpus, informers=informers)
    handlers = providers.List(providers.Singleton(SeenLabelHandler))
    reconciler = providers.Singleton(new_reconciler, client=client, gpus=gpus, handlers=handlers)


def setup_labeler(manager: Manager, container: LabelerContainer) -> Controller:
    return ControllerBuilder(manager, name="labeler").for_(container.gpus()).complete(container.reconciler())
