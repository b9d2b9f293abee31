"""The resource-health stream, v1 and v1alpha1: the complete device list, again on every change.

The kubelet opens the stream once the plugin is registered and keeps it open; each message
replaces what the kubelet knew (devices missing from it turn Unknown after a timeout). The stream
ends when the kubelet cancels it or the plugin stops.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import grpc

from pkg.framework.kubeletplugin.handlers import service_handler
from pkg.framework.kubeletplugin.types import DeviceHealth, HealthBoard

MAX_MESSAGE = 1024


def _stream(
    board: HealthBoard, stopping: threading.Event, context: grpc.ServicerContext
) -> Iterator[tuple[DeviceHealth, ...]]:
    gone = threading.Event()
    context.add_callback(gone.set)  # the kubelet cancelled the stream or went away
    yield from board.watch(lambda: gone.is_set() or stopping.is_set())


def _message(device: DeviceHealth) -> str:
    return device.message if len(device.message) <= MAX_MESSAGE else device.message[: MAX_MESSAGE - 3] + "..."


class HealthService:
    """``DRAResourceHealth`` of one wire version (``dra_health_v1_pb2`` or ``dra_health_v1alpha1_pb2``:
    the same messages under two package names)."""

    def __init__(self, board: HealthBoard, stopping: threading.Event, wire: ModuleType) -> None:
        self._board, self._stopping, self._wire = board, stopping, wire

    def handler(self) -> grpc.GenericRpcHandler:
        return service_handler(
            self._wire.DESCRIPTOR.services_by_name["DRAResourceHealth"], {"NodeWatchResources": self.watch}
        )

    def watch(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        wire = self._wire
        for devices in _stream(self._board, self._stopping, context):
            yield wire.NodeWatchResourcesResponse(
                devices=[
                    wire.DeviceHealth(
                        device=wire.DeviceIdentifier(pool_name=d.pool, device_name=d.device),
                        health=d.status.name,
                        last_updated_time=d.last_updated,
                        health_check_timeout_seconds=d.timeout_seconds,
                        message=_message(d),
                    )
                    for d in devices
                ]
            )
