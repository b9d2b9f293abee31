"""Prepare and Unprepare of the gpu-handler, end to end below the kubelet's socket.

The pipelines, the NVIDIA preparer and the simulated driver are the production code; only the
API server (claims, offers) and the event sink are in memory. Each test states one promise of the
kubelet plugin and checks it in the three places that must agree: the hardware (simulated NVML
state), the CDI folder and the checkpoint.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from testutil.k8s_fields import present
from testutil.unit.gpuhandler.preparation.preparation_fakes import (
    A30,
    A30_B,
    POOL,
    Node,
    mig_offer,
    node,
    prepare_failures,
    whole_offer,
)

from pkg.backends.nvidia.nvml_port import MIG_ENABLED
from pkg.gpuhandler.preparation.cdi import CDI_KIND
from pkg.gpuhandler.preparation.checkpoint import PreparePhase
from pkg.gpuhandler.preparation.kinds.mig import mig_record


def _gpu_instances(n: Node, card: str = A30) -> list[tuple[int, int]]:
    """What the driver holds for the card, read from its state (NVML refuses to list without MIG)."""
    card_state = n.card_state(card)
    return [(gi.profile_id, gi.start) for gi in card_state.gpu_instances]


def _mig_mode(n: Node, card: str = A30) -> int:
    return int(n.backend._nvml.mig_mode(card)[0])


def test_a_mig_claim_gets_its_instance_at_the_offers_placement_and_a_cdi_device(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=3))
    claim = n.claims.allocate("train", [offer])

    outcome = n.driver.prepare([claim])[claim.uid]

    assert outcome.error == ""
    [device] = outcome.devices
    assert (device.pool, device.device, device.requests) == (POOL, offer.name, ("gpu",))
    # The claim's own device, then the node's base spec: the driver's user space.
    assert device.cdi_device_ids == (
        f"{CDI_KIND}={claim.uid}-{offer.name}",
        "k8s.gpu.deckhouse.io/driver=nvidia",
    )
    assert _mig_mode(n) == MIG_ENABLED
    assert _gpu_instances(n) == [(14, 3)]
    record = n.container.store().load().claims[claim.uid]
    assert record.state is PreparePhase.PREPARE_COMPLETED
    assert present(present(mig_record(record.devices[0])).uuid).startswith("MIG-")
    spec = json.loads(n.container.cdi().path_of(claim.uid).read_text())
    env = spec["devices"][0]["containerEdits"]["env"]
    assert env == [f"NVIDIA_VISIBLE_DEVICES={present(mig_record(record.devices[0])).uuid}"]
    assert n.cards_changed == [A30]  # MIG mode changed: the enrichment must look again


def test_preparing_twice_answers_the_same_and_changes_nothing(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=2))
    claim = n.claims.allocate("train", [offer])
    first = n.driver.prepare([claim])[claim.uid]
    n.claims.delete(claim)  # a recorded answer needs no API call

    second = n.driver.prepare([claim])[claim.uid]

    assert second == first
    assert _gpu_instances(n) == [(14, 2)]


def test_unprepare_gives_everything_back_and_is_idempotent(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=0))
    claim = n.claims.allocate("train", [offer])
    n.driver.prepare([claim])

    assert n.driver.unprepare([claim]) == {claim.uid: ""}
    assert n.driver.unprepare([claim]) == {claim.uid: ""}

    assert _gpu_instances(n) == []
    assert not n.container.cdi().path_of(claim.uid).exists()
    assert n.container.store().load().claims == {}
    assert _mig_mode(n) == MIG_ENABLED  # left in MIG mode: the next MIG claim needs no switch


def test_a_device_prepared_for_another_claim_is_refused(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=1))
    first = n.claims.allocate("first", [offer])
    second = n.claims.allocate("second", [offer])  # two allocators raced
    n.driver.prepare([first])
    before = prepare_failures("DoubleAllocation")

    outcome = n.driver.prepare([second])[second.uid]

    assert "overlaps a prepared MIG device" in outcome.error
    assert "team/first" in outcome.error
    assert "team/second" in outcome.error
    assert prepare_failures("DoubleAllocation") == before + 1
    n.events.warning.assert_called_once()
    assert n.events.warning.call_args.kwargs["reason"] == "PrepareFailed"
    n.events.card_warning.assert_called_once()  # and on the card's PhysicalGPU
    assert n.events.card_warning.call_args.args == (A30,)
    assert n.events.card_warning.call_args.kwargs["reason"] == "PrepareFailed"
    assert _gpu_instances(n) == [(14, 1)]
    assert second.uid not in n.container.store().load().claims


def test_a_whole_card_next_to_a_mig_device_is_refused(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    mig, whole = n.offers.publish(mig_offer(A30, start=0), whole_offer(A30))
    n.driver.prepare([n.claims.allocate("mig", [mig])])

    outcome = n.driver.prepare([(claim := n.claims.allocate("whole", [whole]))])[claim.uid]

    assert "is already prepared (device gpu-0000-3b-00-0-mig-14-0 of claim team/mig" in outcome.error
    assert _gpu_instances(n) == [(14, 0)]


def test_a_whole_card_left_in_empty_mig_mode_leaves_it_first(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    mig, whole = n.offers.publish(mig_offer(A30, start=0), whole_offer(A30))
    mig_claim = n.claims.allocate("mig", [mig])
    n.driver.prepare([mig_claim])
    n.driver.unprepare([mig_claim])
    assert _mig_mode(n) == MIG_ENABLED
    n.cards_changed.clear()

    claim = n.claims.allocate("whole", [whole])
    outcome = n.driver.prepare([claim])[claim.uid]

    assert outcome.error == ""
    assert _mig_mode(n) == 0
    assert n.cards_changed == [A30]
    spec = json.loads(n.container.cdi().path_of(claim.uid).read_text())
    nodes = [d["path"] for d in spec["devices"][0]["containerEdits"]["deviceNodes"]]
    assert nodes[:2] == ["/dev/nvidia0", "/dev/nvidiactl"]


def test_a_card_with_processes_does_not_switch_and_nothing_is_left(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    n.backend._nvml.state.set_processes(A30, [31337])  # type: ignore[attr-defined]
    [offer] = n.offers.publish(mig_offer(A30, start=0))
    claim = n.claims.allocate("train", [offer])

    outcome = n.driver.prepare([claim])[claim.uid]

    assert "runs processes [31337]" in outcome.error
    assert _mig_mode(n) == 0
    assert n.container.store().load().claims == {}
    assert not n.container.cdi().path_of(claim.uid).exists()


def test_a_failure_after_the_hardware_step_rolls_the_card_back(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=3))
    claim = n.claims.allocate("train", [offer])
    (tmp_path / "cdi").write_text("not a folder")  # the CDI spec cannot be written

    outcome = n.driver.prepare([claim])[claim.uid]

    assert outcome.error != ""
    assert _gpu_instances(n) == []
    assert _mig_mode(n) == 0  # switched on for this claim, switched back off
    assert n.container.store().load().claims == {}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "GpuConfig", "sharng": {}},
            "unknown field(s) sharng",
        ),
        ({"apiVersion": "gpu.deckhouse.io/v1", "kind": "GpuConfig"}, "apiVersion"),
        (
            {
                "apiVersion": "gpu.deckhouse.io/v1alpha1",
                "kind": "GpuConfig",
                "sharing": {"strategy": "Exclusive", "mps": {}},
            },
            "sharing.mps requires strategy MPS",
        ),
    ],
)
def test_an_invalid_config_fails_naming_the_claim_and_the_field(
    tmp_path: Path, config: dict[str, Any], expected: str, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=0))
    claim = n.claims.allocate("train", [offer], config=config)

    outcome = n.driver.prepare([claim])[claim.uid]

    assert "claim team/train" in outcome.error
    assert expected in outcome.error
    assert _gpu_instances(n) == []


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (
            lambda n: n.claims.allocate(
                "x", n.offers.publish(whole_offer(A30, sharing="MPS")), consumed={"sharePercent": "150"}
            ),
            "has consumed sharePercent 150, not between 1 and 100",
        ),
        (
            lambda n: n.claims.allocate(
                "x", n.offers.publish(whole_offer(A30, sharing="MPS")), consumed={"memory": "1.5"}
            ),
            "not a whole non-negative number",
        ),
        (lambda n: n.claims.allocate("x", [mig_offer(A30, start=0)]), "is not published in pool"),
        (
            lambda n: n.claims.allocate("x", n.offers.publish(mig_offer(A30, start=0)), pool="gpus/other"),
            "not gpus/node-a",
        ),
    ],
)
def test_what_this_node_cannot_prepare_is_refused_clearly(
    tmp_path: Path, make: object, expected: str, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    claim = make(n)  # type: ignore[operator]

    outcome = n.driver.prepare([claim])[claim.uid]

    assert expected in outcome.error
    assert n.container.store().load().claims == {}


def test_a_claim_recreated_under_the_same_name_is_not_prepared(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=0))
    stale = n.claims.allocate("train", [offer])
    n.claims.allocate("train", [offer])  # the same name, another UID

    outcome = n.driver.prepare([stale])[stale.uid]

    assert f"not {stale.uid}" in outcome.error


def test_parallel_prepares_on_one_card_never_mix_modes(tmp_path: Path, mocker: MockerFixture) -> None:
    """Two gpu-handler instances (a rolling update) and several kubelet calls at once, on one card:
    the four 1g placements and a whole-card claim race; the node lock and the checkpoint make sure
    the card ends either with MIG devices or whole, never both."""
    first = node(mocker, tmp_path)
    second = first.another_instance()
    migs = first.offers.publish(*[mig_offer(A30, start=s) for s in range(4)])
    [whole] = first.offers.publish(whole_offer(A30))
    claims = [first.claims.allocate(f"mig-{i}", [offer]) for i, offer in enumerate(migs)]
    claims.append(first.claims.allocate("whole", [whole]))
    results: dict[str, str] = {}

    def prepare(instance: Node, index: int) -> None:
        claim = claims[index]
        results[claim.name] = instance.driver.prepare([claim])[claim.uid].error

    threads = [threading.Thread(target=prepare, args=((first, second)[i % 2], i)) for i in range(len(claims))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    prepared = {name for name, error in results.items() if not error}
    recorded = first.container.store().load().claims
    assert len(results) == 5
    if "whole" in prepared:
        assert prepared == {"whole"}
        assert _gpu_instances(first) == []
        assert _mig_mode(first) == 0
    else:
        assert prepared == {f"mig-{i}" for i in range(4)}
        assert sorted(start for _, start in _gpu_instances(first)) == [0, 1, 2, 3]
    assert {c.name for c in recorded.values()} == prepared
    assert _gpu_instances(first, A30_B) == []
