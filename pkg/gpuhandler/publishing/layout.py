"""The slice layout of this cluster, read from the API server once, on the first publish.

1.34 keeps counter sets beside the devices; 1.35 and newer want them in a slice of their own
(:class:`~pkg.dra.model.slices.Layout`). The version cannot change under a running process
without a restart of the API server it talks to, and an upgrade that changes the layout also
restarts the node's pods soon enough; reading it per publish would only add a request. Reading it
on first use rather than at construction keeps the composition root free of API calls (and
start-up free of a failure the controller's backoff already handles: a failed read raises from
the publish and is retried).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Sequence

from kubernetes.client import V1Device, V1OwnerReference

from pkg.dra.model.offers import CardOffers
from pkg.dra.model.slices import read_server_version
from pkg.dra.publisher import PublishResult, SlicePublisher, SliceReader
from pkg.framework.client import KubeClient

logger = logging.getLogger(__name__)


class ServerLayoutPublisher:
    """A :class:`SlicePublisher` in the layout the API server's version asks for."""

    def __init__(self, *, kube: KubeClient, reader: SliceReader) -> None:
        self._kube = kube
        self._reader = reader
        self._lock = threading.Lock()
        self._inner: SlicePublisher | None = None

    def publish(
        self,
        node: str,
        cards: Sequence[CardOffers],
        *,
        owner: V1OwnerReference | None = None,
        in_use: Collection[str] | None = None,
        channels: Sequence[V1Device] = (),
    ) -> PublishResult:
        return self._publisher().publish(node, cards, owner=owner, in_use=in_use, channels=channels)

    def _publisher(self) -> SlicePublisher:
        with self._lock:
            if self._inner is None:
                version = read_server_version(self._kube)
                layout = version.layout  # UnsupportedServerError below 1.34
                logger.info(
                    "ResourceSlice layout chosen by the API server version",
                    extra={"server_version": f"{version.major}.{version.minor}", "layout": layout.value},
                )
                self._inner = SlicePublisher(kube=self._kube, reader=self._reader, layout=layout)
            return self._inner
