"""Which Pods reference a claim, as of a given claim version: the Pod cache behind a read barrier,
or, when the cache cannot show it is current, a consistent read from the API server.

:class:`PodReferenceBarrier` is what the controller uses (the design and its alternatives are
argued in docs/allocator.md, "Pods created just before their claims"): every Pod created before a
claim version ``v`` has a resourceVersion below ``v``, so once the Pod informer has synced past
``v`` its claim -> Pods index answers "which Pods referenced this claim at ``v``" without a request,
in time independent of how many Pods the namespace holds. If the informer does not get there
within a bounded wait (a lagging or re-listing watch, a quiet cluster whose Pod watch has
nothing to deliver before the next bookmark, versions that are not integers), the answer comes from
:class:`PodReferenceReader` instead, counted in ``gpu_dra_pod_barrier_total{outcome="fallback"}``.

:class:`PodReferenceReader` (below) is that fallback, and what the controller did for every claim
before the barrier existed:

Why: "no Pod references it" must hold when the allocation is written, not only in
the Pod cache, which can lag the claim cache — a Pod created a moment before its claim may be
missing from our cache when the claim arrives, and an allocation written then may sit on a node
the Pod cannot use, leaving it Pending forever. So right before writing (and once more right
after, see ``decisions.py``) the decisions service asks the barrier, which asks this reader when
the Pod cache is late.

The read is a LIST of the claim's namespace without ``resourceVersion``: a consistent read
(served from the API server's watch cache once it has caught up with etcd's current
revision), so it sees every Pod created before the read started — in particular every Pod created
before the claim we decided on. Only the claim's namespace is read, because a Pod can reference
claims of its own namespace only. No field selector: finished Pods count as much as running ones
(:mod:`~pkg.dracontroller.internal.eligibility` says why), and the one Pod that does not count, one
deleted before it was scheduled, cannot be told apart by a field the server filters on. Items stay
raw JSON: only a Pod whose JSON names the claim is decoded and
judged by :func:`~pkg.dracontroller.internal.eligibility.claims_of_pod`, the one rule the Pod
cache's index uses too, so both reads agree on what "references" means.

Cost: one request per check, proportional to the namespace's Pods (a few milliseconds for
tens of Pods on the test control plane; ``gpu_dra_pod_check_seconds`` measures it in production).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from kubernetes.client import ResourceV1ResourceClaim

from pkg.dracontroller.internal.eligibility import claims_of_pod
from pkg.dracontroller.internal.indexes import POD_BY_CLAIM
from pkg.dracontroller.metrics import pod_barrier, pod_check_latency
from pkg.framework.client import ListPage, ResourceKind
from pkg.framework.client.builtin_kinds import POD
from pkg.framework.keys import object_key

PAGE_SIZE = 500


class PodLister(Protocol):
    """The part of :class:`~pkg.framework.client.KubeClient` the reader uses."""

    def list_page(
        self,
        kind: ResourceKind[Any],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> ListPage: ...


class PodReferences(Protocol):
    """Keys (``namespace/name``) of the existing Pods, finished ones included, that reference a
    claim, as of (at least) the claim's resourceVersion."""

    def referencing(self, claim: ResourceV1ResourceClaim) -> list[str]:
        """Always answers: may wait (bounded) and may read from the API server."""
        ...

    def referencing_if_current(self, claim: ResourceV1ResourceClaim) -> list[str] | None:
        """Answers without waiting, or None when that cannot be done yet (the caller asks again)."""
        ...


class PodIndex(Protocol):
    """The part of the Pod :class:`~pkg.framework.cache.informer.SharedInformer` the barrier uses."""

    def wait_for_resource_version(self, resource_version: str, timeout: float) -> bool: ...

    @property
    def store(self) -> Any: ...


def _names_claim(raw: dict[str, Any], claim_name: str) -> bool:
    """Whether the raw Pod mentions the claim anywhere ``claims_of_pod`` looks (a cheap pre-filter)."""
    spec, status = raw.get("spec") or {}, raw.get("status") or {}
    entries = [*(spec.get("resourceClaims") or ()), *(status.get("resourceClaimStatuses") or ())]
    return any(entry.get("resourceClaimName") == claim_name for entry in entries)


class PodReferenceReader:
    """The consistent LIST of the claim's namespace: O(Pods of the namespace) per call."""

    def __init__(self, client: PodLister, *, page_size: int = PAGE_SIZE) -> None:
        self._client = client
        self._page_size = page_size

    def referencing(self, claim: ResourceV1ResourceClaim) -> list[str]:
        meta = claim.metadata
        if meta is None or not meta.name:
            return []
        namespace, key = meta.namespace or "", object_key(claim)
        started = time.monotonic()
        pods: list[str] = []
        token: str | None = None
        while True:
            page = self._client.list_page(
                POD,
                namespace=namespace,
                limit=self._page_size,
                continue_token=token,
            )
            for raw in page.items:
                if _names_claim(raw, meta.name):
                    pod = POD.decode(raw)
                    if key in claims_of_pod(pod):
                        pods.append(object_key(pod))
            if not page.continue_token:
                break
            token = page.continue_token
        pod_check_latency.observe(time.monotonic() - started)
        return sorted(pods)

    def referencing_if_current(self, claim: ResourceV1ResourceClaim) -> list[str] | None:
        """A consistent read is always current, so it always answers (and never defers)."""
        return self.referencing(claim)


DEFAULT_WAIT_SECONDS = 1.0
"""How long a barrier waits for the Pod informer before reading from the API server. Longer than
a watch event takes to arrive on a healthy control plane (milliseconds), shorter than a re-list of
a large cluster, so a lagging cache costs one consistent read, not a stall of every decision."""


class PodReferenceBarrier:
    """Answers from the Pod cache once it has synced past the claim's version; see the module docs."""

    def __init__(
        self, *, pods: PodIndex, fallback: PodReferences, wait_seconds: float = DEFAULT_WAIT_SECONDS
    ) -> None:
        self._pods = pods
        self._fallback = fallback
        self._wait = wait_seconds

    def referencing(self, claim: ResourceV1ResourceClaim) -> list[str]:
        started = time.monotonic()
        found = self._from_cache(claim, self._wait)
        if found is None:
            pod_barrier.labels(outcome="fallback").inc()
            return self._fallback.referencing(claim)  # observes pod_check_latency itself
        pod_barrier.labels(outcome="cache").inc()
        pod_check_latency.observe(time.monotonic() - started)
        return found

    def referencing_if_current(self, claim: ResourceV1ResourceClaim) -> list[str] | None:
        found = self._from_cache(claim, 0.0)
        if found is not None:
            pod_barrier.labels(outcome="cache").inc()
        return found

    def _from_cache(self, claim: ResourceV1ResourceClaim, wait: float) -> list[str] | None:
        meta = claim.metadata
        if meta is None or not meta.name:
            return []
        if not self._pods.wait_for_resource_version(meta.resource_version or "", wait):
            return None
        return sorted(self._pods.store.index_keys(POD_BY_CLAIM, object_key(claim)))
