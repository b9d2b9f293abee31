"""Where the allocation ledger lives: one ConfigMap in the controller's namespace.

Written with the ConfigMap's resourceVersion (optimistic concurrency): if two processes ever both
believe they lead, the second write fails with a conflict instead of overwriting the other's
ledger, and the accountant reloads and re-derives from the claims. A ConfigMap holds at most
1 MiB; the ledger takes about 100 bytes per open device allocation, so a write that would exceed
:data:`MAX_BYTES` is refused with an error that says so rather than rejected by the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kubernetes.client import V1ConfigMap, V1ObjectMeta

from pkg.dracontroller.accounting.ledger import Ledger
from pkg.framework.client import NotFoundError, ResourceKind
from pkg.framework.client.builtin_kinds import CONFIG_MAP

DATA_KEY = "ledger.json"
MAX_BYTES = 900_000  # below the API server's 1 MiB object limit, with room for metadata


class LedgerTooLargeError(RuntimeError):
    pass


class ConfigMapClient(Protocol):
    def get(
        self, kind: ResourceKind[V1ConfigMap], name: str, namespace: str | None = None
    ) -> V1ConfigMap: ...

    def create(
        self, kind: ResourceKind[V1ConfigMap], obj: V1ConfigMap, namespace: str | None = None
    ) -> V1ConfigMap: ...

    def update(
        self, kind: ResourceKind[V1ConfigMap], obj: V1ConfigMap, *, subresource: str | None = None
    ) -> V1ConfigMap: ...


@dataclass(frozen=True)
class Loaded:
    ledger: Ledger | None  # None: no ledger yet
    resource_version: str | None  # None: the ConfigMap does not exist


class LedgerStore:
    def __init__(self, *, client: ConfigMapClient, namespace: str, name: str) -> None:
        self._client = client
        self.namespace = namespace
        self.name = name

    def load(self) -> Loaded:
        """The stored ledger; raises ValueError (naming the ConfigMap) if it cannot be read."""
        try:
            cm = self._client.get(CONFIG_MAP, self.name, self.namespace)
        except NotFoundError:
            return Loaded(None, None)
        text = (cm.data or {}).get(DATA_KEY)
        try:
            ledger = Ledger.from_json(text) if text else None
        except ValueError as exc:
            raise ValueError(f"ConfigMap {self.namespace}/{self.name}: {exc}") from exc
        return Loaded(ledger, (cm.metadata or V1ObjectMeta()).resource_version)

    def save(self, ledger: Ledger, resource_version: str | None) -> str:
        """Writes ``ledger`` over the version read (creates the ConfigMap if there was none);
        returns the new resourceVersion; raises ConflictError/AlreadyExistsError if someone wrote."""
        text = ledger.to_json()
        if len(text) > MAX_BYTES:
            raise LedgerTooLargeError(
                f"ConfigMap {self.namespace}/{self.name}: ledger of {len(ledger.open)} open allocations "
                f"is {len(text)} bytes, over the {MAX_BYTES}-byte limit"
            )
        cm = V1ConfigMap(
            metadata=V1ObjectMeta(
                name=self.name,
                namespace=self.namespace,
                resource_version=resource_version,
                labels={"app.kubernetes.io/component": "gpu-dra-controller"},
            ),
            data={DATA_KEY: text},
        )
        if resource_version is None:
            written = self._client.create(CONFIG_MAP, cm, self.namespace)
        else:
            written = self._client.update(CONFIG_MAP, cm)
        return str((written.metadata or V1ObjectMeta()).resource_version)


__all__ = ["DATA_KEY", "MAX_BYTES", "ConfigMapClient", "LedgerStore", "LedgerTooLargeError", "Loaded"]
