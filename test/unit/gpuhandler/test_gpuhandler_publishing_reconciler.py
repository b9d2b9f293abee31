"""The publish pass: what it reads, when it waits, what it hands the publisher, when it comes back."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from kubernetes.client import V1Device, V1Node, V1ObjectMeta, V1OwnerReference
from testutil.k8s_fields import meta, name_of, present, slice_devices
from testutil.unit.dra.offers.fake_slice_server import FakeSliceServer
from testutil.unit.gpuhandler.gpuhandler_fakes import A30_FIRST, condition, gpu, simulated

from api.gpu.v1alpha1 import DriverType, PhysicalGPU
from pkg.backends import CardVerdict
from pkg.backends.health_events import HealthEvent, Severity
from pkg.dra.model.offers import CardOffers
from pkg.dra.model.slices import Layout
from pkg.dra.publisher import PublishResult, SlicePublisher
from pkg.framework.client import KubeClient
from pkg.framework.reconcile.contract import Result
from pkg.gpuhandler.enrichment.card_specs import CardSpecs
from pkg.gpuhandler.health import HealthTracker
from pkg.gpuhandler.health.taints import device_taints
from pkg.gpuhandler.publishing import LABEL_ALLOW_MIG, PUBLISH, PublishReconciler
from pkg.gpuhandler.publishing.in_use import DevicesInUse

NODE = "node-1"
A30_SECOND = "0000:d8:00.0"


@dataclass
class RecordingPublisher:
    calls: list[tuple[str, list[CardOffers], V1OwnerReference | None]] = field(default_factory=list)
    in_use: list[Collection[str] | None] = field(default_factory=list)
    channels: list[list[V1Device]] = field(default_factory=list)

    def publish(
        self,
        node: str,
        cards: Sequence[CardOffers],
        *,
        owner: V1OwnerReference | None = None,
        in_use: Collection[str] | None = None,
        channels: Sequence[V1Device] = (),
    ) -> PublishResult:
        self.calls.append((node, list(cards), owner))
        self.in_use.append(in_use)
        self.channels.append(list(channels))
        return PublishResult(generation=len(self.calls), applied=("x",))

    def offered(self) -> dict[str, set[str]]:
        """The last publish: card -> device types offered."""
        _, cards, _ = self.calls[-1]
        return {c.card.physical_gpu: {o.device_type.value for o in c.offers} for c in cards}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def node(labels: dict[str, str] | None = None, *, deleting: bool = False) -> V1Node:
    return V1Node(
        metadata=V1ObjectMeta(
            name=NODE,
            uid="node-uid",
            labels=labels,
            deletion_timestamp=datetime.now(UTC) if deleting else None,
        )
    )


def card(address: str, name: str, *, health: str = "True", driver_ready: str = "True") -> PhysicalGPU:
    return gpu(
        address,
        name=name,
        driver_ready=driver_ready,
        extra_conditions=[condition("HardwareHealthy", health, reason="Healthy")],
    )


@dataclass
class World:
    """The caches and the card specs a pass reads, and a reconciler over them."""

    publisher: Any = field(default_factory=RecordingPublisher)
    node: V1Node | None = field(default_factory=node)
    gpus: dict[str, PhysicalGPU] = field(default_factory=dict)
    cards: CardSpecs = field(default_factory=CardSpecs)
    clock: Clock = field(default_factory=Clock)
    health: HealthTracker = field(default_factory=lambda: HealthTracker(quiet_period=0.0))
    in_use: DevicesInUse = field(default_factory=DevicesInUse)
    reconciler: PublishReconciler = field(init=False)

    def __post_init__(self) -> None:
        self.reconciler = PublishReconciler(
            node_name=NODE,
            get_node=lambda name: self.node if self.node and name_of(self.node) == name else None,
            list_gpus=lambda: list(self.gpus.values()),
            card_specs=self.cards,
            publisher=self.publisher,
            pci_vendor_id="10de",
            driver_type=DriverType.NVIDIA,
            resync_period=60.0,
            startup_grace=30.0,
            taints=lambda address: device_taints(self.health.verdict(address)),
            in_use=self.in_use.names,
            clock=self.clock,
            rand=lambda low, high: 1.1,
        )

    def add(self, obj: PhysicalGPU, *, describe: bool = True) -> None:
        self.gpus[str(obj.metadata.name)] = obj
        if describe:
            self.cards.put(str(obj.metadata.name), simulated().offer_inputs(obj))

    def run(self) -> Result:
        return self.reconciler.reconcile(PUBLISH)


def test_a_pass_publishes_the_offered_cards_with_the_node_as_owner() -> None:
    world = World()
    world.add(card(A30_FIRST, "a"))
    world.add(card(A30_SECOND, "b", driver_ready="False"))
    result = world.run()
    assert result == Result(requeue_after=timedelta(seconds=66.0))  # 60 s resync, jittered
    (name, cards, owner) = world.publisher.calls[0]
    assert name == NODE
    assert [c.card.physical_gpu for c in cards] == ["a"]
    assert owner == V1OwnerReference(
        api_version="v1", kind="Node", name=NODE, uid="node-uid", controller=True
    )
    assert world.publisher.offered() == {"a": {"MIG", "Physical"}}


def test_each_pass_publishes_in_the_order_of_the_devices_in_use_then() -> None:
    world = World()
    world.add(card(A30_FIRST, "a"))
    world.run()
    assert world.publisher.in_use == [None], "nothing told the set: the static order"
    world.in_use.update(["gpu-0000-18-00-0-mig-14-3"])
    world.run()
    world.in_use.update([])
    world.run()
    assert world.publisher.in_use[1:] == [{"gpu-0000-18-00-0-mig-14-3"}, set()]


def test_the_nodes_label_turns_mig_offers_off() -> None:
    world = World(node=node({LABEL_ALLOW_MIG: "false"}))
    world.add(card(A30_FIRST, "a"))
    world.run()
    assert world.publisher.offered() == {"a": {"Physical"}}


@pytest.mark.parametrize("missing", ["node", "deleting"])
def test_nothing_is_published_without_a_live_node(missing: str) -> None:
    world = World(node=None if missing == "node" else node(deleting=True))
    world.add(card(A30_FIRST, "a"))
    assert world.run() == Result()
    assert world.publisher.calls == []


def test_the_first_publish_waits_for_the_enrichment_to_describe_ready_cards() -> None:
    """A restart must not withdraw the node's offers only to publish them again a moment later."""
    world = World()
    world.add(card(A30_FIRST, "a"))
    world.add(card(A30_SECOND, "b"), describe=False)
    assert world.run() == Result(requeue_after=timedelta(seconds=30.0))
    world.clock.now += 10
    assert world.run() == Result(requeue_after=timedelta(seconds=20.0))
    assert world.publisher.calls == []
    world.cards.put("b", simulated().offer_inputs(world.gpus["b"]))
    world.run()
    assert set(world.publisher.offered()) == {"a", "b"}


