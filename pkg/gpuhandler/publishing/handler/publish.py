"""Step 4: publish the selected cards' offers by server-side apply, with the Node as owner.

The devices go in the fill-following order (:mod:`pkg.dra.model.fill_order`) given the devices in
use on the node (:mod:`..in_use`, from the preparation checkpoint), so the kube-scheduler's first
fit takes what best fit would; without that set (no kubelet plugin), in the static order.

The node's IMEX channels (:mod:`..channels`) go in the same pool when the node can serve compute
domains; the decision is kept in the pass's state for whoever reports it.

An unhealthy card's offers carry its device taints (:mod:`pkg.gpuhandler.health.taints`): the card
stays published, so a blip does not withdraw its offers and running claims keep their devices.

The publisher writes nothing when nothing changed. Every pass comes back after the resync period
(jittered), which bounds how long a missed event or a hand-edited slice stays wrong; an unchanged
node costs one LIST of its slices.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import Protocol

from kubernetes.client import V1Device, V1Node, V1OwnerReference

from pkg.dra.model.offers import CardOffers, with_taints
from pkg.dra.publisher import PublishResult
from pkg.framework.client.builtin_kinds import NODE
from pkg.framework.jitter import Jitter
from pkg.framework.reconcile import Result
from pkg.framework.reconcile.owner_references import controller_reference
from pkg.gpuhandler.publishing.channels import ChannelOffers
from pkg.gpuhandler.publishing.selection import build_card_offers
from pkg.gpuhandler.publishing.state import PublishState

logger = logging.getLogger("pkg.gpuhandler.publishing.reconciler")


class Publisher(Protocol):
    def publish(
        self,
        node: str,
        cards: Sequence[CardOffers],
        *,
        owner: V1OwnerReference | None = None,
        in_use: Collection[str] | None = None,
        channels: Sequence[V1Device] = (),
    ) -> PublishResult: ...


def node_owner(node: V1Node) -> V1OwnerReference:
    """The owner reference that makes the garbage collector delete the slices with their Node.

    Without ``blockOwnerDeletion``, as Kubernetes' own ResourceSlice publisher
    (k8s.io/dynamic-resource-allocation) writes it: setting it needs permission to update the Node's
    finalizers, which a node component has no use for.
    """
    return controller_reference(node, NODE, block_owner_deletion=False)


class PublishHandler:
    name = "publish"

    def __init__(
        self, *, publisher: Publisher, resync: Jitter, channels: ChannelOffers | None = None
    ) -> None:
        self._publisher = publisher
        self.resync = resync
        self._channels = channels

    def handle(self, state: PublishState) -> Result | None:
        if state.node is None or state.selection is None:
            raise LookupError("the node and select steps run before publish")
        offers = [
            with_taints(o, state.taints(o.card.pci_address)) for o in build_card_offers(state.selection.cards)
        ]
        channels: list[V1Device] = []
        if self._channels is not None:
            decision = self._channels.decide(o.device for c in offers for o in c.offers)
            state.channels = decision
            channels = self._channels.devices(decision)
        result = self._publisher.publish(
            state.node_name, offers, owner=node_owner(state.node), in_use=state.in_use, channels=channels
        )
        state.memory.published = True
        logger.debug(
            "publish pass done",
            extra={"node": state.node_name, "generation": result.generation, "changed": result.changed},
        )
        return Result(requeue_after=timedelta(seconds=self.resync.next()))
