"""The IMEX channel kind, through the real pipeline on a simulated node: a channel is prepared only
for a claim of the domain that owns it, its device node is made and handed to the container, the
Prepare waits (bounded) for the domain's daemon on this node, and the node goes with the last
claim of the channel. Every Prepare and Unprepare crash point converges for a channel claim.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes.client import V1ObjectMeta
from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.preparation.preparation_fakes import NODE, Node, kill_at, node

from api.gpu.v1alpha1 import ComputeDomain, ComputeDomainChannelConfig
from api.gpu.v1alpha1.computedomain import (
    Channel,
    ClaimTemplateRef,
    ComputeDomainSpec,
    ComputeDomainStatus,
    DomainNode,
)
from pkg.dra.publisher.channels import imex_channel_devices
from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation.checkpoint import PreparePhase
from pkg.gpuhandler.preparation.kinds.imex_channel import ImexChannelKind, channel_record
from pkg.gpuhandler.preparation.setup import PREPARE_POINTS, UNPREPARE_POINTS

CLIQUE = "7d3c8f4e-1a2b-4c5d-8e9f-0a1b2c3d4e5f.3"
UID = "domain-uid-1"
CHANNEL = 5


def _domain(*, channel: int | None = CHANNEL, ready: bool = True, uid: str = UID) -> ComputeDomain:
    return ComputeDomain(
        metadata=V1ObjectMeta(name="job", namespace="team", uid=uid),
        spec=ComputeDomainSpec(channel=Channel(resource_claim_template=ClaimTemplateRef(name="job-channel"))),
        status=ComputeDomainStatus(channel=channel, nodes=[DomainNode(name=NODE, index=0, ready=ready)]),
    )


def _config(uid: str = UID) -> dict[str, object]:
    return ComputeDomainChannelConfig(domain="job", domain_uid=uid).model_dump(mode="json", by_alias=True)


def _channel_node(n: Node, domain: ComputeDomain | None = None) -> Node:
    n.domains.add(domain or _domain())
    n.offers.publish(*imex_channel_devices(8, CLIQUE))
    kind = next(k for k in n.container.kinds() if isinstance(k, ImexChannelKind))
    kind._sleep = lambda _seconds: None  # the bounded wait polls without sleeping in tests
    return n


def _claim(n: Node, name: str = "worker-0", *, config: dict[str, object] | None = None) -> ClaimRef:
    return n.claims.allocate(name, [n.offers.devices[f"imex-channel-{CHANNEL}"]], config=config or _config())


def _node_path(n: Node) -> Path:
    return n.host.dev / "nvidia-caps-imex-channels" / f"channel{CHANNEL}"


def test_a_claim_of_the_owning_domain_gets_the_channels_device_node(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = _channel_node(node(mocker, tmp_path))
    claim = _claim(n)

    assert n.driver.prepare([claim])[claim.uid].error == ""

    assert _node_path(n).read_text() == f"242:{CHANNEL}"  # the major /proc/devices lists, minor N
    [record] = n.container.store().load().claims.values()
    [device] = record.devices
    assert (device.card, device.pci_address) == (f"imex-channel-{CHANNEL}", None)
    found = channel_record(device)
    assert found is not None
    assert (found.channel, found.domain, found.domain_uid) == (CHANNEL, "job", UID)
    spec = n.container.cdi().path_of(claim.uid).read_text()
    assert f"/dev/nvidia-caps-imex-channels/channel{CHANNEL}" in spec


@pytest.mark.parametrize(
    ("domain", "config", "problem"),
    [
        (_domain(channel=6), None, "owns channel 6, not channel 5"),
        (_domain(uid="someone-else"), None, "is someone-else, not domain-uid-1"),
        (None, _config("other"), "is domain-uid-1, not other"),
    ],
)
def test_a_channel_the_named_domain_does_not_own_is_refused(
    tmp_path: Path,
    mocker: MockerFixture,
    domain: ComputeDomain | None,
    config: dict[str, object] | None,
    problem: str,
) -> None:
    n = _channel_node(node(mocker, tmp_path), domain)
    claim = _claim(n, config=config)

    error = n.driver.prepare([claim])[claim.uid].error

    assert problem in error
    assert "team/job" in error
    assert not _node_path(n).exists()  # rolled back: no node left for a refused claim
    assert n.container.store().load().claims == {}


def test_a_missing_domain_is_refused_by_name(tmp_path: Path, mocker: MockerFixture) -> None:
    n = _channel_node(node(mocker, tmp_path))
    n.domains.by_name.clear()
    claim = _claim(n)

    assert "compute domain team/job does not exist" in n.driver.prepare([claim])[claim.uid].error


def test_a_claim_without_the_domains_config_is_refused_naming_the_claim(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = _channel_node(node(mocker, tmp_path))
    claim = n.claims.allocate("worker-0", [n.offers.devices[f"imex-channel-{CHANNEL}"]])

    error = n.driver.prepare([claim])[claim.uid].error

    assert "claim team/worker-0" in error
    assert "no ComputeDomainChannelConfig" in error


def test_a_config_of_an_unknown_kind_is_refused_by_name(tmp_path: Path, mocker: MockerFixture) -> None:
    n = _channel_node(node(mocker, tmp_path))
    claim = _claim(n, config={"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "Mystery"})

    assert "of kind 'Mystery'" in n.driver.prepare([claim])[claim.uid].error


def test_prepare_waits_for_the_daemon_then_fails_naming_claim_domain_and_node(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = _channel_node(node(mocker, tmp_path), _domain(ready=False))
    kind = next(k for k in n.container.kinds() if isinstance(k, ImexChannelKind))
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    kind._clock, kind._sleep = (lambda: now[0]), sleep
    claim = _claim(n)

    error = n.driver.prepare([claim])[claim.uid].error

    assert "not ready after 30s" in error
    assert "claim team/worker-0" in error
    assert "team/job" in error
    assert f"node {NODE}" in error
    assert slept[:5] == [0.25, 0.5, 1.0, 2.0, 4.0]  # backoff
    assert max(slept) == 4.0  # capped
    assert sum(slept) == pytest.approx(30.0)  # bounded by the default 30 s


def test_the_node_goes_with_the_last_claim_of_the_channel(tmp_path: Path, mocker: MockerFixture) -> None:
    n = _channel_node(node(mocker, tmp_path))
    first, second = _claim(n, "worker-0"), _claim(n, "worker-1")
    assert n.driver.prepare([first])[first.uid].error == ""
    assert n.driver.prepare([second])[second.uid].error == ""  # one channel, two Pods: no conflict

    assert n.driver.unprepare([first]) == {first.uid: ""}
    assert _node_path(n).exists()  # still held by the second claim
    assert n.driver.unprepare([second]) == {second.uid: ""}
    assert not _node_path(n).exists()
    assert n.driver.unprepare([second]) == {second.uid: ""}  # idempotent


def test_startup_removes_channel_nodes_no_record_owns(tmp_path: Path, mocker: MockerFixture) -> None:
    n = _channel_node(node(mocker, tmp_path))
    claim = _claim(n)
    assert n.driver.prepare([claim])[claim.uid].error == ""
    stray = n.host.dev / "nvidia-caps-imex-channels" / "channel9"
    stray.write_text("242:9")

    report = n.reconcile()

    assert not stray.exists()
    assert _node_path(n).exists()
    assert report.node["orphan IMEX channel nodes removed"] == ["channel9"]


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("point", PREPARE_POINTS)
def test_a_channel_claim_killed_at_any_prepare_point_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str, when: str, mocker: MockerFixture
) -> None:
    n = _channel_node(node(mocker, tmp_path))
    claim = _claim(n)
    kill_at(n, monkeypatch, f"prepare:{point}:{when}", claim)

    restarted = n.another_instance()
    restarted.reconcile()
    assert restarted.driver.prepare([claim])[claim.uid].error == ""  # the kubelet's retry
    [record] = restarted.container.store().load().claims.values()
    assert record.state is PreparePhase.PREPARE_COMPLETED
    assert _node_path(n).exists()


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("point", UNPREPARE_POINTS)
def test_a_channel_claim_killed_at_any_unprepare_point_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str, when: str, mocker: MockerFixture
) -> None:
    n = _channel_node(node(mocker, tmp_path))
    claim = _claim(n)
    assert n.driver.prepare([claim])[claim.uid].error == ""
    kill_at(n, monkeypatch, f"unprepare:{point}:{when}", claim)

    restarted = n.another_instance()
    restarted.reconcile()
    assert restarted.driver.unprepare([claim]) == {claim.uid: ""}
    assert restarted.container.store().load().claims == {}
    assert not _node_path(n).exists()
