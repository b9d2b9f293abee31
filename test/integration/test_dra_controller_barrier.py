"""The Pod reference barrier against a real API server (docs/allocator.md, "a read barrier").

* a Pod created before its claim is in the Pod cache's index once the informer has synced past the
  claim's resourceVersion, and the barrier answers from the cache, without a LIST;
* a quiet Pod watch (no Pod changes after the claim) does not pass a newer version within a short
  wait — the failure mode the bounded wait exists for — and passes it on the next Pod change;
* a cache that never gets there (its informer is not running) makes the barrier fall back to the
  consistent LIST of the namespace, which finds the Pod;
* a watch held away while the Pod and its claim are created and etcd is compacted: the barrier
  falls back meanwhile, and once the watch comes back — resumed from the API server's watch cache,
  or answered 410 Gone and re-listed, whichever the server does (the re-list path is pinned down
  in test/unit/framework/cache/test_read_barrier.py) — the informer passes the claim's version
  with the Pod in the index.
"""

from __future__ import annotations

import time

import pytest
from kubernetes.client import V1Pod
from testutil.integration.dra_controller_process import new_claim, pending_pod
from testutil.integration.informer_helpers import ObservedClient, eventually, running
from testutil.k8s_fields import resource_version_of, spec_of

from pkg.devcluster.cluster import ControlPlane
from pkg.domain.metrics import registry
from pkg.dracontroller.internal.indexes import POD_INDEXERS
from pkg.dracontroller.internal.pod_projection import project_pod
from pkg.dracontroller.internal.service import PodReferenceBarrier, PodReferenceReader
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.reflector import MIN_WATCH_TIMEOUT_SECONDS
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM

pytestmark = pytest.mark.dra_api

SYNC_TIMEOUT = 30.0


def outcome(name: str) -> float:
    return registry.get_sample_value("gpu_dra_pod_barrier_total", {"outcome": name}) or 0.0


def pod_informer(
    kubeconfig: str,
    namespace: str,
    client: ObservedClient | None = None,
    *,
    min_watch_timeout_seconds: int = MIN_WATCH_TIMEOUT_SECONDS,
) -> SharedInformer[V1Pod]:
    return SharedInformer(
        client=client or ObservedClient(kubeconfig), kind=POD, namespace=namespace,
        indexers=POD_INDEXERS, transform=project_pod, min_watch_timeout_seconds=min_watch_timeout_seconds,
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
        assert spec_of(cached).node_selector is None, "the cache holds the projection, not the whole Pod"


def test_quiet_pod_watch_is_bounded_then_passes_on_the_next_pod_change(
    kube: KubeClient, kubeconfig: str, namespace: str
) -> None:
    informer = pod_informer(kubeconfig, namespace)
    with running(informer):
        assert informer.wait_for_sync(SYNC_TIMEOUT)
        claim = kube.create(RESOURCE_CLAIM, new_claim("later", namespace, "no-such-class"))
        version = resource_version_of(claim)
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


def test_relist_after_compaction_passes_the_barrier(
    kube: KubeClient, kubeconfig: str, namespace: str, control_plane: ControlPlane
) -> None:
    client = ObservedClient(kubeconfig)
    informer = pod_informer(kubeconfig, namespace, client, min_watch_timeout_seconds=3)
    with running(informer):
        assert informer.wait_for_sync(SYNC_TIMEOUT)
        client.hold_watches()  # the open watch ends at its short timeout; the next one waits
        try:
            eventually(client.watch_held, timeout=15.0, what="the informer's next watch")
            resume_from = int(informer.last_sync_resource_version)
            kube.create(POD, pending_pod("hidden", namespace, "c"))
            claim = kube.create(RESOURCE_CLAIM, new_claim("c", namespace, "no-such-class"))
            barrier = PodReferenceBarrier(pods=informer, fallback=PodReferenceReader(kube), wait_seconds=0.2)
            before = outcome("fallback")
            assert barrier.referencing(claim) == [f"{namespace}/hidden"], "the lagging cache falls back"
            assert outcome("fallback") == before + 1
            assert control_plane.compact_etcd() > resume_from
        finally:
            client.release_watches()
        assert informer.wait_for_resource_version(resource_version_of(claim), 30.0)
        cached = (outcome("cache"), outcome("fallback"))
        assert barrier.referencing(claim) == [f"{namespace}/hidden"]
        assert (outcome("cache"), outcome("fallback")) == (cached[0] + 1, cached[1])
