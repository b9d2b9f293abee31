"""Named store indexes shared by controllers (docs/architecture.md#controller-patterns).

An index is declared once here, with the function that computes it, so that every controller that
asks "which PhysicalGPUs are on node X" uses the same name and the same answer. A setup module that
reads one declares it with the manager (``manager.indexes.declare(PHYSICAL_GPU_BY_NODE_INDEX)``);
the manager adds it to the PhysicalGPU informers before the caches start
(:mod:`pkg.framework.cache.indexer`). Declaring it from two controllers of one process is harmless.
"""

from __future__ import annotations

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.cache.indexer import Index
from pkg.framework.cache.store import label_index

PHYSICAL_GPU_BY_NODE = "physicalgpu-by-node"

PHYSICAL_GPU_BY_NODE_INDEX: Index[PhysicalGPU] = Index(
    name=PHYSICAL_GPU_BY_NODE, kind=PHYSICAL_GPU, func=label_index(LABEL_NODE)
)
"""PhysicalGPUs by the node they are on (their ``gpu.deckhouse.io/node`` label)."""

__all__ = ["PHYSICAL_GPU_BY_NODE", "PHYSICAL_GPU_BY_NODE_INDEX"]
