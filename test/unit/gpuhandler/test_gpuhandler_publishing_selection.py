"""Which cards the publisher offers, and in which modes, on real simulated cards."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime
from typing import TypedDict

import pytest
from kubernetes.client import V1Node, V1ObjectMeta
from testutil.unit.gpuhandler.gpuhandler_fakes import A30_FIRST, condition, gpu, simulated

from api.gpu.v1alpha1 import DriverType, PhysicalGPU
from pkg.dra.model.card import Card
from pkg.gpuhandler.enrichment.card_specs import CardEntry
from pkg.gpuhandler.publishing.selection import (
    LABEL_ALLOW_MIG,
    build_card_offers,
    mig_allowed_on,
    ready_but_undescribed,
    select_cards,
)

A30_SECOND = "0000:d8:00.0"


class _Vendor(TypedDict):
    pci_vendor_id: str
    driver_type: DriverType


NVIDIA: _Vendor = {"pci_vendor_id": "10de", "driver_type": DriverType.NVIDIA}


def healthy(
    address: str = A30_FIRST,
    *,
    name: str,
    health: str | None = "True",
    driver_ready: str | None = "True",
    driver_type: DriverType | None = DriverType.NVIDIA,
    device_id: str = "20b7",
) -> PhysicalGPU:
    """A PhysicalGPU as the validator and the handler leave it: DriverReady and HardwareHealthy."""
    extra = [condition("HardwareHealthy", health, reason="Healthy")] if health else []
    return gpu(
        address,
        name=name,
        device_id=device_id,
        driver_type=driver_type,
        driver_ready=driver_ready,
        extra_conditions=extra,
    )


def entry(obj: PhysicalGPU, *, ready: bool = True, scenario: str = "a30-x2") -> CardEntry:
    return CardEntry(card=simulated(scenario).offer_inputs(obj), ready=ready)


def test_a_ready_healthy_card_is_offered_with_mig_where_the_node_allows() -> None:
    a, b = healthy(name="a"), healthy(A30_SECOND, name="b")
    entries = {"a": entry(a), "b": entry(b)}
    selection = select_cards(entries=entries, gpus={"a": a, "b": b}, allow_mig=True, **NVIDIA)
    assert [c.physical_gpu for c in selection.cards] == ["a", "b"]
    assert all(c.mig_allowed for c in selection.cards)
    assert selection.withheld == {}

    no_mig = select_cards(entries=entries, gpus={"a": a, "b": b}, allow_mig=False, **NVIDIA)
    assert [c.mig_allowed for c in no_mig.cards] == [False, False]
    assert {o.device_type.value for co in build_card_offers(no_mig.cards) for o in co.offers} == {"Physical"}


def test_a_card_without_mig_gets_no_mig_offers_even_where_allowed() -> None:
    l4 = healthy("0000:ce:00.0", name="l4", device_id="27b8")
    selection = select_cards(
        entries={"l4": entry(l4, scenario="h100-and-l4")}, gpus={"l4": l4}, allow_mig=True, **NVIDIA
    )
    (card,) = selection.cards
    assert card.mig_profiles == ()
    assert card.mig_allowed is False


@pytest.mark.parametrize(
    ("obj", "ready", "reason"),
    [
        (healthy(name="a", driver_ready="False"), True, "not readable: DriverReady is not True"),
        (healthy(name="a", driver_type=DriverType.VFIO), True, "not bound to the Nvidia driver"),
        (healthy(name="a"), False, "the enrichment has not read it since it became ready"),
    ],
    ids=["driver-not-ready", "vfio", "entry-not-ready"],
)
def test_cards_that_may_not_be_offered_are_withheld_with_the_reason(
    obj: PhysicalGPU, ready: bool, reason: str
) -> None:
    described = entry(healthy(name="a"), ready=ready)
    selection = select_cards(entries={"a": described}, gpus={"a": obj}, allow_mig=True, **NVIDIA)
    assert selection.cards == ()
    assert reason in selection.withheld["a"]


@pytest.mark.parametrize("health", ["False", "Unknown", None], ids=["sick", "unknown", "missing"])
def test_health_never_withholds_a_card_its_taints_say_it(health: str | None) -> None:
    obj = healthy(name="a", health=health)
    selection = select_cards(entries={"a": entry(obj)}, gpus={"a": obj}, allow_mig=True, **NVIDIA)
    assert [c.physical_gpu for c in selection.cards] == ["a"]
    assert selection.withheld == {}


def test_a_card_whose_object_is_gone_or_going_is_withheld() -> None:
    a = healthy(name="a")
    going = a.model_copy(
        update={"metadata": a.metadata.model_copy(update={"deletion_timestamp": datetime.now(UTC)})}
    )
    assert select_cards(entries={"a": entry(a)}, gpus={}, allow_mig=True, **NVIDIA).withheld == {
        "a": "its PhysicalGPU is not in the cache"
    }
    assert select_cards(entries={"a": entry(a)}, gpus={"a": going}, allow_mig=True, **NVIDIA).withheld == {
        "a": "its PhysicalGPU is being deleted"
    }


@pytest.mark.parametrize(
    ("labels", "allowed"),
    [
        (None, True),
        ({}, True),
        ({LABEL_ALLOW_MIG: "true"}, True),
        ({LABEL_ALLOW_MIG: "false"}, False),
        ({LABEL_ALLOW_MIG: " FALSE "}, False),
        ({"other": "false"}, True),
    ],
)
def test_the_node_label_decides_mig(labels: dict[str, str] | None, allowed: bool) -> None:
    assert mig_allowed_on(V1Node(metadata=V1ObjectMeta(name="n", labels=labels))) is allowed


def test_no_node_means_no_veto() -> None:
    assert mig_allowed_on(None) is True


def test_a_card_the_api_would_refuse_is_left_out_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    good = entry(healthy(name="a")).card
    bad: Card = dataclasses.replace(good, physical_gpu="bad", pci_address="0000:3B:00.0_x")
    with caplog.at_level(logging.ERROR):
        offers = build_card_offers([bad, good])
    assert [o.card.physical_gpu for o in offers] == ["a"]
    assert "card left out of the ResourceSlices" in caplog.text


def test_ready_cards_not_yet_described_are_reported() -> None:
    a, b = healthy(name="a"), healthy(A30_SECOND, name="b")
    vfio = healthy(name="c", driver_type=DriverType.VFIO)
    pending = ready_but_undescribed(entries={"a": entry(a)}, gpus={"a": a, "b": b, "c": vfio}, **NVIDIA)
    assert pending == ["b"]
