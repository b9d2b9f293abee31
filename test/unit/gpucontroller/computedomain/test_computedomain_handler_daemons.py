"""The daemons step: a ConfigMap per domain, a Pod per member node, recreated on membership change."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes.client import V1PodCondition, V1PodStatus
from testutil.compute_domains import RecordingApi

from api.gpu.v1alpha1 import ComputeDomain
from api.gpu.v1alpha1.computedomain import DomainNode
from pkg.framework.client.builtin_kinds import POD
from pkg.gpucontroller.computedomain.internal.handler.daemons import DaemonsHandler
from pkg.gpucontroller.computedomain.internal.settings import DaemonSettings
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.internal.status import NotReadyYetError
from pkg.gpucontroller.computedomain.render import LABEL_NODES_HASH

StateOf = Callable[..., ComputeDomainState]
DomainOf = Callable[..., ComputeDomain]


def with_nodes(made: ComputeDomainState, *names: str) -> ComputeDomainState:
    made.nodes = [DomainNode(name=name, index=i) for i, name in enumerate(names)]
    return made


def test_one_pinned_pod_per_member_and_a_config_map_listing_them(
    api: RecordingApi, domain: DomainOf, state: StateOf
) -> None:
    DaemonsHandler(api=api).handle(with_nodes(state(domain()), "node-x", "node-y"))
    pods = api.made("create_pod")
    assert [(p.spec.node_name, p.metadata.namespace) for p in pods] == [
        ("node-x", "gpu-system"),
        ("node-y", "gpu-system"),
    ]
    assert pods[0].metadata.name.startswith("job-0b7c2f4e-imex-0-")
    assert pods[0].spec.containers[0].command == ["python", "-m", "pkg.backends.simulated.imex_daemon"]
    probe = POD.encode(pods[0])["spec"]["containers"][0]["readinessProbe"]
    assert probe["exec"]["command"][-1].endswith("nvidia-imex-ctl -q | grep -qx READY")
    [config_map] = api.made("apply_config_map")
    assert config_map.data is not None
    assert config_map.data["nodes_config.cfg"].split() == ["imex-0", "imex-1"]
    assert pods[0].spec.volumes[0].config_map.name == config_map.metadata.name


def test_a_membership_change_recreates_the_pods_of_the_old_hash(
    api: RecordingApi, domain: DomainOf, state: StateOf
) -> None:
    DaemonsHandler(api=api).handle(with_nodes(state(domain()), "node-x"))
    [old] = api.made("create_pod")
    old.status = V1PodStatus(pod_ip="10.0.0.1", conditions=[V1PodCondition(type="Ready", status="True")])
    grown = with_nodes(state(domain(), pods=(old,)), "node-x", "node-y")
    DaemonsHandler(api=api).handle(grown)
    assert api.made("delete_pod") == [old]
    created = api.made("create_pod")[1:]
    assert sorted(p.spec.node_name for p in created) == ["node-x", "node-y"]
    assert all(p.metadata.labels[LABEL_NODES_HASH] != old.metadata.labels[LABEL_NODES_HASH] for p in created)
    assert [n.ready for n in grown.nodes] == [False, False]  # the old daemon no longer counts


def test_a_current_pod_gives_its_member_address_and_readiness(
    api: RecordingApi, domain: DomainOf, state: StateOf
) -> None:
    DaemonsHandler(api=api).handle(with_nodes(state(domain()), "node-x"))
    [pod] = api.made("create_pod")
    pod.status = V1PodStatus(pod_ip="10.0.0.1", conditions=[V1PodCondition(type="Ready", status="True")])
    again = with_nodes(state(domain(), pods=(pod,)), "node-x")
    DaemonsHandler(api=api).handle(again)
    assert (again.nodes[0].address, again.nodes[0].ready) == ("10.0.0.1", True)
    assert len(api.made("create_pod")) == 1
    assert api.made("delete_pod") == []
    assert "10.0.0.1 imex-0" in api.made("apply_config_map")[-1].data["hosts"]


def test_a_node_that_left_loses_its_pod(api: RecordingApi, domain: DomainOf, state: StateOf) -> None:
    DaemonsHandler(api=api).handle(with_nodes(state(domain()), "node-x"))
    [pod] = api.made("create_pod")
    DaemonsHandler(api=api).handle(with_nodes(state(domain(), pods=(pod,))))
    assert api.made("delete_pod") == [pod]


def test_without_daemon_settings_the_domain_says_why(
    api: RecordingApi, domain: DomainOf, state: StateOf
) -> None:
    off = with_nodes(
        state(domain(), daemons=DaemonSettings(None, problem="computeDomains is not enabled")), "n"
    )
    with pytest.raises(NotReadyYetError):
        DaemonsHandler(api=api).handle(off)
    assert off.status.conditions is not None
    assert off.status.conditions[0].message == "computeDomains is not enabled"
    assert api.calls == []
