"""An in-memory ConfigMap API for the allocation ledger's store."""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1ConfigMap

from pkg.framework.client import ApiError, ConflictError, NotFoundError
from testutil.k8s_fields import meta


class MemoryConfigMaps:
    """ConfigMap get/create/update by name with resourceVersion checks, as the API server does them."""

    def __init__(self) -> None:
        self.stored: dict[str, V1ConfigMap] = {}
        self.version = 0
        self.fail_next: Exception | None = None
        self.writes: list[str] = []  # names, in order
        self.fail_after: int | None = None  # that many more writes succeed, then every one fails

    def get(self, kind: Any, name: str, namespace: str | None = None) -> V1ConfigMap:
        if name not in self.stored:
            raise NotFoundError(status=404, reason="NotFound", message="not found")
        return self.stored[name].model_copy(deep=True)

    def create(self, kind: Any, obj: V1ConfigMap, namespace: str | None = None) -> V1ConfigMap:
        return self._write(obj, expected=None)

    def update(self, kind: Any, obj: V1ConfigMap, *, subresource: str | None = None) -> V1ConfigMap:
        return self._write(obj, expected=meta(obj).resource_version)

    def _write(self, obj: V1ConfigMap, expected: str | None) -> V1ConfigMap:
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        if self.fail_after is not None:
            if self.fail_after <= 0:
                raise ApiError(status=503, reason="ServiceUnavailable", message="etcd leader changed")
            self.fail_after -= 1
        name = str(meta(obj).name)
        current = meta(self.stored[name]).resource_version if name in self.stored else None
        if expected != current:
            raise ConflictError(status=409, reason="Conflict", message="conflict")
        self.version += 1
        obj = obj.model_copy(deep=True)
        meta(obj).resource_version = str(self.version)
        self.stored[name] = obj
        self.writes.append(name)
        return obj
