"""The API calls of the compute-domain controller. Every failure propagates, so the controller
retries the pass with backoff; a conflict on the ledger is the optimistic-concurrency loss of a
race for a channel and is retried the same way."""

from __future__ import annotations

from typing import Protocol

from kubernetes.client import V1ConfigMap, V1DeviceClass, V1ObjectMeta, V1ResourceClaimTemplate

from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import CONFIG_MAP, DEVICE_CLASS, RESOURCE_CLAIM_TEMPLATE


class ComputeDomainApi(Protocol):
    def apply_device_class(self, device_class: V1DeviceClass) -> None: ...

    def read_ledger(self) -> V1ConfigMap | None:
        """The channel ledger as stored now (not the cache: a stale read only loses the race)."""
        ...

    def write_ledger(self, current: V1ConfigMap | None, data: dict[str, str]) -> None:
        """Creates the ledger, or updates ``current`` at its resourceVersion; raises
        ``ConflictError``/``AlreadyExistsError`` when another pass wrote first."""
        ...

    def apply_template(self, template: V1ResourceClaimTemplate) -> None: ...


class KubeComputeDomainApi:
    """:class:`ComputeDomainApi` over :class:`KubeClient`; the ledger is ``ledger_name`` in
    ``namespace`` (the node components' namespace)."""

    def __init__(self, client: KubeClient, *, namespace: str, ledger_name: str) -> None:
        self._client = client
        self._namespace = namespace
        self._ledger = ledger_name

    def apply_device_class(self, device_class: V1DeviceClass) -> None:
        self._client.apply(DEVICE_CLASS, DEVICE_CLASS.encode(device_class), force=True)

    def read_ledger(self) -> V1ConfigMap | None:
        try:
            return self._client.get(CONFIG_MAP, self._ledger, self._namespace)
        except NotFoundError:
            return None

    def write_ledger(self, current: V1ConfigMap | None, data: dict[str, str]) -> None:
        if current is None:
            meta = V1ObjectMeta(name=self._ledger, namespace=self._namespace)
            self._client.create(CONFIG_MAP, V1ConfigMap(metadata=meta, data=data))
            return
        updated = current.model_copy(deep=True)
        updated.data = data
        self._client.update(CONFIG_MAP, updated)

    def apply_template(self, template: V1ResourceClaimTemplate) -> None:
        self._client.apply(RESOURCE_CLAIM_TEMPLATE, RESOURCE_CLAIM_TEMPLATE.encode(template), force=True)
