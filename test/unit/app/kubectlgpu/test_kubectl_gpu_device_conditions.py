"""The Ready and Healthy conditions of a claim's devices, read defensively from ``status.devices[]``:
one per allocated device of our driver, other drivers' entries ignored, anything malformed a
sentence naming the claim and device, never an exception."""

from __future__ import annotations

from typing import Any

import pytest
from testutil.unit.app.kubectlgpu.kubectl_gpu_objects import DRIVER, claim

from pkg.app.kubectlgpu.device_conditions import (
    MALFORMED,
    NOT_PREPARED,
    READY,
    cause_lines,
    device_conditions,
    device_lines,
    section,
)

POOL = "gpus/w1"
CARD = "gpu-0000-3b-00-0"
SHARE = "gpu-0000-d8-00-0-ts"
SHARE_ID = "0f3a9c1e-1111-2222-3333-444455556666"


def condition(kind: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-11-29T02:00:00Z",
        "observedGeneration": 1,
    }


def entry(device: str, *conditions: Any, share_id: str | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"driver": DRIVER, "pool": POOL, "device": device, "conditions": list(conditions)}
    if share_id:
        out["shareID"] = share_id
    return out | extra


PREPARED = condition("Ready", "True", "Prepared", "prepared on node w1")
HEALTHY = condition("Healthy", "True", "Healthy", "")
FAILED = condition(
    "Ready", "False", "IntervalConflict", "asks for time slice Short, but the card is time-sliced Long"
)
XID = condition("Healthy", "False", "Xid48DoubleBitEccError", "XID 48 on the card")


def held_claim(*entries: Any, devices: list[tuple[str, str, str | None]] | None = None) -> dict[str, Any]:
    return claim(
        "ml",
        "train",
        devices=devices if devices is not None else [(POOL, CARD, None), (POOL, SHARE, SHARE_ID)],
        pods=("train-0",),
        status_devices=list(entries),
    )


def test_each_allocated_device_gets_its_conditions_and_identity() -> None:
    c = held_claim(
        entry(
            CARD, PREPARED, HEALTHY, data={"physicalGPU": "w1-0-10de-20b7", "uuid": "GPU-1", "pciBusID": 7}
        ),
        entry(SHARE, FAILED, HEALTHY, share_id=SHARE_ID),
    )
    card, share = device_conditions(c)
    assert (card.device, card.node, card.status_text()) == (CARD, "w1", READY)
    assert card.ready is not None
    assert (card.ready.reason, card.ready.since) == (
        "Prepared",
        "2026-11-29T02:00:00Z",
    )
    assert card.identity == (("physicalGPU", "w1-0-10de-20b7"), ("uuid", "GPU-1"))  # a number is no identity
    assert (share.name, share.status_text()) == (f"{SHARE}#0f3a9c1e", "NotReady(IntervalConflict)")
    assert share.failed_prepare
    assert not share.unhealthy


def test_other_drivers_entries_are_ignored_and_an_unreported_device_is_not_prepared() -> None:
    other = {"driver": "nic.example.com", "pool": POOL, "device": CARD, "conditions": "nonsense"}
    [card] = device_conditions(held_claim(other, devices=[(POOL, CARD, None)]))
    assert (card.ready, card.healthy, card.problems) == (None, None, ())
    assert card.status_text() == NOT_PREPARED


@pytest.mark.parametrize(
    ("ready", "healthy", "text"),
    [
        (PREPARED, XID, "Unhealthy(Xid48DoubleBitEccError)"),
        (FAILED, XID, "NotReady(IntervalConflict),Unhealthy(Xid48DoubleBitEccError)"),
        (condition("Ready", "Unknown", "Preparing"), None, "ReadyUnknown"),
        (None, HEALTHY, NOT_PREPARED),
    ],
)
def test_the_status_cell_says_what_is_wrong_first(ready: Any, healthy: Any, text: str) -> None:
    conditions = [c for c in (ready, healthy) if c is not None]
    [card] = device_conditions(held_claim(entry(CARD, *conditions), devices=[(POOL, CARD, None)]))
    assert card.status_text() == text


