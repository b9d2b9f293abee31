"""Why a claim is pending, cause first, in the user's words: the verdict of an explanation.

The allocator's trace (:func:`pkg.dra.allocator.explain`) says, per device, which check failed —
mechanism. A platform engineer asks a different question: *what* stops the claim and *what would
change it*. This module answers it from the same trace and the same inputs (one attempt, nothing
allocated again), per request alternative, in this order, stopping at the first that applies:

1. no device passes the selectors: the selector no device satisfies, with the values the
   attribute it tests has in the cluster (the MIG profiles offered) — waiting does not help;
2. fewer devices match than asked, in the cluster or on any one node (asked, matching, most on
   one node);
3. enough match on a node, but not enough are free: each blocker among the matching devices —
   held by other claims (named where the caller may read them), a card's capacity taken by
   devices of another mode (3 MIG devices on the card a whole card needs free), a taint not
   tolerated (which, since when), a capacity request larger than a device offers, a pool being
   republished.

When every request has enough on its own, a constraint that no value meets is the cause, else the
requests compete for the same devices. "Retry when capacity changes" is said only where a change
of capacity would help (:attr:`Cause.retry`).

The cost is bounded by the devices that pass the request's selectors (the attempt's memoised
eligible list) and the allocated devices that block them; only a request nothing matches looks at
every device once, to list the values its selector's attribute has.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from kubernetes.client import ResourceV1ResourceClaim

from pkg.dra.allocator import AllocationInputs, Explanation, RequestTrace, Unschedulable
from pkg.dra.allocator.constraint_trace import ConstraintTrace
from pkg.dra.allocator.context import AllocationContext, pool_eligibility, selector_key
from pkg.dra.allocator.pools import Candidate
from pkg.dra.allocator.requests import Alternative, class_alternative
from pkg.dra.explain.blockers import Shortfall, blockers
from pkg.dra.explain.device_words import Readable, are, attribute, noun, plural, plural_form
from pkg.dra.explain.verdict import Cause, CauseKind, Facts, Verdict

MAX_VALUES = 12
_REF = r'device\.attributes\["(?P<domain>[^"]+)"\](?:\.(?P<name>[A-Za-z_]\w*)|\["(?P<key>[^"]+)"\])'
_ATTRIBUTE = re.compile(_REF)
_COMPARED = re.compile(_REF + r'\s*==\s*"(?P<literal>[^"]*)"')


def everyone(_namespace: str) -> bool:
    """Every namespace is readable: the caller listed every claim itself (CLI, bundle)."""
    return True


def verdict_of(
    explanation: Explanation, inputs: AllocationInputs, *, readable: Readable = everyone
) -> Verdict:
    """The verdict of ``explanation`` (of an attempt on ``inputs``); ``readable`` says whose claims
    may be named to the caller."""
    outcome = explanation.outcome
    if not isinstance(outcome, Unschedulable):
        return Verdict(allocatable=True)
    ctx = explanation.context
    if explanation.problem or ctx is None:
        return Verdict(False, (_invalid(None, explanation.problem or str(outcome)),))
    traces = {t.request: t for t in explanation.requests}
    causes: list[Cause] = []
    for plan in ctx.plans:
        found: list[Cause] = []
        for alt in plan.alternatives:
            trace = traces.get(alt.result_name)
            if trace is None:
                continue
            alt_causes = _request_causes(ctx, alt, trace, inputs.allocated_claims, readable)
            if not alt_causes:  # one alternative that has enough serves the request
                found = []
                break
            found.extend(alt_causes)
        causes.extend(found)
    if not causes:
        causes.extend(_claim_causes(explanation, outcome))
    return Verdict(False, tuple(causes))


def _invalid(request: str | None, problem: str) -> Cause:
    return Cause(
        CauseKind.INVALID,
        request,
        # The first line: a CEL error goes on with the expression and a caret, kept in the facts.
        f"the claim cannot be allocated as written: {problem.splitlines()[0] if problem else problem}",
        "fix the claim or its device class",
        retry=False,
        facts=Facts(problem=problem),
    )


def _claim_causes(explanation: Explanation, outcome: Unschedulable) -> list[Cause]:
    """Causes when every request has enough devices on its own."""
    causes = [_constraint_cause(c) for c in explanation.constraints if not c.met]
    if causes:
        return causes
    if outcome.fatal:
        return [_invalid(None, str(outcome))]
    return [
        Cause(
            CauseKind.TOGETHER,
            None,
            "each request has enough free devices on its own, but not all of them together on one node"
            f" ({outcome.reason})",
            "free more devices on one node, or ask for fewer",
            retry=True,
        )
    ]


def _constraint_cause(constraint: ConstraintTrace) -> Cause:
    best = sorted(constraint.groups, key=lambda g: -sum(c.fitting for c in g.counts))[:3]
    split = "; ".join(
        f"{g.node + '/' if g.node else ''}{g.value}: "
        + ", ".join(f"{c.request} {c.fitting} of {c.needed}" for c in g.counts)
        for g in best
    )
    text = (
        f"{constraint.kind} {constraint.attribute}: no single value has enough free devices for every "
        f"request ({split or 'no device fits'})"
    )
    return Cause(
        CauseKind.CONSTRAINT,
        None,
        text,
        f"free devices that share one {constraint.attribute} value, or drop the constraint",
        retry=True,
        facts=Facts(constraint=constraint.kind, attribute=constraint.attribute),
    )


def _request_causes(
    ctx: AllocationContext,
    alt: Alternative,
    trace: RequestTrace,
    claims: Sequence[ResourceV1ResourceClaim],
    readable: Readable,
) -> list[Cause]:
    """The causes why ``alt`` cannot get its devices; none when it can (on its own)."""
    name = alt.result_name
    if trace.problem:
        return [_invalid(name, trace.problem)]
    errors = [v for v in trace.devices if v.reason == "selector error"]
    eligible = [c for c in ctx.eligible(alt) if c not in ctx.selector_errors]
    if not eligible:
        if errors:
            return [_invalid(name, errors[0].detail)]
        if not trace.devices:
            return [_nothing_published(ctx, name)]
        return [_no_match(ctx, alt, trace)]
    verdicts = {v.device: v for v in trace.devices if v.matches}
    fits_by_node: Counter[str | None] = Counter()
    match_by_node: Counter[str | None] = Counter()
    for cand in eligible:
        match_by_node[cand.node_name] += 1
        verdict = verdicts.get(str(cand.id))
        if verdict is not None and verdict.reason == "fits":
            fits_by_node[cand.node_name] += 1
    asked = alt.count if not alt.all_devices else len(eligible)
    most, most_node = _most(match_by_node)
    free_most, _ = _most(fits_by_node)
    what = _what(eligible, alt)
    enough = free_most >= asked if not alt.all_devices else sum(fits_by_node.values()) == len(eligible)
    if enough:
        return []
    facts = Facts(
        asked=asked, matching=len(eligible), most_on_one_node=most, node=most_node, free_on_one_node=free_most
    )
    if not alt.all_devices and (asked > len(eligible) or asked > most):
        where = f", at most {most} on one node" if most < len(eligible) else ""
        return [
            Cause(
                CauseKind.TOO_FEW,
                name,
                f"{plural(what, asked)} asked, {len(eligible)} match in the cluster{where}",
                f"ask for at most {most}, or add nodes with more {plural_form(what)}",
                retry=True,
                facts=facts,
            )
        ]
    short = Shortfall(ctx, alt, claims, readable, what, facts)
    return blockers(short, eligible, verdicts)


def _most(counts: Counter[str | None]) -> tuple[int, str | None]:
    """The most devices on one node (devices not local to a node count for every node)."""
    everywhere = counts.get(None, 0)
    local = [(n, node) for node, n in counts.items() if node is not None]
    if not local:
        return everywhere, None
    n, node = max(local, key=lambda item: (item[0], item[1] or ""))
    return n + everywhere, node


def _what(eligible: Sequence[Candidate], alt: Alternative) -> str:
    nouns = {noun(c) for c in eligible[:64]}
    if len(nouns) == 1:
        return nouns.pop()
    meta = alt.device_class.metadata
    return f"device of class {meta.name if meta is not None else '?'}"


def _nothing_published(ctx: AllocationContext, name: str) -> Cause:
    where = f"on node {ctx.node.metadata.name}" if ctx.node is not None and ctx.node.metadata else "anywhere"
    return Cause(
        CauseKind.TOO_FEW,
        name,
        f"no devices are published {where}",
        "wait for the GPU driver to publish its devices (is gpu-handler running there?)",
        retry=True,
        facts=Facts(asked=0, matching=0, most_on_one_node=0, free_on_one_node=0),
    )


def _no_match(ctx: AllocationContext, alt: Alternative, trace: RequestTrace) -> Cause:
    """No device passes the selectors: name the selector that rejects the most (the one to fix)
    and the values its attributes have in the cluster."""
    of_class = sum(1 for v in trace.devices if v.of_class)
    # The class selects some devices: a selector of the claim's rejects them all, and is the one.
    rejected = Counter(
        v.detail for v in trace.devices if v.reason == "selector false" and (v.of_class or not of_class)
    )
    detail = rejected.most_common(1)[0][0] if rejected else ""
    expression = detail.split(": ", 2)[-1] if detail else ""
    values = _values(ctx, alt, expression)
    offered = "; ".join(f"{attr} offered: {', '.join(vals) or 'none'}" for attr, vals in values.items())
    meta = alt.device_class.metadata
    owner = detail.split(": ", 1)[0] if detail else f"class {meta.name if meta else '?'}"
    text = f"no device matches the selector of {owner} ({expression or 'no devices published'})"
    if of_class and owner.startswith("claim"):
        text += f"; {plural('device', of_class)} {are(of_class)} of class {meta.name if meta else '?'}"
    if offered:
        text += f"; {offered}"
    return Cause(
        CauseKind.NO_MATCH,
        alt.result_name,
        text,
        "ask for a value that exists (change the selector or the class)",
        retry=False,
        facts=Facts(selector=expression, owner=owner, values=values),
    )


def _values(ctx: AllocationContext, alt: Alternative, expression: str) -> dict[str, list[str]]:
    """Per attribute the expression tests, the values it has among the devices the other selectors
    allow — only attributes compared with a value no device has, when the expression says which."""
    refs = [(m["domain"], m["name"] or m["key"]) for m in _ATTRIBUTE.finditer(expression)]
    if not refs:
        return {}
    missing = {(m["domain"], m["name"] or m["key"]): m["literal"] for m in _COMPARED.finditer(expression)}
    seen: dict[tuple[str, str], set[str]] = {ref: set() for ref in dict.fromkeys(refs)}
    for cand in _scope(ctx, alt):
        for (domain, name), found in seen.items():
            value = attribute(cand, domain, name)
            if value is not None:
                found.add(value)
    culprits = [ref for ref, literal in missing.items() if ref in seen and literal not in seen[ref]]
    shown = culprits or list(seen)
    return {f"{name}": sorted(seen[(domain, name)])[:MAX_VALUES] for domain, name in shown}


def _scope(ctx: AllocationContext, alt: Alternative) -> Iterable[Candidate]:
    """The devices whose values are worth listing: the class's when a claim selector is at fault
    (memoised per pool, shared with every request of the class), else every usable device."""
    if any(not s.of_class for s in alt.selectors) and alt.device_class.metadata is not None:
        name = alt.device_class.metadata.name or ""
        class_alt = class_alternative(name, alt.device_class, ctx.matcher.env)
        key = selector_key(class_alt)
        selected = [
            c for p in ctx.pools if p.usable for c in pool_eligibility(p, class_alt, ctx.matcher, key)[0]
        ]
        if selected:
            return selected
    return ctx.usable_candidates()


__all__ = ["everyone", "verdict_of"]
