"""The part of a Pod the allocation controller keeps: who it is and which claims it references.

The controller reads Pods for one rule only, "does an existing Pod reference this claim"
(:func:`~pkg.dracontroller.internal.eligibility.claims_of_pod`), so its Pod cache keeps what that
rule and the Pod watch read — name, namespace, uid, resourceVersion, deletionTimestamp (with
nodeName: a Pod deleted before it was scheduled stops counting) and the claim references — and
nothing else. The phase is not kept: a finished Pod references its claims as much as a running
one does. A full Pod decodes to tens of KiB (containers,
env, volumes, managed fields, conditions); the projection is a few hundred bytes, so the cache grows
with the Pods that matter to the rule, not with everything every Pod of the cluster carries.

The projection is applied to the raw JSON before decoding
(:meth:`~pkg.framework.cache.informer_factory.InformerFactory.set_transform`), so the discarded
fields are never decoded at all. ``spec.containers`` stays as an empty list because the Pod model
requires it.
"""

from __future__ import annotations

from typing import Any

_METADATA = ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")


def project_pod(raw: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``raw`` (a Pod as JSON) that the controller reads; see the module docs."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    projected_spec: dict[str, Any] = {"containers": []}
    if spec.get("nodeName"):
        projected_spec["nodeName"] = spec["nodeName"]
    if spec.get("resourceClaims"):
        projected_spec["resourceClaims"] = [
            {"name": c.get("name", ""), "resourceClaimName": c["resourceClaimName"]}
            for c in spec["resourceClaims"]
            if c.get("resourceClaimName")
        ]
    projected_status: dict[str, Any] = {}
    if status.get("resourceClaimStatuses"):
        projected_status["resourceClaimStatuses"] = [
            {"name": s.get("name", ""), "resourceClaimName": s["resourceClaimName"]}
            for s in status["resourceClaimStatuses"]
            if s.get("resourceClaimName")
        ]
    return {
        "apiVersion": raw.get("apiVersion", "v1"),
        "kind": raw.get("kind", "Pod"),
        "metadata": {k: meta[k] for k in _METADATA if meta.get(k) is not None},
        "spec": projected_spec,
        "status": projected_status,
    }
