"""The card specs the publisher reads: snapshots, readiness, change notifications, and the card's
place on the host that the card-specs step adds."""

from __future__ import annotations

import pytest
from testutil.unit.gpuhandler.gpuhandler_fakes import A30_FIRST, gpu, simulated

from pkg.dra.model.card import Card
from pkg.gpuhandler.enrichment.card_specs import CardEntry, CardSpecs
from pkg.gpuhandler.enrichment.handler import CardSpecHandler
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState
from pkg.hardware.pci_topology import PciPlacement

A30 = Card(
    physical_gpu="g0", pci_address="0000:3b:00.0", product_name="NVIDIA A30", device="a30", memory_mib=24576
)


def test_changes_notify_and_repeats_do_not() -> None:
    cards, calls = CardSpecs(), []
    cards.subscribe(lambda: calls.append(1))
    assert cards.put("g0", A30) is True
    assert cards.put("g0", A30) is False
    assert cards.mark_unready("g0") is True
    assert cards.mark_unready("g0") is False
    assert cards.mark_unready("unknown") is False
    assert cards.snapshot() == {"g0": CardEntry(card=A30, ready=False)}
    assert cards.remove("g0") is True
    assert cards.remove("g0") is False
    assert len(calls) == 3


def test_a_snapshot_is_immutable_and_detached() -> None:
    cards = CardSpecs()
    cards.put("g0", A30)
    snapshot = cards.snapshot()
    cards.remove("g0")
    assert "g0" in snapshot
    with pytest.raises(TypeError):
        snapshot["g1"] = CardEntry(card=A30, ready=True)  # type: ignore[index]


def test_a_failing_listener_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    cards, calls = CardSpecs(), []

    def broken() -> None:
        raise RuntimeError("publisher bug")

    cards.subscribe(broken)
    cards.subscribe(lambda: calls.append(1))
    cards.put("g0", A30)
    assert calls == [1]
    assert "card spec listener failed" in caplog.text


class FixedTopology:
    def __init__(self, placement: PciPlacement) -> None:
        self.placement_of = placement
        self.asked: list[str] = []

    def placement(self, address: str) -> PciPlacement:
        self.asked.append(address)
        return self.placement_of


def _described(topology: FixedTopology) -> Card:
    cards = CardSpecs()
    handler = CardSpecHandler(backend=simulated(), card_specs=cards, topology=topology)
    state = EnrichmentState(gpu=gpu(A30_FIRST, name="g0"), readiness=Readiness.READY)
    assert handler.handle(state) is None
    assert state.failures == []
    return cards.snapshot()["g0"].card


def test_the_card_spec_says_where_the_card_sits() -> None:
    topology = FixedTopology(PciPlacement(pcie_root="pci0000:3a", numa_node=1))
    card = _described(topology)
    assert (card.pcie_root, card.numa_node) == ("pci0000:3a", 1)
    assert topology.asked == [A30_FIRST]


def test_an_unknown_placement_leaves_the_card_without_topology() -> None:
    card = _described(FixedTopology(PciPlacement()))
    assert (card.pcie_root, card.numa_node, card.nvlink_domain) == (None, None, None)
