"""A kind is one module and one registration: the test-only example kind
(``test/fixtures/example_backend/example_device_kind.py``), appended to the composition root's
``device_kinds``, is planned, recorded, prepared, crash-recovered and released by the unchanged
Prepare and Unprepare pipelines, on the simulated node the other preparation tests use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from example_device_kind import ORPHANS, ExampleSlotKind, SlotRecord
from kubernetes.client import V1Device
from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.preparation.preparation_fakes import (
    A30,
    Node,
    attrs,
    kill_at,
    node,
    prepare_failures,
)

from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation.checkpoint import PreparePhase
from pkg.gpuhandler.preparation.kinds import Kinds
from pkg.gpuhandler.preparation.setup import PREPARE_POINTS, UNPREPARE_POINTS


def slot_offer(slot: int, card: str = A30) -> V1Device:
    base = "gpu-" + card.replace(":", "-").replace(".", "-")
    return V1Device(
        name=f"{base}-slot-{slot}", attributes=attrs(deviceType="ExampleSlot", pciAddress=card, slot=slot)
    )


def _node(mocker: MockerFixture, tmp_path: Path) -> tuple[Node, ExampleSlotKind]:
    kind = ExampleSlotKind(state_dir=tmp_path / "example-slots")
    return node(mocker, tmp_path, extra_kinds=[kind]), kind


def _claim(n: Node, slot: int = 2, name: str = "slotted") -> ClaimRef:
    [offer] = n.offers.publish(slot_offer(slot))
    return n.claims.allocate(name, [offer])


def test_the_kind_is_registered_through_the_same_registry(tmp_path: Path, mocker: MockerFixture) -> None:
    n, kind = _node(mocker, tmp_path)
    kinds: Kinds = n.container.kinds()
    assert kind in list(kinds)
    assert "ExampleSlot" in n.container.store().file.records.device_types


def test_a_claim_of_the_new_kind_is_prepared_recorded_and_released(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n, kind = _node(mocker, tmp_path)
    claim = _claim(n)

    outcome = n.driver.prepare([claim])[claim.uid]

    assert outcome.error == ""
    assert kind.lent() == {f"{A30}@slot-2": claim.uid}
    [record] = n.container.store().load().claims.values()
    assert record.state is PreparePhase.PREPARE_COMPLETED
    [device] = record.devices
    assert device.device_type == "ExampleSlot"
    assert device.kind_record("exampleSlot", SlotRecord) == SlotRecord(slot=2)
    stored = json.loads(n.container.store().file.path.read_text())
    assert stored["minReaderVersion"] == ExampleSlotKind.reader_version  # an older reader refuses
    assert stored["version"] == ExampleSlotKind.reader_version  # the newest format of its kinds
    spec = json.loads(n.container.cdi().path_of(claim.uid).read_text())
    assert "EXAMPLE_SLOT=2" in spec["devices"][0]["containerEdits"]["env"]
    # a container uses it through the driver: the base spec is named after the claim's device
    assert len(outcome.devices[0].cdi_device_ids) == 2

    assert n.driver.unprepare([claim]) == {claim.uid: ""}
    assert kind.lent() == {}
    assert n.container.store().load().claims == {}
    assert not n.container.cdi().path_of(claim.uid).exists()


def test_its_conflict_rule_refuses_a_slot_another_claim_holds(tmp_path: Path, mocker: MockerFixture) -> None:
    n, kind = _node(mocker, tmp_path)
    [offer] = n.offers.publish(slot_offer(5))
    first, second = n.claims.allocate("first", [offer]), n.claims.allocate("second", [offer])
    assert n.driver.prepare([first])[first.uid].error == ""
    before = prepare_failures("DoubleAllocation")

    error = n.driver.prepare([second])[second.uid].error

    assert "is slot 5, which is already lent" in error
    assert "team/first" in error
    assert prepare_failures("DoubleAllocation") == before + 1
    assert kind.lent() == {f"{A30}@slot-5": first.uid}


def test_its_plan_refuses_an_offer_it_cannot_read_naming_the_claim(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n, kind = _node(mocker, tmp_path)
    claim = _claim(n, slot=42)

    error = n.driver.prepare([claim])[claim.uid].error

    assert "InvalidAllocation" in error
    assert "claim team/slotted: device" in error
    assert "slot 42, not between 0 and 7" in error
    assert kind.lent() == {}


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("point", PREPARE_POINTS)
def test_a_claim_of_the_new_kind_killed_at_any_prepare_point_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str, when: str, mocker: MockerFixture
) -> None:
    n, kind = _node(mocker, tmp_path)
    claim = _claim(n)
    kill_at(n, monkeypatch, f"prepare:{point}:{when}", claim)

    restarted = n.another_instance()
    restarted.reconcile()
    assert restarted.driver.prepare([claim])[claim.uid].error == ""  # the kubelet's retry
    assert kind.lent() == {f"{A30}@slot-2": claim.uid}
    [record] = restarted.container.store().load().claims.values()
    assert record.state is PreparePhase.PREPARE_COMPLETED


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("point", UNPREPARE_POINTS)
def test_a_claim_of_the_new_kind_killed_at_any_unprepare_point_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str, when: str, mocker: MockerFixture
) -> None:
    n, kind = _node(mocker, tmp_path)
    claim = _claim(n)
    assert n.driver.prepare([claim])[claim.uid].error == ""
    kill_at(n, monkeypatch, f"unprepare:{point}:{when}", claim)

    restarted = n.another_instance()
    restarted.reconcile()
    assert restarted.driver.unprepare([claim]) == {claim.uid: ""}  # the kubelet's retry
    assert kind.lent() == {}
    assert restarted.container.store().load().claims == {}


def test_start_up_rolls_back_a_half_prepared_claim_and_removes_what_no_record_owns(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n, kind = _node(mocker, tmp_path)
    claim = _claim(n)
    assert n.driver.prepare([claim])[claim.uid].error == ""
    store = n.container.store()
    data = store.load()
    data.claims[claim.uid].state = PreparePhase.PREPARE_STARTED  # died before record-completed
    store.save(data)
    stray = kind.slot_file(A30, 6)
    stray.write_text("3f1e0e52-53c5-4d33-a2c7-6a5c3cbd1d0c")  # lent, then died before recording

    report = n.reconcile()

    assert report.rolled_back == [claim.uid]
    assert report.node[ORPHANS] == [f"{A30}@slot-6"]
    assert kind.lent() == {}
    assert store.load().claims == {}
