"""The built-in Kubernetes kinds the framework and the project talk to, declared once each.

A flat list of :class:`~pkg.framework.client.kinds.ResourceKind` constants instead of API discovery: the
project was written against these exact group/versions, so a typo or a missing kind fails at import
(and in mypy), not at the first request. Append new kinds to ``_KINDS`` with their declaration under
``TYPE_CHECKING``; keep one kind per constant. Only kinds the Kubernetes API server itself serves
belong here: the project's own CRD kinds are declared in :mod:`pkg.domain.kinds`, because the
framework imports nothing of ``api/``.

Each constant is built on first use (a module ``__getattr__``, PEP 562), because building one
imports its model and a model imports every model it nests: Pod and DaemonSet alone are about a
hundred modules of the client, a third of a second of CPU that a short-lived process such as
``kubectl gpu explain``, which needs only ResourceClaim, would pay at every start
(docs/performance.md). ``from ... import NODE`` works as before; an unknown name still raises
``ImportError``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pkg.framework.client.kinds import ResourceKind

if TYPE_CHECKING:
    from kubernetes.client import (
        EventsV1Event,
        ResourceV1ResourceClaim,
        V1ConfigMap,
        V1DaemonSet,
        V1DeviceClass,
        V1Lease,
        V1Namespace,
        V1Node,
        V1Pod,
        V1ResourceClaimTemplate,
        V1ResourceSlice,
    )

    NODE: ResourceKind[V1Node]
    POD: ResourceKind[V1Pod]
    NAMESPACE: ResourceKind[V1Namespace]
    CONFIG_MAP: ResourceKind[V1ConfigMap]
    DAEMON_SET: ResourceKind[V1DaemonSet]
    EVENT: ResourceKind[EventsV1Event]
    LEASE: ResourceKind[V1Lease]
    RESOURCE_SLICE: ResourceKind[V1ResourceSlice]
    RESOURCE_CLAIM: ResourceKind[ResourceV1ResourceClaim]
    RESOURCE_CLAIM_TEMPLATE: ResourceKind[V1ResourceClaimTemplate]
    DEVICE_CLASS: ResourceKind[V1DeviceClass]

# name: (group, version, kind, plural, namespaced, the model's class in kubernetes.client)
_KINDS: dict[str, tuple[str, str, str, str, bool, str]] = {
    "NODE": ("", "v1", "Node", "nodes", False, "V1Node"),
    "POD": ("", "v1", "Pod", "pods", True, "V1Pod"),
    "NAMESPACE": ("", "v1", "Namespace", "namespaces", False, "V1Namespace"),
    "CONFIG_MAP": ("", "v1", "ConfigMap", "configmaps", True, "V1ConfigMap"),
    "DAEMON_SET": ("apps", "v1", "DaemonSet", "daemonsets", True, "V1DaemonSet"),
    "EVENT": ("events.k8s.io", "v1", "Event", "events", True, "EventsV1Event"),
    "LEASE": ("coordination.k8s.io", "v1", "Lease", "leases", True, "V1Lease"),
    "RESOURCE_SLICE": (
        "resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False, "V1ResourceSlice"
    ),
    "RESOURCE_CLAIM": (
        "resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True, "ResourceV1ResourceClaim"
    ),
    "RESOURCE_CLAIM_TEMPLATE": (
        "resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", True,
        "V1ResourceClaimTemplate",
    ),
    "DEVICE_CLASS": ("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False, "V1DeviceClass"),
}  # fmt: skip


def _build(name: str) -> ResourceKind[Any]:
    group, version, kind, plural, namespaced, model = _KINDS[name]
    client = importlib.import_module("kubernetes.client")  # lazy: its models load on first access
    built = ResourceKind(
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        namespaced=namespaced,
        model=getattr(client, model),
    )
    # Kept as the module's attribute, so later uses are plain lookups. Two threads racing here
    # build equal kinds (a frozen dataclass compares by value; the model is the one class).
    globals()[name] = built
    return built


if not TYPE_CHECKING:  # for mypy the constants are the declarations above, so a typo stays an error

    def __getattr__(name: str) -> ResourceKind[Any]:
        if name in _KINDS:
            return _build(name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_KINDS})
