"""Which claims a Pod's devices come from, and whether the Pod waits for them at all.

``kubectl gpu explain pod/NAME`` explains a Pod by explaining its claims. A pending Pod's claims
come from three places, and two of them are not objects yet:

* ``spec.resourceClaims[].resourceClaimName``: a claim that exists (or should: a missing one is
  itself why the Pod waits);
* ``spec.resourceClaims[].resourceClaimTemplateName``: the claim the ResourceClaim controller
  made from the template, named in ``status.resourceClaimStatuses``; until it exists, the claim
  the template *would* make (its spec, in the Pod's namespace);
* a container's extended resource (``gpu.deckhouse.io/gpu: 3``) that a DeviceClass backs
  (``spec.extendedResourceName``, or the implicit ``deviceclass.resource.kubernetes.io/<class>``):
  the kube-scheduler makes one claim for all of the Pod's such requests only when it schedules the
  Pod (KEP-5004), so until ``status.extendedResourceClaimStatus`` names it, we build the claim the
  scheduler would make, the way it builds it (:func:`extended_resource_requests`).

Nothing here reads the cluster: the caller hands in the templates and classes it read, so the
rules are tested without one. A claim that does not exist is never created to explain it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubernetes.client import (
        ResourceV1ResourceClaim,
        V1Container,
        V1DeviceClass,
        V1Pod,
        V1ResourceClaimTemplate,
    )

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
"""Every DeviceClass backs this extended resource too, whatever its ``extendedResourceName``."""
EXTENDED_CLAIM_SUFFIX = "-extended-resources"
"""The scheduler's claim is named ``<pod>-extended-resources-<random>``; ours, never created, has
no random part, so it cannot be mistaken for (or collide with) a real one."""


@dataclass(frozen=True)
class ExtendedRequest:
    """One device request of the scheduler's claim, and the containers it serves."""

    name: str  # container-<index>-request-<index>, as the scheduler names it
    resource: str
    device_class: str
    count: int
    containers: tuple[str, ...]


@dataclass(frozen=True)
class PodClaim:
    """One claim of the Pod: the claim to read (``claim_name``) or the one that would be made
    (``would_be``); ``heading`` says which, in the words of the Pod's spec."""

    heading: str
    source: str  # resourceClaimName | resourceClaimTemplateName | extendedResource
    claim_name: str | None = None
    would_be: ResourceV1ResourceClaim | None = None
    requests: tuple[ExtendedRequest, ...] = field(default=())


TemplateReader = Callable[[str], "V1ResourceClaimTemplate"]


def not_pending_on_gpus(pod: V1Pod) -> str | None:
    """Why ``pod`` does not wait for devices (a sentence), or None when it may: it is pending and
    no node has been chosen for it. A scheduled Pod's claims are allocated (the scheduler
    allocates before it binds), so whatever it waits for then is not a device."""
    phase = (pod.status.phase if pod.status else None) or "Pending"
    node = pod.spec.node_name if pod.spec else None
    if phase != "Pending":
        return f"it is {phase}" + (f" on node {node}" if node else "")
    if node:
        waiting = _waiting_containers(pod)
        return f"it is scheduled to node {node}" + (
            f"; its containers wait: {waiting}" if waiting else " and waits for its containers to start"
        )
    return None


def scheduler_message(pod: V1Pod) -> str | None:
    """What the scheduler last said about an unschedulable Pod (``PodScheduled=False``)."""
    for condition in (pod.status.conditions if pod.status else None) or []:
        if condition.type == "PodScheduled" and condition.status == "False" and condition.message:
            return str(condition.message)
    return None


