"""An IMEX channel of a compute domain: the device node that lets a job's Pods on several nodes
share GPU memory over a multi-node NVLink fabric, and only theirs.

A channel ``N`` is offered as ``imex-channel-<N>`` (:mod:`pkg.gpuhandler.publishing.channels`);
it is on no card, so its record's card key is the device name. Several Pods of one domain on one
node each hold a claim of the same channel (``allowMultipleAllocations``), so two claims of one
channel never conflict here: what keeps other jobs out is that the channel is the domain's.

* **plan** — the channel number from the offer, and the domain from the claim's
  :class:`~api.gpu.v1alpha1.ComputeDomainChannelConfig` (none: a PlanError naming the claim);
* **prepare**, in order:

  a. the domain (the claim's namespace, the config's name) exists, has the config's UID and owns
     channel ``N`` (``status.channel``), else ``ChannelNotOwned``: a claim cannot reach another
     domain's memory by naming its channel;
  b. the channel's device node is made (mknod, the major from ``/proc/devices``; idempotent);
  c. the container gets that node (CDI);
  d. the domain's IMEX daemon on this node is ready (``status.nodes[]`` of this node,
     ``ready: true``), waited for with backoff up to a bound; past it ``ImexDaemonNotReady``
     names the claim, the domain and the node, and the kubelet retries the Prepare;

* **release** — the node goes when no other recorded claim on the node holds channel ``N``;
  idempotent. A crash between (b) and the record's completion leaves a node the record still
  owns; the retry makes it again (a no-op) or the release removes it;
* **start-up** — channel nodes no record owns are removed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Final

from pydantic import Field

from api.gpu.v1alpha1 import IMEX_CHANNEL_DEVICE_TYPE, IMEX_MAX_CHANNEL, ComputeDomain
from pkg.backends.nvidia.imex_host import ChannelNodeError, ImexChannelNodes
from pkg.backends.preparation import ContainerEdits, DeviceNode
from pkg.framework.client import NotFoundError
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, DeviceRecord, KindRecord
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.kinds import (
    ClaimWork,
    Conflict,
    DeviceKind,
    NodeReport,
    Offer,
    OfferMatch,
    PlanContext,
    PlanError,
    devices_of,
    record_of,
)
from pkg.gpuhandler.preparation.services import ComputeDomainReader

logger = logging.getLogger(__name__)

FIELD: Final = "imexChannel"
ORPHANS: Final = "orphan IMEX channel nodes removed"
REASON_NOT_OWNED: Final = "ChannelNotOwned"
REASON_NOT_READY: Final = "ImexDaemonNotReady"
REASON_NODE: Final = "ChannelDeviceNode"
DEFAULT_READY_TIMEOUT: Final = 30.0
_FIRST_POLL: Final = 0.25
_MAX_POLL: Final = 4.0


class ChannelRecord(KindRecord):
    """The channel and the domain the claim's config named (its name and UID)."""

    channel: int
    domain: str
    domain_uid: str = Field(alias="domainUID")


