"""What wakes a domain: its claims (by the config's domain name), its daemons (by annotation), its
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
from testutil.compute_domains import CLIQUE_A, channel_claim

from api.gpu.v1alpha1 import ComputeDomain, ComputeDomainStatus
from pkg.framework.cache.store import Store
from pkg.framework.reconcile import Request
from pkg.gpucontroller.computedomain.internal.indexes import DOMAIN_BY_TEMPLATE, domain_templates
from pkg.gpucontroller.computedomain.internal.watch.claim import allocation_changed, domain_of
from pkg.gpucontroller.computedomain.internal.watch.compute_domain import spec_or_deletion_changed
from pkg.gpucontroller.computedomain.internal.watch.daemon import domain_of as daemon_domain
from pkg.gpucontroller.computedomain.internal.watch.daemon import pod_changed
from pkg.gpucontroller.computedomain.internal.watch.slice import waiting_for_clique
from pkg.gpucontroller.computedomain.internal.watch.template import template_watch
from pkg.gpucontroller.computedomain.render import ANNOTATION_DOMAIN

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


def test_a_daemon_pod_wakes_its_domain_on_readiness_or_address() -> None:
    meta = V1ObjectMeta(name="p", annotations={ANNOTATION_DOMAIN: "team/job"})
    pending = V1Pod(metadata=meta, status=V1PodStatus())
    ready = V1Pod(
        metadata=meta,
        status=V1PodStatus(pod_ip="10.0.0.1", conditions=[V1PodCondition(type="Ready", status="True")]),
    )
    assert daemon_domain(ready) == [Request(name="job", namespace="team")]
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
