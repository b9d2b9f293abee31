"""A Pod the Pod cache has not shown yet never gets its claim allocated by us.

The Pod cache can lag the claim cache. These tests make it lag on purpose — the Pod exists on the
(fake) API server but not in the cache — and check the consistent read the decisions service makes
right before writing, and the one right after (a Pod created during the write's round trip).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import (
    V1ObjectMeta,
    V1Pod,
    V1PodResourceClaim,
    V1PodResourceClaimStatus,
    V1PodSpec,
    V1PodStatus,
    V1ResourceClaimConsumerReference,
)
from pytest_mock import MockerFixture
from testutil.k8s_fields import annotations_of, meta, resource_version_of, status_of
from testutil.unit.dra.allocator.alloc_builders import a30_pool, claim, exact
from testutil.unit.dracontroller.dra_controller_fakes import Env, our_mig_class

from pkg.domain.metrics import registry
from pkg.dracontroller.internal.names import ALLOCATED_BY
from pkg.dracontroller.internal.service import PodReferenceReader
from pkg.framework.client import ApiError
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.reconcile.contract import Result


def env(mocker: MockerFixture) -> Env:
    return Env(mocker, a30_pool(), [our_mig_class("1g")])


def pod(name: str, claim_name: str, *, namespace: str = "default", phase: str | None = None) -> V1Pod:
    return V1Pod(
        metadata=V1ObjectMeta(name=name, namespace=namespace, uid=f"pod-{name}"),
        spec=V1PodSpec(
            containers=[], resource_claims=[V1PodResourceClaim(name="g", resource_claim_name=claim_name)]
        ),
        status=V1PodStatus(phase=phase) if phase else None,
    )


def races(when: str) -> float:
    return registry.get_sample_value("gpu_dra_pod_reference_races_total", {"when": when}) or 0.0


def allocation(e: Env, c: Any) -> Any:
    stored = e.stored(c)
    return stored.status.allocation if stored.status is not None else None


def test_pod_missing_from_the_cache_is_found_before_anything_is_written(mocker: MockerFixture) -> None:
    e = env(mocker)
    e.add_pod(pod("p", "c"), cached=False)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    before = races("before-write")
    assert e.reconcile(c) == Result()
    assert e.api.writes == []
    assert e.api.pod_lists == [("default", None)]
    [(kind, reason, message)] = e.events()
    assert (kind, reason) == ("Normal", "LeftToScheduler")
    assert "referenced by pod default/p (found by a consistent read before writing" in message
    assert races("before-write") == before + 1


def test_pod_created_during_the_write_gets_the_allocation_given_back(mocker: MockerFixture) -> None:
    e = env(mocker)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    # The Pod appears after our metadata patch, before the status PUT: the read before the write
    # missed it, the read after the write finds it.
    e.api.on_write.append(lambda: e.api.put_pod(pod("late", "c")) if len(e.api.writes) == 1 else None)
    before = races("after-write")
    assert e.reconcile(c) == Result()
    assert [verb for verb, _, _ in e.api.writes] == ["patch", "status", "status", "patch"]
    assert allocation(e, c) is None
    assert ALLOCATED_BY not in annotations_of(e.stored(c))
    [(_, reason, message)] = e.events()
    assert reason == "LeftToScheduler"
    assert "referenced by pod default/late (created while the allocation was being written" in message
    assert races("after-write") == before + 1


def test_allocation_the_scheduler_reserved_meanwhile_is_kept(mocker: MockerFixture) -> None:
    e = env(mocker)
    c = e.add(claim("c", exact("gpu", "mig-1g")))

    def scheduler_reserves() -> None:
        if len(e.api.writes) != 2:  # right after our status PUT
            return
        e.api.put_pod(pod("late", "c"))
        stored = e.stored(c)
        status_of(stored).reserved_for = [
            V1ResourceClaimConsumerReference(resource="pods", name="late", uid="pod-late")
        ]
        meta(stored).resource_version = str(int(resource_version_of(stored)) + 50)
        e.api.objects["default/c"] = RESOURCE_CLAIM.encode(stored)

    e.api.on_write.append(scheduler_reserves)
    assert e.reconcile(c) == Result(requeue=True)  # our release met the scheduler's write: conflict
    assert allocation(e, c) is not None
    e.sync()
    writes = len(e.api.writes)
    assert e.reconcile(c) == Result()  # allocated and reserved: nothing more to do
    assert len(e.api.writes) == writes


def test_pods_of_other_namespaces_do_not_hold_a_claim(mocker: MockerFixture) -> None:
    e = env(mocker)
    e.add_pod(pod("elsewhere", "c", namespace="other"), cached=False)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    assert e.reconcile(c) == Result()
    assert allocation(e, c) is not None


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_pod_missing_from_the_cache_still_holds_its_claim(
    mocker: MockerFixture, phase: str
) -> None:
    e = env(mocker)
    e.add_pod(pod("finished", "c", phase=phase), cached=False)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    assert e.reconcile(c) == Result()
    assert e.api.writes == []
    [(kind, reason, message)] = e.events()
    assert (kind, reason) == ("Normal", "LeftToScheduler")
    assert "referenced by pod default/finished" in message


def test_reader_pages_and_reads_generated_claim_statuses(mocker: MockerFixture) -> None:
    e = env(mocker)
    for i in range(5):
        e.api.put_pod(pod(f"other-{i}", "unrelated"))
    generated = pod("gen", "unrelated")
    generated.status = V1PodStatus(
        resource_claim_statuses=[V1PodResourceClaimStatus(name="g", resource_claim_name="c")]
    )
    e.api.put_pod(generated)
    reader = PodReferenceReader(e.api, page_size=2)
    assert reader.referencing(claim("c", exact("gpu", "mig-1g"), namespace="default")) == ["default/gen"]
    assert len(e.api.pod_lists) == 3  # 6 Pods, 2 per page


def test_failed_read_writes_nothing_and_is_retried(mocker: MockerFixture) -> None:
    e = env(mocker)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    e.api.list_page = _raise  # type: ignore[method-assign]
    with pytest.raises(ApiError):
        e.reconcile(c)
    assert e.api.writes == []


def _raise(*_: Any, **__: Any) -> Any:
    raise ApiError(status=503, reason="ServiceUnavailable", message="etcd leader changed")
