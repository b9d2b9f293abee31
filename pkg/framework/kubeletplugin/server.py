"""The kubelet plugin as a runnable: two gRPC servers on the instance's sockets.

Start order: the DRA server first, then registration, so that by the time the kubelet learns the
endpoint from ``GetInfo`` it answers. Stop order is the reverse: the registration socket goes
first (the kubelet deregisters this instance when it disappears and turns to another instance, if
one runs), then the DRA server finishes the calls in flight within the grace period.

Stale sockets: this instance's own (a container restart keeps the Pod UID) are replaced; other
instances' are removed only when nobody serves them
(:func:`~pkg.framework.kubeletplugin.sockets.remove_dead_sockets`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import grpc

from pkg.framework.kubeletplugin.dra_service import DRAService
from pkg.framework.kubeletplugin.health_service import HealthService
from pkg.framework.kubeletplugin.registration import RegistrationService
from pkg.framework.kubeletplugin.sockets import SOCKET_MODE, SocketPaths, remove_dead_sockets, socket_paths
from pkg.framework.kubeletplugin.types import Driver, HealthBoard, PluginIdentity
from pkg.framework.kubeletplugin.wire import (
    dra_health_v1_pb2,
    dra_health_v1alpha1_pb2,
    dra_v1_pb2,
    dra_v1beta1_pb2,
)

logger = logging.getLogger(__name__)


class KubeletPlugin:
    """Serves the kubelet for one driver instance until stopped."""

    name = "kubelet-plugin"
    needs_leader_election = False

    def __init__(
        self,
        *,
        identity: PluginIdentity,
        kubelet_root: Path,
        driver: Driver,
        health: HealthBoard,
        workers: int = 4,
        stop_grace: float = 10.0,
    ) -> None:
        self.identity = identity
        self.kubelet_root = kubelet_root
        self.paths: SocketPaths = socket_paths(
            kubelet_root=kubelet_root, driver=identity.driver, instance=identity.instance
        )
        self._driver = driver
        self._health = health
        self._workers = workers
        self._stop_grace = stop_grace
        self._stopping = threading.Event()
        self.registration = RegistrationService(identity=identity, endpoint=self.paths.dra)
        self._dra_server: grpc.Server | None = None
        self._registration_server: grpc.Server | None = None

    def start(self) -> None:
        registry = self.paths.registration.parent
        if not registry.is_dir():
            raise FileNotFoundError(
                f"{registry} does not exist: is {self.kubelet_root} the kubelet's root folder?"
            )
        self.paths.dra.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        remove_dead_sockets(kubelet_root=self.kubelet_root, driver=self.identity.driver, keep=self.paths)
        self._dra_server = self._serve(self.paths.dra, self._add_dra_services)
        self._registration_server = self._serve(self.paths.registration, self._add_registration)
        logger.info(
            "serving the kubelet",
            extra={
                "driver": self.identity.driver,
                "dra": str(self.paths.dra),
                "registration": str(self.paths.registration),
            },
        )

    def stop(self) -> None:
        self._stopping.set()  # ends the health streams
        for server, path in (
            (self._registration_server, self.paths.registration),
            (self._dra_server, self.paths.dra),
        ):
            if server is not None:
                server.stop(self._stop_grace).wait()
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self._dra_server = self._registration_server = None

    def run(self, stop: threading.Event) -> None:
        self.start()
        try:
            stop.wait()
        finally:
            self.stop()

    def _serve(self, path: Path, add: Callable[[grpc.Server], None]) -> grpc.Server:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # our own socket from before a restart
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="kubelet-plugin")
        )
        add(server)
        server.add_insecure_port(f"unix://{path}")
        server.start()
        path.chmod(SOCKET_MODE)
        return server

    def _add_dra_services(self, server: grpc.Server) -> None:
        server.add_generic_rpc_handlers(
            (
                DRAService(self._driver, dra_v1_pb2).handler(),
                DRAService(self._driver, dra_v1beta1_pb2).handler(),
                HealthService(self._health, self._stopping, dra_health_v1_pb2).handler(),
                HealthService(self._health, self._stopping, dra_health_v1alpha1_pb2).handler(),
            )
        )

    def _add_registration(self, server: grpc.Server) -> None:
        server.add_generic_rpc_handlers((self.registration.handler(),))
