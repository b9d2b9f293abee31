"""The ready step: Ready only with members whose daemons are all ready."""

from __future__ import annotations

from collections.abc import Callable

from api.gpu.v1alpha1 import ComputeDomain
from api.gpu.v1alpha1.computedomain import DomainNode
from pkg.gpucontroller.computedomain.internal.handler.ready import ReadyHandler
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState

StateOf = Callable[..., ComputeDomainState]
DomainOf = Callable[..., ComputeDomain]


def verdict(made: ComputeDomainState, *ready: bool) -> tuple[str | None, str]:
    made.nodes = [DomainNode(name=f"n{i}", index=i, ready=r) for i, r in enumerate(ready)]
    ReadyHandler().handle(made)
    [condition] = made.status.conditions or []
    return made.status.state, condition.reason


def test_ready_when_every_member_daemon_is(domain: DomainOf, state: StateOf) -> None:
    assert verdict(state(domain()), True, True) == ("Ready", "DaemonsReady")


def test_one_daemon_not_ready_makes_the_domain_not_ready(domain: DomainOf, state: StateOf) -> None:
    made = state(domain())
    assert verdict(made, True, False) == ("NotReady", "DaemonsNotReady")
    assert "n1" in str((made.status.conditions or [])[0].message)


def test_no_members_is_not_ready(domain: DomainOf, state: StateOf) -> None:
    assert verdict(state(domain())) == ("NotReady", "WaitingForMembers")


def test_a_member_outside_the_ensemble_is_named_in_the_reason(domain: DomainOf, state: StateOf) -> None:
    made = state(domain())
    made.clique = "cluster.1"
    made.nodes = [DomainNode(name="in", index=0, ready=True), DomainNode(name="gone")]
    ReadyHandler().handle(made)
    [condition] = made.status.conditions or []
    assert (made.status.state, condition.reason) == ("NotReady", "NodesNotInImexEnsemble")
    assert "gone" in str(condition.message)
    assert "cluster.1" in str(condition.message)
