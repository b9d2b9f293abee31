"""An NVL72-like multi-node NVLink system, described as the simulated NVML answers for it.

A GB200 NVL72 rack joins 18 compute trays of 4 GPUs through NVLink switch trays into one fabric
(one cluster UUID); the fabric manager may split it into partitions, each a clique whose cards
reach one another across trays. The tests need its shape, not its size: four trays of four
cards, two cliques of one cluster (trays 0-1 and 2-3), and one card whose fabric reports degraded
bandwidth (tray 1, card 3). :func:`tray_fabric` puts a tray's cards onto a simulated host's
cards, in PCI address order, the order a compute tray's GPUs probe in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

from pkg.backends.simulated.fabric import CardFabric

NVL72_CLUSTER_UUID: Final = "3c1e5f0a-9d42-4b7e-a1c8-6f2d0e9b7a15"
CARDS_PER_TRAY: Final = 4
CLIQUE_A: Final = 0x7FFF0001
CLIQUE_B: Final = 0x7FFF0002
DEGRADED_CARD: Final = ("tray-1", 3)  # (tray, card index): reports DegradedBandwidth


def _tray(name: str, clique: int) -> tuple[CardFabric, ...]:
    return tuple(
        CardFabric(
            cluster_uuid=NVL72_CLUSTER_UUID,
            clique_id=clique,
            health=("DegradedBandwidth",) if (name, index) == DEGRADED_CARD else (),
        )
        for index in range(CARDS_PER_TRAY)
    )


NVL72_TRAYS: Final[Mapping[str, tuple[CardFabric, ...]]] = MappingProxyType(
    {
        "tray-0": _tray("tray-0", CLIQUE_A),
        "tray-1": _tray("tray-1", CLIQUE_A),
        "tray-2": _tray("tray-2", CLIQUE_B),
        "tray-3": _tray("tray-3", CLIQUE_B),
    }
)


def tray_fabric(tray: str, addresses: Sequence[str]) -> dict[str, CardFabric]:
    """The fabric of ``tray``'s cards on a host whose cards are at ``addresses`` (its first four,
    in address order); raises ``KeyError`` for an unknown tray, ``ValueError`` for too few cards."""
    cards = NVL72_TRAYS[tray]
    ordered = sorted(addresses)
    if len(ordered) < len(cards):
        raise ValueError(f"tray {tray} has {len(cards)} cards; the host has {len(ordered)}")
    return dict(zip(ordered, cards, strict=False))
