"""The publish as a reconciler: one request, ``publish``, for the whole node.

Why one key: the node's pool is one unit (one generation, one ``resourceSliceCount``), and two
publishes of one node running at once would both compute the same next generation from the same
read. It is the framework's :class:`~pkg.framework.reconcile.SingletonReconciler`: a burst of
events costs one pass, an event during a pass one more pass, and the template's single worker
never runs two passes at once (which is also what makes :class:`~.state.PassMemory` safe).

A pass reads everything from the caches and the card specs, never from the event that woke it,
into a scratch :class:`~.state.PublishState`; then its steps (:mod:`.handler`) run:

1. the Node. Without it there is no owner for the slices, so nothing is written (its create event
   wakes the next pass); a Node being deleted is left to the garbage collector, which removes the
   slices it owns;
2. right after start-up, the cards the cache says are readable but the enrichment has not
   described yet are waited for (at most ``startup_grace`` seconds), so a restart does not withdraw
   the node's offers only to publish them again a moment later;
3. the selection (:mod:`~pkg.gpuhandler.publishing.selection`) and the offers, with an unhealthy
   card's device taints on each of its offers (``taints``, by PCI address), published by
   server-side apply with the Node as owner. The publisher writes nothing when nothing changed.

Every pass comes back after the resync period (jittered), which bounds how long a missed event or
a hand-edited slice stays wrong; an unchanged node costs one LIST of its slices.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

from kubernetes.client import V1DeviceTaint, V1Node

from api.gpu.v1alpha1 import DriverType, PhysicalGPU
from pkg.framework.jitter import Jitter
from pkg.framework.reconcile import Request, SingletonReconciler
from pkg.gpuhandler.enrichment.card_specs import CardSpecProvider
from pkg.gpuhandler.enrichment.readiness import Holds
from pkg.gpuhandler.publishing.channels import ChannelOffers
from pkg.gpuhandler.publishing.handler import NodeHandler, PublishHandler, SelectHandler, StartupGraceHandler
from pkg.gpuhandler.publishing.handler.publish import Publisher, node_owner
from pkg.gpuhandler.publishing.state import PassMemory, PublishState

PUBLISH = Request(name="publish")


class PublishReconciler(SingletonReconciler[PublishState]):
    """Publishes the node's offers for every request (there is only ``publish``)."""

    def __init__(
        self,
        *,
        node_name: str,
        get_node: Callable[[str], V1Node | None],
        list_gpus: Callable[[], Sequence[PhysicalGPU]],
        card_specs: CardSpecProvider,
        publisher: Publisher,
        pci_vendor_id: str,
        driver_type: DriverType,
        resync_period: float,
        startup_grace: float,
        holds: Holds | None = None,
        taints: Callable[[str], list[V1DeviceTaint]] = lambda _address: [],
        in_use: Callable[[], frozenset[str] | None] = lambda: None,
        channels: ChannelOffers | None = None,
        jitter: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[float, float], float] = random.uniform,
    ) -> None:
        if resync_period <= 0 or startup_grace < 0 or not 0 <= jitter < 1:
            raise ValueError(
                f"need resync_period > 0, startup_grace >= 0 and 0 <= jitter < 1, got "
                f"{resync_period}, {startup_grace}, {jitter}"
            )
        memory = PassMemory()

        def state() -> PublishState:
            return PublishState(
                node_name=node_name,
                node=get_node(node_name),
                gpus={str(g.metadata.name): g for g in list_gpus()},
                entries=card_specs.snapshot(),
                memory=memory,
                taints=taints,
                in_use=in_use(),
            )

        publish = PublishHandler(
            publisher=publisher,
            resync=Jitter(period=resync_period, jitter=jitter, rand=rand),
            channels=channels,
        )
        super().__init__(
            request=PUBLISH,
            state=state,
            handlers=[
                NodeHandler(),
                StartupGraceHandler(
                    grace=startup_grace, pci_vendor_id=pci_vendor_id, driver_type=driver_type, clock=clock
                ),
                SelectHandler(pci_vendor_id=pci_vendor_id, driver_type=driver_type, holds=holds),
                publish,
            ],
        )


__all__ = ["PUBLISH", "PublishReconciler", "Publisher", "node_owner"]
