"""The domain's readiness as the handlers leave it: ``status.state`` and the ``Ready`` condition."""

from __future__ import annotations

from typing import Final

from api.gpu.v1alpha1 import ComputeDomainStatus
from api.gpu.v1alpha1.computedomain import READY_CONDITION, DomainState
from pkg.framework.reconcile.conditions import ConditionStatus, DesiredCondition, set_condition
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState

REASON_READY: Final = "DaemonsReady"
REASON_NO_CHANNEL_DEVICES: Final = "NoChannelDevices"
REASON_NVLINK_DOMAIN_NOT_OFFERED: Final = "NvlinkDomainNotOffered"
REASON_NO_FREE_CHANNEL: Final = "NoFreeChannel"
REASON_TEMPLATE_TAKEN: Final = "ResourceClaimTemplateTaken"
REASON_NO_DAEMON_SETTINGS: Final = "DaemonsNotConfigured"
REASON_NO_MEMBERS: Final = "WaitingForMembers"
REASON_NOT_IN_ENSEMBLE: Final = "NodesNotInImexEnsemble"
REASON_DAEMONS_NOT_READY: Final = "DaemonsNotReady"
REASON_DELETING: Final = "WaitingForClaims"


class NotReadyYetError(RuntimeError):
    """The domain waits for something outside it (channel devices, a free channel, a template name);
    raised after the status says so, so the controller retries the pass with backoff."""


def report(state: ComputeDomainState, *, ready: bool, reason: str, message: str) -> None:
    status: ComputeDomainStatus = state.status
    status.state = DomainState.READY if ready else DomainState.NOT_READY
    conditions = list(status.conditions or [])
    set_condition(
        conditions,
        DesiredCondition(
            type=READY_CONDITION,
            status=ConditionStatus.of(ready),
            reason=reason,
            message=message,
            observed_generation=state.domain.metadata.generation,
        ),
    )
    status.conditions = conditions


def not_ready(state: ComputeDomainState, *, reason: str, message: str) -> NotReadyYetError:
    """Reports NotReady and returns the error that ends the pass (``raise not_ready(...)``)."""
    report(state, ready=False, reason=reason, message=message)
    return NotReadyYetError(f"ComputeDomain {state.name}: {message}")
