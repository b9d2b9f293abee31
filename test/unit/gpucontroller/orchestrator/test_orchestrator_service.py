"""The orchestrator's API calls: a read of the stored generation, a forced apply, a uid-guarded delete."""

from __future__ import annotations

import pytest
from kubernetes.client import V1DaemonSet, V1DaemonSetSpec, V1LabelSelector, V1ObjectMeta, V1PodTemplateSpec
from pytest_mock import MockerFixture

from pkg.framework.client import ConflictError, KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import DAEMON_SET
from pkg.gpucontroller.orchestrator.internal.service import KubeDaemonSetWriter

SPEC = V1DaemonSetSpec(selector=V1LabelSelector(), template=V1PodTemplateSpec())


def daemon_set(*, uid: str | None = None, generation: int | None = None) -> V1DaemonSet:
    return V1DaemonSet(
        api_version="apps/v1",
        kind="DaemonSet",
        metadata=V1ObjectMeta(name="gpu-handler-nvidia", namespace="d8-gpu", uid=uid, generation=generation),
        spec=SPEC,
    )


def test_generation_reads_the_stored_object_from_the_api_server(mocker: MockerFixture) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)
    client.get.return_value = daemon_set(generation=7)

    assert KubeDaemonSetWriter(client).generation(daemon_set()) == 7

    client.get.assert_called_once_with(DAEMON_SET, "gpu-handler-nvidia", "d8-gpu")


def test_generation_of_a_daemon_set_not_stored_is_none(mocker: MockerFixture) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)
    client.get.side_effect = NotFoundError(status=404, reason="NotFound", message="gone")

    assert KubeDaemonSetWriter(client).generation(daemon_set()) is None


def test_apply_is_forced_with_the_encoded_intent(mocker: MockerFixture) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)
    stored = daemon_set(generation=2)
    client.apply.return_value = stored

    assert KubeDaemonSetWriter(client).apply(daemon_set()) is stored

    client.apply.assert_called_once_with(DAEMON_SET, DAEMON_SET.encode(daemon_set()), force=True)


def test_delete_names_the_uid_and_reports_a_vanished_object(mocker: MockerFixture) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)
    writer = KubeDaemonSetWriter(client)

    assert writer.delete(daemon_set(uid="u1")) is True
    client.delete.assert_called_once_with(DAEMON_SET, "gpu-handler-nvidia", "d8-gpu", uid="u1")

    client.delete.side_effect = NotFoundError(status=404, reason="NotFound", message="gone")
    assert writer.delete(daemon_set(uid="u1")) is False


def test_delete_lets_a_precondition_conflict_through(mocker: MockerFixture) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)
    client.delete.side_effect = ConflictError(status=409, reason="Conflict", message="uid mismatch")

    with pytest.raises(ConflictError):
        KubeDaemonSetWriter(client).delete(daemon_set(uid="u1"))


def test_an_unnamed_daemon_set_is_refused_before_any_call(mocker: MockerFixture) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)
    writer = KubeDaemonSetWriter(client)

    with pytest.raises(ValueError, match="without a name"):
        writer.generation(V1DaemonSet(metadata=V1ObjectMeta(), spec=SPEC))
    with pytest.raises(ValueError, match="without a name"):
        writer.delete(V1DaemonSet(metadata=V1ObjectMeta(), spec=SPEC))
    assert client.method_calls == []
