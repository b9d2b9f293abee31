"""The members step: allocated claims make members; a node joining or leaving is a membership change."""

from __future__ import annotations

from collections.abc import Callable

from testutil.compute_domains import channel_claim

from api.gpu.v1alpha1 import ComputeDomain, ComputeDomainStatus
from api.gpu.v1alpha1.computedomain import DomainNode
from pkg.gpucontroller.computedomain.internal.handler.members import MembersHandler
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState

StateOf = Callable[..., ComputeDomainState]
DomainOf = Callable[..., ComputeDomain]


def test_a_claim_allocated_on_a_node_makes_it_a_member(domain: DomainOf, state: StateOf) -> None:
    joined = state(domain(), claims=(channel_claim("a", "node-x"),))
    MembersHandler().handle(joined)
    assert [(n.name, n.index) for n in joined.nodes] == [("node-x", None)]  # the ensemble step indexes it
    assert joined.status.nodes == joined.nodes
    assert joined.status.last_membership_change is not None


def test_a_joining_node_gets_a_bare_entry_and_a_staying_node_keeps_its_own(
    domain: DomainOf, state: StateOf
) -> None:
    before = ComputeDomainStatus(nodes=[DomainNode(name="node-x", index=0, ready=True)])
    grown = state(domain(status=before), claims=(channel_claim("a", "node-x"), channel_claim("b", "node-y")))
    MembersHandler().handle(grown)
    assert [(n.name, n.index, n.ready) for n in grown.nodes] == [("node-x", 0, True), ("node-y", None, False)]
    grown.nodes[1].index = 1
    after = ComputeDomainStatus(nodes=grown.nodes)
    shrunk = state(domain(status=after), claims=(channel_claim("b", "node-y"),))
    MembersHandler().handle(shrunk)
    assert [(n.name, n.index) for n in shrunk.nodes] == [("node-y", 1)]


def test_the_same_members_are_no_membership_change(domain: DomainOf, state: StateOf) -> None:
    before = ComputeDomainStatus(nodes=[DomainNode(name="node-x", index=0)])
    same = state(domain(status=before), claims=(channel_claim("a", "node-x"),))
    MembersHandler().handle(same)
    assert same.status.last_membership_change is None
