"""A domain that waits is concluded as a quiet requeue with backoff, not an error the log shouts."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from api.gpu.v1alpha1 import ComputeDomain
from api.gpu.v1alpha1.computedomain import DomainState
from pkg.framework.reconcile.chain import ChainOutcome
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.internal.status import REASON_NO_DAEMON_SETTINGS, conclude, not_ready

StateOf = Callable[..., ComputeDomainState]
DomainOf = Callable[..., ComputeDomain]


def test_a_waiting_domain_is_requeued_with_its_reason_in_the_status(domain: DomainOf, state: StateOf) -> None:
    made = state(domain())
    waits = not_ready(made, reason=REASON_NO_DAEMON_SETTINGS, message="computeDomains is off")
    assert conclude(made, ChainOutcome(Result(), (), waits)) == Result(requeue=True)
    assert made.status.state is DomainState.NOT_READY
    assert made.status.conditions is not None
    assert made.status.conditions[0].reason == REASON_NO_DAEMON_SETTINGS


def test_another_failure_is_raised_and_success_returns_the_chains_result(
    domain: DomainOf, state: StateOf
) -> None:
    made = state(domain())
    with pytest.raises(ValueError, match="bug"):
        conclude(made, ChainOutcome(Result(), (), ValueError("bug")))
    assert conclude(made, ChainOutcome(Result(requeue=True), ())) == Result(requeue=True)
