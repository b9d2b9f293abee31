"""The publish as a reconciler: one request, ``publish``, for the whole node.

Why one key: the node's pool is one unit (one generation, one ``resourceSliceCount``), and two
publishes of one node running at once would both compute the same next generation from the same
read. The controller's queue gives the node agent's guarantees: a burst of triggers costs one
pass, a trigger during a pass one more pass, and one worker never runs two passes at once.

A pass reads everything from the caches and the card store, never from the event that woke it:

1. the Node. Without it there is no owner for the slices, so nothing is written (its create event
   wakes the next pass); a Node being deleted is left to the garbage collector, which removes the
   slices it owns;
2. right after start-up, the cards the cache says are readable but the enrichment has not
   described yet are waited for (at most ``startup_grace`` seconds), so a restart does not withdraw
   the node's offers only to publish them again a moment later;
3. the selection (:mod:`~pkg.gpuhandler.publishing.selection`) and the offers, published by
   server-side apply with the Node as owner. The publisher writes nothing when nothing changed.

Every pass comes back after the resync period (jittered), which bounds how long a missed event or
a hand-edited slice stays wrong; an unchanged node costs one LIST of its slices.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Protocol

from kubernetes.client import V1Node, V1OwnerReference

from api.gpu.v1alpha1 import DriverType, PhysicalGPU
from pkg.dra.domain.offers import CardOffers
from pkg.dra.publisher import PublishResult
from pkg.framework.reconcile.contract import Request, Result
from pkg.gpuhandler.card_specs import CardEntry, CardSpecProvider
from pkg.gpuhandler.publishing.selection import (
    build_card_offers,
    mig_allowed_on,
    ready_but_undescribed,
    select_cards,
)

logger = logging.getLogger(__name__)

PUBLISH = Request(name="publish")


class Publisher(Protocol):
    def publish(
        self, node: str, cards: Sequence[CardOffers], *, owner: V1OwnerReference | None = None
    ) -> PublishResult: ...


def node_owner(node: V1Node) -> V1OwnerReference:
    """The owner reference that makes the garbage collector delete the slices with their Node."""
    meta = node.metadata
    if meta is None or not meta.name or not meta.uid:
        raise ValueError("a Node without name or uid cannot own ResourceSlices")
    return V1OwnerReference(api_version="v1", kind="Node", name=meta.name, uid=meta.uid, controller=True)


class PublishReconciler:
    """Publishes the node's offers for every request (there is only ``publish``)."""

    def __init__(
        self,
        *,
        node_name: str,
        get_node: Callable[[str], V1Node | None],
        list_gpus: Callable[[], Sequence[PhysicalGPU]],
        cards: CardSpecProvider,
        publisher: Publisher,
        pci_vendor_id: str,
        driver_type: DriverType,
        resync_period: float,
        startup_grace: float,
        jitter: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[float, float], float] = random.uniform,
    ) -> None:
        if resync_period <= 0 or startup_grace < 0 or not 0 <= jitter < 1:
            raise ValueError(
                f"need resync_period > 0, startup_grace >= 0 and 0 <= jitter < 1, got "
                f"{resync_period}, {startup_grace}, {jitter}"
            )
        self._node = node_name
        self._get_node = get_node
        self._list_gpus = list_gpus
        self._cards = cards
        self._publisher = publisher
        self._vendor = pci_vendor_id
        self._driver = driver_type
        self._resync = resync_period
        self._grace = startup_grace
        self._jitter = jitter
        self._clock = clock
        self._rand = rand
        self._first_pass: float | None = None
        self._published = False
        self._withheld: Mapping[str, str] = {}

    def reconcile(self, request: Request) -> Result:
        node = self._get_node(self._node)
        if node is None or node.metadata is None or not node.metadata.uid:
            logger.warning(
                "the Node is not in the cache; publishing waits for it", extra={"node": self._node}
            )
            return Result()
        if node.metadata.deletion_timestamp is not None:
            logger.info("the Node is being deleted; its slices go with it", extra={"node": self._node})
            return Result()
        gpus = {str(g.metadata.name): g for g in self._list_gpus()}
        entries = self._cards.snapshot()
        wait = self._startup_wait(gpus, entries)
        if wait > 0:
            return Result(requeue_after=timedelta(seconds=wait))
        selection = select_cards(
            entries=entries,
            gpus=gpus,
            pci_vendor_id=self._vendor,
            driver_type=self._driver,
            allow_mig=mig_allowed_on(node),
        )
        self._log_withheld(selection.withheld, offered={c.physical_gpu for c in selection.cards})
        result = self._publisher.publish(
            self._node, build_card_offers(selection.cards), owner=node_owner(node)
        )
        self._published = True
        logger.debug(
            "publish pass done",
            extra={"node": self._node, "generation": result.generation, "changed": result.changed},
        )
        return Result(requeue_after=timedelta(seconds=self.next_resync()))

    def next_resync(self) -> float:
        return self._resync * self._rand(1 - self._jitter, 1 + self._jitter)

    def _startup_wait(self, gpus: Mapping[str, PhysicalGPU], entries: Mapping[str, CardEntry]) -> float:
        """Seconds left to wait for the enrichment's first description of every readable card."""
        if self._published:
            return 0.0
        now = self._clock()
        if self._first_pass is None:
            self._first_pass = now
        remaining = self._first_pass + self._grace - now
        if remaining <= 0:
            return 0.0
        pending = ready_but_undescribed(
            entries=entries,
            gpus=gpus,
            pci_vendor_id=self._vendor,
            driver_type=self._driver,
        )
        if not pending:
            return 0.0
        logger.info(
            "waiting for the enrichment to describe the node's cards before the first publish",
            extra={"node": self._node, "pending": pending, "seconds_left": round(remaining, 1)},
        )
        return remaining

    def _log_withheld(self, withheld: Mapping[str, str], *, offered: set[str]) -> None:
        """Logs why a card is not offered once per change of reason, and when it is offered again."""
        for name, reason in sorted(withheld.items()):
            if self._withheld.get(name) != reason:
                logger.info("card not offered: %s", reason, extra={"node": self._node, "physicalgpu": name})
        for name in sorted(set(self._withheld) & offered):
            logger.info("card offered again", extra={"node": self._node, "physicalgpu": name})
        self._withheld = dict(withheld)
