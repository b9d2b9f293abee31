"""The two writes a reconciled resource may need, behind a port.

:class:`~pkg.framework.reconcile.resource.Resource` decides *what* to write; a
:class:`ResourceWriter` knows *how* for one kind. Keeping the port this small lets unit tests
substitute a mock and assert the exact requests, and keeps the resource wrapper free of REST paths.

The contract both operations share: a write made from a stale resourceVersion raises
:class:`~pkg.framework.client.errors.ConflictError`. For a status PUT the API server answers 409 itself. For
a JSON patch whose ``test`` op on ``/metadata/resourceVersion`` fails it answers **422 Invalid**
("testing value /metadata/resourceVersion failed"), which is the same situation wearing a different
status code, so :class:`KubeResourceWriter` translates it; callers then handle one error type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel

from pkg.framework.client.errors import ConflictError, InvalidError
from pkg.framework.client.kinds import ResourceKind
from pkg.framework.client.kube_client import KubeClient, PatchType
from pkg.framework.client.patch import PatchOp

ObjT = TypeVar("ObjT", bound=BaseModel)

# Markers of a failed JSON patch ``test`` op in the server's message; the wording has changed across
# versions of the server's JSON patch library, hence several.
_TEST_FAILED_MARKERS = ("testing value", "test operation does not apply", "test failed")


class ResourceWriter(Protocol[ObjT]):
    """Writes one kind's status and metadata. Both raise ``ConflictError`` on a stale version and
    ``NotFoundError`` when the object is gone; both return the object as the server stored it."""

    def update_status(self, obj: ObjT) -> ObjT:
        """PUTs the status subresource of ``obj`` from ``obj.metadata.resourceVersion``."""
        ...

    def patch_metadata(self, *, name: str, namespace: str | None, ops: Sequence[PatchOp]) -> ObjT:
        """Applies an RFC 6902 patch (expected to carry a resourceVersion ``test`` op)."""
        ...


class KubeResourceWriter(Generic[ObjT]):
    """:class:`ResourceWriter` over :class:`~pkg.framework.client.KubeClient` for one kind."""

    def __init__(self, client: KubeClient, kind: ResourceKind[ObjT]) -> None:
        self._client = client
        self._kind = kind

    def update_status(self, obj: ObjT) -> ObjT:
        return self._client.update_status(self._kind, obj)

    def patch_metadata(self, *, name: str, namespace: str | None, ops: Sequence[PatchOp]) -> ObjT:
        try:
            return self._client.patch(
                self._kind, name, list(ops), patch_type=PatchType.JSON, namespace=namespace or None
            )
        except InvalidError as exc:
            if is_failed_test_op(exc):
                raise ConflictError(
                    status=409, reason="Conflict", message=f"{self._kind.kind} {name!r}: {exc.message}"
                ) from exc
            raise


def is_failed_test_op(exc: InvalidError) -> bool:
    """Whether a 422 answer to a JSON patch means "a ``test`` op did not hold".

    kube-apiserver 1.37 answers a failed ``test`` with only the generic Invalid message and empty
    details (checked against the real server in test/integration/test_resource_update.py), while a
    field validation failure always names its causes. So: a known marker, or no causes at all.
    """
    message = exc.message.lower()
    if any(marker in message for marker in _TEST_FAILED_MARKERS):
        return True
    return not exc.details.get("causes")
