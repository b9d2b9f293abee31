"""Prepare and Unprepare of AMD cards: a whole MI300X and a CPX partition of another, the mode
switched only on a free card and back when its last partition goes, every crash point converging.

The preparation node of :mod:`preparation_fakes` with the ``simulated-amd`` backend over a copy of
the ``mi300x-x8`` fixture: the real pipelines, checkpoint and CDI writer; the simulated ``amdgpu``
switches modes in the copied tree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes.client import V1Device
from pytest_mock import MockerFixture
from testutil.k8s_fields import uid_of
from testutil.unit.gpuhandler.preparation.preparation_fakes import Node, attrs, kill_at, node

from pkg.backends.amd.plugin import SIMULATED_AMD
from pkg.backends.amd.simulated import PROCESSES_DIR, make_device_files
from pkg.backends.amd.sysfs import read_card
from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation.checkpoint import PreparePhase
from pkg.gpuhandler.preparation.setup import PREPARE_POINTS, UNPREPARE_POINTS

WHOLE = "0000:05:00.0"
SPLIT = "0000:26:00.0"
CARDS = (WHOLE, "0000:26:00.0")


def _node(mocker: MockerFixture, tmp_path: Path) -> Node:
    n = node(mocker, tmp_path, fixture="mi300x-x8", plugin=SIMULATED_AMD)
    make_device_files(n.host.dev, range(128, 136))
    return n


def _base(card: str) -> str:
    return "gpu-" + card.replace(":", "-").replace(".", "-")


def _whole(card: str) -> V1Device:
    return V1Device(
        name=_base(card),
        attributes=attrs(deviceType="Physical", pciAddress=card, sharingStrategy="Exclusive"),
    )


def _partition(card: str, index: int, mode: str = "cpx", count: int = 8) -> V1Device:
    return V1Device(
        name=f"{_base(card)}-{mode}-{index}",
        attributes=attrs(
            deviceType="Partition",
            pciAddress=card,
            sharingStrategy="Exclusive",
            partitionMode=mode,
            partitionCount=count,
            partitionIndex=index,
        ),
    )


def _claim(n: Node, name: str, *devices: V1Device) -> ClaimRef:
    return n.claims.allocate(name, n.offers.publish(*devices))


def _nodes_in_spec(n: Node, claim: ClaimRef) -> list[str]:
    spec = json.loads(n.container.cdi().path_of(claim.uid).read_text())
    return sorted(d["path"] for dev in spec["devices"] for d in dev["containerEdits"].get("deviceNodes", []))


def _base_spec_nodes(n: Node) -> list[str]:
    claims = {n.container.cdi().path_of(uid_of(claim)).name for claim in n.claims.by_name.values()}
    [base] = [p for p in n.container.settings().cdi_dir.glob("*.json") if p.name not in claims]
    spec = json.loads(base.read_text())
    return sorted(d["path"] for dev in spec["devices"] for d in dev["containerEdits"].get("deviceNodes", []))


def _mode(n: Node, card: str) -> str | None:
    return read_card(n.host.root, card).compute_mode


def test_a_whole_card_and_a_cpx_partition_of_another(tmp_path: Path, mocker: MockerFixture) -> None:
    n = _node(mocker, tmp_path)
    whole = _claim(n, "whole", _whole(WHOLE))
    part = _claim(n, "part", _partition(SPLIT, 3))

    answers = n.driver.prepare([whole, part])
    assert [a.error for a in answers.values()] == ["", ""]

    assert _mode(n, WHOLE) == "spx"
    assert _mode(n, SPLIT) == "cpx"
    minors = read_card(n.host.root, SPLIT).render_minors
    assert len(minors) == 8
    assert _nodes_in_spec(n, whole) == ["/dev/dri/renderD128"]
    assert _nodes_in_spec(n, part) == [f"/dev/dri/renderD{minors[3]}"]  # exactly its render node
    for answer in answers.values():  # and the node's base spec: /dev/kfd
        [device] = answer.devices
        assert len(device.cdi_device_ids) == 2
    assert _base_spec_nodes(n) == ["/dev/kfd"]

    assert n.driver.unprepare([part]) == {part.uid: ""}
    assert _mode(n, SPLIT) == "spx"  # the last partition went and the card was free
    assert read_card(n.host.root, SPLIT).render_minors == (129,)


def test_partitions_of_one_mode_share_the_card_and_the_mode_stays_until_the_last(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = _node(mocker, tmp_path)
    first = _claim(n, "first", _partition(SPLIT, 0))
    second = _claim(n, "second", _partition(SPLIT, 1))
    assert n.driver.prepare([first])[first.uid].error == ""
    assert n.driver.prepare([second])[second.uid].error == ""

    assert n.driver.unprepare([first]) == {first.uid: ""}
    assert _mode(n, SPLIT) == "cpx"
    assert n.driver.unprepare([second]) == {second.uid: ""}
    assert _mode(n, SPLIT) == "spx"


def test_a_busy_card_is_not_switched_and_the_claim_fails_as_card_busy(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = _node(mocker, tmp_path)
    busy = n.host.nvml_state / PROCESSES_DIR / SPLIT
    busy.parent.mkdir(parents=True, exist_ok=True)
    busy.write_text("777\n")
    claim = _claim(n, "part", _partition(SPLIT, 0))

    error = n.driver.prepare([claim])[claim.uid].error

    assert "CardBusy" in error or "processes [777]" in error
    assert _mode(n, SPLIT) == "spx"
    assert n.container.store().load().claims == {}


def test_a_partition_of_another_mode_than_the_card_holds_is_refused(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = _node(mocker, tmp_path)
    cpx = _claim(n, "cpx", _partition(SPLIT, 0))
    assert n.driver.prepare([cpx])[cpx.uid].error == ""
    dpx = _claim(n, "dpx", _partition(SPLIT, 1, mode="dpx", count=2))

    assert "DoubleAllocation" in n.driver.prepare([dpx])[dpx.uid].error or _mode(n, SPLIT) == "cpx"
    assert _mode(n, SPLIT) == "cpx"


def test_a_whole_card_claim_switches_an_idle_partitioned_card_back(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = _node(mocker, tmp_path)
    busy = n.host.nvml_state / PROCESSES_DIR / SPLIT
    part = _claim(n, "part", _partition(SPLIT, 0))
    assert n.driver.prepare([part])[part.uid].error == ""
    busy.parent.mkdir(parents=True, exist_ok=True)
    busy.write_text("42\n")  # a process outlives the Pod: the release leaves the mode
    assert n.driver.unprepare([part]) == {part.uid: ""}
    assert _mode(n, SPLIT) == "cpx"
    busy.write_text("")

    whole = _claim(n, "whole", _whole(SPLIT))
    assert n.driver.prepare([whole])[whole.uid].error == ""
    assert _mode(n, SPLIT) == "spx"


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("point", PREPARE_POINTS)
def test_a_partition_claim_killed_at_any_prepare_point_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str, when: str, mocker: MockerFixture
) -> None:
    n = _node(mocker, tmp_path)
    claim = _claim(n, "part", _partition(SPLIT, 5))
    kill_at(n, monkeypatch, f"prepare:{point}:{when}", claim)

    restarted = n.another_instance()
    restarted.reconcile(CARDS)
    assert restarted.driver.prepare([claim])[claim.uid].error == ""  # the kubelet's retry
    assert _mode(restarted, SPLIT) == "cpx"
    [record] = restarted.container.store().load().claims.values()
    assert record.state is PreparePhase.PREPARE_COMPLETED
    assert restarted.driver.unprepare([claim]) == {claim.uid: ""}
    assert _mode(restarted, SPLIT) == "spx"


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("point", UNPREPARE_POINTS)
def test_a_partition_claim_killed_at_any_unprepare_point_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str, when: str, mocker: MockerFixture
) -> None:
    n = _node(mocker, tmp_path)
    claim = _claim(n, "part", _partition(SPLIT, 5))
    assert n.driver.prepare([claim])[claim.uid].error == ""
    kill_at(n, monkeypatch, f"unprepare:{point}:{when}", claim)

    restarted = n.another_instance()
    restarted.reconcile(CARDS)
    assert restarted.driver.unprepare([claim]) == {claim.uid: ""}  # the kubelet's retry
    assert restarted.container.store().load().claims == {}
    assert not restarted.container.cdi().path_of(claim.uid).exists()
    assert _mode(restarted, SPLIT) == "spx"
