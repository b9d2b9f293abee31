"""The API calls of the orchestrator: server-side apply of a DaemonSet, its deletion, and a read of
one the cache does not hold yet (so a DaemonSet created by the previous pass, whose event has not
arrived, is not announced as created twice)."""

from __future__ import annotations

from typing import Protocol

from kubernetes.client import V1DaemonSet

from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import DAEMON_SET


class DaemonSetWriter(Protocol):
    def generation(self, daemon_set: V1DaemonSet) -> int | None:
        """The stored generation of the DaemonSet named like ``daemon_set``; ``None`` if there is none."""
        ...

    def apply(self, daemon_set: V1DaemonSet) -> V1DaemonSet:
        """Server-side apply of the whole intent; returns what the server stored."""
        ...

    def delete(self, daemon_set: V1DaemonSet) -> bool:
        """Deletes exactly this object (uid precondition); False when it was already gone."""
        ...


class KubeDaemonSetWriter:
    """:class:`DaemonSetWriter` over :class:`KubeClient`, as the client's field manager. Forced: the
    orchestrator is the only rightful owner of what it renders, and a hand edit is taken back."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def generation(self, daemon_set: V1DaemonSet) -> int | None:
        meta = daemon_set.metadata
        if meta is None or not meta.name:
            raise ValueError("a DaemonSet without a name cannot be read")
        try:
            stored = self._client.get(DAEMON_SET, meta.name, meta.namespace)
        except NotFoundError:
            return None
        return stored.metadata.generation if stored.metadata else None

    def apply(self, daemon_set: V1DaemonSet) -> V1DaemonSet:
        return self._client.apply(DAEMON_SET, DAEMON_SET.encode(daemon_set), force=True)

    def delete(self, daemon_set: V1DaemonSet) -> bool:
        meta = daemon_set.metadata
        if meta is None or not meta.name:
            raise ValueError("a DaemonSet without a name cannot be deleted")
        try:
            self._client.delete(DAEMON_SET, meta.name, meta.namespace, uid=meta.uid)
        except NotFoundError:
            return False
        return True
