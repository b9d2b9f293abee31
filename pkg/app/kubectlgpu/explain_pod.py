"""``kubectl gpu explain pod/NAME``: a pending Pod explained claim by claim.

Why per claim: the scheduler's verdict on a Pod is a count of nodes ("0/2 nodes are available: 2
cannot allocate all claims"); the cause is in one of its claims, and each claim is explained as
``kubectl gpu explain CLAIM`` explains it. Claims that exist are asked of gpu-dra-controller like a
named claim; a claim that does not exist yet (:mod:`.pod_claims`: a template not instantiated, the
scheduler's extended-resource claim) is computed here, because the controller answers only about
claims in its cache and nothing may be created to explain a Pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pkg.app.kubectlgpu.access import ObjectNotFoundError, Reader
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
class PodExplained:
    namespace: str
    name: str
    not_pending: str | None = None  # why the Pod does not wait for devices
    scheduler: str | None = None  # what the scheduler last said about it
    claims: list[ClaimExplained] = field(default_factory=list)

    @property
    def allocatable(self) -> bool:
        return all(c.explained.report.allocatable for c in self.claims)


def explain_pod(reader: Reader, namespace: str, name: str, options: Options) -> PodExplained:
    pod = reader.get(POD, name, namespace)
    waits = not_pending_on_gpus(pod)
    if waits is not None:
        return PodExplained(namespace, name, not_pending=waits)
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


def render(result: PodExplained) -> str:
    """The text form: what the Pod waits for, then each claim under a heading of its own."""
    key = f"{result.namespace}/{result.name}"
    if result.not_pending is not None:
        said = f"\nthe scheduler says: {result.scheduler}" if result.scheduler else ""
        return f"pod {key} is not pending on GPUs: {result.not_pending}{said}\n"
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


def document(result: PodExplained) -> dict[str, Any]:
    """The ``-o json|yaml`` form: the same content, one item per claim, stable keys for scripts."""
    return {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": LIST_KIND,
        "pod": f"{result.namespace}/{result.name}",
        "pendingOnGPUs": result.not_pending is None,
        **({"reason": result.not_pending} if result.not_pending else {}),
        **({"scheduler": result.scheduler} if result.scheduler else {}),
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
