"""The registration service: tells the kubelet who the plugin is and learns whether it took.

The kubelet's plugin watcher sees the registration socket appear, calls ``GetInfo``, validates
the answer (type ``DRAPlugin``, at least one DRA service it speaks) and reports the verdict with
``NotifyRegistrationStatus``. A refusal is logged as an error with the kubelet's reason: a plugin
the kubelet refused can never be called, and nothing else would say so.

:meth:`RegistrationService.check_registered` is a readiness check. A DaemonSet rollout stops the old
Pod once the new one is Ready, so a new instance must not count as Ready before the kubelet can
call it: in that gap the node would have no plugin, and every prepare would fail.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import grpc

from pkg.framework.kubeletplugin.handlers import service_handler
from pkg.framework.kubeletplugin.types import PluginIdentity
from pkg.framework.kubeletplugin.wire import pluginregistration_v1_pb2 as pb

logger = logging.getLogger(__name__)

PLUGIN_TYPE = "DRAPlugin"


class RegistrationService:
    """Answers the kubelet's registration calls for one plugin instance."""

    def __init__(self, *, identity: PluginIdentity, endpoint: Path) -> None:
        self._identity = identity
        self._endpoint = endpoint
        self.registered = threading.Event()
        self.last_error = ""

    def handler(self) -> grpc.GenericRpcHandler:
        return service_handler(
            pb.DESCRIPTOR.services_by_name["Registration"],
            {"GetInfo": self.get_info, "NotifyRegistrationStatus": self.notify_registration_status},
        )

    def get_info(self, request: pb.InfoRequest, context: grpc.ServicerContext) -> pb.PluginInfo:
        return pb.PluginInfo(
            type=PLUGIN_TYPE,
            name=self._identity.driver,
            endpoint=str(self._endpoint),
            supported_versions=list(self._identity.services),
        )

    def notify_registration_status(
        self, request: pb.RegistrationStatus, context: grpc.ServicerContext
    ) -> pb.RegistrationStatusResponse:
        extra = {"driver": self._identity.driver, "instance": self._identity.instance}
        if request.plugin_registered:
            self.last_error = ""
            self.registered.set()
            logger.info("registered with the kubelet", extra=extra)
        else:
            self.last_error = request.error
            self.registered.clear()
            logger.error("the kubelet refused the plugin: %s", request.error, extra=extra)
        return pb.RegistrationStatusResponse()

    def check_registered(self) -> None:
        """Raises, with the kubelet's reason if it gave one, until the kubelet has registered us."""
        if self.registered.is_set():
            return
        driver = self._identity.driver
        if self.last_error:
            raise RuntimeError(f"the kubelet refused the {driver} plugin: {self.last_error}")
        raise RuntimeError(f"the kubelet has not registered the {driver} plugin yet")
