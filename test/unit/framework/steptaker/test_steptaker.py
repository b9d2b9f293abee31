"""StepTaker: ordering, early stop, failure, and the rollback contract."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pytest

from pkg.framework.steptaker import (
    Continue,
    Fail,
    PipelineError,
    RollbackError,
    StepOutcome,
    StepTaker,
    Stop,
)


@dataclass
class Ctx:
    events: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)


class Pure:
    """A step without side effects: no rollback method at all."""

    def __init__(self, name: str, *, outcome: StepOutcome | None = None) -> None:
        self.name = name
        self._outcome = outcome or Continue()

    def take(self, ctx: Ctx) -> StepOutcome:
        ctx.events.append(f"take:{self.name}")
        return self._outcome


class Effect(Pure):
    """A step with side effects to undo; can be told to raise in take or rollback."""

    def __init__(
        self,
        name: str,
        *,
        outcome: StepOutcome | None = None,
        take_error: Exception | None = None,
        rollback_error: Exception | None = None,
    ) -> None:
        super().__init__(name, outcome=outcome)
        self._take_error = take_error
        self._rollback_error = rollback_error

    def take(self, ctx: Ctx) -> StepOutcome:
        outcome = super().take(ctx)
        if self._take_error is not None:
            raise self._take_error
        return outcome

    def rollback(self, ctx: Ctx) -> None:
        ctx.events.append(f"rollback:{self.name}")
        if self._rollback_error is not None:
            raise self._rollback_error


def test_runs_all_steps_in_order_without_rollback() -> None:
    ctx = Ctx()
    result = StepTaker[Ctx](name="prepare", steps=[Effect("a"), Pure("b"), Effect("c")]).run(ctx)

    assert result.ok
    assert result.completed == ("a", "b", "c")
    assert ctx.events == ["take:a", "take:b", "take:c"]
    assert result.failed_step is None
    assert result.stopped_by is None
    assert result.rolled_back == ()
    result.raise_for_error()  # no-op on success


def test_steps_share_the_context() -> None:
    class Produce:
        name = "produce"

        def take(self, ctx: Ctx) -> StepOutcome:
            ctx.devices.append("gpu-0")
            return Continue()

    class Consume:
        name = "consume"

        def take(self, ctx: Ctx) -> StepOutcome:
            ctx.events.append(f"saw:{','.join(ctx.devices)}")
            return Continue()

    ctx = Ctx()
    assert StepTaker[Ctx](name="p", steps=[Produce(), Consume()]).run(ctx).ok
    assert ctx.events == ["saw:gpu-0"]


def test_fail_rolls_back_completed_steps_in_reverse_and_skips_the_rest() -> None:
    error = RuntimeError("bind vfio: device busy")
    ctx = Ctx()
    steps = [Effect("mig"), Pure("check"), Effect("vfio"), Effect("cdi", outcome=Fail(error)), Effect("late")]
    result = StepTaker[Ctx](name="prepare", steps=steps).run(ctx)

    assert not result.ok
    assert result.failed_step == "cdi"
    assert result.error is error
    assert result.completed == ("mig", "check", "vfio")
    # The failing step cleans up itself; the pure step has nothing to undo; "late" never ran.
    assert ctx.events == ["take:mig", "take:check", "take:vfio", "take:cdi", "rollback:vfio", "rollback:mig"]
    assert result.rolled_back == ("vfio", "mig")
    assert result.rollback_errors == ()


def test_exception_in_take_is_a_failure() -> None:
    error = OSError("nvml: not found")
    ctx = Ctx()
    steps = [Effect("a"), Effect("b", take_error=error), Effect("c")]
    result = StepTaker[Ctx](name="prepare", steps=steps).run(ctx)

    assert result.failed_step == "b"
    assert result.error is error
    assert ctx.events == ["take:a", "take:b", "rollback:a"]
    assert result.rolled_back == ("a",)


def test_non_outcome_return_is_a_failure() -> None:
    class Broken:
        name = "broken"

        def take(self, ctx: Ctx) -> StepOutcome:
            return None  # type: ignore[return-value]

    ctx = Ctx()
    result = StepTaker[Ctx](name="p", steps=[Effect("a"), Broken()]).run(ctx)

    assert result.failed_step == "broken"
    assert isinstance(result.error, TypeError)
    assert ctx.events == ["take:a", "rollback:a"]


def test_rollback_errors_are_reported_and_do_not_stop_other_rollbacks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rollback_error = RuntimeError("destroy MIG instance: in use")
    ctx = Ctx()
    steps = [
        Effect("a"),
        Effect("b", rollback_error=rollback_error),
        Effect("c"),
        Effect("d", outcome=Fail(ValueError("boom"))),
    ]
    with caplog.at_level(logging.INFO, logger="pkg.framework.steptaker"):
        result = StepTaker[Ctx](name="prepare", steps=steps).run(ctx)

    assert ctx.events[-3:] == ["rollback:c", "rollback:b", "rollback:a"]
    assert result.rolled_back == ("c", "a")
    assert result.rollback_errors == (RollbackError(step="b", error=rollback_error),)
    failures = [r for r in caplog.records if r.getMessage().startswith("rollback failed")]
    assert len(failures) == 1
    assert failures[0].__dict__["step"] == "b"
    assert failures[0].__dict__["pipeline"] == "prepare"
    assert failures[0].exc_info is not None


def test_failure_is_logged_with_step_and_pipeline(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="pkg.framework.steptaker"):
        StepTaker[Ctx](name="unprepare", steps=[Effect("x", take_error=KeyError("k"))]).run(Ctx())

    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert record.__dict__["step"] == "x"
    assert record.__dict__["pipeline"] == "unprepare"


def test_stop_skips_later_steps_without_rollback() -> None:
    ctx = Ctx()
    steps = [Effect("a"), Effect("already", outcome=Stop("already prepared")), Effect("late")]
    result = StepTaker[Ctx](name="prepare", steps=steps).run(ctx)

    assert result.ok
    assert result.stopped_by == "already"
    assert result.stop_reason == "already prepared"
    assert result.completed == ("a", "already")
    assert ctx.events == ["take:a", "take:already"]
    assert result.rolled_back == ()


def test_raise_for_error_chains_the_step_error() -> None:
    error = RuntimeError("write CDI spec: read-only fs")
    result = StepTaker[Ctx](name="prepare", steps=[Effect("cdi", outcome=Fail(error))]).run(Ctx())

    with pytest.raises(PipelineError, match="'cdi' failed") as excinfo:
        result.raise_for_error()
    assert excinfo.value.result is result
    assert excinfo.value.__cause__ is error


def test_duplicate_step_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate step names"):
        StepTaker[Ctx](name="p", steps=[Effect("a"), Pure("a")])


def test_empty_pipeline_succeeds() -> None:
    taker = StepTaker[Ctx](name="noop", steps=[])
    assert taker.name == "noop"
    assert taker.run(Ctx()).ok
