"""The ensemble step: each member node's index, address and readiness from its clique's ensemble."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes.client import V1ObjectMeta, V1Pod, V1PodCondition, V1PodStatus
from testutil.compute_domains import CLIQUE_A, CLIQUE_B

from api.gpu.v1alpha1 import ComputeDomain
from api.gpu.v1alpha1.computedomain import DomainNode
from pkg.gpucontroller.computedomain.internal.handler.ensemble import EnsembleHandler
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState, Ensemble
from pkg.gpucontroller.computedomain.internal.status import NotReadyYetError
from pkg.gpucontroller.imexensemble.settings import DaemonSettings

StateOf = Callable[..., ComputeDomainState]
DomainOf = Callable[..., ComputeDomain]
READY = V1Pod(
    metadata=V1ObjectMeta(name="imex-x"),
    status=V1PodStatus(pod_ip="10.0.0.1", conditions=[V1PodCondition(type="Ready", status="True")]),
)


def members(made: ComputeDomainState, *names: str, clique: str = CLIQUE_A) -> ComputeDomainState:
    made.clique = clique
    made.nodes = [DomainNode(name=name) for name in names]
    return made


def test_members_take_the_ensemble_index_and_their_daemon_pod(domain: DomainOf, state: StateOf) -> None:
    ensemble = Ensemble(clique=CLIQUE_A, members={"node-x": 3, "node-y": 0}, pods={"node-x": READY})
    done = members(state(domain(), ensemble=ensemble), "node-x", "node-y")
    EnsembleHandler().handle(done)
    assert [(n.name, n.index, n.address, n.ready) for n in done.status.nodes or []] == [
        ("node-x", 3, "10.0.0.1", True),
        ("node-y", 0, None, False),
    ]


def test_a_node_outside_the_ensemble_has_no_index_and_is_not_ready(domain: DomainOf, state: StateOf) -> None:
    ensemble = Ensemble(clique=CLIQUE_A, members={"node-y": 0}, pods={"node-x": READY})
    done = members(state(domain(), ensemble=ensemble), "node-x")
    done.nodes[0].index, done.nodes[0].ready = 1, True  # what the last pass recorded
    EnsembleHandler().handle(done)
    assert [(n.index, n.ready) for n in done.nodes] == [(None, False)]


def test_the_ensemble_of_another_clique_counts_for_nothing(domain: DomainOf, state: StateOf) -> None:
    ensemble = Ensemble(clique=CLIQUE_B, members={"node-x": 0}, pods={"node-x": READY})
    done = members(state(domain(), ensemble=ensemble), "node-x")
    EnsembleHandler().handle(done)
    assert [(n.index, n.ready) for n in done.nodes] == [(None, False)]


def test_without_daemon_settings_the_domain_says_so(domain: DomainOf, state: StateOf) -> None:
    off = members(state(domain(), daemons=DaemonSettings(None, problem="computeDomains is off")), "node-x")
    with pytest.raises(NotReadyYetError, match="computeDomains is off"):
        EnsembleHandler().handle(off)
    assert off.status.conditions is not None
    assert off.status.conditions[0].reason == "DaemonsNotConfigured"
