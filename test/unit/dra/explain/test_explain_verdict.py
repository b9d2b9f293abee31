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
