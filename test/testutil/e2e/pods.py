"""Pods for the e2e tier: built from the client's models, run to completion, their logs read."""

from __future__ import annotations

from kubernetes.client import V1Container, V1ObjectMeta, V1Pod, V1PodSpec

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.images import BUSYBOX_IMAGE
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD
from testutil.k8s_fields import name_of, status_of


def shell_pod(name: str, script: str, *, node: str, **spec: object) -> V1Pod:
    """A Pod that runs ``script`` in the local busybox image on ``node`` and then stops."""
    return V1Pod(
        metadata=V1ObjectMeta(name=name),
        spec=V1PodSpec(
            node_selector={"kubernetes.io/hostname": node},
            restart_policy="Never",
            termination_grace_period_seconds=1,
            containers=[
                V1Container(
                    name="main", image=BUSYBOX_IMAGE, image_pull_policy="Never", command=["sh", "-c", script]
                )
            ],
            **spec,
        ),
    )


def run_to_completion(kube: KubeClient, namespace: str, pod: V1Pod, *, timeout: float = 90.0) -> V1Pod:
    """Creates ``pod`` and waits until it has Succeeded or Failed; returns its last state."""
    kube.create(POD, pod, namespace=namespace)
    name = name_of(pod)
    wait_until(
        lambda: status_of(kube.get(POD, name, namespace)).phase in ("Succeeded", "Failed"),
        timeout=timeout,
        what=f"Pod {namespace}/{name} to finish",
    )
    return kube.get(POD, name, namespace)


def logs(plane: ControlPlane, namespace: str, pod: str) -> str:
    """The container's log, the way a user reads it: apiserver → kubelet, with certificates."""
    return plane.kubectl("logs", "-n", namespace, pod)
