"""The applier: one claim's entries of ``status.devices``, from the status book, to the API server.

Every write is a server-side apply of the claim's status subresource carrying *all* of our entries
of that claim (:class:`~.status_book.ClaimEntries`) under one field manager, :data:`FIELD_MANAGER`.
``status.devices`` is a map keyed by driver, pool, device and share ID, so the manager owns
exactly the entries it sends: another driver's entries, and the allocation, are never touched; an
entry left out of the next apply (a device no longer prepared, every device after Unprepare) is
removed. ``metadata.uid`` in the body makes a claim deleted and made again under the same name
refuse it (409).

The manager keeps the name of the release that wrote usage only, ``gpu-handler-usage``: entries
that release wrote are then ours in full, and Unprepare removes them. Under a new name the forced
apply would take their ``data`` over but the old manager would keep owning the entries' keys,
so removing them would leave an empty entry behind on every claim prepared before the upgrade.

Failure handling, per claim: a claim the API no longer has (404) or whose name now belongs to
another object (409: the apply is forced, so a conflict can only be the uid) is forgotten — no
retry can succeed. Any other failure backs off exponentially from :data:`FIRST_BACKOFF_SECONDS` to
:data:`MAX_BACKOFF_SECONDS`. A server that drops the field (the feature gate
``DRAResourceClaimDeviceStatus`` off, or a server without it) answers the apply without our
entries: from then on nothing is written, and that is said once, at INFO.

One refusal no retry soon cures: 422 ``status.allocation ... field cannot be modified once set``.
The API server stores the opaque configs' ``parameters`` (RawExtensions) of an allocation as the
very bytes the writing request carried, and compares the stored allocation with the one a write
produces byte by byte; an apply re-encodes the allocation compactly, so an allocation stored with
insignificant whitespace refuses every JSON write of the status, ours included. Such bytes come
from a client that sends JSON with spaces (Python's ``json.dumps``) — a status PUT of the
allocation, or the claim's spec (or its DeviceClass) that the scheduler copies, through protobuf,
as is. Our allocator writes by patch, which stores the server's own compact form. The applier
says so, naming the claim, and retries at :data:`MAX_BACKOFF_SECONDS` (a new allocation after a
release is stored afresh).

A Prepare that failed before it knew its devices (the node lock, an unreadable checkpoint, the
claim unreadable at that moment) leaves the book ``unresolved``: the applier reads the claim and
takes the results of our driver in this node's pool from its allocation.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kubernetes.client import ResourceV1ResourceClaim

from pkg.domain.names import DRIVER
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.client.errors import ApiError, ConflictError, InvalidError, NotFoundError
from pkg.gpuhandler.attribution.status_book import ClaimEntries
from pkg.gpuhandler.preparation.services import DeviceKey

logger = logging.getLogger(__name__)

FIELD_MANAGER: Final = "gpu-handler-usage"
FIRST_BACKOFF_SECONDS: Final = 5.0
MAX_BACKOFF_SECONDS: Final = 300.0


class Outcome(enum.Enum):
    WRITTEN = "written"  # on the server as sent: settle the claim
    GONE = "gone"  # the claim is not there (404, another uid): forget it
    LATER = "later"  # failed or backing off: keep it pending
    DISABLED = "disabled"  # the server keeps no device status: nothing is written any more
    RESOLVED = "resolved"  # an unresolved failure's devices were read: see ``devices``


@dataclass(frozen=True)
class WriteResult:
    outcome: Outcome
    devices: tuple[DeviceKey, ...] = ()


@dataclass
class _Backoff:
    retry_at: float = 0.0
    seconds: float = 0.0


class ClaimStatusWriter:
    """Applies :class:`ClaimEntries`; ``pool`` is this node's, whose results a failure reads."""

    def __init__(self, *, client: KubeClient, pool: str, clock: Callable[[], float]) -> None:
        self._client = KubeClient(client.api_client, field_manager=FIELD_MANAGER)
        self._pool = pool
        self._clock = clock
        self._backoff: dict[str, _Backoff] = {}
        self.disabled = False

    def retry_at(self, uid: str) -> float:
        backoff = self._backoff.get(uid)
        return backoff.retry_at if backoff is not None else 0.0

    def write(self, claim: ClaimEntries) -> WriteResult:
        if self.disabled:
            return WriteResult(Outcome.DISABLED)
        if self._clock() < self.retry_at(claim.uid):
            return WriteResult(Outcome.LATER)
        try:
            if claim.unresolved:
                return WriteResult(Outcome.RESOLVED, self._allocated(claim))
            applied = self._apply(claim)
        except (NotFoundError, ConflictError, _OtherClaimError) as exc:
            self._backoff.pop(claim.uid, None)
            logger.info(
                "claim %s/%s (uid %s) is gone; its device status is not written: %s",
                claim.namespace,
                claim.name,
                claim.uid,
                exc,
            )
            return WriteResult(Outcome.GONE)
        except (ApiError, OSError) as exc:
            stuck = _allocation_bytes_refused(exc)
            backoff = self._backoff.setdefault(claim.uid, _Backoff())
            backoff.seconds = (
                MAX_BACKOFF_SECONDS
                if stuck
                else min(MAX_BACKOFF_SECONDS, max(FIRST_BACKOFF_SECONDS, backoff.seconds * 2))
            )
            backoff.retry_at = self._clock() + backoff.seconds
            logger.warning(
                "device status of claim %s/%s not written (retry in %.0f s): %s%s",
                claim.namespace,
                claim.name,
                backoff.seconds,
                exc,
                _STUCK_ALLOCATION if stuck else "",
            )
            return WriteResult(Outcome.LATER)
        self._backoff.pop(claim.uid, None)
        if claim.entries and not _kept_ours(applied, claim):
            self.disabled = True
            logger.info(
                "the API server keeps no status.devices of ResourceClaims (feature gate "
                "DRAResourceClaimDeviceStatus off, or a Kubernetes without it): the devices' conditions, "
                "identity and usage are not written to claims (first seen on claim %s/%s)",
                claim.namespace,
                claim.name,
            )
            return WriteResult(Outcome.DISABLED)
        return WriteResult(Outcome.WRITTEN)

    def forget(self, uid: str) -> None:
        self._backoff.pop(uid, None)

    def _apply(self, claim: ClaimEntries) -> ResourceV1ResourceClaim:
        body: dict[str, Any] = {
            "metadata": {"name": claim.name, "namespace": claim.namespace, "uid": claim.uid},
            "status": {"devices": list(claim.entries)},
        }
        return self._client.apply(RESOURCE_CLAIM, body, subresource="status")

    def _allocated(self, claim: ClaimEntries) -> tuple[DeviceKey, ...]:
        found = self._client.get(RESOURCE_CLAIM, claim.name, claim.namespace)
        if found.metadata is None or found.metadata.uid != claim.uid:
            raise _OtherClaimError(
                f"the name now belongs to uid {found.metadata.uid if found.metadata else None}"
            )
        allocation = found.status.allocation if found.status is not None else None
        results = (
            allocation.devices.results if allocation is not None and allocation.devices is not None else None
        )
        return tuple(
            DeviceKey(r.pool, r.device, r.share_id)
            for r in results or []
            if r.driver == DRIVER and r.pool == self._pool
        )


_STUCK_ALLOCATION: Final = (
    " — its status.allocation carries opaque parameters stored with whitespace (the claim, its"
    " DeviceClass or its allocation was sent by a client that does not write compact JSON); the API"
    " server refuses every JSON write of this claim's status while it stays allocated"
)


def _allocation_bytes_refused(exc: Exception) -> bool:
    """Whether ``exc`` is the server refusing a status write for the stored allocation's bytes."""
    return (
        isinstance(exc, InvalidError)
        and "status.allocation" in exc.message
        and "cannot be modified once set" in exc.message
    )


class _OtherClaimError(Exception):
    """The claim's name belongs to another object now."""


def _kept_ours(applied: ResourceV1ResourceClaim, claim: ClaimEntries) -> bool:
    """Whether the server's answer holds any of the entries just sent."""
    sent = {(e["pool"], e["device"], e.get("shareID")) for e in claim.entries}
    devices = (applied.status.devices if applied.status is not None else None) or []
    return any(d.driver == DRIVER and (d.pool, d.device, d.share_id) in sent for d in devices)