@pytest.mark.parametrize(
    ("conditions", "problem"),
    [
        ("Ready", "conditions is a str, not a list"),
        (["Ready"], "conditions[0] is a str, not an object"),
        ([{"status": "True"}], "conditions[0] has no type"),
        (
            [{"type": "Ready", "status": "Yes"}],
            "conditions[0] (Ready) has status 'Yes', not one of True, False, Unknown",
        ),
        ([PREPARED, FAILED], "conditions[1]: a second Ready condition (ignored)"),
    ],
)
def test_a_malformed_condition_is_a_sentence_naming_claim_and_device(conditions: Any, problem: str) -> None:
    raw = {"driver": DRIVER, "pool": POOL, "device": CARD, "conditions": conditions}
    [card] = device_conditions(held_claim(raw, devices=[(POOL, CARD, None)]))
    assert card.problems == (f"claim ml/train device {CARD}: {problem}",)
    text = "\n".join(device_lines([card]))
    assert f"malformed: claim ml/train device {CARD}: {problem}" in text


def test_a_device_with_nothing_but_malformed_conditions_shows_malformed() -> None:
    raw = {"driver": DRIVER, "pool": POOL, "device": CARD, "conditions": [42]}
    [card] = device_conditions(held_claim(raw, devices=[(POOL, CARD, None)]))
    assert card.status_text() == MALFORMED


def test_a_status_devices_that_is_no_list_is_one_problem_and_the_devices_stay() -> None:
    c = held_claim(devices=[(POOL, CARD, None)])
    c["status"]["devices"] = {"driver": DRIVER}
    card, problem = device_conditions(c)
    assert (card.device, card.status_text()) == (CARD, NOT_PREPARED)
    assert problem.problems == ("claim ml/train: status.devices is a dict, not a list",)
    assert device_lines([problem]) == ["  claim ml/train: status.devices is a dict, not a list"]


def test_an_entry_for_a_device_the_allocation_does_not_name_is_kept_last() -> None:
    stale = entry("gpu-0000-99-00-0", FAILED)
    card, orphan = device_conditions(held_claim(entry(CARD, PREPARED), stale, devices=[(POOL, CARD, None)]))
    assert (card.device, orphan.device, orphan.node) == (CARD, "gpu-0000-99-00-0", "")


def test_causes_name_device_claim_node_reason_and_message() -> None:
    devices = device_conditions(
        held_claim(entry(CARD, PREPARED, XID), entry(SHARE, FAILED, share_id=SHARE_ID))
    )
    assert cause_lines(devices) == [
        f"device {CARD} (claim ml/train) on node w1 is unhealthy: Xid48DoubleBitEccError: XID 48 on the card",
        f"Prepare of device {SHARE}#0f3a9c1e (claim ml/train) failed on node w1: IntervalConflict: asks for "
        "time slice Short, but the card is time-sliced Long; the kubelet retries it, and the Pod's "
        "containers wait (ContainerCreating) until it succeeds",
    ]
    assert cause_lines(device_conditions(held_claim(entry(CARD, PREPARED, HEALTHY)))) == []


def test_the_devices_section_lists_ready_then_healthy_then_identity() -> None:
    devices = device_conditions(
        held_claim(
            entry(CARD, HEALTHY, PREPARED, data={"physicalGPU": "w1-0", "uuid": "GPU-1"}),
            devices=[(POOL, CARD, None), (POOL, SHARE, SHARE_ID)],
        )
    )
    assert section(devices) == (
        "devices (the conditions gpu-handler reports in status.devices):\n"
        f"  {CARD} on node w1: Ready=True Prepared: prepared on node w1; Healthy=True Healthy\n"
        "    PhysicalGPU w1-0, UUID GPU-1\n"
        f"  {SHARE}#0f3a9c1e on node w1: not prepared yet (gpu-handler has reported no condition for it)\n"
    )
    assert section([]) == ""


def test_to_item_keys_conditions_by_type() -> None:
    [card] = device_conditions(held_claim(entry(CARD, PREPARED, XID), devices=[(POOL, CARD, None)]))
    item = card.to_item()
    assert item["conditions"]["Healthy"] == {
        "status": "False",
        "reason": "Xid48DoubleBitEccError",
        "message": "XID 48 on the card",
        "lastTransitionTime": "2026-11-29T02:00:00Z",
    }
    assert (item["device"], item["shareID"], item["node"]) == (CARD, None, "w1")
    assert "problems" not in item
