"""Which NVLink clique a domain goes to: the one whose channel devices most nodes offer (pure).

A node counts for a clique when one of its ResourceSlices offers an IMEX channel device
(``deviceType == ImexChannel``) with that ``nvlinkDomain``; gpu-handler publishes channels only on
nodes whose fabric is up, so a count of nodes is a count of where the job's Pods can run. Ties go to
the smallest value, so two controllers (or two passes) choose alike.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Final

from kubernetes.client import V1DeviceAttribute, V1ResourceSlice

from api.gpu.v1alpha1 import IMEX_CHANNEL_DEVICE_TYPE

DRIVER: Final = "gpu.deckhouse.io"
DEVICE_TYPE_ATTRIBUTE: Final = "deviceType"
NVLINK_DOMAIN_ATTRIBUTE: Final = "nvlinkDomain"


def _attribute(attributes: Mapping[str, V1DeviceAttribute] | None, name: str) -> str | None:
    value = (attributes or {}).get(name) or (attributes or {}).get(f"{DRIVER}/{name}")
    return value.string if value is not None else None


def offered_cliques(slices: Iterable[V1ResourceSlice]) -> dict[str, set[str]]:
    """Each clique with the nodes offering its channel devices."""
    nodes: dict[str, set[str]] = defaultdict(set)
    for resource_slice in slices:
        spec = resource_slice.spec
        if spec is None or spec.driver != DRIVER or not spec.node_name:
            continue
        for device in spec.devices or []:
            attributes = device.attributes
            if _attribute(attributes, DEVICE_TYPE_ATTRIBUTE) != IMEX_CHANNEL_DEVICE_TYPE:
                continue
            clique = _attribute(attributes, NVLINK_DOMAIN_ATTRIBUTE)
            if clique:
                nodes[clique].add(spec.node_name)
    return dict(nodes)


def choose_clique(offered: dict[str, set[str]]) -> str | None:
    if not offered:
        return None
    return min(offered, key=lambda clique: (-len(offered[clique]), clique))
