"""The publisher writes only differences, bumps the generation on change and removes leftovers."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import pytest
from kubernetes.client import V1ObjectMeta, V1ResourcePool, V1ResourceSlice, V1ResourceSliceSpec
from pytest_mock import MockerFixture
from testutil.k8s_fields import meta, name_of
from testutil.unit.dra.offers.fake_slice_server import FakeSliceServer
from testutil.unit.dra.offers.offer_models import card

from pkg.domain.metrics import registry
from pkg.dra.model.offers import CardOffers, build_offers
from pkg.dra.model.slices import Layout
from pkg.dra.publisher import (
    FieldsDroppedError,
    KubeSliceReader,
    SlicePublisher,
    StoreSliceReader,
)
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import RESOURCE_SLICE

NODE = "node-pub"


def publisher(server: FakeSliceServer, layout: Layout = Layout.SEPARATE) -> SlicePublisher:
    return SlicePublisher(kube=cast(KubeClient, server), reader=server, layout=layout)


def h100s(*buses: int) -> list[CardOffers]:
    return [build_offers(card("H100", f"0000:{bus:02x}:00.0")) for bus in buses]


def offers_metric(physicalgpu: str, device_type: str, profile: str, node: str = NODE) -> float | None:
    labels = {"node": node, "physicalgpu": physicalgpu, "deviceType": device_type, "profile": profile}
    return registry.get_sample_value("gpu_dra_resourceslice_offers", labels)


def test_first_publish_applies_every_slice_at_generation_one() -> None:
    server = FakeSliceServer()
    result = publisher(server).publish(NODE, h100s(0x18, 0x2A, 0x9A))
    assert result.generation == 1
    assert result.applied == (
        "gpu-node-pub-counters-00",
        "gpu-node-pub-devices-00",
        "gpu-node-pub-devices-01",
    )
    assert result.deleted == ()
    assert server.writes == [("apply", name) for name in result.applied]
    assert set(server.generations().values()) == {1}


def test_unchanged_offers_make_no_write() -> None:
    server = FakeSliceServer()
    pub = publisher(server)
    pub.publish(NODE, h100s(0x18))
    versions = {n: meta(rs).resource_version for n, rs in server.slices.items()}
    server.writes.clear()
    result = pub.publish(NODE, h100s(0x18))
    assert server.writes == []
    assert not result.changed
    assert result.generation == 1
    assert {n: meta(rs).resource_version for n, rs in server.slices.items()} == versions


def test_any_change_rewrites_the_whole_pool_at_the_next_generation() -> None:
    server = FakeSliceServer()
    pub = publisher(server)
    pub.publish(NODE, h100s(0x18, 0x2A, 0x9A))
    server.writes.clear()
    changed = [*h100s(0x18, 0x2A), build_offers(card("H100", "0000:9a:00.0", driver_version="580.82.7"))]
    result = pub.publish(NODE, changed)
    assert result.generation == 2
    assert sorted(server.writes) == [("apply", n) for n in sorted(server.slices)]
    assert set(server.generations().values()) == {2}


def test_vanished_slices_are_deleted_after_the_new_generation_is_written() -> None:
    server = FakeSliceServer()
    pub = publisher(server)
    pub.publish(NODE, h100s(0x18, 0x2A, 0x9A))
    server.writes.clear()
    result = pub.publish(NODE, h100s(0x18))
    assert result.deleted == ("gpu-node-pub-devices-01",)
    assert server.writes[-1] == ("delete", "gpu-node-pub-devices-01")
    assert server.generations() == {"gpu-node-pub-counters-00": 2, "gpu-node-pub-devices-00": 2}
    assert server.slices["gpu-node-pub-devices-00"].spec.pool.resource_slice_count == 2


def test_a_node_without_cards_loses_its_slices_without_a_new_generation() -> None:
    server = FakeSliceServer()
    pub = publisher(server)
    pub.publish(NODE, h100s(0x18))
    result = pub.publish(NODE, [])
    assert server.slices == {}
    assert sorted(result.deleted) == ["gpu-node-pub-counters-00", "gpu-node-pub-devices-00"]
    assert result.applied == ()


def test_mixed_generations_left_by_a_failed_publish_are_repaired() -> None:
    server = FakeSliceServer()
    pub = publisher(server)
    pub.publish(NODE, h100s(0x18))
    server.slices["gpu-node-pub-counters-00"].spec.pool.generation = 5
    result = pub.publish(NODE, h100s(0x18))
    assert result.generation == 6
    assert set(server.generations().values()) == {6}


def test_slices_of_an_older_pool_naming_are_deleted() -> None:
    server = FakeSliceServer()
    legacy = V1ResourceSlice(
        metadata=V1ObjectMeta(name=f"{NODE}-gpus-0"),
        spec=V1ResourceSliceSpec(
            driver="gpu.deckhouse.io",
            node_name=NODE,
            pool=V1ResourcePool(name=NODE, generation=9, resource_slice_count=1),
        ),
    )
    server.apply(RESOURCE_SLICE, legacy)
    result = publisher(server).publish(NODE, h100s(0x18))
    assert result.generation == 1  # generations of other pools do not count
    assert result.deleted == (f"{NODE}-gpus-0",)
    assert f"{NODE}-gpus-0" not in server.slices


def test_switching_to_the_inline_layout_rewrites_and_removes_the_counter_slice() -> None:
    server = FakeSliceServer()
    publisher(server).publish(NODE, h100s(0x18))
    result = publisher(server, Layout.INLINE).publish(NODE, h100s(0x18))
    assert result.deleted == ("gpu-node-pub-counters-00",)
    (only,) = server.slices.values()
    assert only.spec.shared_counters is not None
    assert only.spec.devices is not None


def test_dropped_fields_withdraw_the_pool_and_raise() -> None:
    server = FakeSliceServer(drop=("consumesCounters",))
    with pytest.raises(FieldsDroppedError, match="consumesCounters") as err:
        publisher(server).publish(NODE, h100s(0x18))
    assert server.slices == {}
    assert list(err.value.dropped) == ["gpu-node-pub-devices-00"]
    assert offers_metric("node-a-18-10de", "Physical", "Exclusive") is None


def test_offers_metric_follows_the_cards() -> None:
    server = FakeSliceServer()
    pub = publisher(server)
    pub.publish(NODE, h100s(0x18, 0x2A))
    assert offers_metric("node-a-18-10de", "MIG", "1g.10gb") == 7
    assert offers_metric("node-a-18-10de", "MIG", "3g.40gb") == 2
    assert offers_metric("node-a-18-10de", "Physical", "Exclusive") == 1
    assert offers_metric("node-a-18-10de", "Physical", "TimeSlicing") == 1
    assert offers_metric("node-a-2a-10de", "Physical", "MPS") == 1
    no_mig = replace(card("H100", "0000:18:00.0"), mig_allowed=False)
    pub.publish(NODE, [build_offers(no_mig)])
    assert offers_metric("node-a-18-10de", "MIG", "1g.10gb") is None
    assert offers_metric("node-a-18-10de", "Physical", "Exclusive") == 1
    assert offers_metric("node-a-2a-10de", "Physical", "MPS") is None


def test_publisher_applies_as_gpu_handler(mocker: MockerFixture) -> None:
    other = KubeClient(mocker.Mock(), field_manager="someone-else")
    pub = SlicePublisher(kube=other, reader=FakeSliceServer(), layout=Layout.SEPARATE)
    assert pub._kube.field_manager == "gpu-handler"
    assert pub._kube.api_client is other.api_client


def test_readers_filter_by_driver_and_node(mocker: MockerFixture) -> None:
    kube = mocker.Mock(spec=KubeClient)
    kube.list.return_value = ([], "7")
    assert KubeSliceReader(kube).list_slices("n1") == []
    kube.list.assert_called_once_with(
        RESOURCE_SLICE, field_selector="spec.nodeName=n1,spec.driver=gpu.deckhouse.io"
    )

    def rs(name: str, driver: str, node: str) -> V1ResourceSlice:
        pool = V1ResourcePool(name="p", generation=1, resource_slice_count=1)
        return V1ResourceSlice(
            metadata=V1ObjectMeta(name=name),
            spec=V1ResourceSliceSpec(driver=driver, node_name=node, pool=pool),
        )

    store = mocker.Mock()
    store.list.return_value = [
        rs("a", "gpu.deckhouse.io", "n1"),
        rs("b", "other.io", "n1"),
        rs("c", "gpu.deckhouse.io", "n2"),
    ]
    assert [name_of(r) for r in StoreSliceReader(store).list_slices("n1")] == ["a"]
