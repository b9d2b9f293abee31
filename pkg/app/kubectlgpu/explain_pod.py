"""``kubectl gpu explain pod/NAME``: a pending Pod explained claim by claim.

Why per claim: the scheduler's verdict on a Pod is a count of nodes ("0/2 nodes are available: 2
cannot allocate all claims"); the cause is in one of its claims, and each claim is explained as
``kubectl gpu explain CLAIM`` explains it. Claims that exist are asked of gpu-dra-controller like a
named claim; a claim that does not exist yet (:mod:`.pod_claims`: a template not instantiated, the
scheduler's extended-resource claim) is computed here, because the controller answers only about
claims in its cache and nothing may be created to explain a Pod.

A Pod already scheduled waits for no allocation, but it may still wait for its devices: the
kubelet asks gpu-handler to prepare them before the containers start, and a Prepare that fails
leaves the Pod in ``ContainerCreating``. So for such a Pod its claims are read and the conditions
gpu-handler reports for each device (:mod:`.device_conditions`) are shown, a failed Prepare or an
unhealthy device first, as the cause.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pkg.app.kubectlgpu import device_conditions
from pkg.app.kubectlgpu.access import ForbiddenError, ObjectNotFoundError, Reader
from pkg.app.kubectlgpu.device_conditions import DeviceConditions
from pkg.app.kubectlgpu.explain import (
    LIST_KIND,
    Explained,
    Options,
    answer,
    claim_name,
    compute_here,
    report_item,
    required,
)
from pkg.app.kubectlgpu.pod_claims import PodClaim, not_pending_on_gpus, pod_claims, scheduler_message
from pkg.dra.explain.allocation_text import describe_allocation
from pkg.dra.explain.report import Report
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE

NO_GPU = "it asks for no GPU (no resource claim, no extended resource a DeviceClass backs)"


@dataclass(frozen=True)
class ClaimExplained:
    """One of the Pod's claims and its explanation."""

    claim: PodClaim
    name: str  # the claim's name (for one not created yet, the name we gave it)
    created: bool  # the claim exists as an object
    explained: Explained


@dataclass(frozen=True)
class ClaimDevices:
    """One claim of a scheduled Pod and the conditions of its devices, or why they are unknown."""

    claim: PodClaim
    name: str
    devices: list[DeviceConditions] = field(default_factory=list)
    unread: str | None = None  # why the claim could not be read

    @property
    def causes(self) -> list[str]:
        return device_conditions.cause_lines(self.devices)


@dataclass(frozen=True)
class PodExplained:
    namespace: str
    name: str
    not_pending: str | None = None  # why the Pod does not wait for devices
    scheduler: str | None = None  # what the scheduler last said about it
    claims: list[ClaimExplained] = field(default_factory=list)
    devices: list[ClaimDevices] = field(default_factory=list)  # of a scheduled Pod's claims

    @property
    def causes(self) -> list[str]:
        """Failed Prepares and unhealthy devices of a scheduled Pod: what to say first."""
        return [line for c in self.devices for line in c.causes]

    @property
    def allocatable(self) -> bool:
        return all(c.explained.report.allocatable for c in self.claims)


def explain_pod(reader: Reader, namespace: str, name: str, options: Options) -> PodExplained:
    pod = reader.get(POD, name, namespace)
    waits = not_pending_on_gpus(pod)
    if waits is not None:
        return PodExplained(namespace, name, not_pending=waits, devices=_scheduled_devices(reader, pod))
    said = scheduler_message(pod)

    def classes() -> list[Any]:
        from pkg.framework.client.builtin_kinds import DEVICE_CLASS  # noqa: PLC0415 - only for extended resources

        return required(lambda: reader.list_all(DEVICE_CLASS))

    claims = pod_claims(
        pod, template=lambda t: reader.get(RESOURCE_CLAIM_TEMPLATE, t, namespace), classes=classes
    )
    if not claims:
        return PodExplained(namespace, name, not_pending=NO_GPU, scheduler=said)
    return PodExplained(
        namespace, name, scheduler=said, claims=[_explain(reader, namespace, c, options) for c in claims]
    )


