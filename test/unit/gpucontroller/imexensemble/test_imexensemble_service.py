"""The ensemble's API calls: a create of an existing Pod and a delete of a gone one are fine."""

from __future__ import annotations

from kubernetes.client import V1ConfigMap, V1ObjectMeta, V1Pod
from pytest_mock import MockerFixture

from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import CONFIG_MAP, POD
from pkg.framework.client.errors import AlreadyExistsError
from pkg.gpucontroller.imexensemble.internal.service import KubeEnsembleApi


def test_pods_are_created_once_and_deleted_exactly(mocker: MockerFixture) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)
    service = KubeEnsembleApi(client)
    pod = V1Pod(metadata=V1ObjectMeta(name="p", namespace="gpu-system", uid="u-1"))
    client.create.side_effect = AlreadyExistsError(status=409, reason="AlreadyExists", message="")
    service.create_pod(pod)
    client.delete.side_effect = NotFoundError(status=404, reason="NotFound", message="")
    service.delete_pod(pod)
    client.delete.assert_called_once_with(POD, "p", "gpu-system", uid="u-1")


def test_the_config_map_is_applied_and_deleted_by_uid(mocker: MockerFixture) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)
    service = KubeEnsembleApi(client)
    config_map = V1ConfigMap(metadata=V1ObjectMeta(name="imex-a", namespace="gpu-system", uid="c"), data={})
    service.apply_config_map(config_map)
    assert client.apply.call_args.args[0] is CONFIG_MAP
    assert client.apply.call_args.kwargs == {"force": True}
    service.delete_config_map(config_map)
    client.delete.assert_called_once_with(CONFIG_MAP, "imex-a", "gpu-system", uid="c")
