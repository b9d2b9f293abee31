"""The one write of the node-labels controller: a JSON merge patch of the gate labels of a Node."""

from __future__ import annotations

from collections.abc import Mapping

from pkg.framework.client import KubeClient, PatchType
from pkg.framework.client.builtin_kinds import NODE
from pkg.framework.reconcile.resource_builder import ResourceBuilder


class KubeNodeLabelWriter:
    """:class:`~pkg.gpucontroller.nodelabels.reconciler.NodeLabelWriter` over :class:`KubeClient`."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def patch_labels(self, node: str, labels: Mapping[str, str | None]) -> None:
        # A merge patch names only these keys: other writers' labels are never part of the request.
        body = ResourceBuilder(kind=NODE).labels(labels).merge_patch()
        self._client.patch(NODE, node, body, patch_type=PatchType.MERGE)