def pod_claims(
    pod: V1Pod, *, template: TemplateReader, classes: Callable[[], list[V1DeviceClass]]
) -> list[PodClaim]:
    """The Pod's claims in spec order, then the extended-resource claim if it has one.
    ``template`` and ``classes`` are called only when needed (a template not instantiated yet; an
    extended resource the Pod asks for), so a Pod without them costs no such read."""
    spec, status = pod.spec, pod.status
    namespace, pod_name = _namespace(pod), _name(pod)
    generated = {
        s.name: s.resource_claim_name for s in (status.resource_claim_statuses if status else None) or []
    }
    found: list[PodClaim] = []
    for entry in (spec.resource_claims if spec else None) or []:
        if entry.resource_claim_name:
            found.append(
                PodClaim(
                    heading=f'claim "{entry.name}": ResourceClaim {entry.resource_claim_name}',
                    source="resourceClaimName",
                    claim_name=entry.resource_claim_name,
                )
            )
        elif entry.resource_claim_template_name:
            found.append(
                _from_template(entry.name, entry.resource_claim_template_name, generated, template, pod)
            )
    extended = (status.extended_resource_claim_status if status else None) or None
    if extended is not None and extended.resource_claim_name:
        found.append(
            PodClaim(
                heading=f"extended resources: ResourceClaim {extended.resource_claim_name}",
                source="extendedResource",
                claim_name=extended.resource_claim_name,
            )
        )
    elif _asks_extended(pod):
        requests = extended_resource_requests(pod, classes())
        if requests:
            found.append(_extended_claim(namespace, pod_name, requests))
    return found


def extended_resource_requests(pod: V1Pod, classes: Iterable[V1DeviceClass]) -> list[ExtendedRequest]:
    """The device requests of the claim the scheduler would make for ``pod``'s extended resources
    backed by a DeviceClass, as the scheduler builds them: per resource, one request of that
    class per container that asks for it (``container-<i>-request-<j>``: ``i`` counts init
    containers first, ``j`` is the resource's place among the container's sorted requests). An
    init container that runs to completion first reuses the devices of the containers that run
    after it and asks only for what they lack; of those, only the largest request is kept."""
    backing = backing_classes(classes)
    containers, inits = _containers(pod)
    short_lived = [i for i, c in enumerate(containers) if i < inits and c.restart_policy != "Always"]
    long_lived = [i for i in range(len(containers)) if i not in short_lived]
    requests: list[ExtendedRequest] = []
    for resource in sorted({r for c in containers for r in _quantities(c) if r in backing}):
        device_class = backing[resource]
        lasting: dict[int, ExtendedRequest] = {}
        for i in long_lived:
            count = _quantities(containers[i]).get(resource, 0)
            if count > 0:
                lasting[i] = _request(i, containers[i], resource, device_class, count)
        largest: ExtendedRequest | None = None
        for i in short_lived:
            wanted = _quantities(containers[i]).get(resource, 0)
            reused = sum(r.count for j, r in lasting.items() if j >= i)
            if wanted > reused and (largest is None or wanted - reused > largest.count):
                largest = _request(i, containers[i], resource, device_class, wanted - reused)
        requests.extend([*([largest] if largest else []), *lasting.values()])
    return sorted(requests, key=lambda r: r.name)


def backing_classes(classes: Iterable[V1DeviceClass]) -> dict[str, str]:
    """Extended resource name -> the DeviceClass that backs it. Where two classes name the same
    resource the scheduler prefers the newer one, the lower name on a tie (a migration from one
    class to another); every class also backs its implicit name."""
    ordered = sorted(
        classes,
        key=lambda c: (_created(c), _reversed_name(_name(c))),
    )
    backing: dict[str, str] = {}
    for cls in ordered:  # later (newer; on a tie, lower-named) classes win
        name = _name(cls)
        if cls.spec is not None and cls.spec.extended_resource_name:
            backing[cls.spec.extended_resource_name] = name
    for cls in ordered:
        backing[IMPLICIT_PREFIX + _name(cls)] = _name(cls)
    return backing


def _from_template(
    name: str, template_name: str, generated: dict[str, str | None], template: TemplateReader, pod: V1Pod
) -> PodClaim:
    made = generated.get(name)
    if made:
        return PodClaim(
            heading=f'claim "{name}": ResourceClaim {made} (from ResourceClaimTemplate {template_name})',
            source="resourceClaimTemplateName",
            claim_name=made,
        )
    return PodClaim(
        heading=f'claim "{name}": the claim ResourceClaimTemplate {template_name} would make (none yet)',
        source="resourceClaimTemplateName",
        would_be=claim_from_template(pod, name, template(template_name)),
    )


