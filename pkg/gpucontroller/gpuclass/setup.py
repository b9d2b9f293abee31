"""Composition root of the GPUClass controller.

It reconciles GPUClasses; what else wakes one (each a watch of its own in ``internal/watch/``):

- its DeviceClass (same name) appearing, disappearing or changing: a hand edit is put back, a
  foreign class that went away frees the name;
- a PhysicalGPU its ``spec.names`` lists appearing, disappearing or changing its UUID: the
  selector lists the cards by UUID (an index of GPUClasses by listed name, never a scan).

Only a new generation of a GPUClass wakes it (its own status writes do not). The index of
GPUClasses by listed name (``internal/indexes.py``) is declared with the manager.
"""

from __future__ import annotations

from collections.abc import Sequence

from dependency_injector import containers, providers
from kubernetes.client import V1DeviceClass

from api.gpu.v1alpha1 import GPUClass, GPUClassStatus, PhysicalGPU
from pkg.domain.informers import physical_gpus
from pkg.domain.kinds import GPU_CLASS
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import DEVICE_CLASS
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile import Handler, KubeResourceWriter, ResourceReconciler
from pkg.gpucontroller.gpuclass.internal.gpu_uuid import gpu_uuid
from pkg.gpucontroller.gpuclass.internal.handler.apply import ApplyHandler
from pkg.gpucontroller.gpuclass.internal.handler.ownership import OwnershipHandler
from pkg.gpucontroller.gpuclass.internal.indexes import INDEXES
from pkg.gpucontroller.gpuclass.internal.service import KubeDeviceClassWriter
from pkg.gpucontroller.gpuclass.internal.state import GPUClassResource, GPUClassState
from pkg.gpucontroller.gpuclass.internal.watch import device_class_watch, gpu_class_events, named_gpu_watch

CONTROLLER_NAME = "gpuclass"

GPUClassReconciler = ResourceReconciler[GPUClass, GPUClassStatus, GPUClassState]


def gpu_classes(*, informers: InformerFactory) -> SharedInformer[GPUClass]:
    return informers.get_informer(GPU_CLASS)


def device_classes(*, informers: InformerFactory) -> SharedInformer[V1DeviceClass]:
    return informers.get_informer(DEVICE_CLASS)


def new_reconciler(
    *,
    client: KubeClient,
    classes: SharedInformer[GPUClass],
    device_classes: SharedInformer[V1DeviceClass],
    gpus: SharedInformer[PhysicalGPU],
    handlers: Sequence[Handler[GPUClassState]],
) -> GPUClassReconciler:
    def state(resource: GPUClassResource) -> GPUClassState:
        gpu_class = resource.original
        name = str(gpu_class.metadata.name)
        names = gpu_class.spec.names
        uuids = {n: gpu_uuid(gpus.store.get_by_key(n)) for n in names or []}
        return GPUClassState(
            resource=resource,
            existing=device_classes.store.get_by_key(name),
            uuids=tuple(sorted({u for u in uuids.values() if u})) if names is not None else None,
            unresolved=tuple(n for n, u in uuids.items() if not u),
        )

    return ResourceReconciler.over_cache(
        cache=classes.store,
        writer=KubeResourceWriter(client, GPU_CLASS),
        status_type=GPUClassStatus,
        state_factory=state,
        handlers=handlers,
    )


class GPUClassContainer(containers.DeclarativeContainer):
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)
    recorder = providers.Dependency(instance_of=EventRecorderLogger)

    class_informer = providers.Singleton(gpu_classes, informers=informers)
    device_class_informer = providers.Singleton(device_classes, informers=informers)
    gpu_informer = providers.Singleton(physical_gpus, informers=informers)
    writer = providers.Singleton(KubeDeviceClassWriter, client=client)
    handlers = providers.List(
        providers.Singleton(OwnershipHandler, recorder=recorder),
        providers.Singleton(ApplyHandler, writer=writer, recorder=recorder),
    )
    reconciler = providers.Singleton(
        new_reconciler,
        client=client,
        classes=class_informer,
        device_classes=device_class_informer,
        gpus=gpu_informer,
        handlers=handlers,
    )


def setup_controller(manager: Manager, container: GPUClassContainer) -> Controller:
    manager.indexes.declare(*INDEXES)
    classes: SharedInformer[GPUClass] = container.class_informer()
    return (
        ControllerBuilder(manager, name=CONTROLLER_NAME)
        .for_(classes, predicates=[gpu_class_events()])
        .watches_with(container.device_class_informer(), device_class_watch())
        .watches_with(container.gpu_informer(), named_gpu_watch(classes.store))
        .backoff(base=1.0, max_delay=120.0)
        .complete(container.reconciler())
    )
