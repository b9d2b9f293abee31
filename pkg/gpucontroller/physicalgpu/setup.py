"""Composition root of the PhysicalGPU controller.

The container declares how the parts are built, each provider naming what it passes
(``providers.Singleton(Cls, kw=provider)``), so a unit test overrides one part of the real
container (``container.service.override(providers.Object(fake))``) instead of wiring its own.
:func:`setup_controller` declares the indexes the controller reads (``internal/indexes.py``) and
registers the controller with the builder: it reconciles PhysicalGPUs, and what else wakes one is in
``internal/watch/`` (a Node appearing or disappearing, a GPU validator Pod on its node whose verdict
changed). The validator's Pods are watched by label in the node components' namespace.
Everything shared across worker threads here is either immutable or thread-safe (informer stores,
the client, the recorder).
"""

from __future__ import annotations

from collections.abc import Sequence

from dependency_injector import containers, providers
from kubernetes.client import V1Node, V1Pod

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUStatus
from pkg.domain.informers import nodes, physical_gpus
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile import Handler, ResourceReconciler
from pkg.framework.reconcile.conditions import now_utc
from pkg.gpucontroller.names import VALIDATOR_POD_SELECTOR
from pkg.gpucontroller.physicalgpu.internal.handler.default_conditions import DefaultConditionsHandler
from pkg.gpucontroller.physicalgpu.internal.handler.driver_ready import DriverReadyHandler
from pkg.gpucontroller.physicalgpu.internal.handler.orphan_cleanup import OrphanCleanupHandler
from pkg.gpucontroller.physicalgpu.internal.indexes import INDEXES, POD_BY_NODE
from pkg.gpucontroller.physicalgpu.internal.service import PhysicalGPUService
from pkg.gpucontroller.physicalgpu.internal.state import PhysicalGPUState, state_factory
from pkg.gpucontroller.physicalgpu.internal.status_writer import ApplyStatusWriter
from pkg.gpucontroller.physicalgpu.internal.watch import node_watch, validator_pod_watch
from pkg.gpucontroller.physicalgpu.metrics import PhysicalGPUCollector

CONTROLLER_NAME = "physicalgpu"
DEFAULT_WORKERS = 2

PhysicalGPUReconciler = ResourceReconciler[PhysicalGPU, PhysicalGPUStatus, PhysicalGPUState]


def validator_pods(*, informers: InformerFactory, namespace: str) -> SharedInformer[V1Pod]:
    """The GPU validator's Pods in the node components' namespace (indexed by node: ``POD_BY_NODE``)."""
    return informers.get_informer(POD, namespace=namespace, label_selector=VALIDATOR_POD_SELECTOR)


def new_reconciler(
    *,
    client: KubeClient,
    gpus: SharedInformer[PhysicalGPU],
    nodes: SharedInformer[V1Node],
    pods: SharedInformer[V1Pod],
    handlers: Sequence[Handler[PhysicalGPUState]],
) -> PhysicalGPUReconciler:
    """Read from the cache -> state -> handlers -> one server-side apply of the status fields the
    controller owns (``internal/status_writer``): the cache holds a projection of each card, so a
    PUT of the cached object would erase what the node agent and gpu-handler wrote."""

    def node_exists(name: str) -> bool:
        return nodes.store.get_by_key(name) is not None

    def pods_on(node: str) -> list[V1Pod]:
        return pods.store.by_index(POD_BY_NODE, node)

    return ResourceReconciler.over_cache(
        cache=gpus.store,
        writer=ApplyStatusWriter(client),
        status_type=PhysicalGPUStatus,
        state_factory=state_factory(node_exists, pods_on),
        handlers=handlers,
    )


class PhysicalGPUContainer(containers.DeclarativeContainer):
    config = providers.Configuration()
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)
    recorder = providers.Dependency(instance_of=EventRecorderLogger)

    gpu_informer = providers.Singleton(physical_gpus, informers=informers)
    node_informer = providers.Singleton(nodes, informers=informers)
    pod_informer = providers.Singleton(
        validator_pods, informers=informers, namespace=config.components_namespace.required()
    )
    now = providers.Object(now_utc)  # the conditions' clock
    service = providers.Singleton(PhysicalGPUService, client=client)
    handlers = providers.List(
        providers.Singleton(OrphanCleanupHandler, deleter=service, recorder=recorder),
        providers.Singleton(DriverReadyHandler, recorder=recorder, now=now),
        providers.Singleton(DefaultConditionsHandler, now=now),
    )
    reconciler = providers.Singleton(
        new_reconciler,
        client=client,
        gpus=gpu_informer,
        nodes=node_informer,
        pods=pod_informer,
        handlers=handlers,
    )


def setup_controller(manager: Manager, container: PhysicalGPUContainer) -> Controller:
    """Registers the controller's indexes, the controller, its watches and its metrics collector
    with ``manager``."""
    manager.indexes.declare(*INDEXES)
    gpus: SharedInformer[PhysicalGPU] = container.gpu_informer()
    controller = (
        ControllerBuilder(manager, name=CONTROLLER_NAME)
        .for_(gpus)
        .watches_with(container.node_informer(), node_watch(gpus.store))
        .watches_with(container.pod_informer(), validator_pod_watch(gpus.store))
        .workers(int(container.config.workers() or DEFAULT_WORKERS))
        .complete(container.reconciler())
    )
    manager.metrics.register(PhysicalGPUCollector(gpus.store))
    return controller
