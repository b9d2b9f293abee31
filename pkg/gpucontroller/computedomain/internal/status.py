"""The domain's readiness as the handlers leave it: ``status.state`` and the ``Ready`` condition."""

from __future__ import annotations

import logging
from typing import Final

from api.gpu.v1alpha1 import ComputeDomainStatus
from api.gpu.v1alpha1.computedomain import READY_CONDITION, DomainState
from pkg.framework.reconcile.chain import ChainOutcome
from pkg.framework.reconcile.conditions import ConditionStatus, DesiredCondition, set_condition
from pkg.framework.reconcile.contract import Result
from pkg.framework.reconcile.object_reconciler import raise_or_result
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState

logger = logging.getLogger(__name__)

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
    """The domain waits for something outside it (channel devices, a free channel, a template name,
    the daemons' settings); raised after the status says so. Not a failure of the pass: it is
    concluded as a requeue with backoff (:func:`conclude`), logged at debug, because the domain's
    Ready condition is where a person reads why."""


def conclude(state: ComputeDomainState, outcome: ChainOutcome[ComputeDomainState]) -> Result:
    """A domain that waits is requeued with backoff, quietly; anything else as the framework does."""
    if isinstance(outcome.error, NotReadyYetError):
        logger.debug("domain waits: %s", outcome.error, extra={"domain": state.name})
        return Result(requeue=True)
    return raise_or_result(state, outcome)


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
