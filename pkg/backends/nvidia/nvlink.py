"""Which NVLink domain a card is in: cards of one domain reach each other over NVLink.

A multi-GPU job wants its cards in one domain, and a claim says so with ``matchAttribute`` on
``gpu.deckhouse.io/nvlinkDomain`` (docs/topology.md). NVML offers two sources, tried in order:

1. **The GPU fabric** (``nvmlDeviceGetGpuFabricInfoV``, Hopper and newer): once a card has joined
   a multi-node NVLink fabric (state ``COMPLETED``, status success) its cluster UUID and clique ID
   name the set of cards it can reach, across nodes. A card in no such fabric reports an all-zero
   cluster UUID, which names nothing, so the next source is asked.
2. **Its NVLinks** (``nvmlDeviceGetNvLinkState``, ``…RemoteDeviceType``, ``…RemotePciInfo_v2``):
   when every active link ends at an NVSwitch, the card reaches every other card attached to the
   same switches, so the set of switches (their PCI bus IDs) names the domain. Cards on one HGX
   board reach the same switches and share it; a board split into fabric partitions reaches
   different switches and so has several domains.

Anything else gets no domain: links that end at another GPU (NVLink bridges; a bridged pair, a
ring or a hybrid cube-mesh — which cards are *fully* connected would be an inference, not a
reading), a card with no active link, a query the card or driver does not offer
(docs/architecture.md#a-field-without-a-source-is-left-out).

The switch-set value is ``nvswitch-`` and the first 16 hex digits of the SHA-256 of the sorted,
normalised bus IDs: a fixed length within the API's 64-byte limit however many switches there are,
and equal exactly when the sets are. The value is node-local, which is all a claim of node-local
devices needs.
"""

from __future__ import annotations

import hashlib
from typing import Final

from pkg.backends.nvidia.nvml_port import (
    GPU_FABRIC_STATE_COMPLETED,
    NO_FABRIC_CLUSTER,
    NVLINK_DEVICE_TYPE_SWITCH,
    GpuFabricInfo,
    Nvml,
    if_offered,
)

_SUCCESS: Final = 0


def nvlink_domain(nvml: Nvml, address: str, *, fabric: GpuFabricInfo | None) -> str | None:
    """The card's NVLink domain (see the module docs), or ``None``. ``fabric`` is the card's fabric
    info as the caller read it (``None``: not offered), so one pass asks NVML once. Raises
    :class:`NvmlError` for errors other than "not offered here", as every optional reading does.

    A fabric card that is degraded keeps its domain: it still reaches its clique, and its offers
    carry a taint that says what is wrong (:mod:`pkg.backends.nvidia.fabric`)."""
    if (
        fabric is not None
        and fabric.state == GPU_FABRIC_STATE_COMPLETED
        and fabric.status == _SUCCESS
        and fabric.cluster_uuid != NO_FABRIC_CLUSTER
    ):
        return f"{fabric.cluster_uuid}.{fabric.clique_id}"
    links = if_offered(lambda: nvml.active_nvlinks(address))
    if not links or any(link.remote_type != NVLINK_DEVICE_TYPE_SWITCH for link in links):
        return None
    switches = sorted({normalize_bus_id(link.remote_bus_id) for link in links})
    digest = hashlib.sha256(",".join(switches).encode()).hexdigest()[:16]
    return f"nvswitch-{digest}"


def normalize_bus_id(bus_id: str) -> str:
    """NVML's ``00000000:05:00.0`` → ``0000:05:00.0``: lower case, a 4-digit domain where it fits."""
    text = bus_id.strip().lower()
    domain, _, rest = text.partition(":")
    if len(domain) > 4 and domain[:-4].strip("0") == "":
        domain = domain[-4:]
    return f"{domain}:{rest}"
