"""Why an ensemble pass stops short without failing: no daemon settings (the operator
configuration is missing, broken or has computeDomains off). That is a state, not an error: the
domains' Ready condition says it, and a change of the configuration wakes the ensemble again (its
operator-configuration watch), so the pass ends quietly instead of retrying with an error."""

from __future__ import annotations

from api.gpu.v1alpha1 import ComputeDomainSettings
from pkg.framework.reconcile.handler import StopHandlerChain
from pkg.gpucontroller.imexensemble.internal.state import EnsembleState


def require_settings(state: EnsembleState) -> ComputeDomainSettings:
    settings = state.daemons.settings
    if settings is None:
        raise StopHandlerChain(
            reason=f"IMEX ensemble of NVLink clique {state.clique}: {state.daemons.problem}"
        )
    return settings
