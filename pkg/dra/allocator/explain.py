"""Why a claim gets the devices it gets — or none: a structured trace of an allocation attempt.

The trace explains an :class:`~.attempt.AllocationAttempt` that was taken (by the controller, or
by the explain CLI from a bundle or the cluster): it reads the attempt's recorded inputs and
outcome and never allocates again. For each request alternative of the claim, every device of
every reachable pool is diagnosed against the state *before* this claim takes anything, in the
order the allocator checks it: incomplete or invalid pool, already allocated, selector false
(which one) or selector error (the CEL error), blocking taint, capacity (which one), counters
exhausted (which counter set and counter, e.g. ``memory-slice-3`` of ``gpu-0000-02-00-0``) — or
``fits``. Devices are listed in the strategy's order, so the first ``fits`` is usually what the
allocator takes. A request whose class or claim selector does not compile gets that error once
instead (it would be the same for every device, and the scheduler reports it once too). The
trace ends with the attempt's outcome and, when it allocates, what each chosen device consumes
(:mod:`.consumption`: capacity requested and after the request policy, counters taken, what is
left on the card). Each claim constraint gets a trace of its own (:mod:`.constraint_trace`): how
its attribute splits the devices that fit, and whether any value serves every request it
constrains — the one reason a claim whose requests all fit can still be pending. Nothing here
writes anything.

Every device gets a verdict, because the counts per verdict are part of the answer; what keeps that
affordable at 224,000 devices is the attempt's own selector pass (the eligible devices, memoised
per pool; a device outside them was rejected by the first selector that is false for it), selectors
evaluated once per distinct set of the values they read (:mod:`.cel_footprint`), and no call or
object per rejected device beyond its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from kubernetes.client import V1AllocationResult

from pkg.dra.allocator.allocator import Allocator
from pkg.dra.allocator.attempt import AllocationAttempt
from pkg.dra.allocator.capacity import consumption
from pkg.dra.allocator.constraint_trace import ConstraintTrace, trace_constraints
from pkg.dra.allocator.consumption import DeviceUse, device_uses
from pkg.dra.allocator.context import AllocationContext
from pkg.dra.allocator.pools import Candidate
from pkg.dra.allocator.requests import Alternative, ClaimError, Selector, claim_label
from pkg.dra.allocator.selection import SelectorEvaluationError, selector_error
from pkg.dra.allocator.taints import blocking_taint
from pkg.dra.model import Unschedulable

FITS = "fits"


class DeviceVerdict(NamedTuple):
    """One device's verdict. A named tuple, not a frozen dataclass: an explanation at 224,000
    devices makes one per device, and a frozen dataclass's ``__init__`` (``object.__setattr__``
    per field) took about a third of a second of that (docs/performance.md)."""

    device: str  # driver/pool/device
    reason: str  # fits | incomplete pool | invalid pool | already allocated | selector false |
    # selector error | taint | capacity | counters exhausted
    detail: str = ""
    counter_set: str | None = None
    counter: str | None = None
    of_class: bool = True  # False when a selector of the request's class rejects it: not a device
    # the request could ever get, so the report counts it in one line instead of listing it
    matches: bool = True  # every selector holds (False also for a held device a selector rejects)


@dataclass(frozen=True, slots=True)
class RequestTrace:
    request: str
    devices: tuple[DeviceVerdict, ...]
    problem: str | None = None  # a selector that does not compile: said once, no device diagnosed


@dataclass(frozen=True, slots=True)
class Explanation:
    claim: str
    strategy: str
    requests: tuple[RequestTrace, ...]
    outcome: V1AllocationResult | Unschedulable
    problem: str | None = None  # a claim-level error that stopped the diagnosis
    uses: tuple[DeviceUse, ...] = ()  # per allocated device, what it consumes (see .consumption)
    constraints: tuple[ConstraintTrace, ...] = ()  # per claim constraint, how it splits what fits
    # The context the devices were diagnosed in (pools, what other claims hold, the request plans),
    # kept so that the causes (pkg.dra.explain.causes) read the same inputs without building them again.
    context: AllocationContext | None = field(default=None, compare=False, repr=False)


def explain(attempt: AllocationAttempt, *, allocator: Allocator) -> Explanation:
    """Why ``attempt`` (taken by ``allocator``) decided as it did: every device diagnosed against
    the attempt's own inputs, as they were before the claim took anything. Nothing is allocated
    again; the outcome is the attempt's."""
    claim, outcome = attempt.claim, attempt.outcome
    try:
        ctx = allocator.context(claim, attempt.inputs)
    except ClaimError as err:
        return Explanation(claim_label(claim), allocator.strategy.name, (), outcome, problem=str(err))
    traces = []
    fitting: dict[str, list[Candidate]] = {}
    for plan in ctx.plans:
        for alt in plan.alternatives:
            broken = next((s for s in alt.selectors if s.compiled.error), None)
            if broken is not None:
                error = selector_error(broken, broken.compiled.error or "")
                traces.append(RequestTrace(alt.result_name, (), problem=str(error)))
                continue
            verdicts, fitting[alt.result_name] = _diagnose_all(ctx, alt, allocator)
            traces.append(RequestTrace(alt.result_name, tuple(verdicts)))
    uses = device_uses(ctx, outcome) if isinstance(outcome, V1AllocationResult) else ()
    return Explanation(
        claim_label(claim),
        allocator.strategy.name,
        tuple(traces),
        outcome,
        uses=uses,
        constraints=trace_constraints(ctx.constraints, ctx.plans, fitting),
        context=ctx,
    )