def test_the_first_publish_waits_no_longer_than_the_grace() -> None:
    world = World()
    world.add(card(A30_FIRST, "a"))
    world.add(card(A30_SECOND, "b"), describe=False)  # never described: its reads fail
    world.run()
    world.clock.now += 30
    world.run()
    assert set(world.publisher.offered()) == {"a"}
    # Once published, later passes never wait: a newly ready card is offered when described.
    world.gpus["c"] = card("0000:3c:00.0", "c")
    world.run()
    assert len(world.publisher.calls) == 2


def test_cards_that_are_not_ready_are_not_waited_for() -> None:
    world = World()
    world.add(card(A30_FIRST, "a"))
    world.add(card(A30_SECOND, "b", driver_ready="False"), describe=False)
    world.run()
    assert set(world.publisher.offered()) == {"a"}


def test_a_card_not_offered_is_logged_once_per_reason(caplog: pytest.LogCaptureFixture) -> None:
    world = World()
    world.add(card(A30_FIRST, "a", driver_ready="False"))
    with caplog.at_level(logging.INFO, logger="pkg.gpuhandler.publishing.reconciler"):
        world.run()
        world.run()
        world.gpus["a"] = card(A30_FIRST, "a")
        world.run()
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if m.startswith("card not offered: not readable")]) == 1
    assert messages.count("card offered again") == 1


def test_with_the_real_publisher_a_sick_card_is_tainted_and_untainted_and_nothing_else_writes() -> None:
    server = FakeSliceServer()
    publisher = SlicePublisher(kube=cast(KubeClient, server), reader=server, layout=Layout.SEPARATE)
    world = World(publisher=publisher)
    world.add(card(A30_FIRST, "a"))
    world.add(card(A30_SECOND, "b"))
    world.run()
    assert server.generations() == {f"gpu-{NODE}-counters-00": 1, f"gpu-{NODE}-devices-00": 1}
    writes = len(server.writes)
    world.run()
    assert len(server.writes) == writes  # nothing changed: not even a no-op apply
    world.health.record(
        HealthEvent(
            address=A30_SECOND, reason="Xid79GpuFallenOffBus", severity=Severity.FATAL, message="XID 79"
        )
    )
    world.run()
    assert set(server.generations().values()) == {2}
    devices = slice_devices(server.slices[f"gpu-{NODE}-devices-00"])
    assert {d.name.startswith("gpu-0000-d8-00-0") for d in devices} == {True, False}
    for device in devices:
        expected = (
            [("gpu.deckhouse.io/unhealthy", "Xid79GpuFallenOffBus", "NoExecute")]
            if device.name.startswith("gpu-0000-d8-00-0")
            else []
        )
        assert [(t.key, t.value, t.effect) for t in device.taints or []] == expected
    writes = len(server.writes)
    world.run()
    assert len(server.writes) == writes  # the taint's timeAdded is stable: no rewrite
    world.health.probe(A30_SECOND, CardVerdict.true("Healthy"))  # quiet period 0: recovered
    world.run()
    assert set(server.generations().values()) == {3}
    assert not any(d.taints for d in slice_devices(server.slices[f"gpu-{NODE}-devices-00"]))
    assert all(present(meta(rs).owner_references)[0].uid == "node-uid" for rs in server.slices.values())
