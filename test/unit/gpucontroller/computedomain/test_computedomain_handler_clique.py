"""The clique step: chosen once by offers, a pinned one checked, none offered waits."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from testutil.compute_domains import CLIQUE_A, CLIQUE_B

from api.gpu.v1alpha1 import ComputeDomain, ComputeDomainStatus
from pkg.gpucontroller.computedomain.internal.handler.clique import CliqueHandler
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.internal.status import NotReadyYetError

StateOf = Callable[..., ComputeDomainState]
DomainOf = Callable[..., ComputeDomain]


def test_the_clique_offered_by_most_nodes_is_chosen(domain: DomainOf, state: StateOf) -> None:
    chosen = state(domain(), cliques={CLIQUE_A: {"n1"}, CLIQUE_B: {"n2", "n3"}})
    CliqueHandler().handle(chosen)
    assert chosen.clique == chosen.status.nvlink_domain == CLIQUE_B


def test_a_chosen_clique_never_changes(domain: DomainOf, state: StateOf) -> None:
    kept = state(domain(status=ComputeDomainStatus(nvlink_domain=CLIQUE_A)), cliques={CLIQUE_B: {"n2", "n3"}})
    CliqueHandler().handle(kept)
    assert kept.clique == CLIQUE_A


def test_no_channel_devices_anywhere_waits_with_a_reason(domain: DomainOf, state: StateOf) -> None:
    waiting = state(domain())
    with pytest.raises(NotReadyYetError):
        CliqueHandler().handle(waiting)
    [condition] = waiting.status.conditions or []
    assert (condition.status, condition.reason) == ("False", "NoChannelDevices")
    assert waiting.status.state == "NotReady"
    assert waiting.status.nvlink_domain is None


def test_a_pinned_clique_nobody_offers_is_named_in_the_condition(domain: DomainOf, state: StateOf) -> None:
    pinned = state(domain(nvlinkDomain=CLIQUE_B), cliques={CLIQUE_A: {"n1"}})
    with pytest.raises(NotReadyYetError):
        CliqueHandler().handle(pinned)
    [condition] = pinned.status.conditions or []
    assert condition.reason == "NvlinkDomainNotOffered"
    assert CLIQUE_B in str(condition.message)


def test_a_recorded_pinned_clique_is_kept_while_its_offers_are_gone(domain: DomainOf, state: StateOf) -> None:
    recorded = ComputeDomainStatus(nvlink_domain=CLIQUE_B)
    kept = state(domain(nvlinkDomain=CLIQUE_B, status=recorded), cliques={CLIQUE_A: {"n1"}})
    CliqueHandler().handle(kept)
    assert kept.clique == CLIQUE_B


def test_a_pinned_clique_that_is_offered_is_used(domain: DomainOf, state: StateOf) -> None:
    pinned = state(domain(nvlinkDomain=CLIQUE_A), cliques={CLIQUE_A: {"n1"}, CLIQUE_B: {"n2", "n3"}})
    CliqueHandler().handle(pinned)
    assert pinned.clique == CLIQUE_A
