"""Handler chain and the thin reconciler template: order, stops, errors, writes, after_write hooks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from kubernetes.client import V1ObjectMeta
from pydantic import BaseModel, ConfigDict, Field

from pkg.framework.client.errors import ApiError, ConflictError
from pkg.framework.reconcile import (
    HandlerChain,
    Resource,
    ResourceReconciler,
    StopHandlerChain,
    merge_results,
)
from pkg.framework.reconcile.chain import ChainOutcome
from pkg.framework.reconcile.contract import Request, Result
from pkg.framework.reconcile.object_reconciler import raise_or_result


class GPUStatus(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    phase: str | None = None


class GPU(BaseModel):
    metadata: V1ObjectMeta
    status: GPUStatus | None = None


@dataclass(frozen=True)
class State:
    resource: Resource[GPU, GPUStatus]


class Step:
    """A handler that records its calls in a shared journal and may set the phase or raise."""

    def __init__(self, name: str, journal: list[str], *, result: Result | None = None, **kw: Any) -> None:
        self.name, self.journal, self.result = name, journal, result
        self.phase: str | None = kw.get("phase")
        self.error: Exception | None = kw.get("error")

    def handle(self, state: State) -> Result | None:
        self.journal.append(f"handle:{self.name}")
        if self.phase:
            state.resource.status().phase = self.phase
        if self.error:
            raise self.error
        return self.result


class FinalizingStep(Step):
    def after_write(self, state: State) -> None:
        self.journal.append(f"after_write:{self.name}")


@pytest.fixture
def journal() -> list[str]:
    return []


@pytest.fixture
def writer(mocker: Any, journal: list[str]) -> Any:
    def update_status(obj: GPU) -> GPU:
        journal.append("update_status")
        return obj

    mock = mocker.Mock(spec=["update_status", "patch_metadata"])
    mock.update_status.side_effect = update_status
    return mock


def reconciler(writer: Any, handlers: Sequence[Step], *, obj: GPU | None = None, **kw: Any) -> Any:
    stored = (
        obj
        if obj is not None
        else GPU(metadata=V1ObjectMeta(name="gpu-a", resource_version="1", generation=1))
    )
    return ResourceReconciler(
        resource_factory=lambda request: Resource(
            request, getter=lambda _r: stored, writer=writer, status_type=GPUStatus
        ),
        state_factory=State,
        handlers=handlers,
        **kw,
    )


def test_merge_results_requeues_if_any_and_the_sooner_delay_wins() -> None:
    assert merge_results(Result(), Result()) == Result()
    assert merge_results(Result(requeue=True), Result()) == Result(requeue=True)
    soon, late = Result(requeue_after=timedelta(seconds=5)), Result(requeue_after=timedelta(minutes=1))
    assert merge_results(late, soon) == soon
    assert merge_results(soon, Result(requeue=True)) == Result(
        requeue=True, requeue_after=timedelta(seconds=5)
    )


def test_handlers_run_in_order_and_results_merge(journal: list[str]) -> None:
    chain = HandlerChain(
        [
            Step("a", journal, result=Result(requeue_after=timedelta(minutes=2))),
            Step("b", journal),
            Step("c", journal, result=Result(requeue_after=timedelta(seconds=30))),
        ]
    )
    outcome = chain.handle(State(resource=None))  # type: ignore[arg-type]
    assert journal == ["handle:a", "handle:b", "handle:c"]
    assert outcome.result == Result(requeue_after=timedelta(seconds=30))
    assert outcome.error is None


def test_full_pass_writes_status_then_runs_after_write_and_returns_the_merged_result(
    journal: list[str], writer: Any
) -> None:
    handlers = [
        FinalizingStep("a", journal, phase="Ready"),
        Step("b", journal, result=Result(requeue=True)),
    ]
    result = reconciler(writer, handlers).reconcile(Request("gpu-a"))
    assert result == Result(requeue=True)
    assert journal == ["handle:a", "handle:b", "update_status", "after_write:a"]
    body = writer.update_status.call_args.args[0]
    assert body.status == GPUStatus(observed_generation=1, phase="Ready")


def test_stop_handler_chain_skips_later_handlers_but_still_writes(journal: list[str], writer: Any) -> None:
    stop = StopHandlerChain(Result(requeue_after=timedelta(seconds=10)), reason="deleting")
    handlers = [
        FinalizingStep("a", journal, phase="Terminating", error=stop),
        FinalizingStep("b", journal),
    ]
    result = reconciler(writer, handlers).reconcile(Request("gpu-a"))
    assert result == Result(requeue_after=timedelta(seconds=10))
    assert journal == ["handle:a", "update_status", "after_write:a"]


def test_handler_error_writes_what_was_set_then_raises_without_finalizing(
    journal: list[str], writer: Any
) -> None:
    handlers = [
        FinalizingStep("a", journal),
        FinalizingStep("b", journal, phase="Failed", error=RuntimeError("nvml down")),
        FinalizingStep("c", journal),
    ]
    with pytest.raises(RuntimeError, match="nvml down") as raised:
        reconciler(writer, handlers).reconcile(Request("gpu-a"))
    assert journal == ["handle:a", "handle:b", "update_status"]
    assert writer.update_status.call_args.args[0].status.phase == "Failed"
    assert "raised by handler 'b'" in (raised.value.__notes__ or [])


def test_handler_error_wins_over_a_failed_write(journal: list[str], writer: Any) -> None:
    writer.update_status.side_effect = ApiError(status=500, reason="InternalError", message="etcd")
    handlers = [Step("a", journal, phase="Failed", error=RuntimeError("nvml down"))]
    with pytest.raises(RuntimeError, match="nvml down") as raised:
        reconciler(writer, handlers).reconcile(Request("gpu-a"))
    assert any("also failed" in note for note in raised.value.__notes__)
    assert isinstance(raised.value.__cause__, ApiError)


def test_conflict_is_a_requeue_not_an_error_and_skips_after_write(journal: list[str], writer: Any) -> None:
    writer.update_status.side_effect = ConflictError(status=409, reason="Conflict", message="stale")
    handlers = [FinalizingStep("a", journal, phase="Ready", result=Result(requeue_after=timedelta(hours=1)))]
    assert reconciler(writer, handlers).reconcile(Request("gpu-a")) == Result(requeue=True)
    assert journal == ["handle:a"]


def test_failed_write_propagates_and_skips_after_write(journal: list[str], writer: Any) -> None:
    writer.update_status.side_effect = ApiError(status=500, reason="InternalError", message="etcd")
    with pytest.raises(ApiError):
        reconciler(writer, [FinalizingStep("a", journal, phase="Ready")]).reconcile(Request("gpu-a"))
    assert journal == ["handle:a"]


def test_no_change_makes_no_call_but_still_runs_after_write(journal: list[str], writer: Any) -> None:
    current = GPU(
        metadata=V1ObjectMeta(name="gpu-a", resource_version="1", generation=1),
        status=GPUStatus(observed_generation=1),
    )
    result = reconciler(writer, [FinalizingStep("a", journal)], obj=current).reconcile(Request("gpu-a"))
    assert result == Result()
    assert writer.mock_calls == []
    assert journal == ["handle:a", "after_write:a"]


def test_missing_object_calls_on_missing_and_runs_no_handler(
    mocker: Any, journal: list[str], writer: Any
) -> None:
    on_missing = mocker.Mock(return_value=Result(requeue_after=timedelta(seconds=1)))
    rec = ResourceReconciler(
        resource_factory=lambda request: Resource(
            request, getter=lambda _r: None, writer=writer, status_type=GPUStatus
        ),
        state_factory=State,
        handlers=[Step("a", journal)],
        on_missing=on_missing,
    )
    assert rec.reconcile(Request("gpu-a")) == Result(requeue_after=timedelta(seconds=1))
    on_missing.assert_called_once_with(Request("gpu-a"))
    assert journal == []
    assert writer.mock_calls == []


def test_missing_object_without_on_missing_is_done(journal: list[str], writer: Any) -> None:
    rec = ResourceReconciler(
        resource_factory=lambda request: Resource(
            request, getter=lambda _r: None, writer=writer, status_type=GPUStatus
        ),
        state_factory=State,
        handlers=[Step("a", journal)],
    )
    assert rec.reconcile(Request("gpu-a")) == Result()
    assert journal == []


def test_a_resource_reconciler_concludes_its_own_way_after_the_write(journal: list[str], writer: Any) -> None:
    """``conclude`` turns a handler's expected error into a quiet requeue; the status still written."""

    class WaitsError(RuntimeError):
        pass

    def conclude(state: State, outcome: ChainOutcome[State]) -> Result:
        if isinstance(outcome.error, WaitsError):
            return Result(requeue=True)
        return raise_or_result(state, outcome)

    waiting = Step("a", journal, phase="Waiting", error=WaitsError("not yet"))
    rec = reconciler(writer, [waiting], conclude=conclude)
    assert rec.reconcile(Request("gpu-a")) == Result(requeue=True)
    assert writer.mock_calls != []  # the condition saying why is not lost
    plain = reconciler(writer, [Step("a", journal, error=WaitsError("not yet"))])
    with pytest.raises(WaitsError):
        plain.reconcile(Request("gpu-a"))
