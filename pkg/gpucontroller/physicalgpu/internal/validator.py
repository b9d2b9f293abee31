"""What the GPU validator's Pods on a node say about its driver: the ``DriverReady`` verdict.

``DriverReady`` is the readiness of the validator Pod on the card's node; the
files the validator writes under ``/run/nvidia/validations`` are never read. The mapping keeps the
three answers apart, because readers act on them differently:

* **True** — a validator Pod on the node is Ready: its validation (an init container) succeeded
  and its readiness probe, if any, passes.
* **False** — the validator says the driver is *not* usable: the Pod failed, or one of its
  containers is stuck in a failure (``CrashLoopBackOff``, ``ErrImagePull``, an init container that
  exited with an error or runs again after one...). The condition carries the Pod's own reason and
  message, so ``kubectl get pgpu`` tells an operator what broke without reading the Pod.
* **Unknown** — nothing is known yet: no validator Pod on the node, the Pod is being deleted, or
  it is still starting. A node whose validator disappears goes back here.

A failed validation stays False while the kubelet retries it: an init container running again
after exiting with an error is not "in progress" but the same failure retried, and reporting
Unknown between the retries would flap the condition (and write the card's status) on every
restart of the crash loop.

During a rolling update a node may hold two validator Pods (the old one terminating): a Ready Pod
that is not being deleted wins; otherwise the newest live Pod speaks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from kubernetes.client import V1ContainerStatus, V1Pod

from pkg.framework.reconcile.conditions import ConditionStatus

REASON_VALIDATED: Final = "Validated"
REASON_PENDING: Final = "ValidationPending"
REASON_IN_PROGRESS: Final = "ValidationInProgress"
REASON_TERMINATING: Final = "ValidatorTerminating"
REASON_FAILED: Final = "ValidationFailed"

# Waiting reasons of a container that will not start without a change (kubelet's own words).
FAILED_WAITING: Final = frozenset(
    {
        "CrashLoopBackOff",
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "PreStartHookError",
        "PostStartHookError",
    }
)
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_MAX_MESSAGE = 1024
_EPOCH = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Verdict:
    """``DriverReady`` as the validator's Pods say it."""

    status: ConditionStatus
    reason: str
    message: str


def node_verdict(pods: Sequence[V1Pod], node: str) -> Verdict:
    """The verdict of the validator Pods on ``node`` (see the module docs)."""
    if not pods:
        return Verdict(ConditionStatus.UNKNOWN, REASON_PENDING, f"no GPU validator Pod on node {node} yet")
    live = [pod for pod in pods if not _deleting(pod)]
    if not live:
        return pod_verdict(pods[0])
    ready = [pod for pod in live if _ready(pod)]
    if ready:
        return pod_verdict(ready[0])
    newest = max(live, key=lambda pod: pod.metadata.creation_timestamp or _EPOCH if pod.metadata else _EPOCH)
    return pod_verdict(newest)


def pod_verdict(pod: V1Pod) -> Verdict:
    """The verdict of one validator Pod."""
    name = _name(pod)
    if _deleting(pod):
        return Verdict(ConditionStatus.UNKNOWN, REASON_TERMINATING, f"validator Pod {name} is being deleted")
    if _ready(pod):
        return Verdict(ConditionStatus.TRUE, REASON_VALIDATED, f"validator Pod {name} is Ready")
    status = pod.status
    if status is not None and status.phase == "Failed":
        return _false(status.reason, f"validator Pod {name} failed: {status.message or 'no message'}")
    init = (status.init_container_statuses if status else None) or []
    main = (status.container_statuses if status else None) or []
    for container, role in [*((c, "init container") for c in init), *((c, "container") for c in main)]:
        failure = _container_failure(container, role)
        if failure is not None:
            reason, message = failure
            return _false(reason, f"validator Pod {name}: {message}")
    return Verdict(ConditionStatus.UNKNOWN, REASON_IN_PROGRESS, _progress(pod, name))


def _container_failure(container: V1ContainerStatus, role: str) -> tuple[str, str] | None:
    state = container.state
    last = container.last_state.terminated if container.last_state else None
    if state is not None and state.waiting is not None and state.waiting.reason in FAILED_WAITING:
        message = f"{role} {container.name} is {state.waiting.reason}"
        if state.waiting.message:
            message += f": {state.waiting.message}"
        if last is not None:
            message += f"; last run exited with code {last.exit_code}"
            if last.message:
                message += f": {last.message.strip()}"
        return state.waiting.reason, message
    retried = state is not None and state.running is not None and role == "init container"
    if retried and last is not None and last.exit_code != 0:
        message = f"{role} {container.name} is running again; last run exited with code {last.exit_code}"
        if last.message:
            message += f": {last.message.strip()}"
        return last.reason or REASON_FAILED, message
    terminated = state.terminated if state is not None else None
    if terminated is not None and terminated.exit_code != 0:
        message = f"{role} {container.name} exited with code {terminated.exit_code}"
        if terminated.message:
            message += f": {terminated.message.strip()}"
        return terminated.reason or REASON_FAILED, message
    return None


def _false(reason: str | None, message: str) -> Verdict:
    valid = reason if reason and _REASON.match(reason) else REASON_FAILED
    return Verdict(ConditionStatus.FALSE, valid, message[:_MAX_MESSAGE])


def _progress(pod: V1Pod, name: str) -> str:
    conditions = pod.status.conditions if pod.status else None
    ready = next((c for c in conditions or [] if c.type == "Ready"), None)
    phase = pod.status.phase if pod.status else None
    detail = (ready.message if ready and ready.message else None) or f"phase {phase or 'Pending'}"
    return f"validator Pod {name} is not Ready yet: {detail}"[:_MAX_MESSAGE]


def _ready(pod: V1Pod) -> bool:
    conditions = pod.status.conditions if pod.status else None
    return any(c.type == "Ready" and c.status == "True" for c in conditions or [])


def _deleting(pod: V1Pod) -> bool:
    return pod.metadata is not None and pod.metadata.deletion_timestamp is not None


def _name(pod: V1Pod) -> str:
    meta = pod.metadata
    return f"{meta.namespace}/{meta.name}" if meta else "?"
