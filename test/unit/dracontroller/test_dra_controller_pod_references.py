"""Which Pods reference a claim: the consistent read (what it asks of the API, page by page) and
the barrier (the Pod cache once synced past the claim's version, else the read)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import ResourceV1ResourceClaim, V1ObjectMeta
from pytest_mock import MockerFixture, MockType

from pkg.dracontroller.internal.indexes import POD_BY_CLAIM
from pkg.dracontroller.internal.service.pod_references import PodReferenceBarrier, PodReferenceReader
from pkg.framework.client import KubeClient, ListPage
from pkg.framework.client.builtin_kinds import POD

CLAIM = ResourceV1ResourceClaim(metadata=V1ObjectMeta(name="c1", namespace="team-a", resource_version="42"))


def raw_pod(name: str, claim: str, *, phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "containers": [{"name": "main", "image": "x"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
        },
        "status": {"phase": phase},
    }


@pytest.fixture
def client(mocker: MockerFixture) -> MockType:
    client: MockType = mocker.Mock(spec=KubeClient)
    client.list_page.side_effect = [
        ListPage(
            items=[raw_pod("p2", "c1"), raw_pod("other", "c9")], resource_version="50", continue_token="t1"
        ),
        ListPage(items=[raw_pod("p1", "c1")], resource_version="50", continue_token=""),
    ]
    return client


def test_the_read_lists_all_the_claims_namespace_pods_page_by_page(client: MockType) -> None:
    assert PodReferenceReader(client, page_size=2).referencing(CLAIM) == ["team-a/p1", "team-a/p2"]
    assert [call.args for call in client.list_page.call_args_list] == [(POD,), (POD,)]
    assert [call.kwargs for call in client.list_page.call_args_list] == [
        {"namespace": "team-a", "limit": 2, "continue_token": None},
        {"namespace": "team-a", "limit": 2, "continue_token": "t1"},
    ], "no field selector: finished Pods must reach the reader"


def test_the_read_counts_finished_pods_but_not_one_deleted_before_it_was_scheduled(
    mocker: MockerFixture,
) -> None:
    deleted_unscheduled = raw_pod("gone", "c1", phase="Pending")
    deleted_unscheduled["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    client: MockType = mocker.Mock(spec=KubeClient)
    client.list_page.return_value = ListPage(
        items=[
            raw_pod("ok", "c1", phase="Succeeded"),
            raw_pod("failed", "c1", phase="Failed"),
            deleted_unscheduled,
        ],
        resource_version="50",
        continue_token="",
    )
    assert PodReferenceReader(client).referencing(CLAIM) == ["team-a/failed", "team-a/ok"]


def test_the_read_is_always_current(client: MockType) -> None:
    assert PodReferenceReader(client).referencing_if_current(CLAIM) == ["team-a/p1", "team-a/p2"]


@pytest.fixture
def pods(mocker: MockerFixture) -> MockType:
    pods: MockType = mocker.Mock()
    pods.store.index_keys.return_value = {"team-a/p2", "team-a/p1"}
    return pods


@pytest.fixture
def fallback(mocker: MockerFixture) -> MockType:
    fallback: MockType = mocker.Mock()
    fallback.referencing.return_value = ["team-a/from-api"]
    return fallback


def test_the_barrier_answers_from_the_cache_once_it_is_past_the_claims_version(
    pods: MockType, fallback: MockType
) -> None:
    barrier = PodReferenceBarrier(pods=pods, fallback=fallback, wait_seconds=0.5)
    pods.wait_for_resource_version.return_value = True
    assert barrier.referencing(CLAIM) == ["team-a/p1", "team-a/p2"]
    pods.wait_for_resource_version.assert_called_once_with("42", 0.5)
    pods.store.index_keys.assert_called_once_with(POD_BY_CLAIM, "team-a/c1")
    fallback.referencing.assert_not_called()


def test_a_late_cache_makes_the_barrier_read_from_the_api_or_defer(
    pods: MockType, fallback: MockType
) -> None:
    barrier = PodReferenceBarrier(pods=pods, fallback=fallback, wait_seconds=0.5)
    pods.wait_for_resource_version.return_value = False
    assert barrier.referencing(CLAIM) == ["team-a/from-api"]
    fallback.referencing.assert_called_once_with(CLAIM)
    assert barrier.referencing_if_current(CLAIM) is None  # no wait, no read: the caller asks again
    pods.wait_for_resource_version.assert_called_with("42", 0.0)
    fallback.referencing.assert_called_once()
