"""The one line of an ``AllocationFailed`` Event: the cause first, then the allocator's words.

``kubectl describe resourceclaim`` (and the Pod's scheduling events) is where a user looks before
anyone runs ``explain``, so the Event leads with the verdict's first cause, in the same words as
the report (``request gpu: 3 whole cards asked, 2 match in the cluster, at most 1 on one node;
would change it: ...``), says whether waiting helps, and only then keeps what the Event said
before — the allocator's outcome and the per-request device counts, for whoever greps for them.

An Event's message is capped at 1 KiB by the API (``events.k8s.io/v1`` ``note``), and the recorder
cuts bytes blindly; here the line is cut at a part or word boundary, so the cause always survives
whole when it fits and a cut is marked with an ellipsis.
"""

from __future__ import annotations

from typing import Final

from pkg.dra.allocator import Explanation, Unschedulable
from pkg.dra.explain.device_words import plural
from pkg.dra.explain.render import summary
from pkg.dra.explain.verdict import NO_RETRY_NOTE, RETRY_NOTE, Verdict

MAX_EVENT_BYTES: Final = 1024
"""The API's cap on an Event's message (``note``), in bytes of UTF-8."""
_SEP = "; "
_CUT = "…"


def event_message(
    explanation: Explanation, verdict: Verdict | None, *, max_bytes: int = MAX_EVENT_BYTES
) -> str:
    """The Event line for a claim that cannot be allocated (see the module docs), at most
    ``max_bytes`` of UTF-8."""
    parts: list[str] = []
    if verdict is not None and verdict.causes:
        first, *others = verdict.causes
        parts += [first.line(), f"would change it: {first.remedy}"]
        if others:
            parts.append(f"and {plural('more cause', len(others))} (kubectl gpu explain lists them)")
        parts.append(RETRY_NOTE if verdict.retry else NO_RETRY_NOTE)
    if isinstance(explanation.outcome, Unschedulable):
        parts.append(str(explanation.outcome))
    detail = summary(explanation)
    if detail:
        parts.append(detail)
    return clip_parts(parts, max_bytes)


def clip_parts(parts: list[str], max_bytes: int) -> str:
    """``parts`` joined by ``; ``, as many whole parts as fit in ``max_bytes`` (then ``; …``); a
    first part too long on its own is cut at a word boundary and ends with ``…``."""
    text = _SEP.join(parts)
    if _size(text) <= max_bytes:
        return text
    tail = _SEP + _CUT
    kept = ""
    for part in parts:
        longer = f"{kept}{_SEP}{part}" if kept else part
        if _size(longer) + _size(tail) > max_bytes:
            break
        kept = longer
    if kept:
        return kept + tail
    return _cut_words(parts[0] if parts else "", max_bytes)


def _cut_words(text: str, max_bytes: int) -> str:
    room = max_bytes - _size(_CUT)
    if room <= 0:
        return ""
    head = text.encode()[:room].decode(errors="ignore")  # never half a character
    if " " in head.rstrip():
        head = head[: head.rstrip().rindex(" ")]
    return head.rstrip(" ;,") + _CUT


def _size(text: str) -> int:
    return len(text.encode())
