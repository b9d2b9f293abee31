"""Whether this node serves compute domains, as the ``ComputeDomainsReady`` condition of its cards.

The publish pass decides whether the node offers IMEX channels
(:mod:`pkg.gpuhandler.publishing.channels`): it alone sees every card's offers at once and reads
the host's IMEX facts. An administrator asks the PhysicalGPU why a compute domain's Pods never
land on a node, so the answer is written there, by the enrichment, which owns the handler's
conditions. Publishing sits above the enrichment, so the decision flows down through
:class:`NodeChannels`: the publish pass tells it each decision (a :class:`ChannelStanding`), and a
change wakes a pass of every card of the node (the composition root subscribes the enrichment's
card changes).

The condition, on a card the enrichment read in a multi-node NVLink fabric (its
``currentState.nvidia.fabric``), and on no other card:

* ``True``, reason ``ChannelsOffered``: the node offers channels in the card's clique;
* ``False``, reason ``HostImexService``: a host-installed ``nvidia-imex`` service was found (the
  message names the running process or the enabled unit); the node refuses domains, because that
  daemon would serve the channels under its own configuration beside the domains' daemons;
* ``False``, reason ``ChannelsNotOffered``: any other reason (the driver registers no channel
  device, the fabric is not ready, the cards are in different cliques), in the message.

No condition while channels are turned off (``--imex-channels=0``): compute domains are not
asked of this node. Until the first publish pass decided, a card keeps the condition it has, so a
restart does not drop and re-add it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from kubernetes.client import V1Condition

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUConditionType
from pkg.framework.reconcile.conditions import (
    ConditionStatus,
    DesiredCondition,
    find_condition,
    set_condition,
)

logger = logging.getLogger(__name__)


class ComputeDomainsReason(StrEnum):
    CHANNELS_OFFERED = "ChannelsOffered"
    HOST_IMEX_SERVICE = "HostImexService"
    CHANNELS_NOT_OFFERED = "ChannelsNotOffered"


@dataclass(frozen=True, kw_only=True)
class ChannelStanding:
    """One publish pass's decision: ``clique`` the channels are offered in (None: not offered),
    ``reason`` why not, ``host_service`` what host IMEX service was found, ``turned_off`` when the
    node offers no channels by configuration."""

    clique: str | None = None
    reason: str = ""
    host_service: str | None = None
    turned_off: bool = False


TURNED_OFF = ChannelStanding(reason="IMEX channels are turned off on this node", turned_off=True)


class NodeChannels:
    """The node's last :class:`ChannelStanding`; None until the publish pass first decided.
    Subscribers hear of every change. Thread-safe (the publisher tells, the enrichment reads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._standing: ChannelStanding | None = None
        self._subscribers: list[Callable[[], None]] = []

    def subscribe(self, subscriber: Callable[[], None]) -> None:
        self._subscribers.append(subscriber)

    def standing(self) -> ChannelStanding | None:
        with self._lock:
            return self._standing

    def tell(self, standing: ChannelStanding) -> None:
        with self._lock:
            if standing == self._standing:
                return
            self._standing = standing
        for subscriber in self._subscribers:
            try:
                subscriber()
            except Exception:  # one broken subscriber must not stop the others
                logger.exception("IMEX channel standing subscriber failed")


def desired_condition(standing: ChannelStanding, *, generation: int | None) -> DesiredCondition | None:
    """The condition of a card in a fabric on a node whose channels stand so; None: no condition."""
    if standing.turned_off:
        return None
    if standing.host_service is not None:
        status, reason = ConditionStatus.FALSE, ComputeDomainsReason.HOST_IMEX_SERVICE
        message = (
            f"a host-installed IMEX service was found ({standing.host_service}); this node refuses "
            "compute domains until it is stopped and disabled"
        )
    elif standing.clique is not None:
        status, reason = ConditionStatus.TRUE, ComputeDomainsReason.CHANNELS_OFFERED
        message = f"IMEX channels are offered in NVLink clique {standing.clique}"
    else:
        status, reason = ConditionStatus.FALSE, ComputeDomainsReason.CHANNELS_NOT_OFFERED
        message = f"no IMEX channels are offered: {standing.reason}"
    return DesiredCondition(
        type=PhysicalGPUConditionType.COMPUTE_DOMAINS_READY,
        status=status,
        reason=reason,
        message=message,
        observed_generation=generation,
    )


def compute_domains_condition(
    gpu: PhysicalGPU, standing: ChannelStanding, *, now: datetime
) -> V1Condition | None:
    """``ComputeDomainsReady`` of a card in a fabric: a new transition time only when the status
    changes; None when the node's channels are turned off."""
    desired = desired_condition(standing, generation=gpu.metadata.generation)
    if desired is None:
        return None
    conditions = [c.model_copy() for c in (gpu.status.conditions if gpu.status else None) or ()]
    set_condition(conditions, desired, now=now)
    return find_condition(conditions, PhysicalGPUConditionType.COMPUTE_DOMAINS_READY)
