"""The deletion step: waits while a claim holds the channel, then cleans up and drops the finalizer."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from testutil.compute_domains import UID, RecordingApi, channel_claim

from api.gpu.v1alpha1 import COMPUTE_DOMAIN_FINALIZER, ComputeDomain
from pkg.framework.reconcile import StopHandlerChain
from pkg.gpucontroller.computedomain.internal.handler.deletion import DeletionHandler
from pkg.gpucontroller.computedomain.internal.ledger import parse_ledger
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState

StateOf = Callable[..., ComputeDomainState]


def deleted(make: Callable[..., ComputeDomain]) -> ComputeDomain:
    made = make()
    made.metadata.deletion_timestamp = datetime(2026, 1, 1, tzinfo=UTC)
    made.metadata.finalizers = [COMPUTE_DOMAIN_FINALIZER]
    return made


def test_a_live_domain_passes(
    api: RecordingApi, domain: Callable[..., ComputeDomain], state: StateOf
) -> None:
    assert DeletionHandler(api=api).handle(state(domain())) is None


def test_an_allocated_claim_keeps_the_finalizer(
    api: RecordingApi, domain: Callable[..., ComputeDomain], state: StateOf
) -> None:
    waiting = state(deleted(domain), claims=(channel_claim("a", "node-x"),))
    with pytest.raises(StopHandlerChain):
        DeletionHandler(api=api).handle(waiting)
    assert waiting.resource.changed().metadata.finalizers == [COMPUTE_DOMAIN_FINALIZER]
    [condition] = waiting.status.conditions or []
    assert condition.reason == "WaitingForClaims"
    assert "a" in str(condition.message)
    assert api.calls == []


def test_without_allocated_claims_the_channel_is_released_and_the_finalizer_dropped(
    api: RecordingApi, domain: Callable[..., ComputeDomain], state: StateOf
) -> None:
    api.write_ledger(None, {"1": f"{UID} team/job", "2": "other team/other"})
    done = state(
        deleted(domain),
        claims=(channel_claim("a", "node-x", allocated=False),),
    )
    with pytest.raises(StopHandlerChain):
        DeletionHandler(api=api).handle(done)
    assert (
        api.made("delete_pod") == api.made("delete_config_map") == []
    )  # the clique's ensemble is not the domain's
    assert api.ledger is not None
    assert list(parse_ledger(api.ledger.data)) == [2]
    assert done.resource.changed().metadata.finalizers == []
