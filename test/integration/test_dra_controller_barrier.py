"""The Pod reference barrier against a real API server (docs/allocator.md, "a read barrier").

* a Pod created before its claim is in the Pod cache's index once the informer has synced past the
  claim's resourceVersion, and the barrier answers from the cache, without a LIST;
* a quiet Pod watch (no Pod changes after the claim) does not pass a newer version within a short
  wait — the failure mode the bounded wait exists for — and passes it on the next Pod change;
* a cache that never gets there (its informer is not running) makes the barrier fall back to the
  consistent LIST of the namespace, which finds the Pod.
"""

from __future__ import annotations

import time

from dra_controller_process import new_claim, pending_pod
from informer_helpers import ObservedClient, running

from pkg.domain.metrics import registry
from pkg.dracontroller.internal.indexes import POD_INDEXERS
from pkg.dracontroller.internal.pod_projection import project_pod
from pkg.dracontroller.internal.service import PodReferenceBarrier, PodReferenceReader
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM

SYNC_TIMEOUT = 30.0


def outcome(name: str) -> float:
    return registry.get_sample_value("gpu_dra_pod_barrier_total", {"outcome": name}) or 0.0


def pod_informer(kubeconfig: str, namespace: str) -> SharedInformer[object]:
    return SharedInformer(
        client=ObservedClient(kubeconfig), kind=POD, namespace=namespace,
        indexers=POD_INDEXERS, transform=project_pod,
    )  # fmt: skip


def test_barrier_answers_from_the_cache_once_past_the_claim(
    kube: KubeClient, kubeconfig: str, namespace: str
) -> None:
    informer = pod_informer(kubeconfig, namespace)
    with running(informer):
        assert informer.wait_for_sync(SYNC_TIMEOUT)
        kube.create(POD, pending_pod("first", namespace, "c"))
        claim = kube.create(RESOURCE_CLAIM, new_claim("c", namespace, "no-such-class"))
        reader = PodReferenceReader(kube)
        barrier = PodReferenceBarrier(pods=informer, fallback=reader, wait_seconds=15.0)
        before = (outcome("cache"), outcome("fallback"))
        assert barrier.referencing(claim) == [f"{namespace}/first"]
        assert (outcome("cache"), outcome("fallback")) == (before[0] + 1, before[1])
        cached = informer.store.get_by_key(f"{namespace}/first")
        assert cached is not None
        assert cached.spec.node_selector is None, "the cache holds the projection, not the whole Pod"


def test_quiet_pod_watch_is_bounded_then_passes_on_the_next_pod_change(
    kube: KubeClient, kubeconfig: str, namespace: str
) -> None:
    informer = pod_informer(kubeconfig, namespace)
    with running(informer):
        assert informer.wait_for_sync(SYNC_TIMEOUT)
        claim = kube.create(RESOURCE_CLAIM, new_claim("later", namespace, "no-such-class"))
        version = str(claim.metadata.resource_version)
        begun = time.monotonic()
        assert not informer.wait_for_resource_version(version, 0.5), "no Pod event past the claim yet"
        assert time.monotonic() - begun < 2.0
        kube.create(POD, pending_pod("after", namespace, "other"))
        assert informer.wait_for_resource_version(version, 15.0)


def test_cache_that_never_catches_up_falls_back_to_the_consistent_list(
    kube: KubeClient, kubeconfig: str, namespace: str
) -> None:
    informer = pod_informer(kubeconfig, namespace)  # never started: it never passes any version
    kube.create(POD, pending_pod("unseen", namespace, "c"))
    claim = kube.create(RESOURCE_CLAIM, new_claim("c", namespace, "no-such-class"))
    barrier = PodReferenceBarrier(pods=informer, fallback=PodReferenceReader(kube), wait_seconds=0.2)
    before = outcome("fallback")
    assert barrier.referencing(claim) == [f"{namespace}/unseen"]
    assert outcome("fallback") == before + 1
