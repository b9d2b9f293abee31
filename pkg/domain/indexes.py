"""Named store indexes shared by controllers (docs/architecture.md#controller-patterns).

An index is declared once here, with the function that computes it, so that every controller that
asks "which PhysicalGPUs are on node X" uses the same name and the same answer. Informers add the
indexes they need with :meth:`~pkg.framework.cache.informer.SharedInformer.ensure_indexers`,
idempotently, before they start (the one index helper; a controller's private indexes, such as the
claim controller's, go through the same method).
"""

from __future__ import annotations

from api.gpu.v1alpha1 import LABEL_NODE
from pkg.framework.cache.store import Indexers, label_index

PHYSICAL_GPU_BY_NODE = "physicalgpu-by-node"

PHYSICAL_GPU_INDEXERS: Indexers = {PHYSICAL_GPU_BY_NODE: label_index(LABEL_NODE)}

__all__ = ["PHYSICAL_GPU_BY_NODE", "PHYSICAL_GPU_INDEXERS"]
