"""gpu-controller orchestrator's apply handler alone: the last step of a pass, which server-side
applies every DaemonSet the parse step rendered. An Event on the ConfigMap tells when a DaemonSet
was created or its spec changed (its generation moved), never for a pass that changed nothing; a
DaemonSet not in the cache yet is looked up first so that one created by the previous pass is not
announced twice. A DaemonSet the API server refuses gets a Warning naming it, the others are still
applied, and the step then fails so the controller retries.

The state is the real scratch state as the parse step leaves it (the document's DaemonSets
rendered by the real renderers); the DaemonSet writer and the event recorder are autospecced.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes.client import (
    V1DaemonSet,
)
from pytest_mock import MockerFixture, MockType
from testutil.k8s_fields import name_of
from testutil.unit.gpucontroller.orchestrator.orchestrator_values import owned, parsed

from pkg.framework.client.builtin_kinds import CONFIG_MAP
from pkg.framework.client.errors import InvalidError
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.gpucontroller.orchestrator.internal.handler.apply import ApplyError, ApplyHandler
from pkg.gpucontroller.orchestrator.internal.service import KubeDaemonSetWriter

AGENT, VALIDATOR = "gcp-gpu-node-agent", "gcp-gpu-validator"
REFUSED = InvalidError(
    status=422, reason="Invalid", message="spec.template.spec.containers[0].image: Required"
)


def stored_at(*generations: tuple[str, int]) -> Callable[[V1DaemonSet], V1DaemonSet]:
    """An ``apply`` answer: what the server stored, at the given generation for each name."""
    by_name = dict(generations)

    def apply(daemon_set: V1DaemonSet) -> V1DaemonSet:
        meta = daemon_set.metadata
        assert meta is not None
        return daemon_set.model_copy(
            update={"metadata": meta.model_copy(update={"generation": by_name[name_of(daemon_set)]})}
        )

    return apply


@pytest.fixture
def writer(mocker: MockerFixture) -> MockType:
    w = mocker.create_autospec(KubeDaemonSetWriter, instance=True)
    w.apply.side_effect = stored_at((AGENT, 1), (VALIDATOR, 1))
    w.generation.return_value = None
    return w


@pytest.fixture
def recorder(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(EventRecorderLogger, instance=True)


@pytest.fixture
def handler(writer: MockType, recorder: MockType) -> ApplyHandler:
    return ApplyHandler(writer=writer, recorder=recorder)


def events(recorder: MockType) -> list[tuple[str, str, str]]:
    """(type, reason, message) of every Event, each checked to be on the ConfigMap."""
    told = []
    for call in recorder.event.call_args_list:
        assert name_of(call.args[0]) == "gcp"
        assert call.kwargs["kind"] is CONFIG_MAP
        told.append((call.kwargs["type_"], call.kwargs["reason"], call.kwargs["message"]))
    return told


def test_a_first_pass_creates_every_rendered_daemon_set_and_announces_each(
    handler: ApplyHandler, writer: MockType, recorder: MockType
) -> None:
    state = parsed()

    assert handler.handle(state) is None

    assert [call.args for call in writer.apply.call_args_list] == [(ds,) for ds in state.desired.values()]
    assert [call.args for call in writer.generation.call_args_list] == [
        (ds,) for ds in state.desired.values()
    ]
    assert events(recorder) == [
        ("Normal", "DaemonSetApplied", f"created DaemonSet {AGENT}"),
        ("Normal", "DaemonSetApplied", f"created DaemonSet {VALIDATOR}"),
    ]


def test_an_unchanged_pass_applies_everything_but_announces_nothing(
    handler: ApplyHandler, writer: MockType, recorder: MockType
) -> None:
    assert handler.handle(parsed(owned("gpu-node-agent"), owned("gpu-validator"))) is None

    assert writer.apply.call_count == 2  # the whole intent is restated every pass
    writer.generation.assert_not_called()  # the cache knew both
    assert events(recorder) == []


def test_a_spec_change_is_announced_with_the_new_generation(
    handler: ApplyHandler, writer: MockType, recorder: MockType
) -> None:
    writer.apply.side_effect = stored_at((AGENT, 4), (VALIDATOR, 1))

    handler.handle(parsed(owned("gpu-node-agent", generation=3), owned("gpu-validator")))

    assert events(recorder) == [("Normal", "DaemonSetApplied", f"updated DaemonSet {AGENT} (generation 4)")]


def test_a_daemon_set_created_by_the_last_pass_is_not_announced_again(
    handler: ApplyHandler, writer: MockType, recorder: MockType
) -> None:
    writer.generation.return_value = 1  # stored, but its event has not reached the cache yet

    handler.handle(parsed(owned("gpu-node-agent")))

    [(validator,)] = [call.args for call in writer.generation.call_args_list]
    assert name_of(validator) == VALIDATOR
    assert events(recorder) == []


def test_a_daemon_set_missing_from_the_cache_and_changed_is_announced_as_updated(
    handler: ApplyHandler, writer: MockType, recorder: MockType
) -> None:
    writer.generation.return_value = 1
    writer.apply.side_effect = stored_at((AGENT, 1), (VALIDATOR, 2))

    handler.handle(parsed(owned("gpu-node-agent")))

    assert events(recorder) == [
        ("Normal", "DaemonSetApplied", f"updated DaemonSet {VALIDATOR} (generation 2)")
    ]


def test_nothing_rendered_means_nothing_applied(
    handler: ApplyHandler, writer: MockType, recorder: MockType
) -> None:
    state = parsed(owned("gpu-node-agent"))
    state.desired = {}

    assert handler.handle(state) is None

    writer.apply.assert_not_called()
    writer.generation.assert_not_called()
    recorder.event.assert_not_called()


def test_a_refused_daemon_set_is_reported_the_others_applied_and_the_pass_fails(
    handler: ApplyHandler, writer: MockType, recorder: MockType
) -> None:
    answer = stored_at((VALIDATOR, 1))

    def apply(daemon_set: V1DaemonSet) -> V1DaemonSet:
        if name_of(daemon_set) == AGENT:
            raise REFUSED
        return answer(daemon_set)

    writer.apply.side_effect = apply

    with pytest.raises(ApplyError) as failed:
        handler.handle(parsed())

    assert str(failed.value) == f"DaemonSet {AGENT}: {REFUSED}"
    assert writer.apply.call_count == 2
    assert events(recorder) == [
        ("Warning", "DaemonSetRejected", f"DaemonSet {AGENT} was not applied: {REFUSED}"),
        ("Normal", "DaemonSetApplied", f"created DaemonSet {VALIDATOR}"),
    ]


def test_every_refusal_is_named_in_the_failure(
    handler: ApplyHandler, writer: MockType, recorder: MockType
) -> None:
    writer.apply.side_effect = REFUSED

    with pytest.raises(ApplyError) as failed:
        handler.handle(parsed())

    assert str(failed.value) == f"DaemonSet {AGENT}: {REFUSED}; DaemonSet {VALIDATOR}: {REFUSED}"
    assert [reason for _, reason, _ in events(recorder)] == ["DaemonSetRejected", "DaemonSetRejected"]


def test_a_failed_lookup_counts_as_a_refusal_and_skips_that_apply(
    handler: ApplyHandler, writer: MockType, recorder: MockType
) -> None:
    writer.generation.side_effect = REFUSED

    with pytest.raises(ApplyError, match=f"DaemonSet {VALIDATOR}: 422 Invalid"):
        handler.handle(parsed(owned("gpu-node-agent")))

    [(applied,)] = [call.args for call in writer.apply.call_args_list]
    assert name_of(applied) == AGENT
    assert events(recorder) == [
        ("Warning", "DaemonSetRejected", f"DaemonSet {VALIDATOR} was not applied: {REFUSED}")
    ]
