"""The ``AllocationFailed`` Event line: the first cause in the verdict's words leads, then the
allocator's outcome and counts; never over the API's 1 KiB, cut on a boundary, never mid-character."""

from __future__ import annotations

import pytest
from kubernetes.client import ResourceV1ResourceClaim, V1DeviceClass, V1ResourceSlice
from testutil.unit.dra.allocator.alloc_builders import a30_pool, claim, exact, mig_class, physical_class

from pkg.dra.allocator import AllocationInputs, Allocator, Explanation, explain
from pkg.dra.explain.causes import verdict_of
from pkg.dra.explain.event_text import MAX_EVENT_BYTES, clip_parts, event_message
from pkg.dra.explain.verdict import NO_RETRY_NOTE, RETRY_NOTE, Verdict

TWO_NODES = [*a30_pool("node-a", card="gpu-0000-02-00-0"), *a30_pool("node-b", card="gpu-0000-03-00-0")]


def attempt(asked: ResourceV1ResourceClaim, *classes: V1DeviceClass) -> tuple[Explanation, Verdict]:
    slices: list[V1ResourceSlice] = TWO_NODES
    inputs = AllocationInputs.of(slices=slices, classes=list(classes), allocated_claims=[])
    allocator = Allocator()
    explanation = explain(allocator.attempt(asked, inputs), allocator=allocator)
    return explanation, verdict_of(explanation, inputs)


def test_the_cause_leads_then_what_would_change_it_then_the_mechanism() -> None:
    explanation, verdict = attempt(
        claim("wants-three", exact("gpu", "physical-exclusive", count=3)), physical_class()
    )
    message = event_message(explanation, verdict)
    assert message.startswith(
        "request gpu: 3 whole cards asked, 2 match in the cluster, at most 1 on one node; "
        "would change it: ask for at most 1, or add nodes with more whole cards; "
        f"{RETRY_NOTE}; cannot allocate all claims; request gpu: "
    )
    [cause] = verdict.causes
    assert message.startswith(cause.line())  # the report's own words
    assert "…" not in message
    assert len(message.encode()) <= MAX_EVENT_BYTES


def test_a_profile_nobody_offers_does_not_suggest_waiting() -> None:
    explanation, verdict = attempt(claim("wants-7g", exact("gpu", "mig-7g")), mig_class("7g"))
    message = event_message(explanation, verdict)
    assert message.startswith("request gpu: no device matches the selector of class mig-7g (")
    assert "migProfile offered: 1g, 2g, 4g; would change it: ask for a value that exists" in message
    assert NO_RETRY_NOTE in message
    assert RETRY_NOTE not in message


def test_without_a_verdict_the_line_is_the_mechanism_alone() -> None:
    explanation, _ = attempt(
        claim("wants-three", exact("gpu", "physical-exclusive", count=3)), physical_class()
    )
    assert event_message(explanation, None).startswith("cannot allocate all claims; request gpu: ")


def test_a_long_line_keeps_the_cause_whole_and_marks_the_cut() -> None:
    explanation, verdict = attempt(
        claim("wants-three", exact("gpu", "physical-exclusive", count=3)), physical_class()
    )
    [cause] = verdict.causes
    full = event_message(explanation, verdict)
    limit = len(cause.line().encode()) + 60  # room for the cause, not for the rest
    message = event_message(explanation, verdict, max_bytes=limit)
    assert len(message.encode()) <= limit < len(full.encode())
    assert message.startswith(cause.line() + "; ")
    assert message.endswith("; …")


def test_whole_parts_are_kept_while_they_fit() -> None:
    parts = ["a" * 10, "b" * 10, "c" * 10]
    assert clip_parts(parts, 100) == "; ".join(parts)
    assert clip_parts(parts, 30) == f"{'a' * 10}; {'b' * 10}; …"


@pytest.mark.parametrize("limit", [20, 21, 22, 23, 40])
def test_a_first_part_too_long_is_cut_between_words_never_inside_a_character(limit: int) -> None:
    text = "überall können Geräte fehlen " * 4  # two-byte characters at every cut
    message = clip_parts([text, "rest"], limit)
    encoded = message.encode()
    assert len(encoded) <= limit
    assert encoded.decode() == message
    assert message.endswith("…")
    kept = message.removesuffix("…")
    assert kept
    assert text.startswith(kept)
    assert text[len(kept)] == " "  # the cut falls between words
