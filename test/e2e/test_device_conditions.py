"""Each device's ``Ready`` and ``Healthy`` conditions on a real node, as a user reads them: in
``kubectl get resourceclaim -o yaml`` and in ``kubectl gpu explain pod/...`` and ``who -o wide``.

* A Prepare that fails on the node (a whole card whose device node ``/dev/nvidiaN`` is missing,
  as on a host whose driver has not made it yet) leaves the Pod in ContainerCreating; the claim
  says ``Ready=False`` with the failure's reason and message, and ``kubectl gpu explain`` says it
  first. Once the device node is back the kubelet's retry succeeds: the Pod runs, the claim says
  ``Ready=True`` and carries the device's identity.
* A device that becomes unhealthy (an XID injected into the simulated driver gpu-handler reads
  through its NVML event set, as :mod:`test_gpu_health` does) says ``Healthy=False`` with the
  XID's reason, and ``Healthy=True`` again after the card's reset and the quiet period.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1CELDeviceSelector,
    V1DeviceClaim,
    V1DeviceRequest,
    V1DeviceSelector,
    V1ExactDeviceRequest,
    V1ObjectMeta,
    V1ResourceClaimSpec,
)
from testutil.e2e.gpu_nodes import (
    DRIVER,
    SHOW_DEVICES,
    checkpoint,
    claim_pod,
    pod_gone,
)
from testutil.k8s_fields import status_of

from pkg.backends.simulated.driver_memory import SimulatedDriverMemory
from pkg.backends.simulated.events import inject_event, recover
from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.node import RealNode
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM

CARDS = ("0000:3b:00.0", "0000:d8:00.0")  # the a30-x2 host's


def _our_entry(plane: ControlPlane, namespace: str, claim: str) -> dict[str, Any]:
    """Our driver's one entry of the claim's ``status.devices``, read as a user does
    (``kubectl get resourceclaim -o yaml``); empty until gpu-handler wrote one."""
    raw = yaml.safe_load(plane.kubectl("get", "resourceclaim", "-n", namespace, claim, "-o", "yaml"))
    entries = [e for e in (raw.get("status") or {}).get("devices") or [] if e.get("driver") == DRIVER]
    assert len(entries) <= 1, f"claim {claim} holds one device of ours: {entries}"
    return entries[0] if entries else {}


def _condition(entry: dict[str, Any], kind: str) -> tuple[str, str, str]:
    """(status, reason, message) of the entry's condition ``kind``; empty strings while absent."""
    for c in entry.get("conditions") or []:
        if c.get("type") == kind:
            return str(c.get("status")), str(c.get("reason")), str(c.get("message") or "")
    return "", "", ""


def _kubectl_gpu(plane: ControlPlane, *args: str) -> tuple[int, str]:
    """``kubectl gpu ARGS`` as a user runs it: the plugin with the cluster's kubeconfig."""
    done = subprocess.run(
        [sys.executable, "-m", "pkg.app.kubectlgpu", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(plane.kubeconfig)},
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def _delete(kube: KubeClient, namespace: str, *names: str) -> None:
    """Deletes the Pods and then the claims of the same names; waits for the Pods to go."""
    for name in names:
        with contextlib.suppress(NotFoundError):
            kube.delete(POD, name, namespace)
    for name in names:
        wait_until(functools.partial(pod_gone, kube, namespace, name), timeout=90, what=f"Pod {name} to go")
        with contextlib.suppress(NotFoundError):
            kube.delete(RESOURCE_CLAIM, name, namespace)


def _hide_card_nodes(node: RealNode) -> list[Path]:
    """Moves the node's card device nodes (``/dev/nvidiaN``) aside, as on a host whose driver has
    not made them yet; returns where they went, for :func:`_restore`."""
    moved = []
    for path in sorted(node.host.dev.iterdir()):
        if re.fullmatch(r"nvidia\d+", path.name):
            moved.append(path.rename(path.with_name(path.name + ".away")))
    return moved


def _restore(moved: list[Path]) -> None:
    for path in moved:
        if path.exists():
            path.rename(path.with_name(path.name.removesuffix(".away")))


def test_a_failed_prepare_shows_ready_false_with_its_reason_and_ready_true_once_it_succeeds(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node: GpuComponents
) -> None:
    node = gpu_node.node
    moved = _hide_card_nodes(node)
    assert moved, f"no /dev/nvidiaN on {node.name}"
    try:
        kube.create(RESOURCE_CLAIM, _whole_card_claim("stuck"), namespace=namespace)
        kube.create(
            POD, claim_pod("stuck", "stuck", node=node.name, script=SHOW_DEVICES), namespace=namespace
        )

        wait_until(
            lambda: (
                _condition(_our_entry(control_plane, namespace, "stuck"), "Ready")[:2]
                == ("False", "DeviceNodeMissing")
            ),
            timeout=120,
            what="Ready=False DeviceNodeMissing in claim stuck's status.devices",
            process=gpu_node.handler,
        )
        _, _, message = _condition(_our_entry(control_plane, namespace, "stuck"), "Ready")
        assert "is missing" in message, message
        assert status_of(kube.get(POD, "stuck", namespace)).phase == "Pending"

        code, out = _kubectl_gpu(control_plane, "explain", "pod/stuck", "-n", namespace)
        assert code == 0, out
        first = out.splitlines()[0]
        assert first.startswith(f"pod {namespace}/stuck: Prepare of device "), out  # the cause first
        assert f"failed on node {node.name}: DeviceNodeMissing: " in first, out
        assert "Ready=False DeviceNodeMissing" in out, out
        code, out = _kubectl_gpu(control_plane, "who", "-n", namespace, "-o", "wide")
        assert code == 0, out
        assert "NotReady(DeviceNodeMissing)" in out, out

        # The cause goes (the device nodes are back): the kubelet's retry of Prepare succeeds.
        _restore(moved)
        wait_until(
            lambda: "shown" in control_plane.kubectl("logs", "-n", namespace, "stuck", check=False),
            timeout=240,
            what="Pod stuck to run once the device nodes are back",
        )
        wait_until(
            lambda: (
                _condition(_our_entry(control_plane, namespace, "stuck"), "Ready")[:2] == ("True", "Prepared")
            ),
            timeout=60,
            what="Ready=True Prepared in claim stuck's status.devices",
            process=gpu_node.handler,
        )
        data = _our_entry(control_plane, namespace, "stuck").get("data") or {}
        assert data.get("pciBusID") in CARDS, data
        assert str(data.get("uuid") or "").startswith("GPU-"), data
        assert data.get("physicalGPU"), data
        code, out = _kubectl_gpu(control_plane, "explain", "pod/stuck", "-n", namespace)
        assert code == 0, out
        assert out.startswith(f"pod {namespace}/stuck is not pending on GPUs: it is Running"), out
        assert "Ready=True Prepared" in out, out
        assert f"UUID {data['uuid']}" in out, out
    finally:
        _restore(moved)
        _delete(kube, namespace, "stuck")
        wait_until(
            lambda: not any(r["name"] == "stuck" for r in checkpoint(node).values()),
            timeout=90,
            what="the kubelet to unprepare claim stuck",
        )


def _whole_card_claim(name: str) -> ResourceV1ResourceClaim:
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name=name),
        spec=V1ResourceClaimSpec(
            devices=V1DeviceClaim(
                requests=[
                    V1DeviceRequest(
                        name="gpu",
                        exactly=V1ExactDeviceRequest(
                            device_class_name="gpu-physical",
                            selectors=[V1DeviceSelector(cel=V1CELDeviceSelector(expression="true"))],
                        ),
                    )
                ]
            )
        ),
    )