def _diagnose_all(
    ctx: AllocationContext, alt: Alternative, allocator: Allocator
) -> tuple[list[DeviceVerdict], list[Candidate]]:
    """Every device's verdict for ``alt``, and the devices that fit.

    The selector pass is the attempt's own (:func:`_match_all`: the eligible devices memoised per
    pool, what the strategy orders), so no device is matched twice; the devices it rejected get
    their verdict in the loop, the rest from :func:`diagnose`."""
    verdicts = []
    for pool in ctx.pools:
        if pool.incomplete:
            verdicts.append(
                DeviceVerdict(
                    f"{pool.id}/*",
                    "incomplete pool",
                    f"generation {pool.generation} has not all its slices yet",
                )
            )
        elif pool.invalid is not None:
            verdicts.append(DeviceVerdict(f"{pool.id}/*", "invalid pool", pool.invalid))
    outcomes = _match_all(ctx, alt)
    eligible = ctx.eligible(alt)  # known to _match_all: the same list, nothing evaluated again
    ordered = list(allocator.strategy.order(eligible, counters=ctx.counters, fits=ctx.fits_counters))
    seen = set(ordered)
    rest = [c for c in ctx.usable_candidates() if c not in seen]
    fits: list[Candidate] = []
    # The two first checks of :func:`diagnose`, inlined for the devices the selector pass already
    # rejected (most of a cluster: a MIG 1g request matches one device in four); the same checks
    # in the same order, so the same verdicts, with each selector's sentence built once.
    dedicated = frozenset() if alt.admin_access else ctx.allocated.dedicated
    false_details: dict[int, str] = {}
    for cand in (*ordered, *rest):
        known = outcomes.get(cand)
        if isinstance(known, Selector):
            if cand.id in dedicated:
                verdicts.append(
                    DeviceVerdict(str(cand.id), *_HELD, of_class=not known.of_class, matches=False)
                )
                continue
            detail = false_details.get(id(known))
            if detail is None:
                detail = false_details[id(known)] = _false_detail(known)
            verdicts.append(
                DeviceVerdict(
                    str(cand.id), SELECTOR_FALSE, detail, of_class=not known.of_class, matches=False
                )
            )
            continue
        verdict = diagnose(ctx, alt, cand, selectors=known)
        verdicts.append(verdict)
        if verdict.reason == FITS:
            fits.append(cand)
    return verdicts, fits