def claim_from_template(pod: V1Pod, claim: str, template: V1ResourceClaimTemplate) -> ResourceV1ResourceClaim:
    """The claim the ResourceClaim controller would make from ``template`` for ``pod``'s ``claim``
    (the template's spec in the Pod's namespace; named ``<pod>-<claim>``, without the random suffix
    a real one gets)."""
    from kubernetes.client import ResourceV1ResourceClaim, V1ObjectMeta  # noqa: PLC0415 - lazy models

    meta = template.spec.metadata if template.spec is not None else None
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(
            name=f"{_name(pod)}-{claim}",
            namespace=_namespace(pod),
            labels=meta.labels if meta is not None else None,
        ),
        spec=template.spec.spec if template.spec is not None else None,
    )


def _extended_claim(namespace: str, pod: str, requests: list[ExtendedRequest]) -> PodClaim:
    from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM  # noqa: PLC0415 - lazy models

    raw: dict[str, Any] = {
        "metadata": {"name": f"{pod}{EXTENDED_CLAIM_SUFFIX}", "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": r.name,
                        "exactly": {
                            "deviceClassName": r.device_class,
                            "allocationMode": "ExactCount",
                            "count": r.count,
                        },
                    }
                    for r in requests
                ]
            }
        },
    }
    asked = "; ".join(f"{r.resource}: {r.count} of container {', '.join(r.containers)}" for r in requests)
    return PodClaim(
        heading=f"extended resource {asked} (the claim the scheduler would make)",
        source="extendedResource",
        would_be=RESOURCE_CLAIM.decode(raw),
        requests=tuple(requests),
    )


def _request(
    index: int, container: V1Container, resource: str, device_class: str, count: int
) -> ExtendedRequest:
    position = sorted(_quantities(container, every=True)).index(resource)
    return ExtendedRequest(
        name=f"container-{index}-request-{position}",
        resource=resource,
        device_class=device_class,
        count=count,
        containers=(str(container.name),),
    )


def _quantities(container: V1Container, *, every: bool = False) -> dict[str, int]:
    """The container's requests (limits where a request is left out: the API server defaults an
    extended resource's request to its limit) as whole numbers; ``every`` keeps those that are not
    whole too, for the position of a name among all of them."""
    resources = container.resources
    merged = {
        **((resources.limits if resources else None) or {}),
        **((resources.requests if resources else None) or {}),
    }
    out: dict[str, int] = {}
    for name, value in merged.items():
        count = _whole(value)
        if count is not None or every:
            out[name] = count or 0
    return out


def _whole(value: object) -> int | None:
    text = str(value).strip()
    return int(text) if text.isdigit() else None


def _asks_extended(pod: V1Pod) -> bool:
    """Whether a container asks for a domain-prefixed resource (the only kind that can be extended)."""
    containers, _ = _containers(pod)
    return any("/" in name for c in containers for name in _quantities(c))


def _waiting_containers(pod: V1Pod) -> str:
    statuses = [
        *((pod.status.init_container_statuses if pod.status else None) or []),
        *((pod.status.container_statuses if pod.status else None) or []),
    ]
    waiting = [
        f"{s.name}: {s.state.waiting.reason}"
        + (f" ({s.state.waiting.message})" if s.state.waiting.message else "")
        for s in statuses
        if s.state is not None and s.state.waiting is not None and s.state.waiting.reason
    ]
    return "; ".join(waiting)


def _created(cls: V1DeviceClass) -> float:
    stamp = cls.metadata.creation_timestamp if cls.metadata else None
    return stamp.timestamp() if stamp is not None else 0.0


def _reversed_name(name: str) -> tuple[int, ...]:
    """Sorts names descending, so that on equal age the lower name comes last and wins."""
    return (*(-ord(ch) for ch in name), 0)


def _containers(pod: V1Pod) -> tuple[list[V1Container], int]:
    """Init containers, then containers (the order the scheduler numbers them in), and how many
    of them are init containers."""
    inits = list((pod.spec.init_containers if pod.spec else None) or [])
    return [*inits, *((pod.spec.containers if pod.spec else None) or [])], len(inits)


def _name(obj: V1Pod | V1DeviceClass) -> str:
    return str(obj.metadata.name or "") if obj.metadata else ""


def _namespace(pod: V1Pod) -> str:
    return str(pod.metadata.namespace or "") if pod.metadata else ""