def _explain(reader: Reader, namespace: str, claim: PodClaim, options: Options) -> ClaimExplained:
    if claim.would_be is not None:
        return ClaimExplained(
            claim, claim_name(claim.would_be), False, compute_here(reader, claim.would_be, options)
        )
    name = str(claim.claim_name)
    try:
        read = reader.get(RESOURCE_CLAIM, name, namespace)
    except ObjectNotFoundError:
        missing = Report(
            text=f"ResourceClaim {namespace}/{name} does not exist: the Pod waits until it is created\n",
            allocatable=False,
            current=None,
        )
        return ClaimExplained(claim, name, False, Explained(missing))
    return ClaimExplained(claim, name, True, answer(reader, read, options))


def _scheduled_devices(reader: Reader, pod: Any) -> list[ClaimDevices]:
    """The conditions of the devices of a Pod past scheduling, claim by claim. Its claims all
    exist by then (the scheduler allocated them): nothing is built, no class or template read."""
    namespace = str(pod.metadata.namespace or "") if pod.metadata else ""
    claims = pod_claims(pod, template=_no_template, classes=list)
    return [_devices(reader, namespace, c) for c in claims if c.claim_name is not None]


def _no_template(name: str) -> Any:
    """A template's claim not made yet: nothing to read of it (its ``would_be`` is skipped)."""
    return RESOURCE_CLAIM_TEMPLATE.decode({"metadata": {"name": name}, "spec": {"spec": {}}})


def _devices(reader: Reader, namespace: str, claim: PodClaim) -> ClaimDevices:
    name = str(claim.claim_name)
    try:
        read = reader.get(RESOURCE_CLAIM, name, namespace)
    except (ObjectNotFoundError, ForbiddenError) as why:
        return ClaimDevices(claim, name, unread=str(why))
    return ClaimDevices(claim, name, device_conditions.of_object(read))


def render(result: PodExplained) -> str:
    """The text form: what the Pod waits for, then each claim under a heading of its own."""
    key = f"{result.namespace}/{result.name}"
    if result.not_pending is not None:
        return _render_scheduled(result)
    lines = [f"pod {key} is pending" + (f": {result.scheduler}" if result.scheduler else "") + "\n"]
    for c in result.claims:
        lines.append(f"\n== {c.claim.heading}\n")
        current = c.explained.report.current
        if current is not None:
            lines.append(
                f"note: {result.namespace}/{c.name} is already allocated: {describe_allocation(current)}\n"
            )
        lines.append(c.explained.report.text)
    return "".join(lines)


def _render_scheduled(result: PodExplained) -> str:
    """A Pod past scheduling: a failed Prepare or an unhealthy device first (the cause of a Pod
    stuck in ContainerCreating, or of a sick one), then where it stands, then its devices."""
    key = f"{result.namespace}/{result.name}"
    causes = result.causes
    lines = [f"pod {key}: {cause}\n" for cause in causes]
    state = "was allocated its GPUs" if causes else "is not pending on GPUs"
    lines.append(f"pod {key} {state}: {result.not_pending}\n")
    if result.scheduler:
        lines.append(f"the scheduler says: {result.scheduler}\n")
    for c in result.devices:
        lines.append(f"\n== {c.claim.heading}\n")
        if c.unread is not None:
            lines.append(f"cannot read it: {c.unread}\n")
        elif not c.devices:
            lines.append("no device of gpu.deckhouse.io is allocated to it\n")
        else:
            lines.append(device_conditions.section(c.devices))
    return "".join(lines)


def document(result: PodExplained) -> dict[str, Any]:
    """The ``-o json|yaml`` form: the same content, one item per claim, stable keys for scripts."""
    return {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": LIST_KIND,
        "pod": f"{result.namespace}/{result.name}",
        "pendingOnGPUs": result.not_pending is None,
        **({"reason": result.not_pending} if result.not_pending else {}),
        **({"scheduler": result.scheduler} if result.scheduler else {}),
        **({"causes": result.causes} if result.causes else {}),
        **({"devices": [d.to_item() for c in result.devices for d in c.devices]} if result.devices else {}),
        "items": [
            report_item(
                c.explained,
                namespace=result.namespace,
                claim=c.name,
                heading=c.claim.heading,
                source=c.claim.source,
                created=c.created,
            )
            for c in result.claims
        ],
    }
