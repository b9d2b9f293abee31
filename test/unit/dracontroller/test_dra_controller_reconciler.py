"""The claim reconciler end to end over fakes: what it writes, which events, which results."""

from __future__ import annotations

from kubernetes.client import (
    V1CELDeviceSelector,
    V1DeviceSelector,
    V1ObjectMeta,
    V1OwnerReference,
    V1Pod,
    V1PodResourceClaim,
    V1PodSpec,
)
from pytest_mock import MockerFixture
from testutil.k8s_fields import (
    allocated_node_selector,
    allocation_results,
    annotations_of,
    finalizers_of,
    meta,
    present,
    spec_of,
)
from testutil.unit.dra.allocator.alloc_builders import a30_pool, claim, exact
from testutil.unit.dracontroller.dra_controller_fakes import Env, our_mig_class, our_physical_class

from pkg.domain.metrics import registry
from pkg.dracontroller.internal.names import (
    ALLOCATED_BY,
    ALLOCATED_BY_US,
    DELETE_PROTECTION_FINALIZER,
    EXTENDED_RESOURCE_CLAIM,
)
from pkg.framework.client import ConflictError
from pkg.framework.reconcile.contract import Result

CARD = "gpu-0000-02-00-0"


def env(mocker: MockerFixture) -> Env:
    return Env(mocker, a30_pool(), [our_mig_class("1g"), our_mig_class("2g"), our_physical_class()])


def failures(reason: str) -> float:
    return registry.get_sample_value("gpu_dra_allocation_failures_total", {"reason": reason}) or 0.0


def devices(e: Env, c: object) -> list[str]:
    stored = e.stored(c)  # type: ignore[arg-type]
    assert stored.status is not None
    assert stored.status.allocation is not None
    return [r.device for r in allocation_results(stored.status.allocation)]


def test_pre_provisioned_claim_is_allocated_with_finalizer_mark_and_event(mocker: MockerFixture) -> None:
    e = env(mocker)
    c = e.add(claim("shared", exact("gpu", "mig-1g"), namespace="default"))
    assert e.reconcile(c) == Result()
    stored = e.stored(c)
    assert DELETE_PROTECTION_FINALIZER in finalizers_of(stored)
    assert annotations_of(stored)[ALLOCATED_BY] == ALLOCATED_BY_US
    assert devices(e, c) == [f"{CARD}-mig-1g-0"]
    term = allocated_node_selector(stored).node_selector_terms[0]
    assert present(term.match_fields)[0].values == ["node-a"]
    # Metadata first (guarded by the version we decided on), then the status.
    verbs = [w[0] for w in e.api.writes]
    assert verbs == ["patch", "status"]
    assert e.api.writes[0][2][0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "100"}
    [(kind, reason, message)] = e.events()
    assert (kind, reason) == ("Normal", "Allocated")
    assert f"gpu -> gpu.deckhouse.io/gpus-node-a-{CARD}/{CARD}-mig-1g-0" in message
    assert "on node node-a" in message


def test_existing_finalizers_are_kept(mocker: MockerFixture) -> None:
    e = env(mocker)
    c = claim("shared", exact("gpu", "mig-1g"))
    meta(c).finalizers = ["example.com/keep"]
    c = e.add(c)
    e.reconcile(c)
    assert meta(e.stored(c)).finalizers == ["example.com/keep", DELETE_PROTECTION_FINALIZER]


def test_claim_referenced_by_a_pod_is_left_to_the_scheduler(mocker: MockerFixture) -> None:
    e = env(mocker)
    c = e.add(claim("for-pod", exact("gpu", "mig-1g")))
    e.pods.update(
        V1Pod(
            metadata=V1ObjectMeta(name="p", namespace="default"),
            spec=V1PodSpec(
                containers=[],
                resource_claims=[V1PodResourceClaim(name="gpu", resource_claim_name="for-pod")],
            ),
        )
    )
    assert e.reconcile(c) == Result()
    assert e.api.writes == []
    [(kind, reason, message)] = e.events()
    assert (kind, reason) == ("Normal", "LeftToScheduler")
    assert message.startswith("referenced by pod default/p: the kube-scheduler allocates")
    assert e.reconcile(c) == Result()
    assert len(e.events()) == 1  # told once per claim


def test_scheduler_claims_are_never_written(mocker: MockerFixture) -> None:
    e = env(mocker)
    extended = claim("pod-extended-resources-abc", exact("gpu", "mig-1g"))
    meta(extended).annotations = {EXTENDED_RESOURCE_CLAIM: "true"}
    generated = claim("pod-gpu-xyz", exact("gpu", "mig-1g"))
    meta(generated).owner_references = [
        V1OwnerReference(api_version="v1", kind="Pod", name="pod", uid="u1", controller=True)
    ]
    for c in (extended, generated):
        e.reconcile(e.add(c))
    assert e.api.writes == []


