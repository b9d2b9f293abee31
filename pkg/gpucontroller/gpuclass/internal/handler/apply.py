"""Step 2, apply: render the DeviceClass, apply it when it differs, report the result.

The cached DeviceClass is compared with the rendering (spec and owner), so the many passes that
change nothing cost no request. A DeviceClass the API server refuses (422) makes the class invalid
with the server's message, and is not retried until the class changes: the same spec would be
refused again. Other API errors propagate and are retried with backoff.
"""

from __future__ import annotations

from kubernetes.client import V1DeviceClass

from api.gpu.v1alpha1 import Generated
from pkg.domain.kinds import GPU_CLASS
from pkg.framework.client.builtin_kinds import DEVICE_CLASS
from pkg.framework.client.errors import InvalidError
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.gpuclass.internal.service import DeviceClassWriter
from pkg.gpucontroller.gpuclass.internal.state import GPUClassState
from pkg.gpucontroller.gpuclass.internal.status import report
from pkg.gpucontroller.gpuclass.render import device_class, extended_resource_name, owned_by

REASON_APPLIED = "DeviceClassApplied"


class ApplyHandler:
    name = "apply"

    def __init__(self, *, writer: DeviceClassWriter, recorder: EventRecorderLogger) -> None:
        self._writer = writer
        self._recorder = recorder

    def handle(self, state: GPUClassState) -> Result | None:
        gpu_class = state.gpu_class
        name = str(gpu_class.metadata.name)
        extended = extended_resource_name(gpu_class) or ""
        desired = device_class(gpu_class, uuids=state.uuids, extended_resource=extended)
        if not _same(state.existing, desired, state):
            try:
                self._writer.apply(desired)
            except InvalidError as exc:
                report(
                    state,
                    self._recorder,
                    valid=False,
                    message=f"the API server refused DeviceClass {name}: {exc}",
                )
                return None
            verb = "created" if state.existing is None else "updated"
            self._recorder.event(
                gpu_class,
                type_="Normal",
                reason=REASON_APPLIED,
                message=f"{verb} DeviceClass {name}",
                kind=GPU_CLASS,
            )
        message = f"DeviceClass {name} selects these devices; request them as {extended}"
        if state.unresolved:
            message += f"; cards not read yet (no UUID): {', '.join(state.unresolved)}"
        generated = Generated(device_class_name=name, extended_resource_name=extended)
        report(state, self._recorder, valid=True, message=message, generated=generated)
        return None


def _same(existing: V1DeviceClass | None, desired: V1DeviceClass, state: GPUClassState) -> bool:
    if existing is None or not owned_by(existing, state.gpu_class):
        return False
    labels = existing.metadata.labels if existing.metadata else None
    wanted = desired.metadata.labels if desired.metadata else None
    return DEVICE_CLASS.encode(existing)["spec"] == DEVICE_CLASS.encode(desired)["spec"] and all(
        (labels or {}).get(k) == v for k, v in (wanted or {}).items()
    )
