"""Composition root of the PhysicalGPU controller.

The container declares how the parts are built, each provider naming what it passes
(``providers.Singleton(Cls, kw=provider)``), so a unit test overrides one part of the real
container (``container.service.override(providers.Object(fake))``) instead of wiring its own.
:func:`setup_controller` registers the controller with the builder: it reconciles PhysicalGPUs;
a Node appearing or disappearing wakes the GPUs on that node, and so does a GPU validator Pod on
it whose verdict changed. The validator's Pods are watched by label in the node components'
namespace and indexed by node, so a reconcile looks its node's Pods up and never lists Pods.
Everything shared across worker threads here is either immutable or thread-safe (informer stores,
the client, the recorder).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dependency_injector import containers, providers
from kubernetes.client import V1Node, V1Pod

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUStatus
from pkg.domain.indexes import PHYSICAL_GPU_BY_NODE
from pkg.domain.informers import nodes, physical_gpus
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.cache.store import Store
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.controller.object_ref import ObjectRefWatch, ReferrersOf
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile import Handler, Request, ResourceReconciler
from pkg.framework.reconcile.conditions import now_utc
from pkg.gpucontroller.names import VALIDATOR_POD_SELECTOR
from pkg.gpucontroller.physicalgpu.internal.handler.default_conditions import DefaultConditionsHandler
from pkg.gpucontroller.physicalgpu.internal.handler.driver_ready import DriverReadyHandler
from pkg.gpucontroller.physicalgpu.internal.handler.orphan_cleanup import OrphanCleanupHandler
from pkg.gpucontroller.physicalgpu.internal.service import PhysicalGPUService
from pkg.gpucontroller.physicalgpu.internal.state import PhysicalGPUState, state_factory
from pkg.gpucontroller.physicalgpu.internal.status_writer import ApplyStatusWriter
from pkg.gpucontroller.physicalgpu.internal.validator import pod_verdict
from pkg.gpucontroller.physicalgpu.metrics import PhysicalGPUCollector

CONTROLLER_NAME = "physicalgpu"
DEFAULT_WORKERS = 2
POD_BY_NODE = "pod-by-node"

PhysicalGPUReconciler = ResourceReconciler[PhysicalGPU, PhysicalGPUStatus, PhysicalGPUState]


def pod_node(pod: V1Pod) -> list[str]:
    """The index of Pods by the node they are bound to (none while unscheduled)."""
    return [pod.spec.node_name] if pod.spec is not None and pod.spec.node_name else []


def validator_pods(*, informers: InformerFactory, namespace: str) -> SharedInformer[V1Pod]:
    """The GPU validator's Pods in the node components' namespace, indexed by node."""
    informer = informers.get_informer(POD, namespace=namespace, label_selector=VALIDATOR_POD_SELECTOR)
    informer.ensure_indexers({POD_BY_NODE: pod_node})
    return informer


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


def gpus_on_node(gpu_store: Store[PhysicalGPU], *, node_of: Callable[[Any], list[str]]) -> ReferrersOf:
    """An object -> the PhysicalGPUs on its node (an index lookup, never a scan)."""

    def referrers(obj: Any) -> list[Request]:
        gpus = [gpu for node in node_of(obj) for gpu in gpu_store.by_index(PHYSICAL_GPU_BY_NODE, node)]
        return [Request(name=str(gpu.metadata.name)) for gpu in gpus]

    return referrers


def node_name(node: V1Node) -> list[str]:
    return [str(node.metadata.name)] if node.metadata else []


def verdict_changed(old: V1Pod, new: V1Pod) -> bool:
    """A validator Pod's update matters only when it moves or what it says about the driver changes:
    its status changes on every probe and container event, most of which say nothing new."""
    return pod_node(old) != pod_node(new) or pod_verdict(old) != pod_verdict(new)


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
    """Registers the controller, its watches and its metrics collector with ``manager``."""
    gpus: SharedInformer[PhysicalGPU] = container.gpu_informer()
    # Only a Node's appearance or disappearance changes what the controller decides (orphan
    # cleanup): Node status heartbeats would otherwise wake every GPU of the node every few seconds.
    node_changes = ObjectRefWatch(
        update_filter=lambda _old, _new: False, enqueuer=gpus_on_node(gpus.store, node_of=node_name)
    )
    validator_changes = ObjectRefWatch(
        update_filter=verdict_changed, enqueuer=gpus_on_node(gpus.store, node_of=pod_node)
    )
    controller = (
        ControllerBuilder(manager, name=CONTROLLER_NAME)
        .for_(gpus)
        .watches_with(container.node_informer(), node_changes)
        .watches_with(container.pod_informer(), validator_changes)
        .workers(int(container.config.workers() or DEFAULT_WORKERS))
        .complete(container.reconciler())
    )
    manager.metrics.register(PhysicalGPUCollector(gpus.store))
    return controller
