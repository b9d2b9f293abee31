"""One claim explained from one set of allocation inputs: the single implementation behind every
way of asking (``gpu-dra-controller explain``, ``kubectl gpu explain``, and gpu-dra-controller's
answer to a ClaimExplanation).

Why one function: the explanation must be the allocator's own (one attempt and its trace, nothing
allocated twice) and read the same wherever it is computed; the callers differ only in where the
inputs come from (a bundle, the API server, the controller's informer caches) and which
:class:`~pkg.dra.allocator.Allocator` runs it (the controller's shares its pool cache, so the
pools it already built are not built again).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from kubernetes.client import ResourceV1ResourceClaim, V1AllocationResult

    from pkg.dra.allocator import AllocationInputs, Allocator
    from pkg.dra.explain.device_words import Readable
    from pkg.dra.explain.verdict import Verdict

TRUNCATION_NOTE: Final = "... report cut at {limit} KiB ({dropped} more lines): --max-devices lists fewer\n"


@dataclass(frozen=True)
class Report:
    """One claim explained: the rendered report, whether it is allocatable now, what it holds, and
    the verdict as data (what ``-o json``/``-o yaml`` print; the report's first section)."""

    text: str
    allocatable: bool
    current: V1AllocationResult | None
    verdict: Verdict | None = None


def explain_inputs(
    claim: ResourceV1ResourceClaim,
    inputs: AllocationInputs,
    *,
    allocator: Allocator,
    show_all: bool = False,
    max_devices: int = 40,
    readable: Readable | None = None,
) -> Report:
    """Explains ``claim`` against ``inputs`` with one attempt of ``allocator`` and its own trace.
    ``readable`` says in which namespaces the caller may read the claims that hold devices (their
    names appear only there; default: everywhere). An exception here is a bug, not an input error
    (callers check that the claim exists)."""
    # Imported here, not with the module: :class:`Report` also holds ``kubectl gpu explain``'s
    # answer from gpu-dra-controller, a process that computes none (docs/performance.md).
    from pkg.dra.allocator import Unschedulable, explain  # noqa: PLC0415 - see above
    from pkg.dra.explain.causes import everyone, verdict_of  # noqa: PLC0415 - see above
    from pkg.dra.explain.device_holds import hold_words  # noqa: PLC0415 - see above
    from pkg.dra.explain.render import render  # noqa: PLC0415 - see above

    explanation = explain(allocator.attempt(claim, inputs), allocator=allocator)
    verdict = verdict_of(explanation, inputs, readable=readable or everyone)
    holds = hold_words(
        explanation.context, explanation.requests, inputs.allocated_claims, readable or everyone
    )
    return Report(
        text=render(explanation, show_all=show_all, max_devices=max_devices, verdict=verdict, holds=holds),
        allocatable=not isinstance(explanation.outcome, Unschedulable),
        current=claim.status.allocation if claim.status is not None else None,
        verdict=verdict,
    )


def explanation_document(
    claim: str, text: str, verdict: Verdict | None, current: str | None
) -> dict[str, object]:
    """What ``-o json`` and ``-o yaml`` print: the verdict as data, then the report it heads."""
    return {
        "claim": claim,
        **(verdict.to_dict() if verdict is not None else {}),
        **({"currentAllocation": current} if current is not None else {}),
        "report": text,
    }


def bounded(text: str, limit_bytes: int) -> tuple[str, bool]:
    """``text`` cut at a line boundary so that it, with a closing note saying so, fits in
    ``limit_bytes`` of UTF-8; and whether it was cut. Why: a report is stored in an object
    (etcd's limit is 1.5 MiB per object), and ``--all`` over 224,000 devices is tens of MiB."""
    if len(text.encode()) <= limit_bytes:
        return text, False
    lines = text.splitlines(keepends=True)
    budget = limit_bytes - len(TRUNCATION_NOTE.format(limit=limit_bytes // 1024, dropped=len(lines)).encode())
    kept, used = [], 0
    for line in lines:
        size = len(line.encode())
        if used + size > budget:
            break
        kept.append(line)
        used += size
    note = TRUNCATION_NOTE.format(limit=limit_bytes // 1024, dropped=len(lines) - len(kept))
    return "".join(kept) + note, True
