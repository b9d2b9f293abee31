"""Composition root of the PhysicalGPU controller (spec §10.4 item 1).

The container declares how the parts are built, each provider naming what it passes
(``providers.Singleton(Cls, kw=provider)``), so a unit test overrides one part of the real
container (``container.service.override(providers.Object(fake))``) instead of wiring its own.
:func:`setup_controller` registers the controller with the builder: it reconciles PhysicalGPUs,
and a Node appearing or disappearing wakes the GPUs on that node. Everything shared across worker
threads here is either immutable or thread-safe (informer stores, the client, the recorder).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dependency_injector import containers, providers
from kubernetes.client import V1Node

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUStatus
from pkg.domain.indexes import PHYSICAL_GPU_BY_NODE
from pkg.domain.informers import nodes, physical_gpus
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.cache.store import Store
from pkg.framework.client import KubeClient
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.controller.object_ref import ObjectRefWatch, ReferrersOf
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile import Handler, KubeResourceWriter, Request, ResourceReconciler
from pkg.framework.reconcile.conditions import now_utc
from pkg.gpucontroller.physicalgpu.internal.handler.default_conditions import DefaultConditionsHandler
from pkg.gpucontroller.physicalgpu.internal.handler.orphan_cleanup import OrphanCleanupHandler
from pkg.gpucontroller.physicalgpu.internal.service import PhysicalGPUService
from pkg.gpucontroller.physicalgpu.internal.state import PhysicalGPUState, state_factory
from pkg.gpucontroller.physicalgpu.metrics import PhysicalGPUCollector

CONTROLLER_NAME = "physicalgpu"
DEFAULT_WORKERS = 2

PhysicalGPUReconciler = ResourceReconciler[PhysicalGPU, PhysicalGPUStatus, PhysicalGPUState]


def new_reconciler(
    *,
    client: KubeClient,
    gpus: SharedInformer[PhysicalGPU],
    nodes: SharedInformer[V1Node],
    handlers: Sequence[Handler[PhysicalGPUState]],
) -> PhysicalGPUReconciler:
    """Read from the cache -> state -> handlers -> one guarded metadata patch and one status PUT."""

    def node_exists(name: str) -> bool:
        return nodes.store.get_by_key(name) is not None

    return ResourceReconciler.over_cache(
        cache=gpus.store,
        writer=KubeResourceWriter(client, PHYSICAL_GPU),
        status_type=PhysicalGPUStatus,
        state_factory=state_factory(node_exists),
        handlers=handlers,
    )


def gpus_on_node(gpu_store: Store[PhysicalGPU]) -> ReferrersOf:
    """Node -> the PhysicalGPUs labelled with it (an index lookup, never a scan)."""

    def referrers(obj: Any) -> list[Request]:
        gpus = gpu_store.by_index(PHYSICAL_GPU_BY_NODE, str(obj.metadata.name))
        return [Request(name=str(gpu.metadata.name)) for gpu in gpus]

    return referrers


class PhysicalGPUContainer(containers.DeclarativeContainer):
    config = providers.Configuration()
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)
    recorder = providers.Dependency(instance_of=EventRecorderLogger)

    gpu_informer = providers.Singleton(physical_gpus, informers=informers)
    node_informer = providers.Singleton(nodes, informers=informers)
    now = providers.Object(now_utc)  # the conditions' clock
    service = providers.Singleton(PhysicalGPUService, client=client)
    handlers = providers.List(
        providers.Singleton(OrphanCleanupHandler, deleter=service, recorder=recorder),
        providers.Singleton(DefaultConditionsHandler, now=now),
    )
    reconciler = providers.Singleton(
        new_reconciler, client=client, gpus=gpu_informer, nodes=node_informer, handlers=handlers
    )


def setup_controller(manager: Manager, container: PhysicalGPUContainer) -> Controller:
    """Registers the controller, its watches and its metrics collector with ``manager``."""
    gpus: SharedInformer[PhysicalGPU] = container.gpu_informer()
    # Only a Node's appearance or disappearance changes what the controller decides (orphan
    # cleanup): Node status heartbeats would otherwise wake every GPU of the node every few seconds.
    node_changes = ObjectRefWatch(update_filter=lambda _old, _new: False, enqueuer=gpus_on_node(gpus.store))
    controller = (
        ControllerBuilder(manager, name=CONTROLLER_NAME)
        .for_(gpus)
        .watches_with(container.node_informer(), node_changes)
        .workers(int(container.config.workers() or DEFAULT_WORKERS))
        .complete(container.reconciler())
    )
    manager.metrics.register(PhysicalGPUCollector(gpus.store))
    return controller
