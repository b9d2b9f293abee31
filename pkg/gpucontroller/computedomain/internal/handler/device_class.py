"""Step 3, the channel DeviceClass: applied when missing or not as rendered (a hand edit is put
back). Every domain's template names it, so it is checked on every pass; the cache makes an
unchanged class cost nothing."""

from __future__ import annotations

from kubernetes.client import V1DeviceClass

from pkg.framework.client.builtin_kinds import DEVICE_CLASS
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.computedomain.internal.service import ComputeDomainApi
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.render import channel_device_class


class DeviceClassHandler:
    name = "device-class"

    def __init__(self, *, api: ComputeDomainApi) -> None:
        self._api = api

    def handle(self, state: ComputeDomainState) -> Result | None:
        desired = channel_device_class()
        if not _same(state.device_class, desired):
            self._api.apply_device_class(desired)
        return None


def _same(existing: V1DeviceClass | None, desired: V1DeviceClass) -> bool:
    return (
        existing is not None
        and DEVICE_CLASS.encode(existing).get("spec") == DEVICE_CLASS.encode(desired)["spec"]
    )
