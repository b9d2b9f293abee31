"""Step 1, ownership: stop before writing anything the class may not write.

A DeviceClass of the class's name that was not generated from this GPUClass is never taken over
(a forced apply would silently rewrite an administrator's class), and a class without an extended
resource name it can use cannot be rendered. Both make the class invalid and end the pass.
"""

from __future__ import annotations

from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import StopHandlerChain
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.gpuclass.internal.state import GPUClassState
from pkg.gpucontroller.gpuclass.internal.status import report
from pkg.gpucontroller.gpuclass.render import extended_resource_name, owned_by


class OwnershipHandler:
    name = "ownership"

    def __init__(self, *, recorder: EventRecorderLogger) -> None:
        self._recorder = recorder

    def handle(self, state: GPUClassState) -> Result | None:
        name = str(state.gpu_class.metadata.name)
        problem = None
        if state.existing is not None and not owned_by(state.existing, state.gpu_class):
            problem = (
                f"DeviceClass {name} exists and was not generated from this GPUClass; it is left "
                "alone: delete it or give the GPUClass another name"
            )
        elif extended_resource_name(state.gpu_class) is None:
            problem = (
                f"the class name is longer than 63 characters, so gpu.deckhouse.io/{name} is no "
                "valid extended resource name: set spec.extendedResourceName"
            )
        if problem is not None:
            report(state, self._recorder, valid=False, message=problem)
            raise StopHandlerChain(reason=problem)
        return None
