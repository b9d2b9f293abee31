"""Which NVLink clique a domain goes to: the one whose channel devices most nodes offer (pure).

A node counts for a clique when one of its ResourceSlices offers an IMEX channel device
(``deviceType == ImexChannel``) with that ``nvlinkDomain``; gpu-handler publishes channels only on
nodes whose fabric is up, so a count of nodes is a count of where the job's Pods can run. Ties go to
the smallest value, so two controllers (or two passes) choose alike.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from kubernetes.client import V1ResourceSlice

from pkg.gpucontroller.imexensemble.indexes import slice_cliques


def offered_cliques(slices: Iterable[V1ResourceSlice]) -> dict[str, set[str]]:
    """Each clique with the nodes offering its channel devices."""
    nodes: dict[str, set[str]] = defaultdict(set)
    for resource_slice in slices:
        for clique in slice_cliques(resource_slice):
            nodes[clique].add(str(resource_slice.spec.node_name))
    return dict(nodes)


def choose_clique(offered: dict[str, set[str]]) -> str | None:
    if not offered:
        return None
    return min(offered, key=lambda clique: (-len(offered[clique]), clique))
