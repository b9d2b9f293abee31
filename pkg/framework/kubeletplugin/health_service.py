"""The resource-health stream, v1 and v1alpha1: the complete device list, again on every change.

The kubelet opens the stream once the plugin is registered and keeps it open; each message
replaces what the kubelet knew (devices missing from it turn Unknown after a timeout). The stream
ends when the kubelet cancels it or the plugin stops.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import grpc

from pkg.framework.kubeletplugin.handlers import service_handler
from pkg.framework.kubeletplugin.types import DeviceHealth, HealthBoard
from pkg.framework.kubeletplugin.wire import dra_health_v1_pb2 as v1
from pkg.framework.kubeletplugin.wire import dra_health_v1alpha1_pb2 as v1alpha1

MAX_MESSAGE = 1024


def _stream(
    board: HealthBoard, stopping: threading.Event, context: grpc.ServicerContext
) -> Iterator[tuple[DeviceHealth, ...]]:
    gone = threading.Event()
    context.add_callback(gone.set)  # the kubelet cancelled the stream or went away
    yield from board.watch(lambda: gone.is_set() or stopping.is_set())


def _message(device: DeviceHealth) -> str:
    return device.message if len(device.message) <= MAX_MESSAGE else device.message[: MAX_MESSAGE - 3] + "..."


class HealthServiceV1:
    def __init__(self, board: HealthBoard, stopping: threading.Event) -> None:
        self._board, self._stopping = board, stopping

    def handler(self) -> grpc.GenericRpcHandler:
        return service_handler(
            v1.DESCRIPTOR.services_by_name["DRAResourceHealth"], {"NodeWatchResources": self.watch}
        )

    def watch(
        self, request: v1.NodeWatchResourcesRequest, context: grpc.ServicerContext
    ) -> Iterator[v1.NodeWatchResourcesResponse]:
        for devices in _stream(self._board, self._stopping, context):
            yield v1.NodeWatchResourcesResponse(
                devices=[
                    v1.DeviceHealth(
                        device=v1.DeviceIdentifier(pool_name=d.pool, device_name=d.device),
                        health=d.status.name,
                        last_updated_time=d.last_updated,
                        health_check_timeout_seconds=d.timeout_seconds,
                        message=_message(d),
                    )
                    for d in devices
                ]
            )


class HealthServiceV1alpha1:
    def __init__(self, board: HealthBoard, stopping: threading.Event) -> None:
        self._board, self._stopping = board, stopping

    def handler(self) -> grpc.GenericRpcHandler:
        return service_handler(
            v1alpha1.DESCRIPTOR.services_by_name["DRAResourceHealth"], {"NodeWatchResources": self.watch}
        )

    def watch(
        self, request: v1alpha1.NodeWatchResourcesRequest, context: grpc.ServicerContext
    ) -> Iterator[v1alpha1.NodeWatchResourcesResponse]:
        for devices in _stream(self._board, self._stopping, context):
            yield v1alpha1.NodeWatchResourcesResponse(
                devices=[
                    v1alpha1.DeviceHealth(
                        device=v1alpha1.DeviceIdentifier(pool_name=d.pool, device_name=d.device),
                        health=d.status.name,
                        last_updated_time=d.last_updated,
                        health_check_timeout_seconds=d.timeout_seconds,
                        message=_message(d),
                    )
                    for d in devices
                ]
            )