class ImexChannelKind(DeviceKind):
    name = "IMEX channel"
    offers = OfferMatch(IMEX_CHANNEL_DEVICE_TYPE)
    record_field = FIELD
    record_model = ChannelRecord
    reader_version = 6  # an older reader would take the channel for a whole card named imex-channel-<N>
    on_card = False
    node_step = "orphan-imex-channels"

    def __init__(
        self,
        *,
        nodes: ImexChannelNodes,
        domains: ComputeDomainReader,
        node_name: str,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._nodes = nodes
        self._domains = domains
        self._node = node_name
        self._timeout = ready_timeout
        self._clock = clock
        self._sleep = sleep

    def plan(self, offer: Offer, context: PlanContext) -> ChannelRecord:
        channel = offer.bounded("imexChannel", 1, IMEX_MAX_CHANNEL)
        if offer.domain is None:
            raise PlanError(
                f"{offer.where} is an IMEX channel, but the claim has no ComputeDomainChannelConfig "
                "naming its compute domain"
            )
        return ChannelRecord(channel=channel, domain=offer.domain.domain, domain_uid=offer.domain.domain_uid)

    def conflict(self, device: DeviceRecord, held: DeviceRecord) -> Conflict | None:
        """Claims of one channel share it (the domain's Pods on this node); the domain check in
        :meth:`prepare` is what keeps others out."""
        return None

    def prepare(self, device: DeviceRecord, work: ClaimWork) -> ContainerEdits:
        record = record_of(device, ImexChannelKind, ChannelRecord)
        namespace = work.record.namespace
        self._owned(record, namespace, work.label)
        try:
            path = self._nodes.make(record.channel)
        except ChannelNodeError as exc:
            raise PrepareFailedError(REASON_NODE, f"{work.label}: {exc}") from exc
        self._wait_ready(record, namespace, work.label)
        node = DeviceNode(path=self._nodes.container_path(record.channel), host_path=str(path))
        return ContainerEdits(device_nodes=(node,))

    def release(self, device: DeviceRecord, work: ClaimWork) -> None:
        channel = record_of(device, ImexChannelKind, ChannelRecord).channel
        holders = [
            claim
            for claim, held in devices_of(work.checkpoint, self)
            if claim.uid != work.record.uid
            and record_of(held, ImexChannelKind, ChannelRecord).channel == channel
        ]
        if not holders:
            self._nodes.remove(channel)

    def reconcile_node(self, checkpoint: CheckpointData, cards: Sequence[str]) -> NodeReport:
        """Removes the channel nodes no record owns, in any state."""
        report = NodeReport()
        owned = {
            record_of(d, ImexChannelKind, ChannelRecord).channel for _, d in devices_of(checkpoint, self)
        }
        for channel in self._nodes.present():
            if channel in owned:
                continue
            try:
                self._nodes.remove(channel)
            except OSError as exc:
                report.failed.append((f"imex-channel-{channel}", str(exc)))
                continue
            report.add(ORPHANS, f"channel{channel}")
            logger.info("removed an IMEX channel node no claim owns", extra={"channel": channel})
        return report

    def _owned(self, record: ChannelRecord, namespace: str, label: str) -> ComputeDomain:
        where = f"{label}: compute domain {namespace}/{record.domain}"
        try:
            domain = self._domains.get(namespace, record.domain)
        except NotFoundError:
            raise PrepareFailedError(REASON_NOT_OWNED, f"{where} does not exist") from None
        if domain.metadata.uid != record.domain_uid:
            raise PrepareFailedError(
                REASON_NOT_OWNED,
                f"{where} is {domain.metadata.uid}, not {record.domain_uid} as the claim says",
            )
        owned = domain.status.channel if domain.status is not None else None
        if owned != record.channel:
            raise PrepareFailedError(
                REASON_NOT_OWNED, f"{where} owns channel {owned}, not channel {record.channel}"
            )
        return domain

    def _wait_ready(self, record: ChannelRecord, namespace: str, label: str) -> None:
        """Polls the domain, 0.25 s apart doubling to 4 s, until this node's daemon is ready."""
        deadline = self._clock() + self._timeout
        delay = _FIRST_POLL
        while True:
            domain = self._owned(record, namespace, label)
            nodes = domain.status.nodes if domain.status is not None else []
            if any(n.name == self._node and n.ready for n in nodes or []):
                return
            left = deadline - self._clock()
            if left <= 0:
                raise PrepareFailedError(
                    REASON_NOT_READY,
                    f"{label}: the IMEX daemon of compute domain {namespace}/{record.domain} on node "
                    f"{self._node} is not ready after {self._timeout:g}s; the kubelet retries",
                )
            self._sleep(min(delay, left))
            delay = min(delay * 2, _MAX_POLL)


def channel_record(device: DeviceRecord) -> ChannelRecord | None:
    """``device``'s channel record, or None for a device of another kind."""
    return device.kind_record(FIELD, ChannelRecord)
