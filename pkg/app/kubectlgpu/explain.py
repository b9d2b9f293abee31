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
from typing import TYPE_CHECKING, Any, TypeVar

from api.gpu.v1alpha1 import ClaimExplanationSpec, ExplanationOutcome, ExplanationStrategy
from api.gpu.v1alpha1.claimexplanation import DEFAULT_MAX_DEVICES
from pkg.app.kubectlgpu.access import ForbiddenError, PluginError, Reader, optional
from pkg.app.kubectlgpu.device_conditions import DeviceConditions
from pkg.dra.explain.allocation_text import describe_allocation
from pkg.dra.explain.report import Report
from pkg.dra.explain.request import DEFAULT_TIMEOUT, NotServedError, ask
from pkg.dra.explain.verdict import from_status
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.keys import namespaced_key

if TYPE_CHECKING:
    from kubernetes.client import ResourceV1ResourceClaim, V1Node

T = TypeVar("T")
LIST_KIND = "GPUExplanationList"
"""The kind of ``-o json|yaml``'s document: one item per claim explained."""
VIEWER_HINT = " (the chart's gpuViewer role grants it: ask your cluster admin)"


@dataclass
class Explained:
    report: Report
    caveats: list[str] = field(default_factory=list)  # what the answer could not take into account


@dataclass(frozen=True)
class Options:
    """The explain command's flags, for every claim it explains."""

    node: str | None = None
    strategy: ExplanationStrategy = ExplanationStrategy.BEST_FIT
    show_all: bool = False
    max_devices: int = DEFAULT_MAX_DEVICES
    local: bool = False
    timeout: float = DEFAULT_TIMEOUT


def answer(
    reader: Reader,
    claim: ResourceV1ResourceClaim,
    options: Options,
    *,
    warn: Callable[[str], None] | None = None,
) -> Explained:
    """The explanation of ``claim`` (read from the API server): gpu-dra-controller's, or — with
    ``local``, or when it does not answer (the first caveat says why) — computed here.

    With ``warn``, why the controller did not answer is said at once rather than kept as a caveat:
    computing here may then fail on a read the user may not make, and the user must learn both
    that the controller was not asked and why the fallback failed."""
    caveats: list[str] = []
    if not options.local:
        spec = ClaimExplanationSpec(
            claim_name=claim_name(claim),
            strategy=options.strategy,
            node=options.node,
            all=options.show_all or None,
            max_devices=max(options.max_devices, 0),
        )
        served = from_controller(reader, claim, spec, timeout=options.timeout)
        if isinstance(served, Explained):
            return served
        fallback = f"{served}; computing the explanation here (slower)"
        if warn is not None:
            warn(fallback)
        else:
            caveats.append(fallback)
    here = compute_here(reader, claim, options)
    return Explained(here.report, [*caveats, *here.caveats])


def compute_here(reader: Reader, claim: ResourceV1ResourceClaim, options: Options) -> Explained:
    """:func:`explain_object` with the command's flags."""
    return explain_object(
        reader,
        claim,
        node=options.node,
        first_fit=options.strategy is ExplanationStrategy.FIRST_FIT,
        show_all=options.show_all,
        max_devices=options.max_devices,
    )


def from_controller(
    reader: Reader, claim: ResourceV1ResourceClaim, spec: ClaimExplanationSpec, timeout: float
) -> Explained | NotServedError:
    """gpu-dra-controller's answer, or why there is none (the caller warns and falls back). The
    caller reads the claim first: a missing or forbidden claim is the user's error, not a reason to
    fall back, and the request names the claim's uid as its owner."""
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
        verdict=from_status(answer.outcome is ExplanationOutcome.ALLOCATABLE, answer.causes),
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
    """The explanation of claim ``namespace/name``, computed here from what the user may read."""
    claim = reader.get(RESOURCE_CLAIM, name, namespace)
    return explain_object(
        reader, claim, node=node, first_fit=first_fit, show_all=show_all, max_devices=max_devices
    )


def explain_object(
    reader: Reader,
    claim: ResourceV1ResourceClaim,
    *,
    node: str | None,
    first_fit: bool,
    show_all: bool,
    max_devices: int,
) -> Explained:
    """:func:`explain` of a claim in hand: one read from the API server, or one that does not
    exist yet (a Pod's template not instantiated, the scheduler's extended-resource claim), which
    is explained as it would be without creating anything."""
    # The local computation's modules (the allocator, the slice and bundle readers, the models of
    # slices, classes and nodes) are imported only when it runs: a process answered by the
    # controller never loads them, a third of its start-up otherwise (docs/performance.md).
    from pkg.dra.explain.bundle import BundleError, ExplainObjects  # noqa: PLC0415 - see above
    from pkg.dra.explain.cli import explain_claim  # noqa: PLC0415 - see above
    from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NAMESPACE, NODE  # noqa: PLC0415

    namespace, name = (claim.metadata.namespace or "") if claim.metadata else "", claim_name(claim)
    caveats: list[str] = []
    objects = ExplainObjects()
    objects.slices = required(reader.resource_slices)
    classes = required(lambda: reader.list_all(DEVICE_CLASS))
    claims = optional(lambda: reader.list_all(RESOURCE_CLAIM))
    if isinstance(claims, ForbiddenError):
        claims = reader.list_all(RESOURCE_CLAIM, namespace)
        caveats.append(
            "forbidden: you cannot list resourceclaims.resource.k8s.io at the cluster scope, so only "
            f'the allocations of namespace "{namespace}" are counted: devices that claims of other '
            "namespaces hold may be shown as free"
        )
    node_object: V1Node | None = required(lambda: reader.get(NODE, node)) if node else None
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


def required(read: Callable[[], T]) -> T:
    try:
        return read()
    except ForbiddenError as refusal:
        raise ForbiddenError(
            verb=refusal.verb, resource=refusal.resource, namespace=refusal.namespace, hint=VIEWER_HINT
        ) from None


def _asks_admin_access(claim: ResourceV1ResourceClaim) -> bool:
    requests = claim.spec.devices.requests if claim.spec and claim.spec.devices else None
    return any(bool(r.exactly and r.exactly.admin_access) for r in requests or [])


def claim_name(claim: ResourceV1ResourceClaim) -> str:
    return str(claim.metadata.name or "") if claim.metadata else ""


def report_item(
    explained: Explained,
    *,
    namespace: str,
    claim: str,
    heading: str | None,
    source: str | None,
    created: bool,
    devices: list[DeviceConditions] | None = None,
) -> dict[str, Any]:
    """One claim's report as an item of :data:`LIST_KIND` (also the claim path's one item);
    ``devices``: the conditions of its allocated devices (:mod:`.device_conditions`)."""
    report = explained.report
    return {
        "namespace": namespace,
        "claim": claim,
        **({"heading": heading} if heading else {}),
        **({"source": source} if source else {}),
        "created": created,
        "allocatable": report.allocatable,
        **({"currentAllocation": describe_allocation(report.current)} if report.current is not None else {}),
        **({"verdict": report.verdict.to_dict()} if report.verdict is not None else {}),
        **({"devices": [d.to_item() for d in devices]} if devices else {}),
        "report": report.text,
        "warnings": list(explained.caveats),
    }
