"""Which Pods a fault killed by its nature (a reboot's, a lost card's) and which the system lost."""

from __future__ import annotations

import pytest
from soak.casualties import casualty_of
from soak.report import StrikeResult
from soak.workload import LOST, Kind, PodRecord

BEGUN = 1000.0  # the soak clock's time the strikes count from
BOUND = 120.0


def record(
    *,
    node: str = "soak-a30",
    card: str = "0000:3b:00.0",
    created: float = BEGUN + 50,
    finished: float = BEGUN + 70,
    why: str = "failed: exit code 137",
    disruption: str = "",
) -> PodRecord:
    pod = PodRecord("soak-mig-7", Kind.MIG, node, card, created, lifetime=60)
    pod.outcome, pod.finished, pod.why, pod.disruption = LOST, finished, why, disruption
    return pod


def reboot(target: str = "soak-a30", at: float = 60) -> StrikeResult:
    return StrikeResult("reboot-node", target, struck_at=at, healed_at=at, recovery=7)


def off_bus(target: str = "soak-a30 0000:3b:00.0", at: float = 60) -> StrikeResult:
    return StrikeResult("card-off-bus", target, struck_at=at, healed_at=at + 20, recovery=5)


def test_a_pod_that_was_running_on_a_rebooted_node_and_failed_is_the_reboot_s() -> None:
    assert casualty_of(record(), [reboot()], begun=BEGUN, bound=BOUND) == "reboot-node"


def test_a_pod_failing_late_in_the_reboot_s_window_is_still_the_reboot_s() -> None:
    late = record(finished=BEGUN + 60 + BOUND)
    assert casualty_of(late, [reboot()], begun=BEGUN, bound=BOUND) == "reboot-node"


@pytest.mark.parametrize(
    ("pod", "why"),
    [
        (record(node="soak-h100"), "on another node"),
        (record(created=BEGUN + 65), "created after the reboot: nothing of it was killed"),
        (record(finished=BEGUN + 59), "failed before the strike"),
        (record(finished=BEGUN + 60 + BOUND + 1), "failed after the window"),
        (record(why="stuck Pending (no reason) beyond 120s"), "stuck: the system's, not the reboot's"),
        (record(why="vanished: the Pod was deleted by someone else"), "deleted: nothing in a reboot deletes"),
    ],
)
def test_a_reboot_explains_no_other_end(pod: PodRecord, why: str) -> None:
    assert casualty_of(pod, [reboot()], begun=BEGUN, bound=BOUND) is None, why


def test_a_pod_the_device_taint_evicted_from_the_card_that_fell_off_is_the_card_s() -> None:
    evicted = record(
        why="evicted: the Pod was deleted for DeletionByDeviceTaintManager",
        disruption="DeletionByDeviceTaintManager",
    )
    killed_in_grace = record(disruption="DeletionByDeviceTaintManager")  # exit 137 after the grace
    for pod in (evicted, killed_in_grace):
        assert casualty_of(pod, [off_bus()], begun=BEGUN, bound=BOUND) == "card-off-bus"


@pytest.mark.parametrize(
    ("pod", "why"),
    [
        (record(card="0000:5e:00.0", disruption="DeletionByDeviceTaintManager"), "another card"),
        (record(node="soak-h100", disruption="DeletionByDeviceTaintManager"), "another node"),
        (record(), "failed without the eviction's mark"),
        (record(disruption="PreemptionByScheduler"), "another controller's deletion"),
        (
            record(finished=BEGUN + 80 + BOUND + 1, disruption="DeletionByDeviceTaintManager"),
            "after the window",
        ),
    ],
)
def test_a_lost_card_explains_only_its_own_evictions(pod: PodRecord, why: str) -> None:
    assert casualty_of(pod, [off_bus()], begun=BEGUN, bound=BOUND) is None, why


def test_other_faults_explain_nothing() -> None:
    strikes = [
        StrikeResult(kind, "soak-a30", struck_at=60, healed_at=90, recovery=1)
        for kind in (
            "restart-kubelet",
            "restart-containerd",
            "api-cut",
            "driver-reload",
            "plugin-folder-full",
        )
    ]
    assert casualty_of(record(), strikes, begun=BEGUN, bound=BOUND) is None


def test_a_pod_still_running_is_nobody_s_casualty() -> None:
    pod = record()
    pod.finished = None
    assert casualty_of(pod, [reboot()], begun=BEGUN, bound=BOUND) is None
