"""The one write of the node-labels controller: a JSON merge patch of the gate labels of a Node."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from pkg.framework.client import KubeClient, PatchType
from pkg.framework.client.builtin_kinds import NODE


class NodeLabelWriter(Protocol):
    def patch_labels(self, node: str, labels: Mapping[str, str | None]) -> None:
        """Sets (a value) or removes (``None``) exactly these labels of ``node``."""
        ...


class KubeNodeLabelWriter:
    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def patch_labels(self, node: str, labels: Mapping[str, str | None]) -> None:
        # A merge patch names only these keys: other writers' labels are never part of the request.
        self._client.patch(NODE, node, {"metadata": {"labels": dict(labels)}}, patch_type=PatchType.MERGE)
