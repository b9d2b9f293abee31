"""The one way to name an object in a store, a queue, a log line or an error: ``namespace/name``.

Cluster-scoped objects are just ``name``. The informer store keys objects this way (client-go's
``MetaNamespaceKeyFunc``), a :class:`~pkg.framework.reconcile.Request` prints this way, and indexes
that point at other objects (a Pod's claims) store these keys, so a key read from an index can be
looked up in a store as it is.
"""

from __future__ import annotations

from typing import Any


def namespaced_key(namespace: str | None, name: str) -> str:
    """``namespace/name``, or ``name`` when ``namespace`` is empty."""
    return f"{namespace}/{name}" if namespace else name


def object_key(obj: Any) -> str:
    """The key of an object from its ``metadata``; ``""`` for an object without metadata."""
    meta = obj.metadata
    return "" if meta is None else namespaced_key(meta.namespace, str(meta.name))


__all__ = ["namespaced_key", "object_key"]
