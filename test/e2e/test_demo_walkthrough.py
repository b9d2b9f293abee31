"""The README's quick start on real nodes: every sample Pod of ``config/samples`` runs unchanged, and
``kubectl gpu explain`` says why the one that cannot be satisfied stays Pending.

The walkthrough is the demo's (``make demo DEMO_ARGS=--keep-running``, then the README's steps): the
same three nodes (2 x A30; an H100 and an L4; a VM host with 2 x T4 under NVIDIA's vGPU manager),
the sample DeviceClasses, gpu-dra-controller serving ``explain``, and the sample files applied as a
newcomer applies them, with nothing edited but the namespace: the MIG sample first, waited for until
it is scheduled, then the rest at once (the order that leaves the MIG Pod a card that can cut a MIG
device). Which samples, in what order, and what each one's log proves is
:mod:`pkg.devcluster.samples`, the list the demo prints.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import V1Namespace, V1ObjectMeta

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.processes import ManagedProcess, free_port, ready, wait_until
from pkg.devcluster.samples import (
    ASKED_WHOLE_CARDS,
    RUNNABLE,
    SCHEDULED_FIRST,
    UNSATISFIABLE,
    WAIT_SCHEDULED_FIRST,
)
from pkg.framework.client import AlreadyExistsError, KubeClient
from pkg.framework.client.builtin_kinds import NAMESPACE

DRIVER = "gpu.deckhouse.io"
LEASE_NAMESPACE = "walkthrough-dra-controller"
EXPLAIN_NOT_ALLOCATABLE = 5  # kubectl gpu's exit code (docs/kubectl-gpu.md)


@pytest.fixture(scope="module")
def dra_controller(
    kube: KubeClient, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagedProcess]:
    """gpu-dra-controller as the demo runs it: it answers ``kubectl gpu explain``."""
    with contextlib.suppress(AlreadyExistsError):
        kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=LEASE_NAMESPACE)))
    port = free_port()
    proc = ManagedProcess(
        name="gpu-dra-controller",
        argv=[
            sys.executable,
            "-m",
            "pkg.app.gpu_dra_controller",
            f"--kubeconfig={control_plane.kubeconfig}",
            f"--metrics-bind-address=127.0.0.1:{port}",
            f"--leader-election-namespace={LEASE_NAMESPACE}",
            "--leader-election-id=gpu-dra-controller-walkthrough",
        ],
        log_path=tmp_path_factory.mktemp("walkthrough") / "gpu-dra-controller.log",
    )
    proc.start()
    try:
        wait_until(lambda: ready(port), timeout=60, what="gpu-dra-controller ready", process=proc)
        yield proc
    finally:
        proc.stop()


def kubectl_gpu(plane: ControlPlane, *args: str) -> tuple[int, str, float]:
    """``kubectl gpu ARGS`` as a user runs it (the plugin, the cluster's kubeconfig): exit code,
    what it printed, and how long it took."""
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig)}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pkg.app.kubectlgpu", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def whole_cards_per_node(plane: ControlPlane) -> Counter[str]:
    """The devices the gpu-physical class selects (exclusive whole cards, not a VM host's), counted
    per node."""
    slices = json.loads(plane.kubectl("get", "resourceslices", "-o", "json"))["items"]
    per_node: Counter[str] = Counter()
    for resource_slice in slices:
        spec = resource_slice["spec"]
        if spec.get("driver") != DRIVER:
            continue
        for device in spec.get("devices") or []:
            attrs = {key.rsplit("/", 1)[-1]: value for key, value in (device.get("attributes") or {}).items()}
            kind = attrs.get("deviceType", {}).get("string")
            strategy = attrs.get("sharingStrategy", {}).get("string")
            if kind == "Physical" and strategy == "Exclusive" and "vmOnly" not in attrs:
                per_node[spec.get("nodeName", "")] += 1
    return per_node


def apply(plane: ControlPlane, namespace: str, sample: Path) -> None:
    plane.kubectl("apply", "-n", namespace, "-f", str(sample))


@pytest.mark.timeout(900)  # the first test of a session may wait for another run's real nodes
@pytest.mark.usefixtures("gpu_node", "gpu_node_b", "gpu_node_vgpu", "dra_controller")
def test_every_sample_runs_and_explain_names_why_the_unsatisfiable_one_waits(
    control_plane: ControlPlane, namespace: str
) -> None:
    apply(control_plane, namespace, SCHEDULED_FIRST.path)
    control_plane.kubectl(*WAIT_SCHEDULED_FIRST, "-n", namespace)
    for sample in RUNNABLE:
        if sample != SCHEDULED_FIRST:
            apply(control_plane, namespace, sample.path)
    apply(control_plane, namespace, UNSATISFIABLE.path)

    for sample in RUNNABLE:

        def shown(pod: str = sample.pod, line: str = sample.shows) -> bool:
            return line in control_plane.kubectl("logs", "-n", namespace, pod, check=False)

        wait_until(
            shown, timeout=120, what=f"sample {sample.file}: Pod {sample.pod} to run and log {sample.shows!r}"
        )

    phase = control_plane.kubectl(
        "get", "pod", "-n", namespace, UNSATISFIABLE.pod, "-o", "jsonpath={.status.phase}"
    )
    assert phase == "Pending"

    # The cause, in the user's words: the cards asked, how many match in the cluster, the most on one node.
    per_node = whole_cards_per_node(control_plane)
    matching, most = sum(per_node.values()), max(per_node.values())
    assert most < ASKED_WHOLE_CARDS <= matching, (
        f"the cluster no longer makes the sample unsatisfiable: {per_node}"
    )
    code, out, took = kubectl_gpu(control_plane, "explain", f"pod/{UNSATISFIABLE.pod}", "-n", namespace)
    assert code == EXPLAIN_NOT_ALLOCATABLE, out
    numbers = (ASKED_WHOLE_CARDS, matching, most)
    assert any(all(re.search(rf"\b{n}\b", line) for n in numbers) for line in out.splitlines()), (
        f"no line names {ASKED_WHOLE_CARDS} asked, {matching} matching, {most} on one node:\n{out}"
    )
    assert took < 10, f"explain took {took:.1f}s"

    # A running sample is not pending on GPUs, and explain says so instead of failing.
    code, out, _ = kubectl_gpu(control_plane, "explain", f"pod/{RUNNABLE[0].pod}", "-n", namespace)
    assert code == 0, out
    assert "Running" in out

    for sample in (*RUNNABLE, UNSATISFIABLE):
        control_plane.kubectl(
            "delete", "-n", namespace, "--wait=true", "--timeout=90s", "-f", str(sample.path)
        )