def test_unschedulable_claim_gets_a_warning_with_the_reason_and_is_retried(mocker: MockerFixture) -> None:
    e = env(mocker)
    e.reconcile(e.add(claim("whole", exact("gpu", "physical"))))
    e.sync()
    before = failures("unschedulable")
    c = e.add(claim("mig", exact("gpu", "mig-1g")))
    assert e.reconcile(c) == Result(requeue=True)
    assert e.stored(c).status is None
    kind, reason, message = e.events()[-1]
    assert (kind, reason) == ("Warning", "AllocationFailed")
    # the cause first, in the verdict's words (the card is used as a whole card), then the mechanism
    assert message.startswith(f"request gpu: 1 asked, 4 match, 0 free on one node; card {CARD} ")
    assert "; retry when capacity changes; cannot allocate all claims; " in message
    assert "counters exhausted" in message
    assert f"most often counters exhausted: counter memory of counter set {CARD}" in message
    assert failures("unschedulable") == before + 1


def test_a_failure_is_explained_from_the_attempt_taken_without_allocating_again(
    mocker: MockerFixture,
) -> None:
    e = env(mocker)
    e.reconcile(e.add(claim("whole", exact("gpu", "physical"))))
    e.sync()
    c = e.add(claim("mig", exact("gpu", "mig-1g")))
    attempts = mocker.patch.object(e.allocator, "attempt", wraps=e.allocator.attempt)
    allocations = mocker.patch.object(e.allocator, "allocate", wraps=e.allocator.allocate)
    assert e.reconcile(c) == Result(requeue=True)
    assert attempts.call_count == 1
    assert allocations.call_count == 0
    _, reason, message = e.events()[-1]
    assert reason == "AllocationFailed"
    assert "counters exhausted" in message  # the explain summary, from the recorded inputs


def test_broken_selector_is_fatal_and_not_retried(mocker: MockerFixture) -> None:
    broken = our_mig_class("1g", name="broken")
    present(spec_of(broken).selectors, "spec.selectors").append(
        V1DeviceSelector(
            cel=V1CELDeviceSelector(expression='device.attributes["gpu.deckhouse.io"].nosuch == "x"')
        )
    )
    e = Env(mocker, a30_pool(), [broken])
    before = failures("invalid")
    c = e.add(claim("c", exact("gpu", "broken")))
    assert e.reconcile(c) == Result()
    kind, reason, message = e.events()[-1]
    assert (kind, reason) == ("Warning", "AllocationFailed")
    assert "device selector failed" in message
    assert failures("invalid") == before + 1


def test_write_conflict_requeues_without_event(mocker: MockerFixture) -> None:
    e = env(mocker)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    e.api.fail_next.append(ConflictError(status=409, reason="Conflict", message="modified"))
    before = failures("conflict")
    assert e.reconcile(c) == Result(requeue=True)
    assert e.events() == []
    assert failures("conflict") == before + 1


def test_stale_cache_version_is_a_conflict_not_an_overwrite(mocker: MockerFixture) -> None:
    e = env(mocker)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    e.api.put(c)  # someone else wrote since our cache saw it
    assert e.reconcile(c) == Result(requeue=True)
    assert e.stored(c).status is None
    e.sync()
    assert e.reconcile(c) == Result()
    assert devices(e, c)


def test_second_decision_sees_the_first_before_the_watch_delivers_it(mocker: MockerFixture) -> None:
    e = env(mocker)
    first = e.add(claim("first", exact("gpu", "mig-2g")))
    second = e.add(claim("second", exact("gpu", "mig-2g")))
    e.reconcile(first)
    e.reconcile(second)  # no sync in between
    assert {devices(e, first)[0], devices(e, second)[0]} == {f"{CARD}-mig-2g-0", f"{CARD}-mig-2g-2"}


def test_allocated_claim_is_not_reallocated(mocker: MockerFixture) -> None:
    e = env(mocker)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    e.reconcile(c)
    e.sync()
    writes = len(e.api.writes)
    assert e.reconcile(c) == Result()
    assert len(e.api.writes) == writes


def test_stale_mark_is_removed_when_a_pod_takes_the_claim(mocker: MockerFixture) -> None:
    e = env(mocker)
    c = claim("c", exact("gpu", "mig-1g"))
    meta(c).annotations = {ALLOCATED_BY: ALLOCATED_BY_US}
    c = e.add(c)
    e.pods.update(
        V1Pod(
            metadata=V1ObjectMeta(name="p", namespace="default"),
            spec=V1PodSpec(
                containers=[], resource_claims=[V1PodResourceClaim(name="g", resource_claim_name="c")]
            ),
        )
    )
    e.reconcile(c)
    assert ALLOCATED_BY not in annotations_of(e.stored(c))
    assert e.stored(c).status is None
