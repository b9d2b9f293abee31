"""The devices in use follow the checkpoint feed, wake the publisher only on a change, and reach
the publisher on the next pass."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from testutil.unit.gpuhandler.gpuhandler_fakes import A30_FIRST, gpu, simulated

from pkg.dra.model.card import Card
from pkg.dra.model.fill_order import follows_fill
from pkg.gpuhandler.preparation.checkpoint import (
    CheckpointData,
    CheckpointFeed,
    ClaimRecord,
    DeviceRecord,
    PreparePhase,
)
from pkg.gpuhandler.publishing.in_use import DevicesInUse, wake_if_fill_followed

POOL = "gpus/node-a"


def checkpoint(*devices: tuple[str, str]) -> CheckpointData:
    records = [
        DeviceRecord.model_validate(
            {"pool": pool, "device": name, "card": "0000:18:00.0", "deviceType": "MIG"}
        )
        for pool, name in devices
    ]
    claim = ClaimRecord(
        uid="u1", namespace="ns", name="c", state=PreparePhase.PREPARE_COMPLETED, devices=records
    )
    return CheckpointData.model_validate({"bootID": "b", "claims": {"u1": claim}})


def test_nothing_told_means_no_set_and_the_static_order() -> None:
    assert DevicesInUse().names() is None


def test_the_set_follows_the_checkpoint_feed_of_our_pool_only() -> None:
    feed, in_use = CheckpointFeed(), DevicesInUse()
    feed.subscribe(lambda cp: in_use.update(cp.devices_in_use(POOL)))
    feed.publish(checkpoint((POOL, "gpu-0000-18-00-0-mig-1g-3"), ("gpus/other", "x")))
    assert in_use.names() == frozenset({"gpu-0000-18-00-0-mig-1g-3"})
    feed.publish(CheckpointData.model_validate({"bootID": "b"}))
    assert in_use.names() == frozenset()


def test_a_burst_of_unchanged_sets_wakes_the_publisher_once() -> None:
    in_use = DevicesInUse()
    woken: list[None] = []
    in_use.subscribe(lambda: woken.append(None))
    for _ in range(100):
        in_use.update(["a", "b"])
    assert len(woken) == 1
    in_use.update(["a"])
    assert len(woken) == 2


def a30(address: str = A30_FIRST) -> Card:
    return simulated("a30-x2").offer_inputs(gpu(address))


def a100() -> Card:
    return simulated("a100-80gb").offer_inputs(
        gpu("0000:17:00.0", name="node-1-0-10de-20b2", device_id="20b2")
    )


@pytest.mark.parametrize(
    ("node_cards", "follows"),
    [
        pytest.param(lambda: [a30(), a30("0000:d8:00.0")], False, id="one MIG model: the static order"),
        pytest.param(lambda: [a30(), a100()], True, id="two MIG models: the fill"),
        pytest.param(
            lambda: [a30(), dataclasses.replace(a100(), mig_allowed=False)], False, id="MIG off on one"
        ),
        pytest.param(lambda: [], False, id="no card described yet"),
    ],
)
def test_only_a_node_that_follows_the_fill_wakes_the_publisher(
    node_cards: Callable[[], list[Card]], follows: bool
) -> None:
    cards = node_cards()
    assert follows_fill(cards) is follows
    in_use = DevicesInUse()
    woken: list[None] = []
    in_use.subscribe(wake_if_fill_followed(lambda: cards, lambda: woken.append(None)))
    in_use.update(["gpu-0000-3b-00-0-mig-1g-6gb-0"])
    assert len(woken) == (1 if follows else 0)
