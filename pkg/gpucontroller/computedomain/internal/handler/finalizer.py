"""Step 2, finalizer: stored before the domain takes a channel or gets daemons, so its deletion
always passes through the deletion step that gives them back."""

from __future__ import annotations

from api.gpu.v1alpha1 import COMPUTE_DOMAIN_FINALIZER
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState


class FinalizerHandler:
    name = "finalizer"

    def handle(self, state: ComputeDomainState) -> Result | None:
        meta = state.resource.changed().metadata
        if COMPUTE_DOMAIN_FINALIZER not in (meta.finalizers or []):
            meta.finalizers = [*(meta.finalizers or []), COMPUTE_DOMAIN_FINALIZER]
        return None
