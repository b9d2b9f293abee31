"""Composition root of the node-labels controller.

It reconciles Nodes (one request per Node name). A Node's own update wakes it only when one of the
gate labels changed (someone removed it: put it back), never for status heartbeats; a PhysicalGPU
wakes its node when it appears, disappears, or its vendor or ``DriverReady`` changes. The object
reconciler reads both from the caches and has no writer: the handler's service patches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dependency_injector import containers, providers
from kubernetes.client import V1Node

from api.gpu.v1alpha1 import LABEL_NODE, LABEL_VENDOR, PhysicalGPU, PhysicalGPUConditionType
from pkg.domain.indexes import PHYSICAL_GPU_BY_NODE, PHYSICAL_GPU_BY_NODE_INDEX
from pkg.domain.informers import nodes, physical_gpus
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.controller.enqueue import EnqueueRequestsFromMapFunc
from pkg.framework.controller.predicate import Funcs
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile import Handler, ObjectReconciler, Request
from pkg.framework.reconcile.conditions import condition_status
from pkg.gpucontroller.names import LABEL_DRIVER_READY, vendor_present_label
from pkg.gpucontroller.nodelabels.internal.handler.gate_labels import GateLabelsHandler, known_vendors
from pkg.gpucontroller.nodelabels.internal.service import KubeNodeLabelWriter
from pkg.gpucontroller.nodelabels.internal.state import NodeLabelsState

CONTROLLER_NAME = "nodelabels"
GATE_LABELS = (*(vendor_present_label(v) for v in known_vendors()), LABEL_DRIVER_READY)


def new_reconciler(
    *,
    gpus: SharedInformer[PhysicalGPU],
    nodes: SharedInformer[V1Node],
    handlers: Sequence[Handler[NodeLabelsState]],
) -> ObjectReconciler[V1Node, NodeLabelsState]:
    def state(node: V1Node) -> NodeLabelsState:
        name = str(node.metadata.name) if node.metadata else ""
        return NodeLabelsState(
            node_name=name,
            labels=dict((node.metadata.labels if node.metadata else None) or {}),
            gpus=tuple(gpus.store.by_index(PHYSICAL_GPU_BY_NODE, name)),
        )

    return ObjectReconciler(get=lambda r: nodes.store.get_by_key(r.name), state=state, handlers=handlers)


def gate_labels_changed(old: V1Node, new: V1Node) -> bool:
    def gates(node: V1Node) -> list[str | None]:
        labels = (node.metadata.labels if node.metadata else None) or {}
        return [labels.get(key) for key in GATE_LABELS]

    return gates(old) != gates(new)


def gate_inputs_changed(old: PhysicalGPU, new: PhysicalGPU) -> bool:
    """What the gate labels depend on: the card's node and vendor labels and its DriverReady."""

    def inputs(gpu: PhysicalGPU) -> tuple[Any, ...]:
        labels = gpu.metadata.labels or {}
        ready = condition_status(
            gpu.status.conditions if gpu.status else None, PhysicalGPUConditionType.DRIVER_READY
        )
        return labels.get(LABEL_NODE), labels.get(LABEL_VENDOR), ready

    return inputs(old) != inputs(new)


def node_of_gpu(gpu: PhysicalGPU) -> list[Request]:
    node = (gpu.metadata.labels or {}).get(LABEL_NODE)
    return [Request(name=node)] if node else []


class NodeLabelsContainer(containers.DeclarativeContainer):
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)

    gpu_informer = providers.Singleton(physical_gpus, informers=informers)
    node_informer = providers.Singleton(nodes, informers=informers)
    writer = providers.Singleton(KubeNodeLabelWriter, client=client)
    handlers = providers.List(providers.Singleton(GateLabelsHandler, writer=writer))
    reconciler = providers.Singleton(
        new_reconciler, gpus=gpu_informer, nodes=node_informer, handlers=handlers
    )


def setup_controller(manager: Manager, container: NodeLabelsContainer) -> Controller:
    manager.indexes.declare(PHYSICAL_GPU_BY_NODE_INDEX)  # the state reads a node's cards by it
    return (
        ControllerBuilder(manager, name=CONTROLLER_NAME)
        .for_(
            container.node_informer(), predicates=[Funcs(update=gate_labels_changed, delete=lambda _n: False)]
        )
        .watches(
            container.gpu_informer(),
            EnqueueRequestsFromMapFunc(node_of_gpu),
            predicates=[Funcs(update=gate_inputs_changed)],
        )
        .backoff(base=1.0, max_delay=60.0)
        .complete(container.reconciler())
    )
