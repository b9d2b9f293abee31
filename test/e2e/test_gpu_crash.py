"""Crash safety of Prepare and Unprepare: SIGKILL at every crash point, restart, and the node
converges.

For each step of the Prepare and Unprepare pipelines (their crash points,
``setup.PREPARE_POINTS``/``UNPREPARE_POINTS``), gpu-handler is restarted with
``GPU_HANDLER_CRASH_AT`` naming it; the kubelet's call makes it kill itself right after that step
(no rollback, no cleanup, as a power loss would); it is started again without the variable; the
kubelet retries (or start-up reconciliation finishes the job); and the node must end up exactly as
if nothing had happened: one MIG device per prepared claim, one CDI spec per prepared claim, a
checkpoint that says so — and after the Pod is gone, nothing at all. An MPS share is crashed at the
steps that start and stop its card's daemon: no daemon without a share, none left changed once
the share is gone.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from testutil.e2e.gpu_nodes import (
    card_state,
    cdi_specs,
    checkpoint,
    claim_pod,
    crashed,
    gpu_instances,
    gpu_pod,
    mps_daemon,
    normal_handler,
    pod_gone,
    restart_handler,
    run_and_show,
    run_shared,
    shared_claim,
)

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM
from pkg.gpuhandler.preparation.setup import PREPARE_POINTS, UNPREPARE_POINTS


@pytest.fixture
def handler(gpu_node: GpuComponents) -> Iterator[GpuComponents]:
    yield from normal_handler(gpu_node)


def _one_prepared_claim(components: GpuComponents) -> None:
    node = components.node
    claims = checkpoint(node)
    assert len(claims) == 1, claims
    [(uid, record)] = claims.items()
    assert record["state"] == "PrepareCompleted"
    [device] = record["devices"]
    assert gpu_instances(node) == {device["card"]: [(14, device["mig"]["placementStart"])]}
    assert cdi_specs(node) == [f"k8s.gpu.deckhouse.io-claim_{uid}.json"]


def _nothing_left(components: GpuComponents) -> bool:
    node = components.node
    return not checkpoint(node) and not gpu_instances(node) and not cdi_specs(node)


@pytest.mark.parametrize("step", PREPARE_POINTS)
def test_a_crash_after_each_prepare_step_converges(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, handler: GpuComponents, step: str
) -> None:
    restart_handler(handler, crash_at=f"prepare:{step}:after")
    pod = gpu_pod("crash", "mig-1g", node=handler.node.name)
    kube.create(POD, pod, namespace=namespace)
    crashed(handler)

    restart_handler(handler)
    wait_until(
        lambda: "shown" in control_plane.kubectl("logs", "-n", namespace, "crash", check=False),
        timeout=180,
        what="the kubelet's retry to start the Pod",
    )

    _one_prepared_claim(handler)
    kube.delete(POD, "crash", namespace)
    wait_until(lambda: _nothing_left(handler), timeout=90, what="the claim to be unprepared")


@pytest.mark.parametrize("step", UNPREPARE_POINTS)
def test_a_crash_after_each_unprepare_step_converges(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, handler: GpuComponents, step: str
) -> None:
    run_and_show(kube, control_plane, namespace, gpu_pod("running", "mig-1g", node=handler.node.name))
    _one_prepared_claim(handler)
    restart_handler(handler, crash_at=f"unprepare:{step}:after")

    kube.delete(POD, "running", namespace)
    crashed(handler)
    restart_handler(handler)

    wait_until(
        lambda: pod_gone(kube, namespace, "running"), timeout=120, what="the Pod to finish terminating"
    )
    wait_until(lambda: _nothing_left(handler), timeout=90, what="the node to be clean again")


MPS_CARD = "0000:d8:00.0"


def _mps_nothing_left(components: GpuComponents) -> bool:
    node = components.node
    return (
        not checkpoint(node)
        and not cdi_specs(node)
        and mps_daemon(components, MPS_CARD) is None
        and not (components.mps_root / MPS_CARD).exists()
        and card_state(node, MPS_CARD).get("compute_mode", 0) == 0
    )


def _mps_share_running(components: GpuComponents) -> None:
    [record] = checkpoint(components.node).values()
    assert record["state"] == "PrepareCompleted"
    assert mps_daemon(components, MPS_CARD) is not None
    assert card_state(components.node, MPS_CARD)["compute_mode"] == 3  # EXCLUSIVE_PROCESS


def test_a_crash_after_an_mps_share_started_its_daemon_converges(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, handler: GpuComponents
) -> None:
    restart_handler(handler, crash_at="prepare:prepare-devices:after")
    kube.create(
        RESOURCE_CLAIM, shared_claim("mps", "gpu-mps", share_percent=40, card=MPS_CARD), namespace=namespace
    )
    kube.create(POD, claim_pod("mps", "mps", node=handler.node.name), namespace=namespace)
    crashed(handler)
    assert mps_daemon(handler, MPS_CARD) is not None  # started, never recorded as prepared

    restart_handler(handler)
    wait_until(
        lambda: "shown" in control_plane.kubectl("logs", "-n", namespace, "mps", check=False),
        timeout=180,
        what="the kubelet's retry to start the Pod",
    )

    _mps_share_running(handler)
    assert "THREADS=40" in control_plane.kubectl("logs", "-n", namespace, "mps")
    kube.delete(POD, "mps", namespace)
    wait_until(lambda: _mps_nothing_left(handler), timeout=90, what="the share and its daemon to go")


def test_a_crash_after_the_last_mps_share_stopped_its_daemon_converges(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, handler: GpuComponents
) -> None:
    claim = shared_claim("mps", "gpu-mps", share_percent=40, card=MPS_CARD)
    run_shared(kube, control_plane, namespace, claim, node=handler.node.name)
    _mps_share_running(handler)
    restart_handler(handler, crash_at="unprepare:release-claim:after")

    kube.delete(POD, "mps", namespace)
    crashed(handler)
    restart_handler(handler)

    wait_until(lambda: pod_gone(kube, namespace, "mps"), timeout=120, what="the Pod to finish terminating")
    wait_until(lambda: _mps_nothing_left(handler), timeout=90, what="the node to be clean again")
