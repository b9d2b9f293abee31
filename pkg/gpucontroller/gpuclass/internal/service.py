"""The write of the GPUClass controller: server-side apply of the generated DeviceClass."""

from __future__ import annotations

from typing import Protocol

from kubernetes.client import V1DeviceClass

from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import DEVICE_CLASS


class DeviceClassWriter(Protocol):
    def apply(self, device_class: V1DeviceClass) -> V1DeviceClass:
        """Server-side apply of the whole DeviceClass; raises ``InvalidError`` when refused."""
        ...


class KubeDeviceClassWriter:
    """Applies as the client's field manager, forced: the class is checked to be ours first."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def apply(self, device_class: V1DeviceClass) -> V1DeviceClass:
        return self._client.apply(DEVICE_CLASS, DEVICE_CLASS.encode(device_class), force=True)
