"""The channel step: lowest free channel through the ledger, once; a lost race retries."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes.client import V1ConfigMap
from testutil.compute_domains import RecordingApi

from api.gpu.v1alpha1 import ComputeDomain, ComputeDomainStatus
from pkg.framework.client import ConflictError
from pkg.gpucontroller.computedomain.internal.handler.channel import ChannelHandler
from pkg.gpucontroller.computedomain.internal.ledger import parse_ledger
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.internal.status import NotReadyYetError

StateOf = Callable[..., ComputeDomainState]
DomainOf = Callable[..., ComputeDomain]


def test_a_new_domain_takes_the_lowest_free_channel_and_records_it(
    api: RecordingApi, domain: DomainOf, state: StateOf
) -> None:
    taken = state(domain(), channels_in_use=frozenset({1}))
    ChannelHandler(api=api).handle(taken)
    assert taken.status.channel == 2
    assert api.ledger is not None
    assert parse_ledger(api.ledger.data)[2].uid == taken.domain.metadata.uid


class ReadBeforeTheOtherWrote(RecordingApi):
    """The second pass's read of the ledger happened before the first pass wrote it."""

    def __init__(self, server: RecordingApi, snapshot: V1ConfigMap | None) -> None:
        super().__init__(ledger=server.ledger)
        self.snapshot = snapshot

    def read_ledger(self) -> V1ConfigMap | None:
        return self.snapshot


def test_two_domains_created_at_once_never_get_the_same_channel(
    api: RecordingApi, domain: DomainOf, state: StateOf
) -> None:
    """Both passes read the same empty ledger and caches; the ledger's resourceVersion makes the
    later write lose, and the retry (a new pass, reading anew) takes the next channel."""
    live = frozenset({"uid-a", "uid-b"})
    first = state(domain("a", uid="uid-a"), live_domains=live)
    second = state(domain("b", uid="uid-b"), live_domains=live)
    snapshot = api.read_ledger()
    ChannelHandler(api=api).handle(first)
    with pytest.raises(ConflictError):
        ChannelHandler(api=ReadBeforeTheOtherWrote(api, snapshot)).handle(second)
    retried = state(domain("b", uid="uid-b"), live_domains=live)
    ChannelHandler(api=api).handle(retried)
    assert (first.status.channel, retried.status.channel) == (1, 2)


def test_a_domain_with_a_channel_keeps_it(api: RecordingApi, domain: DomainOf, state: StateOf) -> None:
    kept = state(domain(status=ComputeDomainStatus(channel=7)))
    ChannelHandler(api=api).handle(kept)
    assert kept.status.channel == 7
    assert api.calls == []


def test_no_free_channel_is_reported_and_retried(api: RecordingApi, domain: DomainOf, state: StateOf) -> None:
    full = state(domain(), channels_in_use=frozenset(range(1, 2048)))
    with pytest.raises(NotReadyYetError):
        ChannelHandler(api=api).handle(full)
    assert full.status.conditions is not None
    assert full.status.conditions[0].reason == "NoFreeChannel"
