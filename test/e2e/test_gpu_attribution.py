"""Per-Pod attribution on the real node: real containers' processes, found on the cards they hold,
are attributed to their Pods, claims and devices — on a time-sliced card and on a MIG device.

Each Pod's container opens the card's device node and keeps it open (``exec 3</dev/nvidia<N>``),
as a CUDA program does, and declares in its environment what a real program would make the driver
report (``SIMULATED_GPU_MEMORY_MIB``, ``SIMULATED_GPU_SM_PERCENT``): the simulated NVML lists the
container's real PID (pkg/backends/simulated/gpu_processes.py), and gpu-handler maps it through
``/proc/<pid>/cgroup`` and the node's Pods. The bound the series are held to: memory and SM share
exactly what the processes declared; each share's part of the card's energy in proportion to its
SM share within 10 %.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import V1EnvVar
from prometheus_client.parser import text_string_to_metric_families
from testutil.e2e.gpu_nodes import checkpoint, claim_pod, gpu_pod, run_and_show, shared_claim
from testutil.k8s_fields import name_of, spec_of, status_of
from testutil.kubectl_gpu_user import User, bind_viewer_role, namespace_user

from api.gpu.v1alpha1 import DeviceUsage
from pkg.app.kubectlgpu.usage import device_samples
from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM

A30_FIRST = "0000:3b:00.0"
MIB = 1024 * 1024
# Opens the card's node the CDI spec gave (the first /dev/nvidia<N>), then holds it while it sleeps.
HOLD_THE_CARD = (
    "for d in /dev/nvidia[0-9]*; do exec 3<$d; echo holding=$d; break; done; "
    "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; echo shown; exec sleep 3600"
)
SHARES = {"user-a": (1024, 30), "user-b": (3072, 60)}  # Pod: (GPU memory MiB, SM percent)
MIG = (512, 0)

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(components: GpuComponents) -> Series:
    with urllib.request.urlopen(components.handler_metrics_url, timeout=10) as response:
        text = response.read().decode()
    found: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(series: Series, name: str, **labels: str) -> float | None:
    """The one sample of ``name`` whose labels include ``labels``; None when there is none."""
    wanted = set(labels.items())
    matching = [v for (n, ls), v in series.items() if n == name and wanted <= set(ls)]
    assert len(matching) <= 1, f"{name}{labels}: {len(matching)} series"
    return matching[0] if matching else None


def with_usage(pod: Any, memory_mib: int, sm_percent: int) -> Any:
    spec_of(pod).containers[0].env = [
        V1EnvVar(name="SIMULATED_GPU_MEMORY_MIB", value=str(memory_mib)),
        V1EnvVar(name="SIMULATED_GPU_SM_PERCENT", value=str(sm_percent)),
    ]
    return pod


@pytest.fixture
def workloads(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node: GpuComponents
) -> Iterator[dict[str, str]]:
    """Two TimeSlicing shares of the first A30 and one MIG 1g device, each held by a running Pod;
    the claim names by Pod. Deleted afterwards, and the node left with no prepared claim."""
    node = gpu_node.node.name
    claims = {}
    for pod_name, (memory, sm) in SHARES.items():
        kube.create(
            RESOURCE_CLAIM,
            shared_claim(pod_name, "gpu-timeslicing", share_percent=50, card=A30_FIRST),
            namespace=namespace,
        )
        run_and_show(
            kube,
            control_plane,
            namespace,
            with_usage(claim_pod(pod_name, pod_name, node=node, script=HOLD_THE_CARD), memory, sm),
        )
        claims[pod_name] = pod_name
    mig = with_usage(gpu_pod("mig-user", "mig-1g", node=node, script=HOLD_THE_CARD), *MIG)
    run_and_show(kube, control_plane, namespace, mig)
    extended = status_of(kube.get(POD, "mig-user", namespace)).extended_resource_claim_status
    assert extended is not None, "the scheduler made no claim for the extended resource"
    claims["mig-user"] = extended.resource_claim_name
    yield claims
    for pod_name in claims:
        kube.delete(POD, pod_name, namespace)
    wait_until(lambda: not checkpoint(gpu_node.node), timeout=120, what="the claims to be unprepared")


def test_each_pod_on_a_shared_card_and_a_mig_device_gets_its_own_series_which_go_with_it(
    kube: KubeClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_node: GpuComponents,
    workloads: dict[str, str],
    tmp_path: Path,
    unique: str,
) -> None:
    def attributed() -> Series | None:
        series = scrape(gpu_node)
        names = [
            p for p in workloads if value(series, "gpu_process_count", namespace=namespace, pod=p) is not None
        ]
        return series if len(names) == len(workloads) else None

    wait_until(lambda: attributed() is not None, timeout=60, what="a series for each of the three Pods")
    series = attributed()
    assert series is not None

    card_uuid = None
    for pod_name, (memory, sm) in SHARES.items():
        labels = {"namespace": namespace, "pod": pod_name, "container": "main", "claim": workloads[pod_name]}
        assert value(series, "gpu_process_count", **labels, attribution="pod") == 1
        assert value(series, "gpu_process_memory_bytes", **labels) == memory * MIB
        assert value(series, "gpu_process_sm_utilization_ratio", **labels) == pytest.approx(sm / 100)
        uuids = {
            dict(ls)["UUID"]
            for (n, ls) in series
            if n == "gpu_process_count" and dict(ls).get("pod") == pod_name
        }
        [uuid] = uuids
        assert uuid.startswith("GPU-")
        card_uuid = card_uuid or uuid
        assert uuid == card_uuid  # both shares on the one card
    mig_labels = {
        "namespace": namespace,
        "pod": "mig-user",
        "container": "main",
        "claim": workloads["mig-user"],
    }
    assert value(series, "gpu_process_memory_bytes", **mig_labels) == MIG[0] * MIB
    assert value(series, "gpu_process_sm_utilization_ratio", **mig_labels) is None  # none sampled in MIG mode
    [mig_uuid] = {
        dict(ls)["UUID"]
        for (n, ls) in series
        if n == "gpu_process_count" and dict(ls).get("pod") == "mig-user"
    }
    assert mig_uuid.startswith("MIG-")
    assert (
        value(
            series,
            "gpu_dra_device_memory_used_bytes",
            namespace=namespace,
            claim=workloads["mig-user"],
            UUID=mig_uuid,
        )
        == MIG[0] * MIB
    )

    # Energy: the card's energy since both ran, shared 30:60 by SM share.
    def energy(series: Series, pod_name: str) -> float:
        found = value(series, "gpu_process_energy_joules_total", namespace=namespace, pod=pod_name)
        return found or 0.0

    wait_until(lambda: energy(scrape(gpu_node), "user-a") > 0, timeout=30, what="energy to be attributed")
    before = scrape(gpu_node)
    wait_until(
        lambda: energy(scrape(gpu_node), "user-a") > energy(before, "user-a") + 1,
        timeout=30,
        what="more energy to be attributed",
    )
    after = scrape(gpu_node)
    ratio = (energy(after, "user-b") - energy(before, "user-b")) / (
        energy(after, "user-a") - energy(before, "user-a")
    )
    assert ratio == pytest.approx(SHARES["user-b"][1] / SHARES["user-a"][1], rel=0.10)

    # The claim's status: its own Pod only, read as kubectl gpu top reads it (the device's data
    # carries its identity from Prepare on, its usage once a sample saw the Pod).
    def usage_of(claim_name: str) -> DeviceUsage | None:
        claim = RESOURCE_CLAIM.encode(kube.get(RESOURCE_CLAIM, claim_name, namespace))
        usages = [s.usage for s in device_samples(claim) if s.usage is not None]
        return usages[0] if usages else None

    wait_until(lambda: usage_of("user-b") is not None, timeout=30, what="the claim's usage in its status")
    usage = usage_of("user-b")
    assert usage is not None
    assert [(c.pod, c.container, c.memory_bytes) for c in usage.containers] == [
        ("user-b", "main", 3072 * MIB)
    ]
    assert usage.uuid == card_uuid

    # What a namespace user sees from a laptop: kubectl gpu over the same claims.
    user = namespace_user(kube, control_plane, namespace, tmp_path)
    kubectl_gpu_on_the_node(kube, control_plane, user, workloads, f"attr-{unique}")

    # Deleting a Pod takes its series away; the others stay.
    kube.delete(POD, "user-a", namespace)

    def user_a_gone() -> bool:
        try:
            kube.get(POD, "user-a", namespace)
            return False
        except NotFoundError:
            return value(scrape(gpu_node), "gpu_process_count", namespace=namespace, pod="user-a") is None

    wait_until(user_a_gone, timeout=90, what="user-a's series to go with the Pod")
    assert value(scrape(gpu_node), "gpu_process_count", namespace=namespace, pod="user-b") == 1
    del workloads["user-a"]
    assert name_of(kube.get(POD, "user-b", namespace)) == "user-b"


def kubectl_gpu_on_the_node(
    kube: KubeClient,
    control_plane: ControlPlane,
    user: User,
    claims: dict[str, str],
    release: str,
) -> None:
    """``top`` shows each Pod's sample as gpu-handler wrote it, ``who`` what each claim holds,
    ``explain`` (with the chart's viewer role) why a third share of the full card cannot be had."""

    def top_rows() -> dict[str, dict[str, Any]]:
        run = user.run("top", "-o", "json")
        assert run.code == 0, run.err
        return {i["pod"]: i for i in json.loads(run.out)["items"] if i.get("memoryBytes")}

    wait_until(
        lambda: set(top_rows()) == set(claims), timeout=30, what="kubectl gpu top to show the three Pods"
    )
    rows = top_rows()
    for pod_name, (memory, sm) in SHARES.items():
        assert (rows[pod_name]["claim"], rows[pod_name]["memoryBytes"]) == (claims[pod_name], memory * MIB)
        assert rows[pod_name]["smUtilizationPercent"] == sm
    assert rows["mig-user"]["memoryBytes"] == MIG[0] * MIB
    assert rows["mig-user"].get("smUtilizationPercent") is None

    who = user.run("who", "-o", "json")
    assert who.code == 0, who.err
    held = {i["claim"]: i for i in json.loads(who.out)["items"]}
    assert set(held) == set(claims.values())
    assert held["user-a"]["pods"] == ["user-a"]
    assert held["user-a"]["device"] == held["user-b"]["device"]  # two shares of one card

    kube.create(
        RESOURCE_CLAIM,
        shared_claim("third", "gpu-timeslicing", share_percent=50, card=A30_FIRST),
        namespace=user.namespace,
    )
    with bind_viewer_role(control_plane, user, release):
        explained = user.run("explain", "third")
    assert explained.code == 5, explained.out + explained.err  # not allocatable now
    # The shared offer of the first A30 is there, and full: the two shares hold all of it, and the
    # details say so by naming them (the caller may read its own namespace's claims).
    [full] = [line for line in explained.out.splitlines() if "gpu-0000-3b-00-0-ts:" in line]
    assert "no sharePercent left: held by" in full, explained.out
    assert f"Pod {user.namespace}/user-a" in full, full
    assert f"Pod {user.namespace}/user-b" in full, full
    assert "result: NOT allocatable" in explained.out
