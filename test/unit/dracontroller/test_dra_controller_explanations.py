"""ClaimExplanations answered by gpu-dra-controller: the same report as the local explain, once per
request, from a snapshot taken under the decision lock but diagnosed outside it; bounded text;
deleted after the TTL."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from kubernetes.client import V1ObjectMeta
from pytest_mock import MockerFixture
from testutil.k8s_fields import name_of
from testutil.unit.dra.allocator.alloc_builders import a30_pool, claim, exact
from testutil.unit.dracontroller.dra_controller_fakes import T0, Env, our_mig_class, our_physical_class

from api.gpu.v1alpha1 import (
    ClaimExplanation,
    ClaimExplanationSpec,
    ClaimExplanationStatus,
    ExplanationOutcome,
    ExplanationStrategy,
)
from pkg.dra.allocator import AllocationInputs, Allocator
from pkg.dra.allocator.pools import PoolCache
from pkg.dra.explain.bundle import ExplainObjects
from pkg.dra.explain.cli import explain_claim
from pkg.dracontroller.explanations.explainer import ClaimNotCachedError, Explainer
from pkg.dracontroller.explanations.reconciler import ExplanationReconciler
from pkg.dracontroller.internal.service.claim_writer import planned
from pkg.framework.reconcile.contract import Request, Result

CARD = "gpu-0000-02-00-0"


def env(mocker: MockerFixture) -> Env:
    return Env(mocker, a30_pool(), [our_mig_class("1g"), our_mig_class("2g"), our_physical_class()])


def explainer(e: Env, **kwargs: Any) -> Explainer:
    return Explainer(
        decisions=e.container.decisions(),
        allocator=e.allocator,
        pool_cache=PoolCache(),
        nodes=lambda name: None,
        clock=lambda: T0,
        **kwargs,
    )


def local_report(e: Env, key: str, *, first_fit: bool = False) -> str:
    """What `gpu-dra-controller explain --local` prints for the same objects."""
    objects = ExplainObjects()
    objects.slices = list(e.slices.list())
    for obj in (*e.classes.list(), *e.claims.list(), *e.namespaces.list()):
        objects.add(obj, "test")
    return explain_claim(objects, key, node=None, first_fit=first_fit).text


def test_the_answer_is_the_local_report(mocker: MockerFixture) -> None:
    e = env(mocker)
    e.reconcile(e.add(claim("held", exact("gpu", "mig-1g"))))  # allocated by the controller
    e.sync()
    pending = e.add(claim("pending", exact("gpu", "mig-2g", count=2)))
    for strategy in ExplanationStrategy:
        status = explainer(e).answer(
            "default", ClaimExplanationSpec(claim_name=name_of(pending), strategy=strategy)
        )
        expected = local_report(e, "default/pending", first_fit=strategy is ExplanationStrategy.FIRST_FIT)
        assert status.report == expected
        # the held claim counts, as it does locally, and is named (same namespace as the asker)
        assert "blocked by the MIG 1g device of claim default/held on the same card" in expected
        assert status.outcome in (ExplanationOutcome.ALLOCATABLE, ExplanationOutcome.NOT_ALLOCATABLE)
        assert status.computed_at == T0
        assert not status.truncated


def test_the_answer_carries_the_causes_and_names_only_the_askers_namespace(mocker: MockerFixture) -> None:
    """The causes are stored as data (what ``-o json`` prints); a holder in another namespace is
    counted, not named: the asker may create requests here, not read claims there."""
    e = env(mocker)
    whole = name_of(our_physical_class())
    e.reconcile(e.add(claim("card", exact("gpu", whole), namespace="other")))
    e.sync()
    pending = e.add(claim("pending", exact("gpu", whole)))
    status = explainer(e).answer("default", ClaimExplanationSpec(claim_name=name_of(pending)))
    assert status.outcome is ExplanationOutcome.NOT_ALLOCATABLE
    assert status.retry is True
    [cause] = status.causes or []
    assert cause.kind == "HeldByOthers"
    assert cause.text.endswith("1 whole card is held by claims you cannot read")
    assert cause.facts is not None
    assert cause.facts.hidden_holders == 1
    assert cause.facts.holders is None
    assert "other/card" not in (status.report or "")
    assert "other/card" in local_report(e, "default/pending")  # the CLI read every claim itself


def test_an_allocated_claim_says_what_it_holds(mocker: MockerFixture) -> None:
    e = env(mocker)
    held = e.add(claim("held", exact("gpu", "mig-1g")))
    e.reconcile(held)
    e.sync()
    status = explainer(e).answer("default", ClaimExplanationSpec(claim_name="held"))
    assert status.outcome is ExplanationOutcome.ALLOCATABLE
    assert status.current_allocation is not None
    assert f"{CARD}-mig-1g-0 on node node-a" in status.current_allocation


def test_a_missing_claim_or_node_is_said(mocker: MockerFixture) -> None:
    e = env(mocker)
    with pytest.raises(ClaimNotCachedError, match="default/nope"):
        explainer(e).answer("default", ClaimExplanationSpec(claim_name="nope"))
    status = explainer(e).not_found("default/nope")
    assert (status.outcome, status.reason) == (
        ExplanationOutcome.ERROR,
        "ResourceClaim default/nope not found",
    )
    assert status.report is None
    e.add(claim("pending", exact("gpu", "mig-1g")))
    status = explainer(e).answer("default", ClaimExplanationSpec(claim_name="pending", node="ghost"))
    assert (status.outcome, status.reason) == (ExplanationOutcome.ERROR, "node ghost not found")


def test_the_report_is_bounded_and_says_it_was_cut(mocker: MockerFixture) -> None:
    e = env(mocker)
    e.add(claim("pending", exact("gpu", "mig-1g")))
    spec = ClaimExplanationSpec(claim_name="pending", all=True, max_devices=0)
    full = explainer(e).answer("default", spec).report or ""
    status = explainer(e, max_report_bytes=400).answer("default", spec)
    assert len(full.encode()) > 400
    assert status.truncated is True
    report = status.report or ""
    assert len(report.encode()) <= 400
    assert report.endswith("more lines): --max-devices lists fewer\n")
    assert full.startswith(report.rsplit("...", 1)[0])  # whole lines of the full report, in order


def test_the_diagnosis_runs_outside_the_decision_lock(mocker: MockerFixture) -> None:
    """Only the snapshot is taken under the lock: a decision of another worker could run while the
    (long, at 1,000 nodes) attempt and diagnosis of an explanation do."""
    e = env(mocker)
    e.add(claim("pending", exact("gpu", "mig-1g")))
    free_during_attempt: list[bool] = []

    class Probe(Allocator):
        def attempt(self, c: Any, inputs: AllocationInputs) -> Any:
            other = threading.Thread(target=lambda: free_during_attempt.append(_try_lock(e)))
            other.start()
            other.join()
            return super().attempt(c, inputs)

    Explainer(
        decisions=e.container.decisions(), allocator=Probe(), pool_cache=PoolCache(), nodes=lambda n: None
    ).answer("default", ClaimExplanationSpec(claim_name="pending"))
    assert free_during_attempt == [True]


def _try_lock(e: Env) -> bool:
    if e.in_flight.lock.acquire(blocking=False):
        e.in_flight.lock.release()
        return True
    return False


def test_the_snapshot_sees_reservations_of_writes_on_the_wire(mocker: MockerFixture) -> None:
    """A decision reserved (its write not landed, not in the cache): the explanation counts it."""
    e = env(mocker)
    e.add(claim("pending", exact("gpu", "physical")))
    before = explainer(e).answer("default", ClaimExplanationSpec(claim_name="pending"))
    assert before.outcome is ExplanationOutcome.ALLOCATABLE
    other = e.add(claim("other", exact("gpu", "physical")))
    decision = e.container.decisions()._decide(other, "default")
    e.in_flight.reserve(planned(other, decision.outcome))  # type: ignore[arg-type]
    after = explainer(e).answer("default", ClaimExplanationSpec(claim_name="pending"))
    assert after.outcome is ExplanationOutcome.NOT_ALLOCATABLE
    assert "already allocated" in (after.report or "")


# -- the reconciler ---------------------------------------------------------------------------------


class Answers:
    def __init__(self, *, cached: bool = True) -> None:
        self.asked: list[tuple[str, str]] = []
        self.cached = cached

    def answer(self, namespace: str, spec: ClaimExplanationSpec) -> ClaimExplanationStatus:
        self.asked.append((namespace, spec.claim_name))
        if not self.cached:
            raise ClaimNotCachedError(f"{namespace}/{spec.claim_name}")
        return ClaimExplanationStatus(
            outcome=ExplanationOutcome.NOT_ALLOCATABLE, report="r\n", computed_at=T0
        )

    def not_found(self, key: str) -> ClaimExplanationStatus:
        return ClaimExplanationStatus(
            outcome=ExplanationOutcome.ERROR, reason=f"{key} not found", computed_at=T0
        )


class Writes:
    def __init__(self) -> None:
        self.answered: list[ClaimExplanationStatus] = []
        self.deleted: list[str] = []

    def answer(self, obj: ClaimExplanation, status: ClaimExplanationStatus) -> None:
        self.answered.append(status)
        obj.status = status  # as the cache will show it once the watch delivers the write

    def delete(self, obj: ClaimExplanation) -> None:
        self.deleted.append(obj.metadata.name or "")


def request_object(generation: int = 1) -> ClaimExplanation:
    return ClaimExplanation(
        metadata=V1ObjectMeta(
            name="q", namespace="ml", uid="u", generation=generation, creation_timestamp=T0
        ),
        spec=ClaimExplanationSpec(claim_name="train-0"),
    )


def test_each_request_is_answered_once_then_deleted_after_the_ttl() -> None:
    obj, answers, writes = request_object(), Answers(), Writes()
    now = [T0]
    reconciler = ExplanationReconciler(
        get=lambda r: obj, explainer=answers, writer=writes, ttl=600, clock=lambda: now[0]
    )
    assert reconciler.reconcile(Request("q", "ml")) == Result(requeue_after=timedelta(seconds=600))
    assert answers.asked == [("ml", "train-0")]
    assert writes.answered[0].observed_generation == 1
    now[0] = T0 + timedelta(seconds=60)  # resynced, or its own status event: not computed again
    assert reconciler.reconcile(Request("q", "ml")) == Result(requeue_after=timedelta(seconds=540))
    assert len(answers.asked) == 1
    assert writes.deleted == []
    now[0] = T0 + timedelta(seconds=600)
    assert reconciler.reconcile(Request("q", "ml")) == Result()
    assert writes.deleted == ["q"]


def test_a_changed_spec_is_answered_again() -> None:
    obj, answers, writes = request_object(), Answers(), Writes()
    reconciler = ExplanationReconciler(get=lambda r: obj, explainer=answers, writer=writes, clock=lambda: T0)
    reconciler.reconcile(Request("q", "ml"))
    obj.metadata.generation = 2
    reconciler.reconcile(Request("q", "ml"))
    assert len(answers.asked) == 2
    assert writes.answered[-1].observed_generation == 2


def test_a_claim_the_cache_does_not_show_yet_is_waited_for_then_not_found() -> None:
    """The requester read the claim just before; the claim cache may lag by milliseconds."""
    obj, answers, writes = request_object(), Answers(cached=False), Writes()
    now = [T0 + timedelta(seconds=1)]
    reconciler = ExplanationReconciler(
        get=lambda r: obj, explainer=answers, writer=writes, clock=lambda: now[0]
    )
    assert reconciler.reconcile(Request("q", "ml")) == Result(requeue_after=timedelta(milliseconds=500))
    assert writes.answered == []
    now[0] = T0 + timedelta(seconds=5)
    assert reconciler.reconcile(Request("q", "ml")) == Result(requeue_after=timedelta(seconds=600))
    [status] = writes.answered
    assert (status.outcome, status.reason, status.observed_generation) == (
        ExplanationOutcome.ERROR,
        "ml/train-0 not found",
        1,
    )


def test_a_gone_or_deleting_request_is_left_alone() -> None:
    answers, writes = Answers(), Writes()
    gone = ExplanationReconciler(get=lambda r: None, explainer=answers, writer=writes)
    assert gone.reconcile(Request("q", "ml")) == Result()
    deleting = request_object()
    deleting.metadata.deletion_timestamp = T0
    reconciler = ExplanationReconciler(get=lambda r: deleting, explainer=answers, writer=writes)
    assert reconciler.reconcile(Request("q", "ml")) == Result()
    assert answers.asked == []
    assert writes.answered == []
    assert writes.deleted == []


def test_one_worker() -> None:
    assert ExplanationReconciler.max_workers == 1
