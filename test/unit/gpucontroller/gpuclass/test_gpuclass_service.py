"""The GPUClass controller's one write: a forced server-side apply of the whole DeviceClass."""

from __future__ import annotations

import pytest
from kubernetes.client import V1DeviceClass, V1DeviceClassSpec, V1ObjectMeta
from pytest_mock import MockerFixture

from pkg.framework.client import InvalidError, KubeClient
from pkg.framework.client.builtin_kinds import DEVICE_CLASS
from pkg.gpucontroller.gpuclass.internal.service import KubeDeviceClassWriter


def device_class() -> V1DeviceClass:
    return V1DeviceClass(
        api_version="resource.k8s.io/v1",
        kind="DeviceClass",
        metadata=V1ObjectMeta(name="gpu-a30"),
        spec=V1DeviceClassSpec(selectors=[]),
    )


def test_apply_sends_the_encoded_class_forced_and_returns_what_the_server_stored(
    mocker: MockerFixture,
) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)
    stored = device_class()
    client.apply.return_value = stored

    assert KubeDeviceClassWriter(client).apply(device_class()) is stored

    client.apply.assert_called_once_with(DEVICE_CLASS, DEVICE_CLASS.encode(device_class()), force=True)
    assert client.apply.call_args.args[1]["metadata"] == {"name": "gpu-a30"}


def test_a_refused_apply_reaches_the_handler(mocker: MockerFixture) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)
    client.apply.side_effect = InvalidError(status=422, reason="Invalid", message="spec.selectors: invalid")

    with pytest.raises(InvalidError):
        KubeDeviceClassWriter(client).apply(device_class())
