"""The only place the allocation controller writes ResourceClaims.

Writing an allocation takes two requests, in the scheduler's order (``bindClaim``):

1. a JSON patch of the metadata — the delete-protection finalizer and our ``allocated-by`` mark —
   guarded by a ``test`` of the resourceVersion we decided on;
2. a JSON patch of the status subresource adding ``allocation``, guarded by a ``test`` of the
   version step 1 returned.

Both are compare-and-swap: if anyone (the scheduler, another replica) changed the claim since we
read it, one of them fails with a conflict and nothing is overwritten.

Why a patch and not a PUT of the status (as the scheduler does): the allocation copies the opaque
configs' ``parameters``, RawExtensions the API server stores as the very bytes a request carried.
A PUT from us carries them as Python's ``json.dumps`` writes them, with a space after every ``:``
and ``,``; the server compares a stored allocation with the one any later write produces byte by
byte, and every later JSON write (gpu-handler's server-side apply of ``status.devices``, anyone's
patch) re-encodes it compactly — so each was refused with 422 ``status.allocation: field cannot be
modified once set``. A patch is decoded from the server's own compact encoding, so the allocation
is stored as the server will encode it again. (The scheduler writes protobuf, which keeps the
bytes of the claim's spec; a spec sent with such whitespace is stored and copied with it.) A conflict raises
:class:`~pkg.framework.reconcile.ConflictRequeue`; the reconciler requeues and the next pass
decides again from fresher state. If step 2 fails after step 1 succeeded, the claim carries the
finalizer and mark without an allocation: harmless (the kube-controller-manager removes the
finalizer on deletion; the next pass allocates or clears the mark).

The allocation carries ``allocationTimestamp`` (whole seconds, as the API keeps it): a kube-scheduler
with ``DRADeviceBindingConditions`` and ``DRAResourceClaimDeviceStatus`` stamps an allocation that
has none when it reserves the claim for a Pod, in the same status write, and the API server refuses
that write (the allocation cannot change once set) — so a Pod using a claim we allocated without
the stamp stayed Pending for ever.

Releasing (collision handling) is the reverse: status PUT without ``allocation`` first, then the
mark removed; the finalizer stays for the re-allocation (the kube-controller-manager removes it
once the claim is deleted). Every write is recorded in the in-flight record.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1ObjectMeta,
    V1ResourceClaimStatus,
)

from pkg.dracontroller.internal.names import (
    ALLOCATED_BY,
    ALLOCATED_BY_US,
    DELETE_PROTECTION_FINALIZER,
)
from pkg.dracontroller.internal.service.in_flight import InFlight
from pkg.framework.client import ConflictError, InvalidError, KubeClient, NotFoundError, PatchType
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.client.patch import PatchOp, list_patch, map_patch, test_op
from pkg.framework.keys import object_key
from pkg.framework.reconcile import ConflictRequeue, KubeResourceWriter
from pkg.framework.reconcile.resource_builder import ResourceBuilder
from pkg.framework.reconcile.writer import is_failed_test_op


class ClaimWrites(Protocol):
    """The writes handlers may ask for (:class:`ClaimWriter` is the real one)."""

    def allocate(
        self, claim: ResourceV1ResourceClaim, allocation: V1AllocationResult
    ) -> ResourceV1ResourceClaim | None: ...

    def release(self, claim: ResourceV1ResourceClaim) -> ResourceV1ResourceClaim | None: ...

    def forget_mark(self, claim: ResourceV1ResourceClaim) -> ResourceV1ResourceClaim | None: ...


def planned(claim: ResourceV1ResourceClaim, allocation: V1AllocationResult) -> ResourceV1ResourceClaim:
    """``claim`` as :meth:`ClaimWriter.allocate` will leave it (mark, finalizer, allocation): what
    the in-flight record shows other decisions while the writes are on the wire. Shallow copies:
    the cached claim is shared and never mutated."""
    status = (claim.status or V1ResourceClaimStatus()).model_copy(update={"allocation": allocation})
    return claim.model_copy(update={"metadata": _marked(_meta(claim)), "status": status})


def _marked(meta: V1ObjectMeta) -> V1ObjectMeta:
    """``meta`` with our finalizer and our ``allocated-by`` mark."""
    return (
        ResourceBuilder.of(meta, kind=RESOURCE_CLAIM)
        .add_finalizer(DELETE_PROTECTION_FINALIZER)
        .annotations({ALLOCATED_BY: ALLOCATED_BY_US})
        .meta()
    )


class ClaimWriter:
    def __init__(
        self,
        client: KubeClient,
        in_flight: InFlight,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._client = client
        self._clock = clock
        self._writer = KubeResourceWriter(client, RESOURCE_CLAIM)
        self._in_flight = in_flight

    def allocate(
        self, claim: ResourceV1ResourceClaim, allocation: V1AllocationResult
    ) -> ResourceV1ResourceClaim | None:
        """Marks and allocates ``claim`` as read; None if it is gone. Raises ConflictRequeue."""
        before, marked = _version(claim), _marked(_meta(claim))
        current = self._patch_metadata(claim, finalizers=marked.finalizers, annotations=marked.annotations)
        if current is None:
            return None
        written = self._add_allocation(current, allocation)
        if written is not None:
            self._in_flight.record(written, superseded=(before, _version(current)))
        return written

    def release(self, claim: ResourceV1ResourceClaim) -> ResourceV1ResourceClaim | None:
        """Clears ``status.allocation`` and our mark; None if the claim is gone."""
        before = _version(claim)
        status = (claim.status or V1ResourceClaimStatus()).model_copy(deep=True)
        status.allocation = None
        status.devices = None  # device status describes the released devices; the server drops it too
        current = self._put_status(claim, status)
        if current is None:
            return None
        self._in_flight.record(current, superseded=(before,))
        return self.forget_mark(current)

    def forget_mark(self, claim: ResourceV1ResourceClaim) -> ResourceV1ResourceClaim | None:
        """Removes our ``allocated-by`` mark (e.g. left behind by an interrupted write)."""
        meta = _meta(claim)
        if ALLOCATED_BY not in (meta.annotations or {}):
            return claim
        unmarked = ResourceBuilder.of(meta, kind=RESOURCE_CLAIM).annotations({ALLOCATED_BY: None}).meta()
        current = self._patch_metadata(claim, finalizers=meta.finalizers, annotations=unmarked.annotations)
        if current is not None:
            self._in_flight.record(current, superseded=(_version(claim),))
        return current

    def _patch_metadata(
        self,
        claim: ResourceV1ResourceClaim,
        *,
        finalizers: list[str] | None,
        annotations: dict[str, str] | None,
    ) -> ResourceV1ResourceClaim | None:
        meta = _meta(claim)
        ops = [
            *list_patch("/metadata/finalizers", meta.finalizers, finalizers),
            *map_patch("/metadata/annotations", meta.annotations, annotations),
        ]
        if not ops:
            return claim
        try:
            return self._writer.patch_metadata(
                name=str(meta.name),
                namespace=meta.namespace,
                ops=[test_op("/metadata/resourceVersion", meta.resource_version), *ops],
            )
        except ConflictError as exc:
            raise ConflictRequeue(key=object_key(claim), write="metadata", cause=exc) from exc
        except NotFoundError:
            return None

    def _add_allocation(
        self, claim: ResourceV1ResourceClaim, allocation: V1AllocationResult
    ) -> ResourceV1ResourceClaim | None:
        meta = _meta(claim)
        if allocation.allocation_timestamp is None:
            stamp = self._clock().replace(microsecond=0)
            allocation = allocation.model_copy(update={"allocation_timestamp": stamp})
        value = allocation.model_dump(by_alias=True, exclude_none=True, mode="json")
        ops: list[PatchOp] = [
            test_op("/metadata/resourceVersion", meta.resource_version),
            {"op": "add", "path": "/status/allocation", "value": value},
        ]
        try:
            return self._patch_status(str(meta.name), meta.namespace, ops)
        except ConflictError as exc:
            raise ConflictRequeue(key=object_key(claim), write="status", cause=exc) from exc
        except NotFoundError:
            return None

    def _patch_status(self, name: str, namespace: str | None, ops: list[PatchOp]) -> ResourceV1ResourceClaim:
        """A JSON patch of the status subresource; a failed ``test`` is the conflict it means."""
        try:
            return self._client.patch(
                RESOURCE_CLAIM,
                name,
                ops,
                patch_type=PatchType.JSON,
                namespace=namespace,
                subresource="status",
            )
        except InvalidError as exc:
            if not is_failed_test_op(exc):
                raise
            raise ConflictError(
                status=409, reason="Conflict", message=f"ResourceClaim {name!r}: {exc.message}"
            ) from exc

    def _put_status(
        self, claim: ResourceV1ResourceClaim, status: V1ResourceClaimStatus
    ) -> ResourceV1ResourceClaim | None:
        body = claim.model_copy(deep=True)
        body.status = status
        try:
            return self._writer.update_status(body)
        except ConflictError as exc:
            raise ConflictRequeue(key=object_key(claim), write="status", cause=exc) from exc
        except NotFoundError:
            return None


def _meta(claim: ResourceV1ResourceClaim) -> V1ObjectMeta:
    if claim.metadata is None:
        raise ValueError("a ResourceClaim without metadata cannot be written")
    return claim.metadata


def _version(claim: ResourceV1ResourceClaim) -> str:
    return (claim.metadata.resource_version if claim.metadata is not None else None) or ""
