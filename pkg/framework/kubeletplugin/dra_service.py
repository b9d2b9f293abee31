"""The DRA service, in the two versions the kubelet speaks (v1, and v1beta1 for older kubelets).

Both translate protobuf to :mod:`~pkg.framework.kubeletplugin.types` and back, and nothing else: the
driver does the work. Every claim of a request gets an entry in the answer, as the kubelet
requires; a claim the driver did not answer for, or a driver that raised, becomes an error for
that claim rather than a failed call, so one bad claim never hides the others' results.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import grpc

from pkg.framework.kubeletplugin.handlers import service_handler
from pkg.framework.kubeletplugin.types import ClaimRef, Driver, PrepareOutcome

logger = logging.getLogger(__name__)


def _claims(request: Any) -> list[ClaimRef]:
    return [ClaimRef(namespace=c.namespace, name=c.name, uid=c.uid) for c in request.claims]


def _prepare(driver: Driver, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
    try:
        outcomes = driver.prepare(claims)
    except Exception as exc:  # the kubelet retries; every claim says why
        logger.exception("prepare raised", extra={"claims": [str(c) for c in claims]})
        return {c.uid: PrepareOutcome.failed(f"prepare failed: {exc}") for c in claims}
    return {
        c.uid: outcomes.get(c.uid) or PrepareOutcome.failed(f"claim {c} got no answer from the driver")
        for c in claims
    }


def _unprepare(driver: Driver, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
    try:
        errors = driver.unprepare(claims)
    except Exception as exc:
        logger.exception("unprepare raised", extra={"claims": [str(c) for c in claims]})
        return {c.uid: f"unprepare failed: {exc}" for c in claims}
    return {c.uid: errors.get(c.uid, "") for c in claims}


class DRAService:
    """The ``DRAPlugin`` service of one wire version (``dra_v1_pb2`` or ``dra_v1beta1_pb2``).

    The versions differ only in the package name and in share IDs, which v1beta1 lacks: a shared
    device is reported there without one. Which one a version has is read from its descriptor.
    """

    def __init__(self, driver: Driver, wire: ModuleType) -> None:
        self._driver = driver
        self._wire = wire
        self._share_ids = "share_id" in wire.Device.DESCRIPTOR.fields_by_name

    def handler(self) -> grpc.GenericRpcHandler:
        return service_handler(
            self._wire.DESCRIPTOR.services_by_name["DRAPlugin"],
            {"NodePrepareResources": self.prepare, "NodeUnprepareResources": self.unprepare},
        )

    def prepare(self, request: Any, context: grpc.ServicerContext) -> Any:
        response = self._wire.NodePrepareResourcesResponse()
        for uid, outcome in _prepare(self._driver, _claims(request)).items():
            entry = response.claims[uid]
            entry.error = outcome.error
            for device in outcome.devices if not outcome.error else ():
                fields = {"share_id": device.share_id} if self._share_ids else {}
                entry.devices.add(
                    request_names=list(device.requests),
                    pool_name=device.pool,
                    device_name=device.device,
                    cdi_device_ids=list(device.cdi_device_ids),
                    **fields,
                )
        return response

    def unprepare(self, request: Any, context: grpc.ServicerContext) -> Any:
        response = self._wire.NodeUnprepareResourcesResponse()
        for uid, error in _unprepare(self._driver, _claims(request)).items():
            response.claims[uid].error = error
        return response
