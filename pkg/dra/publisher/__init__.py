"""Publishing a node's GPU offers as DRA ResourceSlices.

Public surface:

* :class:`SlicePublisher` — ``publish(node, cards, *, owner=None) -> PublishResult``: server-side
  apply of the pool's slices, a generation bump on any content change, no write when nothing
  changed, deletion of slices no longer desired;
* readers of the node's existing slices: :class:`KubeSliceReader` (field-selected list) and
  :class:`StoreSliceReader` (an informer store);
* :class:`FieldsDroppedError` — the server did not keep counters or consumable capacity.

The offers and the slice layout are built by :mod:`pkg.dra.model` (``build_offers``,
``build_slices``, ``read_server_version``); this package only compares and writes.
"""

from pkg.dra.publisher.diff import SliceChanges, content, dropped_fields, slice_changes
from pkg.dra.publisher.publisher import (
    FIELD_MANAGER,
    FieldsDroppedError,
    PublishResult,
    SlicePublisher,
)
from pkg.dra.publisher.readers import KubeSliceReader, SliceReader, StoreSliceReader

__all__ = [
    "FIELD_MANAGER",
    "FieldsDroppedError",
    "KubeSliceReader",
    "PublishResult",
    "SliceChanges",
    "SlicePublisher",
    "SliceReader",
    "StoreSliceReader",
    "content",
    "dropped_fields",
    "slice_changes",
]
