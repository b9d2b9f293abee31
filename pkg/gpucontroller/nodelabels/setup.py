"""Composition root of the node-labels controller: its parts, and its registration with the manager.

It reconciles Nodes (one request per Node name), woken as :mod:`.watch` says.
"""

from __future__ import annotations

from dependency_injector import containers, providers

from pkg.domain.indexes import PHYSICAL_GPU_BY_NODE_INDEX
from pkg.domain.informers import nodes, physical_gpus
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.manager.manager import Manager
from pkg.gpucontroller.nodelabels.reconciler import GateLabelsHandler, new_reconciler
from pkg.gpucontroller.nodelabels.service import KubeNodeLabelWriter
from pkg.gpucontroller.nodelabels.watch import gpu_watch, node_events

CONTROLLER_NAME = "nodelabels"


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
        .for_(container.node_informer(), predicates=[node_events()])
        .watches_with(container.gpu_informer(), gpu_watch())
        .backoff(base=1.0, max_delay=60.0)
        .complete(container.reconciler())
    )