def test_an_unhealthy_device_shows_healthy_false_and_healthy_true_after_recovery(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node: GpuComponents
) -> None:
    node = gpu_node.node
    driver = SimulatedDriverMemory(node.host.nvml_state / "driver")
    try:
        kube.create(RESOURCE_CLAIM, _whole_card_claim("sick"), namespace=namespace)
        kube.create(POD, claim_pod("sick", "sick", node=node.name, script=SHOW_DEVICES), namespace=namespace)
        wait_until(
            lambda: "shown" in control_plane.kubectl("logs", "-n", namespace, "sick", check=False),
            timeout=90,
            what="the Pod to run",
        )
        [record] = [r for r in checkpoint(node).values() if r["name"] == "sick"]
        card = record["devices"][0]["card"]
        wait_until(
            lambda: (
                _condition(_our_entry(control_plane, namespace, "sick"), "Healthy")[:2] == ("True", "Healthy")
            ),
            timeout=60,
            what="Healthy=True in claim sick's status.devices",
        )
        assert _condition(_our_entry(control_plane, namespace, "sick"), "Ready")[:2] == ("True", "Prepared")

        # XID 94 (a contained ECC error) degrades the card; the running Pod stays.
        inject_event(driver, card, xid=94)
        wait_until(
            lambda: (
                _condition(_our_entry(control_plane, namespace, "sick"), "Healthy")[:2]
                == ("False", "Xid94ContainedEccError")
            ),
            timeout=60,
            what="Healthy=False Xid94ContainedEccError in claim sick's status.devices",
        )
        code, out = _kubectl_gpu(control_plane, "explain", "pod/sick", "-n", namespace)
        assert code == 0, out
        first = out.splitlines()[0]
        assert first.startswith(f"pod {namespace}/sick: device "), out
        assert "is unhealthy: Xid94ContainedEccError" in first, out
        assert "Healthy=False Xid94ContainedEccError" in out, out
        code, out = _kubectl_gpu(control_plane, "who", "-n", namespace, "-o", "wide")
        assert "Unhealthy(Xid94ContainedEccError)" in out, out

        # The card is reset: after the quiet period the device is healthy again.
        recover(driver, card)
        wait_until(
            lambda: (
                _condition(_our_entry(control_plane, namespace, "sick"), "Healthy")[:2] == ("True", "Healthy")
            ),
            timeout=90,
            what="Healthy=True again after the card's recovery",
        )
        code, out = _kubectl_gpu(control_plane, "explain", "pod/sick", "-n", namespace)
        assert code == 0, out
        assert out.startswith(f"pod {namespace}/sick is not pending on GPUs: it is Running"), out
        assert "Ready=True Prepared" in out, out
        assert "Healthy=True Healthy" in out, out
        code, out = _kubectl_gpu(control_plane, "who", "-n", namespace, "-o", "wide")
        assert " Ready " in out, out
    finally:
        for c in CARDS:
            recover(driver, c)
        _delete(kube, namespace, "sick")
        wait_until(
            lambda: not any(r["name"] == "sick" for r in checkpoint(node).values()),
            timeout=90,
            what="the kubelet to unprepare claim sick",
        )
