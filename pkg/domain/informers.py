"""The informers the components share, each declared once with its scope (indexes: ``indexes.py``).

Typed functions rather than lambdas in the containers, so a composition root names what it gets
(``providers.Singleton(node_informer, informers=..., node_name=...)``). Node components watch only
their own node's objects (a PhysicalGPU label selector, a Node field selector;
docs/architecture.md#node-components-touch-only-their-node); the
informer factory shares one informer per scope in a process.
"""

from __future__ import annotations

from kubernetes.client import V1Node, V1ResourceSlice

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.domain.names import DRIVER
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client.builtin_kinds import NODE, RESOURCE_SLICE


def physical_gpus(*, informers: InformerFactory) -> SharedInformer[PhysicalGPU]:
    """Every PhysicalGPU of the cluster (a controller reading ``PHYSICAL_GPU_BY_NODE`` declares
    :data:`~pkg.domain.indexes.PHYSICAL_GPU_BY_NODE_INDEX` with its manager)."""
    return informers.get_informer(PHYSICAL_GPU)


def node_physical_gpus(*, informers: InformerFactory, node_label: str) -> SharedInformer[PhysicalGPU]:
    """The PhysicalGPUs labelled ``gpu.deckhouse.io/node=<node_label>``: one node's cards."""
    return informers.get_informer(PHYSICAL_GPU, label_selector=f"{LABEL_NODE}={node_label}")


def nodes(*, informers: InformerFactory) -> SharedInformer[V1Node]:
    return informers.get_informer(NODE)


def node_named(*, informers: InformerFactory, node_name: str) -> SharedInformer[V1Node]:
    """One Node, by field selector."""
    return informers.get_informer(NODE, field_selector=f"metadata.name={node_name}")


def node_slices_selector(node_name: str) -> str:
    """The field selector of one node's ResourceSlices of our driver."""
    return f"spec.nodeName={node_name},spec.driver={DRIVER}"


def node_resource_slices(*, informers: InformerFactory, node_name: str) -> SharedInformer[V1ResourceSlice]:
    """This node's ResourceSlices of our driver, by field selector."""
    return informers.get_informer(RESOURCE_SLICE, field_selector=node_slices_selector(node_name))


__all__ = [
    "node_named",
    "node_physical_gpus",
    "node_resource_slices",
    "node_slices_selector",
    "nodes",
    "physical_gpus",
]
