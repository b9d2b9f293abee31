"""Which claims gpu-dra-controller may allocate: pure rules over cached objects.

A claim is ours to allocate only if **all** of these hold, checked in this order so the first
failing rule names the reason:

1. it is not being deleted and not allocated yet;
2. it is not the scheduler's: no ``resource.kubernetes.io/extended-resource-claim`` annotation
   (KEP-5004 special claims) and no ownerReference to a Pod (claims generated from a
   ResourceClaimTemplate for a Pod);
3. no existing Pod references it — by ``spec.resourceClaims[].resourceClaimName`` or
   ``status.resourceClaimStatuses[].resourceClaimName`` (see :func:`claims_of_pod`), whether that
   Pod is pending, running or finished. Such a claim is the scheduler's, which allocates it on a
   node that fits the Pod. Only a Pod deleted before it was ever scheduled stops counting at once:
   it never held devices and goes away without a node's kubelet;
4. every request (every subrequest of a ``firstAvailable`` request) names a device class that
   exists and is **ours** (:func:`is_our_class`).

The Pod rule is judged here from the Pod cache, which can lag the claim cache: a Pod created a
moment before its claim may not be in our cache yet when the claim is. An allocation written then
would pin the claim to a node the Pod may not be able to use, and the Pod would stay Pending
forever. So the cache's "no Pod" is only a first filter: the decisions service confirms it with a
consistent read right before writing (``service/pod_references.py``, ``service/decisions.py``).

Why a finished Pod still counts. When a Pod finishes, kube-controller-manager takes it out of its
claim's ``reservedFor`` and deallocates the claim; at that moment the kube-scheduler is free to
hand the claim's devices to the next Pod. Were the claim ours again as soon as its Pod finished,
gpu-dra-controller would allocate it at the same instant, and the two allocators could pick the
same device. Our collision step gives ours back within a second, but the damage is done in the
scheduler: its record of allocated devices is a plain set keyed by device
(``pkg/scheduler/framework/plugins/dynamicresources`` in kubernetes/kubernetes,
https://github.com/kubernetes/kubernetes/tree/master/pkg/scheduler/framework/plugins/dynamicresources),
so the deallocation of our claim removes the device from that set although the scheduler's own
claim still holds it, and from then on the scheduler hands the device to one claim after another.
A finished Pod never needs its devices again, so waiting costs nothing: once the Pod is deleted
the claim becomes ours (pre-provisioned for its next user), and a new Pod that references it in
the meantime is scheduled as usual.

How a class is "ours": one of its CEL selectors requires our driver with an equality
``device.driver == "gpu.deckhouse.io"`` (either operand order, either quote), or one of its
opaque configs names our driver. This is how the classes generated from GPUClass
(``pkg/gpucontroller/gpuclass``) and every sample are written. A class that merely reads our
attribute domain is not enough: another driver may publish attributes in it. The check is
syntactic on purpose — evaluating selectors needs devices, and a class must be judged before any
exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.client import ResourceV1ResourceClaim, V1DeviceClass

from pkg.domain.names import DRIVER
from pkg.dracontroller.internal.names import EXTENDED_RESOURCE_CLAIM
from pkg.framework.keys import namespaced_key


@dataclass(frozen=True, slots=True)
class Verdict:
    eligible: bool
    reason: str
    pods: tuple[str, ...] = ()  # the referencing Pods, when that is the reason


ELIGIBLE = Verdict(True, "eligible")


def _driver_pattern(driver: str) -> re.Pattern[str]:
    quoted = rf"""["']{re.escape(driver)}["']"""
    return re.compile(rf"device\s*\.\s*driver\s*==\s*{quoted}|{quoted}\s*==\s*device\s*\.\s*driver")


_OUR_DRIVER = _driver_pattern(DRIVER)


def is_our_class(device_class: V1DeviceClass, *, driver: str = DRIVER) -> bool:
    spec = device_class.spec
    if spec is None:
        return False
    pattern = _OUR_DRIVER if driver == DRIVER else _driver_pattern(driver)
    for selector in spec.selectors or ():
        if selector.cel is not None and pattern.search(selector.cel.expression or ""):
            return True
    return any(c.opaque is not None and c.opaque.driver == driver for c in spec.config or ())


def requested_classes(claim: ResourceV1ResourceClaim) -> list[str]:
    """Every device class the claim names, requests and subrequests, in order (may repeat)."""
    devices = claim.spec.devices if claim.spec is not None else None
    names: list[str] = []
    for request in (devices.requests if devices is not None else None) or ():
        if request.exactly is not None:
            names.append(request.exactly.device_class_name or "")
        for sub in request.first_available or ():
            names.append(sub.device_class_name or "")
    return names


def owning_pod(claim: ResourceV1ResourceClaim) -> str | None:
    for ref in (claim.metadata.owner_references if claim.metadata else None) or ():
        if ref.kind == "Pod" and ref.api_version == "v1":
            return str(ref.name)
    return None


def is_scheduler_claim(claim: ResourceV1ResourceClaim) -> bool:
    """Generated for a Pod (template or extended resource): the scheduler allocates it."""
    annotations = (claim.metadata.annotations if claim.metadata else None) or {}
    return EXTENDED_RESOURCE_CLAIM in annotations or owning_pod(claim) is not None


def is_allocated(claim: ResourceV1ResourceClaim) -> bool:
    return claim.status is not None and claim.status.allocation is not None


def is_deleted_unscheduled(pod: Any) -> bool:
    """Deleted before it was ever scheduled: it never held devices and no kubelet has to let go of
    it, so it stops counting now. A finished Pod still counts until it is gone (module docs)."""
    return pod.metadata.deletion_timestamp is not None and not (pod.spec and pod.spec.node_name)


def claims_of_pod(pod: Any) -> list[str]:
    """``namespace/name`` of every claim an existing Pod references, finished or not (a store index)."""
    if is_deleted_unscheduled(pod):
        return []
    namespace = pod.metadata.namespace or ""
    names = {c.resource_claim_name for c in (pod.spec.resource_claims if pod.spec else None) or ()}
    statuses = (pod.status.resource_claim_statuses if pod.status else None) or ()
    names |= {s.resource_claim_name for s in statuses}
    return sorted(namespaced_key(namespace, name) for name in names if name)


def judge(
    claim: ResourceV1ResourceClaim,
    *,
    classes: Mapping[str, V1DeviceClass],
    referencing_pods: Sequence[str] | Iterable[str],
) -> Verdict:
    """Whether this controller may allocate ``claim``, and if not, why (see the module docs)."""
    if claim.metadata is not None and claim.metadata.deletion_timestamp is not None:
        return Verdict(False, "being deleted")
    if is_allocated(claim):
        return Verdict(False, "already allocated")
    annotations = (claim.metadata.annotations if claim.metadata else None) or {}
    if EXTENDED_RESOURCE_CLAIM in annotations:
        return Verdict(False, "an extended-resource claim of the scheduler")
    pod = owning_pod(claim)
    if pod is not None:
        return Verdict(False, f"generated for pod {pod}; the scheduler allocates it")
    pods = sorted(referencing_pods)
    if pods:
        return Verdict(False, f"referenced by pod {pods[0]}; the scheduler allocates it", pods=tuple(pods))
    names = requested_classes(claim)
    if not names:
        return Verdict(False, "no device requests")
    for name in names:
        device_class = classes.get(name)
        if device_class is None:
            return Verdict(False, f"device class {name!r} not found")
        if not is_our_class(device_class):
            return Verdict(False, f"device class {name!r} does not select driver {DRIVER}")
    return ELIGIBLE
