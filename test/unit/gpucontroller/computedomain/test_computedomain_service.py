"""The compute-domain controller's API calls over KubeClient."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import V1ConfigMap, V1ObjectMeta
from pytest_mock import MockerFixture

from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import CONFIG_MAP
from pkg.framework.client.errors import ConflictError
from pkg.gpucontroller.computedomain.internal.service import KubeComputeDomainApi


def api(mocker: MockerFixture) -> tuple[KubeComputeDomainApi, Any]:
    client = mocker.create_autospec(KubeClient, instance=True)
    return KubeComputeDomainApi(
        client, namespace="gpu-system", ledger_name="cp-compute-domain-channels"
    ), client


def test_the_ledger_is_created_when_missing_and_updated_at_its_version(mocker: MockerFixture) -> None:
    service, client = api(mocker)
    client.get.side_effect = NotFoundError(status=404, reason="NotFound", message="")
    assert service.read_ledger() is None
    service.write_ledger(None, {"1": "u ns/a"})
    created = client.create.call_args.args[1]
    assert (created.metadata.name, created.metadata.namespace) == ("cp-compute-domain-channels", "gpu-system")
    current = V1ConfigMap(metadata=V1ObjectMeta(name="cp-compute-domain-channels", resource_version="7"))
    service.write_ledger(current, {"2": "v ns/b"})
    updated = client.update.call_args.args[1]
    assert client.update.call_args.args[0] is CONFIG_MAP
    assert (updated.metadata.resource_version, updated.data) == ("7", {"2": "v ns/b"})


def test_a_lost_race_on_the_ledger_reaches_the_controller(mocker: MockerFixture) -> None:
    service, client = api(mocker)
    client.update.side_effect = ConflictError(status=409, reason="Conflict", message="changed")
    with pytest.raises(ConflictError):
        service.write_ledger(V1ConfigMap(metadata=V1ObjectMeta(name="l", resource_version="1")), {})
