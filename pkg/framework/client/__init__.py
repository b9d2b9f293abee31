"""A typed Kubernetes client over the official client's transport.

Everything above this package speaks in terms of :class:`ResourceKind` descriptors and pydantic
models (the official client's models for built-in kinds, ours for CRDs), the way controller-runtime
speaks in terms of GroupVersionKinds. One generic client serves every kind, so the informer, the
reconciler's resource wrapper and the services share one set of error types and one transport.
"""

from pkg.framework.client.errors import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    GoneError,
    InvalidError,
    NotFoundError,
)
from pkg.framework.client.kinds import ResourceKind
from pkg.framework.client.kube_client import KubeClient, ListPage, PatchType
from pkg.framework.client.watch import WatchEvent, WatchEventType, WatchStreamClosedError

__all__ = [
    "AlreadyExistsError",
    "ApiError",
    "ConflictError",
    "GoneError",
    "InvalidError",
    "KubeClient",
    "ListPage",
    "NotFoundError",
    "PatchType",
    "ResourceKind",
    "WatchEvent",
    "WatchEventType",
    "WatchStreamClosedError",
]
