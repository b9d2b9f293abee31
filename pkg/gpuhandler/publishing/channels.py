"""Whether this node offers IMEX channels to compute domains, and in which NVLink clique.

A channel is worth offering only where a compute domain can use it, so all three must hold:

* the driver registers ``nvidia-caps-imex-channels`` (its major in ``/proc/devices``): without it
  no channel device node can be made;
* the node's cards joined a multi-node NVLink fabric: at least one card's ``nvlinkDomain`` is a
  fabric clique (``<cluster UUID>.<clique ID>``, not a node-local ``nvswitch-…`` value), and every
  card in a fabric names the same one. Cards of two cliques on one node is a fabric we do not
  understand; offering channels in either would let a domain span cliques IMEX cannot bridge;
* no host-installed ``nvidia-imex`` service: its daemon would serve the node's channels under its
  own configuration, beside the per-domain daemons; the node refuses domains and says so on its
  PhysicalGPUs instead (``ComputeDomainsReady``, written by the enrichment from what
  :class:`ChannelOffers` tells its :class:`~pkg.gpuhandler.enrichment.compute_domains.NodeChannels`).

:func:`decide_channels` is the one place this is decided: the publish pass and the hardware tier
call it with what they read.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from kubernetes.client import V1Device

from api.gpu.v1alpha1 import IMEX_MAX_CHANNEL
from pkg.backends.nvidia.imex_host import IMEX_CHANNELS_DEVICE, ImexHost
from pkg.dra.model.attributes import NVLINK_DOMAIN
from pkg.dra.publisher.channels import imex_channel_devices
from pkg.gpuhandler.enrichment.compute_domains import ChannelStanding, NodeChannels

logger = logging.getLogger(__name__)

_FABRIC_DOMAIN: Final = re.compile(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\.\d+")


def is_fabric_domain(value: str | None) -> bool:
    """Whether an ``nvlinkDomain`` value names a multi-node fabric clique."""
    return value is not None and _FABRIC_DOMAIN.fullmatch(value) is not None


@dataclass(frozen=True)
class ChannelDecision:
    """``domain``: the clique channels are offered in, None when none are; ``reason``: why not."""

    domain: str | None
    reason: str
    host_service: str | None = None
    in_fabric: bool = False  # whether any card is in a fabric (who gets the refusal's condition)

    def devices(self, count: int) -> list[V1Device]:
        return imex_channel_devices(count, self.domain) if self.domain is not None and count > 0 else []

    def standing(self) -> ChannelStanding:
        """The decision as the enrichment reports it on the node's cards."""
        return ChannelStanding(clique=self.domain, reason=self.reason, host_service=self.host_service)


def decide_channels(host: ImexHost, domains: Iterable[str | None]) -> ChannelDecision:
    """The decision for a node whose cards have ``domains`` (their ``nvlinkDomain``, None for none)."""
    cliques = sorted({d for d in domains if d is not None and is_fabric_domain(d)})
    in_fabric = bool(cliques)
    if host.host_service is not None:
        return ChannelDecision(
            None,
            f"a host-installed IMEX service was found ({host.host_service}); stop and disable it "
            "to use compute domains on this node",
            host_service=host.host_service,
            in_fabric=in_fabric,
        )
    if host.channel_major is None:
        return ChannelDecision(
            None, f"the driver lists no {IMEX_CHANNELS_DEVICE} device", in_fabric=in_fabric
        )
    if not cliques:
        return ChannelDecision(None, "no card is in a multi-node NVLink fabric")
    if len(cliques) > 1:
        return ChannelDecision(None, f"the cards are in different NVLink cliques {cliques}", in_fabric=True)
    return ChannelDecision(cliques[0], "offered", in_fabric=True)


def offer_domains(devices: Iterable[V1Device]) -> list[str | None]:
    """The ``nvlinkDomain`` of each published offer (None where it has none)."""
    found: list[str | None] = []
    for device in devices:
        value = (device.attributes or {}).get(NVLINK_DOMAIN)
        found.append(value.string if value is not None else None)
    return found


class ChannelOffers:
    """The publish pass's view: reads the host's facts each pass (a service installed or stopped
    later is seen on the next one) and turns a decision into ``count`` channel devices. Each
    decision is told to ``node_channels``, whose change wakes the enrichment's condition."""

    def __init__(
        self, *, host: Callable[[], ImexHost], count: int, node_channels: NodeChannels | None = None
    ) -> None:
        if not 0 <= count <= IMEX_MAX_CHANNEL:
            raise ValueError(f"IMEX channel count {count} is not between 0 and {IMEX_MAX_CHANNEL}")
        self._host = host
        self._count = count
        self._last: ChannelDecision | None = None
        self._node_channels = node_channels

    def decide(self, offers: Iterable[V1Device]) -> ChannelDecision:
        decision = decide_channels(self._host(), offer_domains(offers))
        if decision != self._last:
            logger.info(
                "IMEX channels %s",
                f"offered in clique {decision.domain}"
                if decision.domain
                else f"not offered: {decision.reason}",
                extra={"count": self._count if decision.domain else 0},
            )
            self._last = decision
        if self._node_channels is not None:
            self._node_channels.tell(decision.standing())
        return decision

    def devices(self, decision: ChannelDecision) -> list[V1Device]:
        return decision.devices(self._count)
