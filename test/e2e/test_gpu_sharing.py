"""Shares of a whole card on the real node: TimeSlicing and MPS, from the scheduler to the container.

The real scheduler allocates ``sharePercent`` of one card's shared offer to each claim (each
claim's selector names the card, so the shares meet on it); the real kubelet calls gpu-handler,
which sets the card's time slice or starts its MPS daemon (a real detached process standing in for
``nvidia-cuda-mps-control``), and containerd applies the CDI spec: the environment each share's
limits are enforced through, and the daemon's pipe and shared-memory folders.
"""

from __future__ import annotations

import json

from testutil.e2e.gpu_nodes import card_state, checkpoint, claim_pod, mps_daemon, run_shared, shared_claim
from testutil.k8s_fields import status_of, uid_of

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM

A30_FIRST = "0000:3b:00.0"
A30_SECOND = "0000:d8:00.0"
A30_MIB = 24 * 1024
EXCLUSIVE_PROCESS = 3
LONG = 3


def _time_slicing(interval: str) -> dict[str, object]:
    return {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": interval}},
    }


def _delete_pods(kube: KubeClient, namespace: str, *names: str) -> None:
    for name in names:
        kube.delete(POD, name, namespace)

    def gone() -> bool:
        for name in names:
            try:
                kube.get(POD, name, namespace)
            except NotFoundError:
                continue
            return False
        return True

    wait_until(gone, timeout=90, what=f"Pods {names} to go")


def _claim_uids(kube: KubeClient, namespace: str, *names: str) -> set[str]:
    return {uid_of(kube.get(RESOURCE_CLAIM, name, namespace)) for name in names}


def test_two_half_time_slices_share_one_card_and_a_third_share_waits(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node: GpuComponents
) -> None:
    node = gpu_node.node
    config = _time_slicing("Long")
    seen = [
        run_shared(
            kube,
            control_plane,
            namespace,
            shared_claim(f"half-{i}", "gpu-timeslicing", share_percent=50, card=A30_FIRST, config=config),
            node=node.name,
        )
        for i in range(2)
    ]

    assert seen[0]["NVIDIA_VISIBLE_DEVICES"].startswith("GPU-")
    assert seen[0]["NVIDIA_VISIBLE_DEVICES"] == seen[1]["NVIDIA_VISIBLE_DEVICES"]
    assert card_state(node, A30_FIRST)["time_slice"] == LONG

    kube.create(
        RESOURCE_CLAIM,
        shared_claim("more", "gpu-timeslicing", share_percent=60, card=A30_FIRST, config=config),
        namespace=namespace,
    )
    kube.create(POD, claim_pod("more", "more", node=node.name), namespace=namespace)
    wait_until(
        lambda: (
            "cannot allocate all claims" in control_plane.kubectl("describe", "pod", "-n", namespace, "more")
        ),
        timeout=60,
        what="the scheduler to report that 60% more of the card does not fit",
    )
    assert status_of(kube.get(POD, "more", namespace)).phase == "Pending"
    assert status_of(kube.get(RESOURCE_CLAIM, "more", namespace)).allocation is None

    _delete_pods(kube, namespace, "half-0", "half-1", "more")
    wait_until(lambda: not checkpoint(node), timeout=60, what="the shares to be unprepared")
    assert card_state(node, A30_FIRST)["time_slice"] == 0  # the last share gave the default back


def test_mps_shares_see_their_own_limits_and_the_daemon_stops_with_the_last(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node: GpuComponents
) -> None:
    node = gpu_node.node
    small, large = (
        run_shared(
            kube,
            control_plane,
            namespace,
            shared_claim(name, "gpu-mps", share_percent=percent, card=A30_SECOND),
            node=node.name,
        )
        for name, percent in (("mps-30", 30), ("mps-70", 70))
    )

    daemon = mps_daemon(gpu_node, A30_SECOND)
    assert daemon is not None
    assert (small["THREADS"], small["MEMORY"]) == ("30", f"0={A30_MIB * 30 // 100}M")
    assert (large["THREADS"], large["MEMORY"]) == ("70", f"0={A30_MIB * 70 // 100}M")
    for seen in (small, large):
        assert seen["PIPE"] == "/tmp/nvidia-mps"
        assert seen["DAEMON"] == str(daemon)  # the daemon's own pipe folder
        assert seen["SHM"] == seen["NVIDIA_VISIBLE_DEVICES"]  # its /dev/shm, naming this card
    assert card_state(node, A30_SECOND)["compute_mode"] == EXCLUSIVE_PROCESS

    _delete_pods(kube, namespace, "mps-30")
    wait_until(lambda: len(checkpoint(node)) == 1, timeout=60, what="the 30% share to be unprepared")
    assert mps_daemon(gpu_node, A30_SECOND) == daemon
    _delete_pods(kube, namespace, "mps-70")
    wait_until(lambda: not checkpoint(node), timeout=60, what="the 70% share to be unprepared")

    assert mps_daemon(gpu_node, A30_SECOND) is None
    assert not (gpu_node.mps_root / A30_SECOND).exists()
    assert card_state(node, A30_SECOND)["compute_mode"] == 0


def test_a_time_slice_other_than_the_cards_fails_with_a_reason_on_the_claim(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node: GpuComponents
) -> None:
    node = gpu_node.node
    run_shared(
        kube,
        control_plane,
        namespace,
        shared_claim(
            "long", "gpu-timeslicing", share_percent=50, card=A30_FIRST, config=_time_slicing("Long")
        ),
        node=node.name,
    )
    kube.create(
        RESOURCE_CLAIM,
        shared_claim(
            "short", "gpu-timeslicing", share_percent=50, card=A30_FIRST, config=_time_slicing("Short")
        ),
        namespace=namespace,
    )
    kube.create(POD, claim_pod("short", "short", node=node.name), namespace=namespace)

    def claim_event() -> str:
        out = control_plane.kubectl(
            "get", "events", "-n", namespace, "--field-selector", "involvedObject.name=short", "-o", "json"
        )
        return " ".join(
            f"{e.get('reason')}: {e.get('message')}"
            for e in json.loads(out)["items"]
            if e.get("involvedObject", {}).get("kind") == "ResourceClaim"
        )

    wait_until(
        lambda: "IntervalConflict" in claim_event(), timeout=90, what="a PrepareFailed event on the claim"
    )
    event = claim_event()
    assert "PrepareFailed" in event
    assert "asks for time slice Short, but the card is time-sliced Long" in event
    assert status_of(kube.get(POD, "short", namespace)).phase == "Pending"  # never started
    assert card_state(node, A30_FIRST)["time_slice"] == LONG  # the running share's slice is untouched
    assert set(checkpoint(node)) == _claim_uids(kube, namespace, "long")

    _delete_pods(kube, namespace, "long", "short")
    wait_until(lambda: not checkpoint(node), timeout=60, what="the shares to be unprepared")
    assert card_state(node, A30_FIRST)["time_slice"] == 0
