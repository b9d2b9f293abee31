"""gpu-controller as a process for integration tests, and GPU validator Pods whose status the test
sets (no kubelet runs here: the test plays the kubelet reporting the validator's state)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from kubernetes.client import (
    V1Container,
    V1ContainerState,
    V1ContainerStateTerminated,
    V1ContainerStateWaiting,
    V1ContainerStatus,
    V1ObjectMeta,
    V1Pod,
    V1PodCondition,
    V1PodSpec,
    V1PodStatus,
)

from pkg.devcluster.processes import free_port
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import POD
from pkg.gpucontroller.names import LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY, Component
from testutil.integration.process_helpers import running

VALIDATOR_LABELS = {LABEL_COMPONENT: Component.VALIDATOR.value, LABEL_MANAGED_BY: MANAGED_BY}


@contextmanager
def gpu_controller(
    kubeconfig: str,
    namespace: str,
    *,
    log_path: Path,
    metrics_port: int | None = None,
    args: Sequence[str] = (),
) -> Iterator[subprocess.Popen[bytes]]:
    """gpu-controller with its node components in ``namespace`` (its Lease there too)."""
    flags = [
        f"--kubeconfig={kubeconfig}",
        f"--metrics-bind-address=127.0.0.1:{metrics_port or free_port()}",
        f"--leader-election-namespace={namespace}",
        f"--components-namespace={namespace}",
        *args,
    ]
    with running("pkg.app.gpu_controller", flags, log_path=log_path) as proc:
        yield proc


def create_validator_pod(kube: KubeClient, namespace: str, node: str, name: str = "validator") -> V1Pod:
    """A validator Pod bound to ``node``, as the DaemonSet controller would create it."""
    pod = V1Pod(
        metadata=V1ObjectMeta(name=name, labels=dict(VALIDATOR_LABELS)),
        spec=V1PodSpec(
            node_name=node,
            init_containers=[V1Container(name="driver-validation", image="validator")],
            containers=[V1Container(name="validator", image="validator")],
        ),
    )
    return kube.create(POD, pod, namespace=namespace)


def report_validator(
    kube: KubeClient,
    namespace: str,
    name: str = "validator",
    *,
    ready: bool,
    init_failure: str | None = None,
    message: str = "",
) -> V1Pod:
    """Writes the Pod status a kubelet would: Ready after a passed validation; not Ready with the
    validation container failing as ``init_failure`` (a waiting reason, or ``Error``: exited 1)."""
    pod = kube.get(POD, name, namespace)
    if init_failure == "Error":
        state = V1ContainerState(
            terminated=V1ContainerStateTerminated(exit_code=1, reason="Error", message=message)
        )
    elif init_failure is not None:
        state = V1ContainerState(waiting=V1ContainerStateWaiting(reason=init_failure, message=message))
    else:
        state = V1ContainerState(terminated=V1ContainerStateTerminated(exit_code=0, reason="Completed"))
    pod.status = V1PodStatus(
        phase="Running" if ready else "Pending",
        conditions=[V1PodCondition(type="Ready", status="True" if ready else "False")],
        init_container_statuses=[
            V1ContainerStatus(
                name="driver-validation", image="validator", image_id="", ready=init_failure is None,
                restart_count=0, state=state,
            )
        ],
    )  # fmt: skip
    return kube.update_status(POD, pod)


def delete_now(kube: KubeClient, namespace: str, name: str = "validator") -> None:
    """Deletes a Pod at once (no kubelet would ever confirm a graceful deletion here)."""
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    with suppress(NotFoundError):
        kube.raw("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body=body)
