"""The card specs the publisher reads: snapshots, readiness, change notifications."""

from __future__ import annotations

import pytest

from pkg.dra.model.card import Card
from pkg.gpuhandler.enrichment.card_specs import CardEntry, CardSpecs

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
