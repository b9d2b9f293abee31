"""The built-in Kubernetes kinds the framework and the project talk to, declared once each.

A flat list of :class:`~pkg.framework.client.kinds.ResourceKind` constants instead of API discovery: the
project was written against these exact group/versions, so a typo or a missing kind fails at import,
not at the first request. Append new kinds here as constants; keep one kind per constant. Only
kinds the Kubernetes API server itself serves belong here: the project's own CRD kinds are declared
in :mod:`pkg.domain.kinds`, because the framework imports nothing of ``api/``.
"""

from __future__ import annotations

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
    V1ResourceSlice,
)

from pkg.framework.client.kinds import ResourceKind

NODE = ResourceKind(group="", version="v1", kind="Node", plural="nodes", namespaced=False, model=V1Node)
POD = ResourceKind(group="", version="v1", kind="Pod", plural="pods", namespaced=True, model=V1Pod)
NAMESPACE = ResourceKind(
    group="", version="v1", kind="Namespace", plural="namespaces", namespaced=False, model=V1Namespace
)
CONFIG_MAP = ResourceKind(
    group="", version="v1", kind="ConfigMap", plural="configmaps", namespaced=True, model=V1ConfigMap
)

DAEMON_SET = ResourceKind(
    group="apps", version="v1", kind="DaemonSet", plural="daemonsets", namespaced=True, model=V1DaemonSet
)

EVENT = ResourceKind(
    group="events.k8s.io", version="v1", kind="Event", plural="events", namespaced=True, model=EventsV1Event
)
LEASE = ResourceKind(
    group="coordination.k8s.io", version="v1", kind="Lease", plural="leases", namespaced=True, model=V1Lease
)

RESOURCE_SLICE = ResourceKind(
    group="resource.k8s.io",
    version="v1",
    kind="ResourceSlice",
    plural="resourceslices",
    namespaced=False,
    model=V1ResourceSlice,
)
RESOURCE_CLAIM = ResourceKind(
    group="resource.k8s.io",
    version="v1",
    kind="ResourceClaim",
    plural="resourceclaims",
    namespaced=True,
    model=ResourceV1ResourceClaim,
)
DEVICE_CLASS = ResourceKind(
    group="resource.k8s.io",
    version="v1",
    kind="DeviceClass",
    plural="deviceclasses",
    namespaced=False,
    model=V1DeviceClass,
)
