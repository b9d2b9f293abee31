"""``kubectl gpu explain CLAIM``: the allocator's explain, asked of gpu-dra-controller or computed here.

First the plugin asks gpu-dra-controller (:func:`from_controller`): it creates a ClaimExplanation
in the claim's namespace — ``create`` there is all the user needs, the chart aggregates it into
the ``edit`` role — and the controller answers from the slices and pools it holds, without the
plugin reading a slice (docs/allocator.md#explain-served-by-the-controller). Without the CRD, without
the right to create it, or without an answer in time, it warns and computes the explanation here
(:func:`explain`, also what ``--local`` forces).

Both answers are :func:`pkg.dra.explain.report.explain_inputs`, the one ``gpu-dra-controller
explain`` prints: one attempt of the allocator and its own trace, nothing allocated twice. Only
the reading differs. Computed here, a namespace user reads their claim; the ResourceSlices and DeviceClasses
(cluster-scoped) it needs are readable only with the rights the chart's ``gpuViewer`` role grants,
and a refusal names the read. Two reads are softer, because an answer without them is still
worth having, and the output says what it lacks:

* ResourceClaims of *other* namespaces (what is already taken): without them, only the user's
  namespace's allocations are subtracted, so a device another namespace holds may look free;
* the claim's Namespace (its labels decide admin access): without it, a request for admin access
  is judged as if the namespace were not labelled for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from api.gpu.v1alpha1 import ClaimExplanationSpec, ExplanationOutcome
from pkg.app.kubectlgpu.access import ForbiddenError, PluginError, Reader, optional
from pkg.dra.explain.report import Report
from pkg.dra.explain.request import NotServedError, ask
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.keys import namespaced_key

if TYPE_CHECKING:
    from kubernetes.client import ResourceV1ResourceClaim, V1Node

T = TypeVar("T")
VIEWER_HINT = " (the chart's gpuViewer role grants it: ask your cluster admin)"


@dataclass
class Explained:
    report: Report
    caveats: list[str] = field(default_factory=list)  # what the answer could not take into account


def from_controller(
    reader: Reader, *, namespace: str, name: str, spec: ClaimExplanationSpec, timeout: float
) -> Explained | NotServedError:
    """gpu-dra-controller's answer, or why there is none (the caller warns and falls back). The
    claim is read first: a missing or forbidden claim is the user's error, not a reason to fall
    back, and the request names the claim's uid as its owner."""
    claim = reader.get(RESOURCE_CLAIM, name, namespace)
    try:
        answer = ask(reader.client, claim, spec, timeout=timeout)
    except NotServedError as why:
        return why
    if answer.outcome is ExplanationOutcome.ERROR:
        raise PluginError(answer.reason or "gpu-dra-controller could not explain the claim")
    held = claim.status.allocation if claim.status is not None else None  # the note, as computed here
    report = Report(
        text=answer.report,
        allocatable=answer.outcome is ExplanationOutcome.ALLOCATABLE,
        current=held if answer.current_allocation is not None else None,
    )
    return Explained(report, [])


def explain(
    reader: Reader,
    *,
    namespace: str,
    name: str,
    node: str | None,
    first_fit: bool,
    show_all: bool,
    max_devices: int,
) -> Explained:
    # The local computation's modules (the allocator, the slice and bundle readers, the models of
    # slices, classes and nodes) are imported only when it runs: a process answered by the
    # controller never loads them, a third of its start-up otherwise (docs/performance.md).
    from pkg.dra.explain.bundle import BundleError, ExplainObjects  # noqa: PLC0415 - see above
    from pkg.dra.explain.cli import explain_claim  # noqa: PLC0415 - see above
    from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NAMESPACE, NODE  # noqa: PLC0415

    claim = reader.get(RESOURCE_CLAIM, name, namespace)
    caveats: list[str] = []
    objects = ExplainObjects()
    objects.slices = _required(reader.resource_slices)
    classes = _required(lambda: reader.list_all(DEVICE_CLASS))
    claims = optional(lambda: reader.list_all(RESOURCE_CLAIM))
    if isinstance(claims, ForbiddenError):
        claims = reader.list_all(RESOURCE_CLAIM, namespace)
        caveats.append(
            "forbidden: you cannot list resourceclaims.resource.k8s.io at the cluster scope, so only "
            f'the allocations of namespace "{namespace}" are counted: devices that claims of other '
            "namespaces hold may be shown as free"
        )
    node_object: V1Node | None = _required(lambda: reader.get(NODE, node)) if node else None
    ns = optional(lambda: reader.get(NAMESPACE, namespace))
    if isinstance(ns, ForbiddenError) and _asks_admin_access(claim):
        caveats.append(f"{ns}: admin access is judged as if the namespace were not labelled for it")
    try:
        for obj in (*classes, *claims, *([] if isinstance(ns, ForbiddenError) else [ns])):
            objects.add(obj, "cluster")
        key = namespaced_key(namespace, name)
        objects.claims[key] = claim  # the one read by name: newer than the list's, and always there
    except BundleError as err:
        raise PluginError(str(err)) from None
    try:
        report = explain_claim(
            objects, key, node=node_object, first_fit=first_fit, show_all=show_all, max_devices=max_devices
        )
    except Exception as err:  # the reads are checked above; what is left is a bug, said in one line
        raise PluginError(f"explaining {key} failed: {type(err).__name__}: {err}") from None
    return Explained(report, caveats)


def _required(read: Callable[[], T]) -> T:
    try:
        return read()
    except ForbiddenError as refusal:
        raise ForbiddenError(
            verb=refusal.verb, resource=refusal.resource, namespace=refusal.namespace, hint=VIEWER_HINT
        ) from None


def _asks_admin_access(claim: ResourceV1ResourceClaim) -> bool:
    requests = claim.spec.devices.requests if claim.spec and claim.spec.devices else None
    return any(bool(r.exactly and r.exactly.admin_access) for r in requests or [])
