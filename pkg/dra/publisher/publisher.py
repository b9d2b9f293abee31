"""Publishes one node's offers as the ResourceSlices of its pool.

ResourceSlices and pools are described in
https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/#resourceslice.

Contract of :meth:`SlicePublisher.publish` — level-based, like a reconcile: it reads the slices that
exist, builds the desired ones and writes only the difference.

* Nothing changed → **no write** (not even a no-op apply), and the generation stays.
* Anything changed → every desired slice is applied at ``max(existing generation) + 1`` with
  server-side apply (field manager ``gpu-handler``, forced: the node's handler is the only owner),
  then slices no longer desired are deleted. Counter slices sort and are applied before device
  slices, so a complete pool never has devices whose counter sets are missing.
* A failed write raises the client's error; slices already written keep a newer generation, and
  the next publish sees mixed generations and writes the whole pool again.
* If the server drops fields it was sent (DRA feature gates off), the pool is withdrawn — every
  slice deleted — and :class:`FieldsDroppedError` is raised: without counters the scheduler would
  hand out Physical and MIG offers of one card together, so no offers is the safe state.

After a successful publish ``gpu_dra_resourceslice_offers`` reflects the node's offers.

One publisher serves one node's handler: publishes of one node must not run concurrently (two
would compute the same next generation from the same read), which a single reconcile worker per
node, as in the gpu-handler loop, guarantees.
"""

from __future__ import annotations

import collections
import contextlib
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kubernetes.client import V1Device, V1OwnerReference, V1ResourceSlice

from pkg.domain.names import DRIVER
from pkg.dra.model.offers import CardOffers
from pkg.dra.model.slices import Layout, build_slices, pool_name
from pkg.dra.publisher.channels import channel_slices, slices_needed
from pkg.dra.publisher.diff import dropped_fields, slice_changes
from pkg.dra.publisher.metrics import OfferSeries, set_node_offers
from pkg.dra.publisher.readers import SliceReader
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import RESOURCE_SLICE

FIELD_MANAGER = "gpu-handler"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PublishResult:
    """The pool's generation after the publish and the slices written and deleted, by name."""

    generation: int
    applied: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.applied or self.deleted)


class FieldsDroppedError(RuntimeError):
    """The API server did not keep fields of a slice; the node's pool was withdrawn."""

    def __init__(self, node: str, dropped: dict[str, list[str]]) -> None:
        detail = "; ".join(f"{name}: {', '.join(paths[:5])}" for name, paths in dropped.items())
        super().__init__(
            f"node {node}: the API server dropped ResourceSlice fields ({detail}); are the "
            "DRAPartitionableDevices and DRAConsumableCapacity feature gates enabled? "
            "The node's offers were withdrawn."
        )
        self.node = node
        self.dropped = dropped


class SlicePublisher:
    """Writes a node's slices in one API-server layout (:func:`pkg.dra.model.slices.read_server_version`)."""

    def __init__(
        self, *, kube: KubeClient, reader: SliceReader, layout: Layout, driver: str = DRIVER
    ) -> None:
        # Apply under our own field manager, over the caller's connection pool.
        if kube.field_manager != FIELD_MANAGER:
            kube = KubeClient(kube.api_client, field_manager=FIELD_MANAGER)
        self._kube = kube
        self._reader = reader
        self._layout = layout
        self._driver = driver

    def publish(
        self,
        node: str,
        cards: Sequence[CardOffers],
        *,
        owner: V1OwnerReference | None = None,
        in_use: Collection[str] | None = None,
        channels: Sequence[V1Device] = (),
    ) -> PublishResult:
        """Makes the node's pool hold exactly ``cards``' offers and the IMEX ``channels``
        (:mod:`.channels`, in slices of their own after the cards'); ``owner`` (the Node) for GC;
        ``in_use`` (device names in use on the node): the fill-following order
        (:mod:`pkg.dra.model.fill_order`), else the static one."""
        existing = [
            rs
            for rs in self._reader.list_slices(node)
            if rs.spec.driver == self._driver and rs.spec.node_name == node
        ]
        changes = slice_changes(
            pool=pool_name(node),
            existing=existing,
            desired_at=lambda generation: self._desired(
                node, cards, generation=generation, owner=owner, in_use=in_use, channels=channels
            ),
        )
        dropped: dict[str, list[str]] = {}
        for rs in changes.apply:
            stored = self._kube.apply(RESOURCE_SLICE, rs, force=True)
            if paths := dropped_fields(rs, stored):
                dropped[_name(rs)] = paths
        if dropped:
            self._withdraw(node, [*existing, *changes.apply])
            raise FieldsDroppedError(node, dropped)
        for rs in changes.delete:
            self._delete(rs)
        set_node_offers(node, _offer_counts(cards))
        if not changes.unchanged:
            logger.info(
                "resource slices published",
                extra={
                    "node": node,
                    "generation": changes.generation,
                    "applied": len(changes.apply),
                    "deleted": len(changes.delete),
                    "cards": len(cards),
                },
            )
        return PublishResult(
            changes.generation,
            tuple(_name(rs) for rs in changes.apply),
            tuple(_name(rs) for rs in changes.delete),
        )

    def _desired(
        self,
        node: str,
        cards: Sequence[CardOffers],
        *,
        generation: int,
        owner: V1OwnerReference | None,
        in_use: Collection[str] | None,
        channels: Sequence[V1Device],
    ) -> list[V1ResourceSlice]:
        slices = build_slices(
            node=node, cards=cards, generation=generation, layout=self._layout, owner=owner, in_use=in_use
        )
        if not channels:
            return slices
        count = len(slices) + slices_needed(channels)
        for rs in slices:  # the pool's slice count includes the channels' slices
            rs.spec.pool.resource_slice_count = count
        return slices + channel_slices(
            node=node,
            channels=channels,
            generation=generation,
            count=count,
            inline=self._layout is Layout.INLINE,
            owner=owner,
        )

    def _withdraw(self, node: str, slices: Sequence[V1ResourceSlice]) -> None:
        for name in sorted({_name(rs) for rs in slices}):
            with contextlib.suppress(NotFoundError):
                self._kube.delete(RESOURCE_SLICE, name)
        set_node_offers(node, {})

    def _delete(self, rs: V1ResourceSlice) -> None:
        # The UID precondition keeps a same-named slice created meanwhile from being deleted.
        uid = rs.metadata.uid if rs.metadata else None
        with contextlib.suppress(NotFoundError):
            self._kube.delete(RESOURCE_SLICE, _name(rs), uid=uid)


def _offer_counts(cards: Sequence[CardOffers]) -> dict[OfferSeries, int]:
    counts: collections.Counter[OfferSeries] = collections.Counter(
        OfferSeries(c.card.physical_gpu, o.device_type.value, o.label) for c in cards for o in c.offers
    )
    return dict(counts)


def _name(rs: V1ResourceSlice) -> str:
    return str(rs.metadata.name if rs.metadata else "")
