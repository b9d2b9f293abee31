"""The I/O of Prepare and Unprepare: fresh reads of the claim and the Pod, the offer index (cache
first, a fresh LIST when it lacks a device), and Events on the claim."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import (
    V1Device,
    V1ObjectMeta,
    V1ResourcePool,
    V1ResourceSlice,
    V1ResourceSliceSpec,
)
from pytest_mock import MockerFixture

from pkg.domain.kinds import COMPUTE_DOMAIN
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM, RESOURCE_SLICE
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation.services import (
    KubeClaimReader,
    KubeComputeDomainReader,
    KubePodReader,
    RecorderClaimEvents,
    SliceOfferIndex,
)

SELECTOR = "spec.nodeName=n1"


def resource_slice(pool: str, generation: int, *devices: str) -> V1ResourceSlice:
    return V1ResourceSlice(
        metadata=V1ObjectMeta(name=f"{pool}-{generation}"),
        spec=V1ResourceSliceSpec(
            driver="gpu.deckhouse.io",
            pool=V1ResourcePool(name=pool, generation=generation, resource_slice_count=1),
            node_name="n1",
            devices=[V1Device(name=name) for name in devices],
        ),
    )


@pytest.fixture
def client(mocker: MockerFixture) -> Any:
    return mocker.create_autospec(KubeClient, instance=True)


def test_the_claim_is_read_fresh_by_name(client: Any) -> None:
    assert KubeClaimReader(client).get("ns", "c") is client.get.return_value
    client.get.assert_called_once_with(RESOURCE_CLAIM, "c", "ns")


def test_the_pod_is_read_fresh_by_name(client: Any) -> None:
    assert KubePodReader(client).get("ns", "p") is client.get.return_value
    client.get.assert_called_once_with(POD, "p", "ns")


def test_the_compute_domain_is_read_fresh_by_name(client: Any) -> None:
    assert KubeComputeDomainReader(client).get("ns", "job") is client.get.return_value
    client.get.assert_called_once_with(COMPUTE_DOMAIN, "job", "ns")


def test_a_missing_claim_is_a_not_found_error(client: Any) -> None:
    client.get.side_effect = NotFoundError(status=404, reason="NotFound", message="gone")

    with pytest.raises(NotFoundError):
        KubeClaimReader(client).get("ns", "c")


def offers(mocker: MockerFixture, client: Any, cached: list[V1ResourceSlice]) -> SliceOfferIndex:
    informer: Any = mocker.create_autospec(SharedInformer, instance=True)
    informer.store.list.return_value = cached
    return SliceOfferIndex(slices=informer, client=client, selector=SELECTOR)


def test_a_device_the_cache_has_costs_no_request_and_comes_from_the_newest_generation(
    mocker: MockerFixture, client: Any
) -> None:
    cached = [resource_slice("p", 1, "gpu-0"), resource_slice("p", 2, "gpu-0")]
    index = offers(mocker, client, cached)

    found = index.device("p", "gpu-0")

    assert found is not None
    assert client.method_calls == []
    newest = cached[1].spec.devices  # the newest generation's object, not the older equal one
    assert newest is not None
    assert found is newest[0]


def test_a_device_the_cache_lacks_is_looked_up_with_a_fresh_list(mocker: MockerFixture, client: Any) -> None:
    client.list.return_value = ([resource_slice("p", 3, "gpu-1")], "100")
    index = offers(mocker, client, [resource_slice("p", 2, "gpu-0")])

    found = index.device("p", "gpu-1")

    assert found is not None
    assert found.name == "gpu-1"
    client.list.assert_called_once_with(RESOURCE_SLICE, field_selector=SELECTOR)
    client.list.return_value = ([], "101")
    assert index.device("p", "gpu-9") is None


def test_claim_events_are_recorded_on_the_claim(mocker: MockerFixture) -> None:
    recorder = mocker.create_autospec(EventRecorderLogger, instance=True)

    RecorderClaimEvents(recorder).warning(
        ClaimRef(namespace="ns", name="c", uid="u"), reason="PrepareFailed", message="no card"
    )

    regarding = recorder.event.call_args.args[0]
    assert (
        regarding.kind,
        regarding.metadata.namespace,
        regarding.metadata.name,
        regarding.metadata.uid,
    ) == (
        "ResourceClaim",
        "ns",
        "c",
        "u",
    )
    assert recorder.event.call_args.kwargs == {
        "type_": "Warning",
        "reason": "PrepareFailed",
        "message": "no card",
        "kind": RESOURCE_CLAIM,
    }
