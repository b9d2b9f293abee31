"""The verdict as data: what the ClaimExplanation status stores reads back as the same verdict, so
``kubectl gpu explain -o json`` says the same whether gpu-dra-controller answered or not."""

from __future__ import annotations

from api.gpu.v1alpha1 import ClaimExplanationStatus, ExplanationOutcome
from pkg.dra.explain.verdict import (
    NO_RETRY_NOTE,
    RETRY_NOTE,
    Cause,
    CauseKind,
    Facts,
    Verdict,
    from_status,
    to_status,
)

HELD = Cause(
    CauseKind.HELD,
    "gpu",
    "1 asked, 1 match, 0 free on one node; 1 whole card is held by claims you cannot read",
    "wait for those claims to be released, or free them",
    retry=True,
    facts=Facts(
        asked=1, matching=1, most_on_one_node=1, node="n1", free_on_one_node=0, blocked=1, hidden_holders=1
    ),
)
NO_MATCH = Cause(
    CauseKind.NO_MATCH,
    "gpu",
    "no device matches the selector of class mig-7g",
    "ask for a value that exists (change the selector or the class)",
    retry=False,
    facts=Facts(selector="x" * 20_000, owner="class mig-7g", values={"migProfile": ["1g.6gb", "2g.12gb"]}),
)


def test_the_status_reads_back_as_the_same_verdict() -> None:
    verdict = Verdict(False, (HELD,))
    status = ClaimExplanationStatus(outcome=ExplanationOutcome.NOT_ALLOCATABLE, causes=to_status(verdict))
    stored = ClaimExplanationStatus.from_api_dict(status.to_api_dict())  # through the API server
    assert from_status(False, stored.causes) == verdict
    assert stored.to_api_dict()["causes"][0]["facts"]["hiddenHolders"] == 1


def test_a_long_selector_is_clipped_to_fit_its_field() -> None:
    [stored] = to_status(Verdict(False, (NO_MATCH,)))
    assert stored.facts is not None
    assert stored.facts.selector is not None
    assert len(stored.facts.selector) == 10240
    assert stored.facts.values == {"migProfile": ["1g.6gb", "2g.12gb"]}


def test_an_older_controllers_answer_has_no_causes() -> None:
    assert from_status(True, None) == Verdict(True)


def test_retry_is_said_when_one_cause_would_change_with_capacity() -> None:
    assert Verdict(False, (NO_MATCH,)).lines()[-1] == f"  {NO_RETRY_NOTE}"
    assert Verdict(False, (NO_MATCH, HELD)).lines()[-1] == f"  {RETRY_NOTE}"
    assert Verdict(False, (NO_MATCH, HELD)).to_dict()["retry"] is True
    assert Verdict(True).lines() == []


def crowded() -> Cause:
    """A cause about a cluster far larger than the status's bounds: every list and string over."""
    return Cause(
        CauseKind.HELD,
        "r" * 600,
        "5000 whole cards are held by " + "x" * 10_000,
        "wait " * 500,
        retry=True,
        facts=Facts(
            asked=5000,
            node="n" * 300,
            owner="o" * 600,
            values={f"attribute{i}": [f"v{j}" for j in range(100)] for i in range(40)},
            holders=tuple(f"team-{i}/train-{i}" for i in range(5000)),
            cards=tuple(f"gpu-{i:04x}" for i in range(100)),
            taints=tuple(f"example.com/{'k' * 300}{i}=v:NoSchedule since 2026-03-01" for i in range(100)),
            attribute="a" * 600,
            constraint="matchAttribute" * 10,
        ),
    )


def test_thousands_of_holders_are_clipped_to_the_bounds_saying_how_many_more() -> None:
    [stored] = to_status(Verdict(False, (crowded(),)))  # the model enforces the CRD's bounds
    facts = stored.facts
    assert facts is not None
    assert facts.holders is not None
    assert len(facts.holders) == 32
    assert facts.holders[:2] == ["team-0/train-0", "team-1/train-1"]
    assert facts.holders[-1] == "and 4969 more"
    assert facts.cards is not None
    assert facts.cards[-1] == "and 69 more"
    assert facts.taints is not None
    assert len(facts.taints) == 32
    assert all(len(t) <= 1024 for t in facts.taints)
    assert facts.values is not None
    assert len(facts.values) == 16
    assert facts.values["attribute0"][-1] == "and 69 more"
    assert stored.request is not None
    assert len(stored.request) == 512
    assert stored.request.endswith("…")
    assert len(stored.text) == 4096
    assert len(stored.remedy) == 1024
    assert facts.node is not None
    assert len(facts.node) == 253


def test_a_clipped_verdict_round_trips_through_the_status() -> None:
    status = ClaimExplanationStatus(
        outcome=ExplanationOutcome.NOT_ALLOCATABLE, causes=to_status(Verdict(False, (crowded(),) * 70))
    )
    stored = ClaimExplanationStatus.from_api_dict(status.to_api_dict())
    assert stored.causes is not None
    assert len(stored.causes) == 64
    verdict = from_status(False, stored.causes)
    assert to_status(verdict) == stored.causes  # clipping is stable: what is stored is stored again
    [cause, *_] = verdict.causes
    assert cause.facts.holders[-1] == "and 4969 more"
    assert cause.facts.asked == 5000
    assert cause.retry
