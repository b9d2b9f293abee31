"""The node's Pods by container ID and by UID: how a process's cgroup leads to its Pod."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kubernetes.client import V1Pod


@dataclass(frozen=True, kw_only=True)
class PodContainer:
    """A container of a Pod (``container`` empty: only the Pod is known) and the names of the
    ResourceClaims the Pod uses (:func:`_claim_names`)."""

    namespace: str
    pod: str
    uid: str
    container: str
    claims: frozenset[str]


class PodDirectory:
    """An index over one list of Pods (the node's, from the informer), built per sampling pass."""

    def __init__(self, pods: Iterable[V1Pod]) -> None:
        self._containers: dict[str, PodContainer] = {}
        self._pods: dict[str, PodContainer] = {}
        for pod in pods:
            meta, status = pod.metadata, pod.status
            if meta is None or not meta.uid:
                continue
            claims = frozenset(_claim_names(pod))
            whole = PodContainer(
                namespace=meta.namespace or "", pod=meta.name or "", uid=meta.uid, container="", claims=claims
            )
            self._pods[meta.uid] = whole
            statuses = [
                *((status.init_container_statuses or []) if status else []),
                *((status.container_statuses or []) if status else []),
                *((status.ephemeral_container_statuses or []) if status else []),
            ]
            for container in statuses:
                container_id = (container.container_id or "").split("://", 1)[-1]
                if container_id:
                    self._containers[container_id] = PodContainer(
                        namespace=whole.namespace,
                        pod=whole.pod,
                        uid=whole.uid,
                        container=container.name,
                        claims=claims,
                    )

    def find(self, *, container_id: str | None, pod_uid: str | None) -> PodContainer | None:
        """The container by ID, else its Pod by UID (container unknown), else ``None``."""
        if container_id is not None and container_id in self._containers:
            return self._containers[container_id]
        return self._pods.get(pod_uid) if pod_uid is not None else None


def _claim_names(pod: V1Pod) -> set[str]:
    """The Pod's ResourceClaims: named in its spec, generated from templates (``resourceClaimStatuses``)
    or made for its extended resources (``extendedResourceClaimStatus``, the one-line GPU request)."""
    spec, status = pod.spec, pod.status
    names = {c.resource_claim_name for c in (spec.resource_claims if spec else None) or []}
    names |= {c.resource_claim_name for c in (status.resource_claim_statuses if status else None) or []}
    extended = status.extended_resource_claim_status if status else None
    if extended is not None:
        names.add(extended.resource_claim_name)
    return {name for name in names if name}