def _match_all(
    ctx: AllocationContext, alt: Alternative
) -> dict[Candidate, Selector | SelectorEvaluationError]:
    """The selector pass's outcome for every usable device: the first false selector of each
    device the selectors reject, the error of each that fails to evaluate; none for a device that
    matches.

    The eligible devices are the context's (:meth:`AllocationContext.eligible`), memoised per pool
    and selector set: a pool the attempt, an earlier decision or an earlier explanation matched for
    these selectors is not matched again (best fit's search may visit only some pools; the others
    are matched here once, and memoised). A device not among them was rejected by a
    selector that evaluated to false: with one selector (a class's, the usual request) that is the
    one, and with more, :meth:`~.selection.SelectorMatcher.first_mismatch` names it from the
    matcher's cache. Either way, the outcome the per-device pass gave before, found without
    visiting 224,000 devices' attribute values again (docs/performance.md)."""
    eligible = ctx.eligible(alt)  # records the selector errors in ctx.selector_errors too
    errors = ctx.selector_errors
    outcomes: dict[Candidate, Selector | SelectorEvaluationError] = {}
    for cand in eligible:
        failure = errors.get(cand)
        if failure is not None:
            outcomes[cand] = failure
    matched = set(eligible)
    only = alt.selectors[0] if len(alt.selectors) == 1 else None
    first_mismatch = ctx.matcher.first_mismatch
    for cand in ctx.usable_candidates():
        if cand in matched:
            continue
        mismatch = only if only is not None else first_mismatch(alt, cand)
        if mismatch is None:  # cannot happen: a device no selector rejects is eligible
            raise AssertionError(f"device {cand.id}: not eligible, yet every selector holds")
        outcomes[cand] = mismatch
    return outcomes


_UNKNOWN = object()
SELECTOR_FALSE = "selector false"
_HELD = ("already allocated", "held exclusively by another claim")


def _false_detail(selector: Selector) -> str:
    return f"{selector.owner}: selector #{selector.index}: {selector.compiled.expression}"


def diagnose(
    ctx: AllocationContext,
    alt: Alternative,
    cand: Candidate,
    *,
    selectors: Selector | SelectorEvaluationError | object | None = _UNKNOWN,
) -> DeviceVerdict:
    """Why ``cand`` can or cannot serve ``alt`` right now (the allocator's checks, in its order).
    ``selectors``, when known, is the selector pass's outcome for the device: None when all hold,
    the first false selector, or the evaluation error."""
    device = str(cand.id)
    mismatch: object = selectors
    if mismatch is _UNKNOWN:
        try:
            mismatch = ctx.matcher.first_mismatch(alt, cand)
        except SelectorEvaluationError as failure:
            mismatch = failure
    if not alt.admin_access and cand.id in ctx.allocated.dedicated:
        # "already allocated" comes first, as in the allocator; whether the selectors would take it
        # only decides if the report lists it under the request (a held device of another class
        # is not part of its story).
        if isinstance(mismatch, Selector):
            return DeviceVerdict(device, *_HELD, of_class=not mismatch.of_class, matches=False)
        return DeviceVerdict(device, *_HELD, matches=not isinstance(mismatch, SelectorEvaluationError))
    if isinstance(mismatch, SelectorEvaluationError):
        return DeviceVerdict(device, "selector error", str(mismatch), matches=False)
    if isinstance(mismatch, Selector):
        return DeviceVerdict(
            device, SELECTOR_FALSE, _false_detail(mismatch), of_class=not mismatch.of_class, matches=False
        )
    taint = blocking_taint(cand.device.taints, alt.tolerations)
    if taint is not None:
        return DeviceVerdict(device, "taint", f"{taint.key}={taint.value or ''}:{taint.effect} not tolerated")
    amounts = consumption(alt.capacity, cand.capacity)
    if isinstance(amounts, str):
        return DeviceVerdict(device, "capacity", amounts)
    exceeded = ctx.capacity.exceeded(cand.id, amounts, cand.capacity)
    if exceeded is not None:
        return DeviceVerdict(device, "capacity", f"capacity {exceeded!r} exhausted")
    if cand.consumes and not (cand.shared and ctx.capacity.in_shared_use(cand.id)):
        missing = ctx.counters.shortfall(cand)
        if missing is not None:
            return DeviceVerdict(
                device,
                "counters exhausted",
                f"counter {missing[1]} of counter set {missing[0]}",
                counter_set=missing[0],
                counter=missing[1],
            )
    return DeviceVerdict(device, FITS)
