"""The DRA service, in the two versions the kubelet speaks (v1, and v1beta1 for older kubelets).

Both translate protobuf to :mod:`~pkg.framework.kubeletplugin.types` and back, and nothing else: the
driver does the work. Every claim of a request gets an entry in the answer, as the kubelet
requires; a claim the driver did not answer for, or a driver that raised, becomes an error for
that claim rather than a failed call, so one bad claim never hides the others' results.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from pkg.framework.kubeletplugin.handlers import service_handler
from pkg.framework.kubeletplugin.types import ClaimRef, Driver, PrepareOutcome
from pkg.framework.kubeletplugin.wire import dra_v1_pb2 as v1
from pkg.framework.kubeletplugin.wire import dra_v1beta1_pb2 as v1beta1

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


class DRAServiceV1:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def handler(self) -> grpc.GenericRpcHandler:
        return service_handler(
            v1.DESCRIPTOR.services_by_name["DRAPlugin"],
            {"NodePrepareResources": self.prepare, "NodeUnprepareResources": self.unprepare},
        )

    def prepare(
        self, request: v1.NodePrepareResourcesRequest, context: grpc.ServicerContext
    ) -> v1.NodePrepareResourcesResponse:
        response = v1.NodePrepareResourcesResponse()
        for uid, outcome in _prepare(self._driver, _claims(request)).items():
            entry = response.claims[uid]
            entry.error = outcome.error
            for device in outcome.devices if not outcome.error else ():
                entry.devices.add(
                    request_names=list(device.requests),
                    pool_name=device.pool,
                    device_name=device.device,
                    cdi_device_ids=list(device.cdi_device_ids),
                    share_id=device.share_id,
                )
        return response

    def unprepare(
        self, request: v1.NodeUnprepareResourcesRequest, context: grpc.ServicerContext
    ) -> v1.NodeUnprepareResourcesResponse:
        response = v1.NodeUnprepareResourcesResponse()
        for uid, error in _unprepare(self._driver, _claims(request)).items():
            response.claims[uid].error = error
        return response


class DRAServiceV1beta1:
    """v1beta1 has no share IDs: a shared device is reported without one."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def handler(self) -> grpc.GenericRpcHandler:
        return service_handler(
            v1beta1.DESCRIPTOR.services_by_name["DRAPlugin"],
            {"NodePrepareResources": self.prepare, "NodeUnprepareResources": self.unprepare},
        )

    def prepare(
        self, request: v1beta1.NodePrepareResourcesRequest, context: grpc.ServicerContext
    ) -> v1beta1.NodePrepareResourcesResponse:
        response = v1beta1.NodePrepareResourcesResponse()
        for uid, outcome in _prepare(self._driver, _claims(request)).items():
            entry = response.claims[uid]
            entry.error = outcome.error
            for device in outcome.devices if not outcome.error else ():
                entry.devices.add(
                    request_names=list(device.requests),
                    pool_name=device.pool,
                    device_name=device.device,
                    cdi_device_ids=list(device.cdi_device_ids),
                )
        return response

    def unprepare(
        self, request: v1beta1.NodeUnprepareResourcesRequest, context: grpc.ServicerContext
    ) -> v1beta1.NodeUnprepareResourcesResponse:
        response = v1beta1.NodeUnprepareResourcesResponse()
        for uid, error in _unprepare(self._driver, _claims(request)).items():
            response.claims[uid].error = error
        return response
