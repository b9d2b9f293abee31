"""Metrics of DRA publishing, exported by gpu-handler.

* ``gpu_dra_resourceslice_offers{node,physicalgpu,deviceType,profile}``: how many offers the last
  successful publish put into the node's ResourceSlices, per card and kind. ``profile`` is the MIG
  profile (``1g.6gb``; one offer per placement) or, for whole-card offers, the sharing strategy
  (``Exclusive``, ``TimeSlicing``, ``MPS``).

The publisher replaces a node's series as a whole with :func:`set_node_offers`, which also removes
the series of cards and profiles that are gone: a removed card must not keep reporting offers.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import NamedTuple

from pkg.domain.metrics import METRICS

resourceslice_offers = METRICS.gauge(
    "dra_resourceslice_offers",
    "Offers published in the node's ResourceSlices, per card, device type and profile.",
    labelnames=["node", "physicalgpu", "deviceType", "profile"],
)


class OfferSeries(NamedTuple):
    physicalgpu: str
    device_type: str
    profile: str


_lock = threading.Lock()
_published: dict[str, set[OfferSeries]] = {}


def set_node_offers(node: str, counts: Mapping[OfferSeries, int]) -> None:
    """Sets the node's offer counts and drops its series that ``counts`` no longer has."""
    with _lock:
        for gone in _published.get(node, set()) - set(counts):
            resourceslice_offers.remove(node, *gone)
        for series, count in counts.items():
            resourceslice_offers.labels(node, *series).set(count)
        _published[node] = set(counts)


__all__ = ["OfferSeries", "resourceslice_offers", "set_node_offers"]
