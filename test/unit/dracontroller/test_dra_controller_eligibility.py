"""Which claims gpu-dra-controller may allocate, and which Pods reference which claims."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kubernetes.client import (
    V1DeviceClass,
    V1DeviceClassConfiguration,
    V1DeviceClassSpec,
    V1ObjectMeta,
    V1OpaqueDeviceConfiguration,
    V1OwnerReference,
    V1Pod,
    V1PodResourceClaim,
    V1PodResourceClaimStatus,
    V1PodSpec,
    V1PodStatus,
)
from testutil.k8s_fields import meta, name_of
from testutil.unit.dra.allocator.alloc_builders import claim, device_class, exact, first_available
from testutil.unit.dracontroller.dra_controller_fakes import our_mig_class

from pkg.dracontroller.internal.eligibility import claims_of_pod, is_our_class, judge
from pkg.dracontroller.internal.indexes import POD_BY_CLAIM, POD_INDEXERS
from pkg.dracontroller.internal.names import EXTENDED_RESOURCE_CLAIM
from pkg.framework.cache.store import Store

CLASSES = {name_of(c): c for c in (our_mig_class("1g"), device_class("other", 'device.driver == "x.io"'))}


@pytest.mark.parametrize(
    "expression",
    [
        'device.driver == "gpu.deckhouse.io"',
        "device.driver=='gpu.deckhouse.io' && true",
        '"gpu.deckhouse.io" == device.driver',
        'device.attributes["gpu.deckhouse.io"].deviceType == "MIG" && device.driver == "gpu.deckhouse.io"',
    ],
)
def test_classes_requiring_our_driver_are_ours(expression: str) -> None:
    assert is_our_class(device_class("c", expression))


@pytest.mark.parametrize(
    "expression",
    [
        'device.attributes["gpu.deckhouse.io"].deviceType == "MIG"',  # another driver may publish these
        'device.driver == "gpu.deckhouse.io.evil"',
        'device.driver != "gpu.deckhouse.io"',
        'device.driver == "example.com"',
    ],
)
def test_other_classes_are_not_ours(expression: str) -> None:
    assert not is_our_class(device_class("c", expression))


def test_a_class_configuring_our_driver_is_ours() -> None:
    config = V1DeviceClassConfiguration(
        opaque=V1OpaqueDeviceConfiguration(driver="gpu.deckhouse.io", parameters={})
    )
    assert is_our_class(
        V1DeviceClass(metadata=V1ObjectMeta(name="c"), spec=V1DeviceClassSpec(config=[config]))
    )
    assert not is_our_class(V1DeviceClass(metadata=V1ObjectMeta(name="c"), spec=V1DeviceClassSpec()))


def test_unreferenced_claim_of_our_class_is_eligible() -> None:
    assert judge(claim("c", exact("gpu", "mig-1g")), classes=CLASSES, referencing_pods=()).eligible


def test_reasons_in_order() -> None:
    deleted = claim("c", exact("gpu", "mig-1g"))
    meta(deleted).deletion_timestamp = datetime(2026, 1, 1, tzinfo=UTC)
    extended = claim("c", exact("gpu", "mig-1g"))
    meta(extended).annotations = {EXTENDED_RESOURCE_CLAIM: "true"}
    generated = claim("c", exact("gpu", "mig-1g"))
    meta(generated).owner_references = [V1OwnerReference(api_version="v1", kind="Pod", name="web-0", uid="u")]
    cases = {
        "being deleted": (deleted, ()),
        "an extended-resource claim of the scheduler": (extended, ()),
        "generated for pod web-0; the scheduler allocates it": (generated, ()),
        "referenced by pod default/p; the scheduler allocates it": (
            claim("c", exact("gpu", "mig-1g")),
            ["default/p"],
        ),
        "device class 'missing' not found": (claim("c", exact("gpu", "missing")), ()),
        "device class 'other' does not select driver gpu.deckhouse.io": (
            claim("c", exact("gpu", "other")),
            (),
        ),
    }
    for reason, (c, pods) in cases.items():
        verdict = judge(c, classes=CLASSES, referencing_pods=pods)
        assert (verdict.eligible, verdict.reason) == (False, reason)


def test_every_subrequest_class_must_be_ours() -> None:
    mixed = claim("c", first_available("gpu", ("a", "mig-1g"), ("b", "other")))
    assert judge(mixed, classes=CLASSES, referencing_pods=()).reason.startswith("device class 'other'")
    ours = claim("c", first_available("gpu", ("a", "mig-1g"), ("b", "mig-1g")))
    assert judge(ours, classes=CLASSES, referencing_pods=()).eligible


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def pod(*, phase: str | None = None, deleting: bool = False, node: str | None = None) -> V1Pod:
    return V1Pod(
        metadata=V1ObjectMeta(
            name="p",
            namespace="ns",
            deletion_timestamp=datetime(2026, 1, 1, tzinfo=UTC) if deleting else None,
        ),
        spec=V1PodSpec(
            containers=[],
            node_name=node,
            resource_claims=[
                V1PodResourceClaim(name="direct", resource_claim_name="shared"),
                V1PodResourceClaim(name="templated", resource_claim_template_name="tpl"),
            ],
        ),
        status=V1PodStatus(
            phase=phase,
            resource_claim_statuses=[
                V1PodResourceClaimStatus(name="templated", resource_claim_name="p-templated-x")
            ],
        ),
    )


def test_pod_references_by_name_and_by_status() -> None:
    assert claims_of_pod(pod(phase="Pending")) == ["ns/p-templated-x", "ns/shared"]


def test_finished_pods_still_reference_their_claims() -> None:
    # kube-controller-manager deallocates a finished Pod's claim while the kube-scheduler hands its
    # devices to the next Pod: taking the claim then would race the scheduler for the same device.
    assert claims_of_pod(pod(phase="Succeeded", node="n1")) == ["ns/p-templated-x", "ns/shared"]
    assert claims_of_pod(pod(phase="Failed", node="n1")) == ["ns/p-templated-x", "ns/shared"]
    assert claims_of_pod(pod(phase="Succeeded", node="n1", deleting=True)) != []  # until it is gone


def test_only_a_pod_deleted_before_it_was_scheduled_references_nothing() -> None:
    assert claims_of_pod(pod(deleting=True)) == []
    assert claims_of_pod(pod(phase="Pending", deleting=True)) == []
    assert claims_of_pod(pod(deleting=True, node="n1")) != []  # still running on its node


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_claim_of_a_finished_pod_is_the_schedulers_until_the_pod_is_gone(phase: str) -> None:
    store: Store[V1Pod] = Store(indexers=POD_INDEXERS)
    finished = pod(phase=phase, node="n1")
    store.add(finished)
    shared = claim("shared", exact("gpu", "mig-1g"), namespace="ns")
    referencing = store.index_keys(POD_BY_CLAIM, "ns/shared")
    verdict = judge(shared, classes=CLASSES, referencing_pods=referencing)
    assert not verdict.eligible
    assert verdict.reason.startswith("referenced by pod ns/p")
    assert verdict.pods == ("ns/p",)
    store.delete(finished)
    assert judge(
        shared, classes=CLASSES, referencing_pods=store.index_keys(POD_BY_CLAIM, "ns/shared")
    ).eligible
