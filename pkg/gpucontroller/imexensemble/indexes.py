"""Store indexes of the IMEX ensembles, declared with the manager by both compute-domain setups.

* :data:`DOMAIN_BY_CLIQUE` (ComputeDomains): domains by the clique they are pinned to
  (``status.nvlinkDomain`` and ``spec.nvlinkDomain``): whether a clique still needs its ensemble,
  and which domains an ensemble's change concerns;
* :data:`SLICE_BY_CLIQUE` (ResourceSlices): slices by the cliques of the IMEX channel devices they
  offer: a clique's members without scanning every slice;
* :data:`DAEMON_BY_CLIQUE` (Pods): an ensemble's daemon Pods by the clique hash label.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kubernetes.client import V1DeviceAttribute, V1Pod, V1ResourceSlice

from api.gpu.v1alpha1 import IMEX_CHANNEL_DEVICE_TYPE, ComputeDomain
from pkg.domain.kinds import COMPUTE_DOMAIN
from pkg.framework.cache.indexer import Index
from pkg.framework.client.builtin_kinds import POD, RESOURCE_SLICE
from pkg.gpucontroller.imexensemble.render import LABEL_CLIQUE

DRIVER: Final = "gpu.deckhouse.io"
DEVICE_TYPE_ATTRIBUTE: Final = "deviceType"
NVLINK_DOMAIN_ATTRIBUTE: Final = "nvlinkDomain"

DOMAIN_BY_CLIQUE = "compute-domain-by-clique"
SLICE_BY_CLIQUE = "resource-slice-by-imex-clique"
DAEMON_BY_CLIQUE = "imex-daemon-by-clique"


def _attribute(attributes: Mapping[str, V1DeviceAttribute] | None, name: str) -> str | None:
    value = (attributes or {}).get(name) or (attributes or {}).get(f"{DRIVER}/{name}")
    return value.string if value is not None else None


def slice_cliques(resource_slice: V1ResourceSlice) -> list[str]:
    """The cliques whose IMEX channel devices a node's slice of our driver offers."""
    spec = resource_slice.spec
    if spec is None or spec.driver != DRIVER or not spec.node_name:
        return []
    cliques = set()
    for device in spec.devices or []:
        if _attribute(device.attributes, DEVICE_TYPE_ATTRIBUTE) != IMEX_CHANNEL_DEVICE_TYPE:
            continue
        clique = _attribute(device.attributes, NVLINK_DOMAIN_ATTRIBUTE)
        if clique:
            cliques.add(clique)
    return sorted(cliques)


def domain_cliques(domain: ComputeDomain) -> list[str]:
    """The cliques a domain is pinned to: the recorded one, and a pinned spec until recorded."""
    recorded = domain.status.nvlink_domain if domain.status is not None else None
    return sorted({c for c in (recorded, domain.spec.nvlink_domain) if c})


def daemon_clique(pod: V1Pod) -> list[str]:
    found = (pod.metadata.labels or {}).get(LABEL_CLIQUE) if pod.metadata else None
    return [found] if found else []


DOMAIN_BY_CLIQUE_INDEX: Index[ComputeDomain] = Index(
    name=DOMAIN_BY_CLIQUE, kind=COMPUTE_DOMAIN, func=domain_cliques
)
SLICE_BY_CLIQUE_INDEX: Index[V1ResourceSlice] = Index(
    name=SLICE_BY_CLIQUE, kind=RESOURCE_SLICE, func=slice_cliques
)
DAEMON_BY_CLIQUE_INDEX: Index[V1Pod] = Index(name=DAEMON_BY_CLIQUE, kind=POD, func=daemon_clique)

INDEXES: tuple[Index[Any], ...] = (DOMAIN_BY_CLIQUE_INDEX, SLICE_BY_CLIQUE_INDEX, DAEMON_BY_CLIQUE_INDEX)
