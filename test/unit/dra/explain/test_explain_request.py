"""Asking gpu-dra-controller (``pkg.dra.explain.request``): create, wait on a watch, delete; and
every way of getting no answer is a :class:`NotServedError` the CLIs fall back on."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from api.gpu.v1alpha1 import ClaimExplanation, ClaimExplanationSpec, ExplanationOutcome
from pkg.domain.kinds import CLAIM_EXPLANATION
from pkg.dra.explain.request import NotServedError, answer_of, ask, request_for
from pkg.framework.client import ApiError, NotFoundError
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.client.watch import WatchEvent, WatchEventType

CLAIM = RESOURCE_CLAIM.decode(
    {"metadata": {"name": "train-0", "namespace": "ml", "uid": "claim-uid"}, "spec": {}}
)
SPEC = ClaimExplanationSpec(claim_name="train-0")


def raw(*, generation: int = 1, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "ClaimExplanation",
        "metadata": {
            "name": "train-0-abcde",
            "namespace": "ml",
            "uid": "req-uid",
            "generation": generation,
            "resourceVersion": "10",
        },
        "spec": {"claimName": "train-0"},
    }
    if status is not None:
        obj["status"] = status
    return obj


ANSWERED = {"observedGeneration": 1, "outcome": "NotAllocatable", "report": "claim ml/train-0 ...\n"}


class FakeKube:
    """create/watch/get/delete of one ClaimExplanation; ``events`` are what each watch streams."""

    def __init__(self, events: list[list[WatchEvent]], *, create_error: Exception | None = None) -> None:
        self.events = events
        self.create_error = create_error
        self.created: list[ClaimExplanation] = []
        self.deleted: list[tuple[str, str | None]] = []
        self.watches: list[dict[str, Any]] = []

    def create(self, kind: Any, obj: ClaimExplanation, namespace: str | None = None) -> Any:
        assert kind is CLAIM_EXPLANATION
        if self.create_error is not None:
            raise self.create_error
        self.created.append(obj)
        return CLAIM_EXPLANATION.decode(raw())

    def watch(self, kind: Any, **kwargs: Any) -> Iterator[WatchEvent]:
        self.watches.append(kwargs)
        yield from (self.events.pop(0) if self.events else [])

    def get(self, kind: Any, name: str, namespace: str | None = None) -> ClaimExplanation:
        return CLAIM_EXPLANATION.decode(raw())

    def delete(self, kind: Any, name: str, namespace: str | None = None, **_: Any) -> None:
        self.deleted.append((name, namespace))


def event(obj: dict[str, Any], kind: WatchEventType = WatchEventType.MODIFIED) -> WatchEvent:
    return WatchEvent(type=kind, resource_version="11", raw=obj)


def test_the_request_is_owned_by_the_claim_and_named_after_it() -> None:
    request = request_for(CLAIM, SPEC)
    assert request.metadata.generate_name == "train-0-"
    assert request.metadata.namespace == "ml"
    [owner] = request.metadata.owner_references or []
    assert (owner.kind, owner.name, owner.uid) == ("ResourceClaim", "train-0", "claim-uid")


def test_the_answer_comes_from_the_watch_and_the_request_is_deleted() -> None:
    kube = FakeKube([[event(raw()), event(raw(status=ANSWERED))]])
    answer = ask(kube, CLAIM, SPEC, timeout=5)  # type: ignore[arg-type]
    assert answer.outcome is ExplanationOutcome.NOT_ALLOCATABLE
    assert answer.report == "claim ml/train-0 ...\n"
    assert kube.watches[0]["field_selector"] == "metadata.name=train-0-abcde"
    assert kube.watches[0]["resource_version"] == "10"  # from the created version: nothing is missed
    assert kube.deleted == [("train-0-abcde", "ml")]


def test_an_answer_for_an_older_generation_is_no_answer() -> None:
    stale = raw(generation=2, status=ANSWERED)
    assert answer_of(CLAIM_EXPLANATION.decode(stale)) is None
    assert answer_of(CLAIM_EXPLANATION.decode(raw(status=ANSWERED))) is not None


def test_no_answer_in_time_is_not_served_and_the_request_is_still_deleted() -> None:
    ticks = itertools.count(0.0, 1.0)
    kube = FakeKube([[event(raw())]] * 10)
    with pytest.raises(NotServedError, match="did not answer in time"):
        ask(kube, CLAIM, SPEC, timeout=3, clock=lambda: next(ticks))  # type: ignore[arg-type]
    assert kube.deleted == [("train-0-abcde", "ml")]


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (NotFoundError(status=404, reason="NotFound", message="no kind"), "not installed"),
        (ApiError(status=403, reason="Forbidden", message="no"), "forbidden: you cannot create"),
        (ApiError(status=500, reason="InternalError", message="etcd"), "the API server answered"),
    ],
)
def test_no_crd_or_no_right_is_not_served(error: Exception, message: str) -> None:
    kube = FakeKube([], create_error=error)
    with pytest.raises(NotServedError, match=message):
        ask(kube, CLAIM, SPEC, timeout=3)  # type: ignore[arg-type]
    assert kube.deleted == []


def test_a_request_deleted_before_its_answer_is_not_served() -> None:
    kube = FakeKube([[event(raw(), WatchEventType.DELETED)]])
    with pytest.raises(NotServedError, match="deleted before"):
        ask(kube, CLAIM, SPEC, timeout=3)  # type: ignore[arg-type]
