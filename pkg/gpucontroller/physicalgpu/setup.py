"""Composition root of the PhysicalGPU controller (spec §10.4 item 1).

The container declares how the parts are built; :func:`setup_controller` wires them into a manager:
indexes, watches, the inventory collector and the controller itself. Everything shared across
worker threads here is either immutable or thread-safe (informer stores, the client, the recorder).
"""

from __future__ import annotations

from typing import Any

from dependency_injector import containers, providers

from pkg.domain.indexes import index_all
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.domain.metrics import METRICS
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import NODE
from pkg.framework.controller.controller import Controller
from pkg.framework.controller.enqueue import EnqueueRequestForObject
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.manager.manager import Manager
from pkg.gpucontroller.physicalgpu.internal.handler import DefaultConditionsHandler, OrphanCleanupHandler
from pkg.gpucontroller.physicalgpu.internal.service import PhysicalGPUService
from pkg.gpucontroller.physicalgpu.internal.watch import node_watch
from pkg.gpucontroller.physicalgpu.metrics import PhysicalGPUCollector
from pkg.gpucontroller.physicalgpu.reconciler import new_reconciler

CONTROLLER_NAME = "physicalgpu"


def _gpu_informer(factory: InformerFactory) -> Any:
    informer = factory.get_informer(PHYSICAL_GPU)
    index_all(informer)
    return informer


class PhysicalGPUContainer(containers.DeclarativeContainer):
    config = providers.Configuration()
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)
    recorder = providers.Dependency(instance_of=EventRecorderLogger)

    gpu_informer = providers.Singleton(_gpu_informer, informers)
    node_informer = providers.Singleton(lambda f: f.get_informer(NODE), informers)
    service = providers.Singleton(PhysicalGPUService, client)
    handlers = providers.List(
        providers.Singleton(OrphanCleanupHandler, deleter=service, recorder=recorder),
        providers.Singleton(DefaultConditionsHandler),
    )
    reconciler = providers.Singleton(
        lambda client, gpus, nodes, handlers: new_reconciler(
            client=client,
            get_gpu=lambda request: gpus.store.get_by_key(request.name),
            node_exists=lambda name: nodes.store.get_by_key(name) is not None,
            handlers=handlers,
        ),
        client,
        gpu_informer,
        node_informer,
        handlers,
    )
    controller = providers.Singleton(
        lambda reconciler, workers: Controller(
            metrics=METRICS,
            name=CONTROLLER_NAME,
            reconciler=reconciler,
            max_concurrent_reconciles=int(workers or 2),
        ),
        reconciler,
        config.workers,
    )


def setup_controller(manager: Manager, container: PhysicalGPUContainer) -> Controller:
    """Registers the controller, its watches and its metrics collector with ``manager``."""
    controller: Controller = container.controller()
    gpus = container.gpu_informer()
    controller.watch(gpus, EnqueueRequestForObject())
    node_watch(gpus.store).watch(container.node_informer(), controller)
    METRICS.register(PhysicalGPUCollector(gpus.store))
    manager.add(controller)
    return controller
