"""Why an ensemble pass stops short; expected, retried with backoff (a settings change wakes it sooner)."""

from __future__ import annotations

from api.gpu.v1alpha1 import ComputeDomainSettings
from pkg.gpucontroller.imexensemble.internal.state import EnsembleState


class DaemonsNotConfiguredError(RuntimeError):
    """The operator configuration gives no daemon settings; the domains' status says so too."""


def require_settings(state: EnsembleState) -> ComputeDomainSettings:
    settings = state.daemons.settings
    if settings is None:
        raise DaemonsNotConfiguredError(
            f"IMEX ensemble of NVLink clique {state.clique}: {state.daemons.problem}"
        )
    return settings
