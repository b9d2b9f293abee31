"""Named store indexes shared by controllers (spec §10.4 item 7).

An index is declared once here, with the function that computes it, so that every controller that
asks "which PhysicalGPUs are on node X" uses the same name and the same answer. ``index_all`` adds
every index a kind has to an informer's store before the informer starts.
"""

from __future__ import annotations

from typing import Any

from api.gpu.v1alpha1 import LABEL_NODE
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.cache.store import Indexers, label_index
from pkg.framework.client import ResourceKind

PHYSICAL_GPU_BY_NODE = "physicalgpu-by-node"

INDEXERS: dict[str, Indexers] = {
    PHYSICAL_GPU.plural: {PHYSICAL_GPU_BY_NODE: label_index(LABEL_NODE)},
}


def indexers_for(kind: ResourceKind[Any]) -> Indexers:
    """Every index declared for ``kind`` (empty when it has none)."""
    return dict(INDEXERS.get(kind.plural, {}))


def index_all(informer: Any) -> None:
    """Adds to ``informer``'s store every declared index of its kind it does not have yet.

    Idempotent, so each controller's setup can call it for the informers it uses without knowing
    whether another controller in the process already did.
    """
    existing = informer.store.get_indexers()
    missing = {name: fn for name, fn in indexers_for(informer.kind).items() if name not in existing}
    if missing:
        informer.add_indexers(missing)
