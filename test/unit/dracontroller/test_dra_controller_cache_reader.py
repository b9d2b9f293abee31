"""The allocation controller's reads: the caches, each claim seen through the in-flight record."""

from __future__ import annotations

from typing import Any

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1DeviceClass,
    V1DeviceClassSpec,
    V1Namespace,
    V1ObjectMeta,
    V1ResourceClaimSpec,
    V1ResourceClaimStatus,
)
from pytest_mock import MockerFixture

from pkg.dracontroller.internal.indexes import POD_BY_CLAIM
from pkg.dracontroller.internal.service.cache_reader import CacheReader
from pkg.dracontroller.internal.service.in_flight import InFlight
from pkg.framework.cache.store import Store
from pkg.framework.reconcile.contract import Request


def claim(name: str, version: str, *, allocated: bool = False) -> ResourceV1ResourceClaim:
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}", resource_version=version),
        spec=V1ResourceClaimSpec(),
        status=V1ResourceClaimStatus(allocation=V1AllocationResult()) if allocated else None,
    )


def reader(mocker: MockerFixture, in_flight: InFlight | None = None) -> tuple[CacheReader, dict[str, Any]]:
    stores = {
        name: mocker.create_autospec(Store, instance=True)
        for name in ("claims", "pods", "slices", "classes", "namespaces")
    }
    return CacheReader(**stores, in_flight=in_flight or InFlight()), stores


def test_a_claim_is_read_by_its_key_and_shown_as_last_written(mocker: MockerFixture) -> None:
    in_flight = InFlight()
    written = claim("c", "6", allocated=True)
    in_flight.record(written, superseded=("5",))
    cache_reader, stores = reader(mocker, in_flight)
    stores["claims"].get_by_key.return_value = claim("c", "5")

    assert cache_reader.claim(Request("c", "ns")) is written
    stores["claims"].get_by_key.assert_called_once_with("ns/c")


def test_a_claim_not_in_the_cache_is_none(mocker: MockerFixture) -> None:
    cache_reader, stores = reader(mocker)
    stores["claims"].get_by_key.return_value = None

    assert cache_reader.claim(Request("c", "ns")) is None


def test_referencing_pods_come_from_the_pod_by_claim_index(mocker: MockerFixture) -> None:
    cache_reader, stores = reader(mocker)
    stores["pods"].index_keys.return_value = ["ns/p1"]

    assert cache_reader.referencing_pods(claim("c", "5")) == ["ns/p1"]
    stores["pods"].index_keys.assert_called_once_with(POD_BY_CLAIM, "ns/c")


def test_allocated_claims_count_writes_the_cache_has_not_shown_and_forget_deleted_claims(
    mocker: MockerFixture,
) -> None:
    in_flight = InFlight()
    in_flight.record(claim("a", "6", allocated=True), superseded=("5",))
    in_flight.record(claim("gone", "9", allocated=True), superseded=("8",))
    cache_reader, stores = reader(mocker, in_flight)
    stores["claims"].list.return_value = [claim("a", "5"), claim("b", "3", allocated=True), claim("c", "1")]

    assert [c.metadata.name for c in cache_reader.allocated_claims() if c.metadata] == ["a", "b"]
    assert len(in_flight) == 1  # the deleted claim's entry is pruned


def test_classes_by_name_and_namespace_labels(mocker: MockerFixture) -> None:
    cache_reader, stores = reader(mocker)
    gpu = V1DeviceClass(metadata=V1ObjectMeta(name="gpu"), spec=V1DeviceClassSpec())
    stores["classes"].list.return_value = [gpu]
    stores["namespaces"].get_by_key.side_effect = lambda key: (
        V1Namespace(metadata=V1ObjectMeta(name=key, labels={"team": "a"})) if key == "ns" else None
    )

    assert cache_reader.classes() == {"gpu": gpu}
    assert cache_reader.namespace_labels("ns") == {"team": "a"}
    assert cache_reader.namespace_labels("other") == {}
