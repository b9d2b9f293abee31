"""ResourceSlice publishing of the gpu-handler: this node's offers, kept current.

The loop (:mod:`.setup`, :mod:`.reconciler`) publishes the node's pool ``gpus/<node>`` through
:class:`~pkg.dra.publisher.SlicePublisher`: server-side apply, the generation bumped on
any change, slices of vanished cards deleted, no write when nothing changed, the Node as owner of
every slice so they go with it. Publishes of one node never overlap (one request, one worker).

What is offered (:mod:`.selection`): cards the enrichment described, readable (``DriverReady=True``
on the backend's driver) and ``HardwareHealthy=True``; MIG offers only for cards that support MIG
on a Node whose ``gpu.deckhouse.io/allow-mig`` label is not ``false``. What wakes a publish
(:mod:`.watches`): the card specs' changes, this node's PhysicalGPUs, its Node's MIG label, its
slices edited or deleted by others, and a slow periodic resync. The layout (1.34 inline counters,
1.35+ a counter slice) follows the API server's version, read once (:mod:`.layout`).
"""

from pkg.gpuhandler.publishing.reconciler import PUBLISH, PublishReconciler, node_owner
from pkg.gpuhandler.publishing.selection import (
    LABEL_ALLOW_MIG,
    Selection,
    build_card_offers,
    mig_allowed_on,
    select_cards,
)
from pkg.gpuhandler.publishing.setup import (
    PUBLISH_CONTROLLER,
    PublishingContainer,
    PublishSettings,
    setup_publishing,
)

__all__ = [
    "LABEL_ALLOW_MIG",
    "PUBLISH",
    "PUBLISH_CONTROLLER",
    "PublishReconciler",
    "PublishSettings",
    "PublishingContainer",
    "Selection",
    "build_card_offers",
    "mig_allowed_on",
    "node_owner",
    "select_cards",
    "setup_publishing",
]
