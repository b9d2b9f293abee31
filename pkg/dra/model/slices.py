"""How one node's offers are laid out in ResourceSlices (pools with shared counters, KEP-4815:
https://github.com/kubernetes/enhancements/tree/master/keps/sig-scheduling/4815-dra-partitionable-devices).

All of a node's slices form one pool, ``gpus/<node>``, with one ``generation`` and a
``resourceSliceCount`` that counts every slice. The layout depends on the API server:

* **1.35 and newer** (:attr:`Layout.SEPARATE`): a slice holds either counter sets or devices.
  Counter sets go into ``gpu-<node>-counters-NN`` (at most 8 per slice), devices into
  ``gpu-<node>-devices-NN`` (at most 64, the limit once devices consume counters).
* **1.34** (:attr:`Layout.INLINE`): devices may only consume counter sets of their own slice, so
  each ``gpu-<node>-devices-NN`` carries its cards' counter sets beside their devices, within the
  older per-slice totals checked in :mod:`.limits`.

Cards are never split across device slices; they are packed greedily in the node order of
:mod:`.offer_order` (card models in a searched order, PCI address within a model). The scheduler
sorts a pool's slices by name and walks devices first fit, so the zero-padded index keeps slice
order equal to card order, and within a card the offers are already in publication order.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes.client import (
    V1OwnerReference,
    V1ResourcePool,
    V1ResourceSlice,
    V1ResourceSliceSpec,
)

from pkg.domain.names import DRIVER
from pkg.dra.model.card import Card
from pkg.dra.model.fill_order import fill_order
from pkg.dra.model.limits import (
    INLINE_MAX_CONSUMED_COUNTERS,
    INLINE_MAX_SHARED_COUNTERS,
    MAX_COUNTER_SETS,
    MAX_DEVICES_ADVANCED,
    MAX_SUBDOMAIN_LENGTH,
    validate_slice,
)
from pkg.dra.model.offer_order import node_order
from pkg.dra.model.offers import CardOffers
from pkg.framework.client.builtin_kinds import RESOURCE_SLICE
from pkg.framework.reconcile.resource_builder import ResourceBuilder

_LONGEST_SUFFIX = len("-counters-000")
_DIGITS = re.compile(r"\d+")


class Layout(enum.StrEnum):
    INLINE = "Inline"
    SEPARATE = "Separate"


class UnsupportedServerError(RuntimeError):
    """The API server is older than 1.34, which has no ``resource.k8s.io/v1``."""


@dataclass(frozen=True, order=True)
class ServerVersion:
    major: int
    minor: int

    @classmethod
    def from_version_info(cls, info: Mapping[str, Any]) -> ServerVersion:
        """From the ``/version`` body; ``minor`` may carry a vendor suffix (``"35+"``)."""
        major, minor = _DIGITS.match(str(info.get("major", ""))), _DIGITS.match(str(info.get("minor", "")))
        if major is None or minor is None:
            raise UnsupportedServerError(f"cannot read the server version from {dict(info)}")
        return cls(int(major.group()), int(minor.group()))

    @property
    def layout(self) -> Layout:
        if (self.major, self.minor) < (1, 34):
            raise UnsupportedServerError(f"Kubernetes {self.major}.{self.minor} is older than 1.34")
        return Layout.INLINE if (self.major, self.minor) == (1, 34) else Layout.SEPARATE


class SupportsRaw(Protocol):
    def raw(self, method: str, path: str) -> Any: ...


def read_server_version(client: SupportsRaw) -> ServerVersion:
    """``GET /version`` through ``KubeClient.raw``."""
    return ServerVersion.from_version_info(client.raw("GET", "/version"))


def pool_name(node: str) -> str:
    return f"gpus/{node}"


def slice_name_base(node: str) -> str:
    """``gpu-<node>``, shortened with a hash when a long node name would overflow 253 characters."""
    base = f"gpu-{node}"
    if len(base) + _LONGEST_SUFFIX <= MAX_SUBDOMAIN_LENGTH:
        return base
    digest = hashlib.sha256(node.encode()).hexdigest()[:8]
    return base[: MAX_SUBDOMAIN_LENGTH - _LONGEST_SUFFIX - 9].rstrip(".-") + "-" + digest


def build_slices(
    *,
    node: str,
    cards: Sequence[CardOffers],
    generation: int,
    layout: Layout,
    owner: V1OwnerReference | None = None,
    arrange: Callable[[Sequence[Card]], list[Card]] = node_order,
    in_use: Collection[str] | None = None,
) -> list[V1ResourceSlice]:
    """The node's slices in name order; none for a node without cards. Every slice is validated.

    ``arrange`` puts the cards in publication order; only the packing benchmark passes another
    than the published one (:func:`~.offer_order.by_pci`, the order before the search).
    ``in_use``: the names of the node's devices in use; given, the cards and offers go in the
    fill-following order (:mod:`.fill_order`) from that static order.
    """
    by_pci = {c.card.pci_address: c for c in cards}
    ordered = [by_pci[c.pci_address] for c in arrange([c.card for c in cards])]
    if in_use is not None:
        ordered = fill_order(ordered, in_use)
    groups = list(_pack(ordered, inline=layout is Layout.INLINE))
    base = slice_name_base(node)
    specs: list[tuple[str, list[CardOffers], bool]] = []
    if layout is Layout.SEPARATE:
        counter_groups = [ordered[i : i + MAX_COUNTER_SETS] for i in range(0, len(ordered), MAX_COUNTER_SETS)]
        specs += [(f"{base}-counters-{i:02d}", g, False) for i, g in enumerate(counter_groups)]
    specs += [(f"{base}-devices-{i:02d}", g, True) for i, g in enumerate(groups)]
    slices = []
    for name, group, with_devices in specs:
        counters = layout is Layout.INLINE or not with_devices
        spec = V1ResourceSliceSpec(
            driver=DRIVER,
            node_name=node,
            pool=V1ResourcePool(name=pool_name(node), generation=generation, resource_slice_count=len(specs)),
            shared_counters=[c.counter_set for c in group] if counters else None,
            devices=[o.device for c in group for o in c.offers] if with_devices else None,
        )
        builder = ResourceBuilder(name, kind=RESOURCE_SLICE)
        meta = (builder.with_owner(owner) if owner else builder).meta()
        slices.append(
            V1ResourceSlice(api_version="resource.k8s.io/v1", kind="ResourceSlice", metadata=meta, spec=spec)
        )
    for rs in slices:
        validate_slice(rs, inline=layout is Layout.INLINE)
    return slices


def _pack(cards: Sequence[CardOffers], *, inline: bool) -> Iterator[list[CardOffers]]:
    """Whole cards per device slice, greedily; a card too big alone fails in ``validate_slice``."""
    group: list[CardOffers] = []
    for card in cards:
        if group and not _fits([*group, card], inline=inline):
            yield group
            group = []
        group.append(card)
    if group:
        yield group


def _fits(group: Sequence[CardOffers], *, inline: bool) -> bool:
    if sum(len(c.offers) for c in group) > MAX_DEVICES_ADVANCED:
        return False
    if not inline:
        return True
    shared = sum(len(c.counter_set.counters) for c in group)
    consumed = sum(len(u.counters) for c in group for o in c.offers for u in o.device.consumes_counters or [])
    return (
        len(group) <= MAX_COUNTER_SETS
        and shared <= INLINE_MAX_SHARED_COUNTERS
        and consumed <= INLINE_MAX_CONSUMED_COUNTERS
    )
