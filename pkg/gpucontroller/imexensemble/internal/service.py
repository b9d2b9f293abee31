"""The API calls of the ensemble controller. Every failure propagates, so the pass is retried with
backoff; objects are deleted with a UID precondition, so a successor of the same name is never hit."""

from __future__ import annotations

import contextlib
from typing import Protocol

from kubernetes.client import V1ConfigMap, V1Pod

from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import CONFIG_MAP, POD
from pkg.framework.client.errors import AlreadyExistsError


class EnsembleApi(Protocol):
    def apply_config_map(self, config_map: V1ConfigMap) -> None: ...

    def delete_config_map(self, config_map: V1ConfigMap) -> None:
        """Deletes exactly this ConfigMap (uid precondition); gone already is fine."""
        ...

    def create_pod(self, pod: V1Pod) -> None:
        """Creates the Pod; one of that name already there is left for the next pass to judge."""
        ...

    def delete_pod(self, pod: V1Pod) -> None:
        """Deletes exactly this Pod (uid precondition); gone already is fine."""
        ...


class KubeEnsembleApi:
    """:class:`EnsembleApi` over :class:`KubeClient`."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def apply_config_map(self, config_map: V1ConfigMap) -> None:
        self._client.apply(CONFIG_MAP, CONFIG_MAP.encode(config_map), force=True)

    def delete_config_map(self, config_map: V1ConfigMap) -> None:
        meta = config_map.metadata
        if meta is None or not meta.name:
            return
        with contextlib.suppress(NotFoundError):
            self._client.delete(CONFIG_MAP, meta.name, meta.namespace, uid=meta.uid)

    def create_pod(self, pod: V1Pod) -> None:
        with contextlib.suppress(AlreadyExistsError):
            self._client.create(POD, pod)

    def delete_pod(self, pod: V1Pod) -> None:
        meta = pod.metadata
        if meta is None or not meta.name:
            return
        with contextlib.suppress(NotFoundError):
            self._client.delete(POD, meta.name, meta.namespace, uid=meta.uid)
