"""Where the publisher reads a node's existing slices: the informer's store, or the API server.

The publisher owns every slice of its driver on its node (the chart's node admission policy lets a
node's handler write only slices whose ``spec.nodeName`` is that node), so "existing" means:
driver and ``spec.nodeName`` match. Both readers filter the same way; the store reader costs
nothing per publish but may lag behind our own writes by a watch event. A lagging read is
harmless: the publisher then computes the same next generation and content it has just written,
and the server-side apply of an identical object changes nothing.
"""

from __future__ import annotations

from typing import Any, Protocol

from kubernetes.client import V1ResourceSlice

from pkg.domain.names import DRIVER
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import RESOURCE_SLICE


class SliceReader(Protocol):
    def list_slices(self, node: str) -> list[V1ResourceSlice]:
        """Every ResourceSlice of the driver whose ``spec.nodeName`` is ``node``."""
        ...


class ListsObjects(Protocol):
    def list(self) -> list[Any]: ...


class KubeSliceReader:
    """Lists with field selectors ``spec.nodeName`` and ``spec.driver`` (one request per publish)."""

    def __init__(self, kube: KubeClient, *, driver: str = DRIVER) -> None:
        self._kube = kube
        self._driver = driver

    def list_slices(self, node: str) -> list[V1ResourceSlice]:
        selector = f"spec.nodeName={node},spec.driver={self._driver}"
        items, _ = self._kube.list(RESOURCE_SLICE, field_selector=selector)
        return items


class StoreSliceReader:
    """Filters an informer store of ResourceSlices (objects are not copied; they are not changed)."""

    def __init__(self, store: ListsObjects, *, driver: str = DRIVER) -> None:
        self._store = store
        self._driver = driver

    def list_slices(self, node: str) -> list[V1ResourceSlice]:
        return [
            rs
            for rs in self._store.list()
            if isinstance(rs, V1ResourceSlice)
            and rs.spec.driver == self._driver
            and rs.spec.node_name == node
        ]
