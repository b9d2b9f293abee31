"""The step taker: order, STOP, NOT_APPLICABLE, compensation on failure, stuck undos, recovery undo,
hooks, refused names, BaseException, the duration histogram and the log fields.

The context of every pipeline here is the journal itself: each step appends ``take:<name>`` and
``undo:<name>`` to it, and the hooks append ``<when>:<step>``, so one list shows what ran, in which
order, interleaved.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from pkg.framework.metrics.provider import MetricsProvider
from pkg.framework.steptaker import Pipeline, PipelineResult, StepOutcome, UndoFailure, When

Journal = list[str]

DOCS = Path(__file__).resolve().parents[3] / "docs" / "framework.md"

DONE, NOT_APPLICABLE, STOP = StepOutcome.DONE, StepOutcome.NOT_APPLICABLE, StepOutcome.STOP


class FakeClock:
    """A monotonic clock that moves only when a step says its take lasted a while."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """A step that journals its takes and undos, returns ``outcome``, and may raise in either."""

    def __init__(
        self,
        name: str,
        *,
        outcome: Any = DONE,
        take_error: BaseException | None = None,
        undo_error: Exception | None = None,
        clock: FakeClock | None = None,
        lasts: float = 0.0,
    ) -> None:
        self._name = name
        self.outcome, self.take_error, self.undo_error = outcome, take_error, undo_error
        self.clock, self.lasts = clock, lasts

    @property
    def name(self) -> str:
        return self._name

    def take(self, context: Journal) -> StepOutcome:
        context.append(f"take:{self.name}")
        if self.clock is not None:
            self.clock.now += self.lasts
        if self.take_error is not None:
            raise self.take_error
        return self.outcome  # type: ignore[no-any-return]

    def undo(self, context: Journal) -> None:
        context.append(f"undo:{self.name}")
        if self.undo_error is not None:
            raise self.undo_error


def journaling_hook(journal: Journal) -> Any:
    def hook(pipeline: str, step: str, when: When) -> None:
        journal.append(f"{when}:{pipeline}/{step}")

    return hook


def count(registry: CollectorRegistry, *, pipeline: str, step: str, outcome: str) -> float | None:
    labels = {"pipeline": pipeline, "step": step, "outcome": outcome}
    return registry.get_sample_value("steptaker_step_duration_seconds_count", labels)


def test_steps_are_taken_in_declared_order_and_nothing_is_undone_on_success() -> None:
    journal: Journal = []
    pipeline = Pipeline("prepare", [Recorder("c"), Recorder("a"), Recorder("b")])
    result = pipeline.run(journal)
    assert journal == ["take:c", "take:a", "take:b"]
    assert result == PipelineResult(
        pipeline="prepare",
        taken=("c", "a", "b"),
        not_applicable=(),
        stopped_at=None,
        failed_at=None,
        error=None,
        undone=(),
        undo_failure=None,
    )
    assert result.ok
    assert (pipeline.name, pipeline.step_names) == ("prepare", ("c", "a", "b"))


def test_stop_ends_the_run_successfully_and_later_steps_neither_take_nor_undo() -> None:
    journal: Journal = []
    later = Recorder("later", take_error=RuntimeError("must not run"))
    result = Pipeline("prepare", [Recorder("a"), Recorder("b", outcome=STOP), later]).run(journal)
    assert journal == ["take:a", "take:b"]
    assert (result.ok, result.taken, result.stopped_at, result.undone) == (True, ("a", "b"), "b", ())


def test_a_failure_undoes_the_failed_step_and_the_taken_ones_in_reverse_and_stops_taking() -> None:
    journal: Journal = []
    boom = RuntimeError("boom")
    steps = [Recorder("a"), Recorder("b"), Recorder("c"), Recorder("d", take_error=boom), Recorder("e")]
    result = Pipeline("prepare", steps).run(journal)
    assert journal == ["take:a", "take:b", "take:c", "take:d", "undo:d", "undo:c", "undo:b", "undo:a"]
    assert not result.ok
    assert (result.failed_at, result.error, result.taken) == ("d", boom, ("a", "b", "c"))
    assert (result.undone, result.undo_failure) == (("d", "c", "b", "a"), None)
    assert "raised by step 'd' of pipeline 'prepare'" in getattr(boom, "__notes__", [])


def test_not_applicable_steps_are_reported_and_not_undone() -> None:
    journal: Journal = []
    steps = [Recorder("a"), Recorder("b", outcome=NOT_APPLICABLE), Recorder("c", take_error=OSError("eio"))]
    result = Pipeline("prepare", steps).run(journal)
    assert journal == ["take:a", "take:b", "take:c", "undo:c", "undo:a"]
    assert (result.taken, result.not_applicable, result.undone) == (("a",), ("b",), ("c", "a"))


def test_an_undo_failure_stops_undoing_is_reported_logged_and_keeps_the_original_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal: Journal = []
    cause, stuck = RuntimeError("take failed"), OSError("device busy")
    steps = [Recorder("a"), Recorder("b", undo_error=stuck), Recorder("c"), Recorder("d", take_error=cause)]
    with caplog.at_level(logging.ERROR, logger="pkg.framework.steptaker"):
        result = Pipeline("prepare", steps).run(journal, log_fields={"claim": "ns/claim-1"})
    assert journal == ["take:a", "take:b", "take:c", "take:d", "undo:d", "undo:c", "undo:b"]
    assert (result.error, result.failed_at) == (cause, "d")
    assert result.undone == ("d", "c")
    assert result.undo_failure == UndoFailure(step="b", error=stuck)
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.exc_info is not None
    assert record.exc_info[1] is stuck
    fields = {k: getattr(record, k, None) for k in ("claim", "pipeline", "step", "failed_at", "left")}
    assert fields == {
        "claim": "ns/claim-1",
        "pipeline": "prepare",
        "step": "b",
        "failed_at": "d",
        "left": ["b", "a"],
    }


def test_undo_runs_every_undo_in_reverse_declared_order() -> None:
    journal: Journal = []
    steps = [Recorder("a"), Recorder("b", outcome=NOT_APPLICABLE), Recorder("c", outcome=STOP)]
    result = Pipeline("unprepare", steps).undo(journal)
    assert journal == ["undo:c", "undo:b", "undo:a"]
    assert (result.undone, result.undo_failure, result.taken, result.not_applicable) == (
        ("c", "b", "a"),
        None,
        (),
        (),
    )
    assert (result.failed_at, result.error, result.stopped_at, result.ok) == (None, None, None, True)


def test_undo_stops_at_the_first_undo_that_raises() -> None:
    journal: Journal = []
    stuck = OSError("busy")
    result = Pipeline("unprepare", [Recorder("a"), Recorder("b", undo_error=stuck), Recorder("c")]).undo(
        journal
    )
    assert journal == ["undo:c", "undo:b"]
    assert (result.undone, result.undo_failure) == (("c",), UndoFailure(step="b", error=stuck))


def test_the_hook_runs_before_every_take_and_after_every_take_that_returned() -> None:
    journal: Journal = []
    steps = [Recorder("a"), Recorder("b", outcome=NOT_APPLICABLE), Recorder("c", outcome=STOP), Recorder("d")]
    Pipeline("prepare", steps, hook=journaling_hook(journal)).run(journal)
    assert journal == [
        "before:prepare/a",
        "take:a",
        "after:prepare/a",
        "before:prepare/b",
        "take:b",
        "after:prepare/b",
        "before:prepare/c",
        "take:c",
        "after:prepare/c",
    ]


def test_the_hook_is_not_called_after_a_take_that_raised() -> None:
    journal: Journal = []
    steps = [Recorder("a", take_error=RuntimeError("boom"))]
    Pipeline("prepare", steps, hook=journaling_hook(journal)).run(journal)
    assert journal == ["before:prepare/a", "take:a", "undo:a"]


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_hook_that_raises_fails_its_step_as_its_take_would(mocker: Any, when: str) -> None:
    journal: Journal = []
    crash = RuntimeError("injected")

    def hook(pipeline: str, step: str, at: When) -> None:
        if (step, at) == ("b", when):
            raise crash

    spy = mocker.Mock(side_effect=hook)
    result = Pipeline("prepare", [Recorder("a"), Recorder("b"), Recorder("c")], hook=spy).run(journal)
    took_b = ["take:b"] if when == "after" else []
    assert journal == ["take:a", *took_b, "undo:b", "undo:a"]
    assert (result.failed_at, result.error, result.taken, result.undone) == ("b", crash, ("a",), ("b", "a"))
    assert spy.call_args_list[-1] == mocker.call("prepare", "b", when)


def test_a_take_that_returns_no_outcome_fails_its_step() -> None:
    journal: Journal = []
    result = Pipeline("prepare", [Recorder("a"), Recorder("b", outcome=None)]).run(journal)
    assert isinstance(result.error, TypeError)
    assert (result.failed_at, result.undone) == ("b", ("b", "a"))


@pytest.mark.parametrize("error", [KeyboardInterrupt(), SystemExit(3)])
def test_a_base_exception_propagates_untouched_and_nothing_is_undone(error: BaseException) -> None:
    journal: Journal = []
    pipeline = Pipeline("prepare", [Recorder("a"), Recorder("b", take_error=error), Recorder("c")])
    with pytest.raises(type(error)) as raised:
        pipeline.run(journal)
    assert raised.value is error
    assert not hasattr(error, "__notes__")
    assert journal == ["take:a", "take:b"]


def test_a_base_exception_from_an_undo_propagates() -> None:
    journal: Journal = []
    pipeline = Pipeline("unprepare", [Recorder("a"), Recorder("b", undo_error=KeyboardInterrupt())])  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        pipeline.undo(journal)
    assert journal == ["undo:b"]


@pytest.mark.parametrize(
    ("name", "step_names", "message"),
    [
        ("", ["a"], "needs a name"),
        ("prepare", ["a", "b", "a"], r"\['a'\] are not unique"),
        ("prepare", ["a", ""], "every step needs a name"),
    ],
)
def test_bad_names_are_refused(name: str, step_names: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Pipeline(name, [Recorder(n) for n in step_names])


def test_every_step_reached_gets_one_duration_sample_labelled_by_its_outcome() -> None:
    clock, provider = FakeClock(), MetricsProvider()
    steps = [
        Recorder("a", clock=clock, lasts=0.003),
        Recorder("b", outcome=NOT_APPLICABLE, clock=clock, lasts=0.5),
        Recorder("c", take_error=RuntimeError("boom"), clock=clock, lasts=2.0),
        Recorder("d"),
    ]
    Pipeline("prepare", steps, clock=clock, metrics=provider).run([])
    Pipeline("release", [Recorder("s", outcome=STOP)], clock=clock, metrics=provider).run([])
    registry = provider.registry
    assert count(registry, pipeline="prepare", step="a", outcome="done") == 1
    assert count(registry, pipeline="prepare", step="b", outcome="not-applicable") == 1
    assert count(registry, pipeline="prepare", step="c", outcome="failed") == 1
    assert count(registry, pipeline="release", step="s", outcome="stop") == 1
    # Created at zero for every step and outcome, so alerts see them before the first sample.
    assert count(registry, pipeline="prepare", step="c", outcome="done") == 0
    assert count(registry, pipeline="prepare", step="d", outcome="failed") == 0
    total = sum(
        registry.get_sample_value(
            "steptaker_step_duration_seconds_count", {"pipeline": "prepare", "step": s, "outcome": o}
        )
        or 0
        for s in "abcd"
        for o in ("done", "not-applicable", "stop", "failed")
    )
    assert total == 3
    labels = {"pipeline": "prepare", "step": "c", "outcome": "failed"}
    assert registry.get_sample_value("steptaker_step_duration_seconds_sum", labels) == pytest.approx(2.0)
    fast = {"pipeline": "prepare", "step": "a", "outcome": "done"}
    assert registry.get_sample_value("steptaker_step_duration_seconds_bucket", {**fast, "le": "0.001"}) == 0
    assert registry.get_sample_value("steptaker_step_duration_seconds_bucket", {**fast, "le": "0.005"}) == 1


def test_the_histogram_is_named_under_the_providers_namespace_and_shared_by_pipelines() -> None:
    provider = MetricsProvider(namespace="test")
    Pipeline("prepare", [Recorder("a")], metrics=provider).run([])
    Pipeline("prepare", [Recorder("a")], metrics=provider).run([])
    labels = {"pipeline": "prepare", "step": "a", "outcome": "done"}
    assert provider.registry.get_sample_value("test_steptaker_step_duration_seconds_count", labels) == 2


def test_each_take_is_logged_at_debug_with_the_callers_fields(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    steps = [Recorder("a", clock=clock, lasts=0.25), Recorder("b", take_error=RuntimeError("boom"))]
    with caplog.at_level(logging.DEBUG, logger="pkg.framework.steptaker"):
        Pipeline("prepare", steps, clock=clock).run([], log_fields={"claim": "ns/claim-1", "node": "n1"})
    takes = [r for r in caplog.records if getattr(r, "outcome", None) is not None]
    fields = [
        {k: getattr(r, k) for k in ("levelno", "claim", "node", "pipeline", "step", "outcome", "seconds")}
        for r in takes
    ]
    assert fields == [
        {
            "levelno": logging.DEBUG,
            "claim": "ns/claim-1",
            "node": "n1",
            "pipeline": "prepare",
            "step": "a",
            "outcome": "done",
            "seconds": 0.25,
        },
        {
            "levelno": logging.DEBUG,
            "claim": "ns/claim-1",
            "node": "n1",
            "pipeline": "prepare",
            "step": "b",
            "outcome": "failed",
            "seconds": 0.0,
        },
    ]
    assert "boom" in takes[1].error  # type: ignore[attr-defined]


def test_log_fields_that_logging_would_refuse_are_refused_before_any_step() -> None:
    journal: Journal = []
    pipeline = Pipeline("prepare", [Recorder("a")])
    with pytest.raises(ValueError, match="'name'"):
        pipeline.run(journal, log_fields={"name": "claim-1"})
    with pytest.raises(ValueError, match="'msg'"):
        pipeline.undo(journal, log_fields={"msg": "x"})
    assert journal == []


def test_the_example_of_docs_framework_md_runs_as_written() -> None:
    section = DOCS.read_text().split("## StepTaker\n", 1)[1].split("\n## ", 1)[0]
    [example] = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    namespace: dict[str, Any] = {"__name__": "framework_md_steptaker"}
    # Compiled without this module's __future__ import, as a reader's module would run it; the
    # example's own asserts check the outcome.
    exec(compile(example, str(DOCS), "exec", dont_inherit=True), namespace)
    assert namespace["result"].undone == ("start-sharing", "write-record")
