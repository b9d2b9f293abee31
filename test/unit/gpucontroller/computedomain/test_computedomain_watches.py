"""What wakes a domain: its claims (by the config's domain name), its clique's ensemble, its
template (owner or name), and slices only while it waits for a clique; its own status writes do not."""

from __future__ import annotations

from collections.abc import Callable

from kubernetes.client import (
    V1ObjectMeta,
    V1OwnerReference,
    V1Pod,
    V1PodCondition,
    V1PodStatus,
    V1ResourceClaimTemplate,
)
from testutil.compute_domains import CLIQUE_A, CLIQUE_B, channel_claim

from api.gpu.v1alpha1 import ComputeDomain, ComputeDomainStatus
from pkg.framework.cache.store import Store
from pkg.framework.reconcile import Request
from pkg.gpucontroller.computedomain.internal.indexes import DOMAIN_BY_TEMPLATE, domain_templates
from pkg.gpucontroller.computedomain.internal.watch.claim import allocation_changed, domain_of
from pkg.gpucontroller.computedomain.internal.watch.compute_domain import spec_or_deletion_changed
from pkg.gpucontroller.computedomain.internal.watch.daemon import daemon_pod_watch, pod_changed
from pkg.gpucontroller.computedomain.internal.watch.slice import waiting_for_clique
from pkg.gpucontroller.computedomain.internal.watch.template import template_watch
from pkg.gpucontroller.imexensemble.indexes import DOMAIN_BY_CLIQUE, domain_cliques
from pkg.gpucontroller.imexensemble.render import ANNOTATION_CLIQUE

DomainOf = Callable[..., ComputeDomain]


def test_a_claim_wakes_the_domain_it_names_and_only_an_allocation_change_counts() -> None:
    pending, allocated = channel_claim("a", "n", allocated=False), channel_claim("a", "n")
    assert domain_of(pending) == [Request(name="job", namespace="team")]
    assert allocation_changed(pending, allocated)
    assert not allocation_changed(allocated, channel_claim("a", "n"))


def test_a_status_write_does_not_wake_the_domain(domain: DomainOf) -> None:
    before, after = domain(), domain(status=ComputeDomainStatus(channel=1))
    assert not spec_or_deletion_changed(before, after)
    changed = domain(nvlinkDomain=CLIQUE_A)
    changed.metadata.generation = 2
    assert spec_or_deletion_changed(before, changed)


def test_an_ensemble_pod_wakes_the_domains_of_its_clique_on_readiness_or_address(domain: DomainOf) -> None:
    store: Store[ComputeDomain] = Store()
    store.add_indexers({DOMAIN_BY_CLIQUE: domain_cliques})
    store.add(domain(status=ComputeDomainStatus(nvlinkDomain=CLIQUE_A)))
    store.add(domain(name="pinned", uid="u2", nvlinkDomain=CLIQUE_A))
    store.add(domain(name="elsewhere", uid="u3", nvlinkDomain=CLIQUE_B))
    meta = V1ObjectMeta(name="p", annotations={ANNOTATION_CLIQUE: CLIQUE_A})
    pending = V1Pod(metadata=meta, status=V1PodStatus())
    ready = V1Pod(
        metadata=meta,
        status=V1PodStatus(pod_ip="10.0.0.1", conditions=[V1PodCondition(type="Ready", status="True")]),
    )
    assert daemon_pod_watch(store).requests_for(ready) == [
        Request(name="job", namespace="team"),
        Request(name="pinned", namespace="team"),
    ]
    assert daemon_pod_watch(store).requests_for(V1Pod(metadata=V1ObjectMeta(name="foreign"))) == []
    assert pod_changed(pending, ready)
    assert not pod_changed(ready, ready)


def test_a_template_wakes_its_owner_and_the_domains_naming_it(domain: DomainOf) -> None:
    named = domain()
    store: Store[ComputeDomain] = Store()
    store.add_indexers({DOMAIN_BY_TEMPLATE: domain_templates})
    store.add(named)
    owner = V1OwnerReference(
        api_version="gpu.deckhouse.io/v1alpha1", kind="ComputeDomain", name="other", uid="u", controller=True
    )
    template = V1ResourceClaimTemplate(
        metadata=V1ObjectMeta(name="job-channel", namespace="team", owner_references=[owner])
    )
    assert template_watch(store).requests_for(template) == [
        Request(name="job", namespace="team"),
        Request(name="other", namespace="team"),
    ]


def test_slices_wake_only_domains_without_a_clique(domain: DomainOf) -> None:
    assert waiting_for_clique(domain())
    assert not waiting_for_clique(domain(status=ComputeDomainStatus(nvlink_domain=CLIQUE_A)))
