"""gpu-handler's ``ComputeDomainsReady``: the publish pass's IMEX channel decision, told to the
enrichment's :class:`NodeChannels`, becomes a condition on the node's cards that are in a
multi-node NVLink fabric — True when channels are offered, False naming a host-installed IMEX
service or the other reason they are not — and on no other card; the apply step writes it with
the handler's other fields and removes it from a card that left its fabric.
"""

from __future__ import annotations

import pytest
from kubernetes.client import V1Condition
from pytest_mock import MockerFixture, MockType
from testutil.unit.gpuhandler.gpuhandler_fakes import T0, T1, condition, gpu, stored

from api.gpu.v1alpha1 import (
    Capabilities,
    FabricState,
    NvidiaFabric,
    NvidiaState,
    PhysicalGPU,
    Vendor,
)
from pkg.backends import Enrichment
from pkg.gpuhandler.enrichment.compute_domains import (
    TURNED_OFF,
    ChannelStanding,
    NodeChannels,
    compute_domains_condition,
)
from pkg.gpuhandler.enrichment.handler.apply import ApplyHandler
from pkg.gpuhandler.enrichment.handler.compute_domains import ComputeDomainsHandler
from pkg.gpuhandler.enrichment.owned import OwnedStatus, owned_of
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState
from pkg.gpuhandler.enrichment.status_writer import KubeStatusWriter

CLUSTER = "7d3c8f4e-1a2b-4c5d-8e9f-0a1b2c3d4e5f"
CLIQUE = f"{CLUSTER}.3"
GB200 = Capabilities(vendor=Vendor.NVIDIA, product_name="NVIDIA GB200", memory_mib=189471)
IN_FABRIC = NvidiaState(
    gpu_uuid="GPU-gb200-0",
    fabric=NvidiaFabric(state=FabricState.READY, cluster_uuid=CLUSTER, clique_id=3),
)
NO_FABRIC = NvidiaState(gpu_uuid="GPU-gb200-0")
HEALTHY = condition("HardwareHealthy", "True", reason="Healthy", at=T0)
OFFERED = ChannelStanding(clique=CLIQUE, reason="offered")
SERVICE = "a running nvidia-imex process (pid 4242)"
REFUSED = ChannelStanding(reason="a host-installed IMEX service was found", host_service=SERVICE)
NOT_READY = ChannelStanding(reason="no card is in a multi-node NVLink fabric")


def told(standing: ChannelStanding | None) -> NodeChannels:
    channels = NodeChannels()
    if standing is not None:
        channels.tell(standing)
    return channels


def passed(
    card: PhysicalGPU,
    channels: NodeChannels,
    *,
    read: NvidiaState | None = IN_FABRIC,
    readiness: Readiness = Readiness.READY,
) -> EnrichmentState:
    """The state after the compute-domains step (``read`` None: the card's read failed)."""
    enrichment = Enrichment(capabilities=GB200, nvidia=read) if read is not None else None
    state = EnrichmentState(gpu=card, readiness=readiness, health=HEALTHY, enrichment=enrichment)
    ComputeDomainsHandler(channels=channels, now=lambda: T1).handle(state)
    return state


def with_condition(card: PhysicalGPU, found: V1Condition) -> PhysicalGPU:
    return stored(
        card, OwnedStatus(capabilities=GB200, nvidia=IN_FABRIC, health=HEALTHY, compute_domains=found)
    )


@pytest.mark.parametrize(
    ("standing", "status", "reason", "says"),
    [
        (OFFERED, "True", "ChannelsOffered", CLIQUE),
        (REFUSED, "False", "HostImexService", SERVICE),
        (NOT_READY, "False", "ChannelsNotOffered", "no card is in a multi-node NVLink fabric"),
    ],
)
def test_a_card_in_a_fabric_says_whether_the_node_serves_compute_domains(
    standing: ChannelStanding, status: str, reason: str, says: str
) -> None:
    state = passed(gpu(), told(standing))

    found = state.compute_domains
    assert found is not None
    assert (found.type, found.status, found.reason) == ("ComputeDomainsReady", status, reason)
    assert says in found.message
    assert found.last_transition_time == T1


def test_a_card_in_no_fabric_gets_no_condition_even_beside_a_host_service() -> None:
    card = with_condition(gpu(), condition("ComputeDomainsReady", "False", reason="HostImexService"))

    assert passed(card, told(REFUSED), read=NO_FABRIC).compute_domains is None


def test_channels_turned_off_take_the_condition_away() -> None:
    card = with_condition(gpu(), condition("ComputeDomainsReady", "True", reason="ChannelsOffered"))

    assert passed(card, told(TURNED_OFF)).compute_domains is None


@pytest.mark.parametrize(
    ("channels", "read", "readiness"),
    [
        (told(None), IN_FABRIC, Readiness.READY),  # no publish pass decided yet (a restart)
        (told(OFFERED), None, Readiness.READY),  # the card's read failed in this pass
        (told(OFFERED), IN_FABRIC, Readiness.NOT_READY),
    ],
    ids=["undecided", "read-failed", "not-ready"],
)
def test_a_pass_that_cannot_tell_keeps_the_condition_the_card_has(
    channels: NodeChannels, read: NvidiaState | None, readiness: Readiness
) -> None:
    kept = condition("ComputeDomainsReady", "False", reason="HostImexService")
    card = with_condition(gpu(), kept)

    assert passed(card, channels, read=read, readiness=readiness).compute_domains == kept


def test_the_transition_time_moves_only_with_the_status() -> None:
    card = gpu()
    first = compute_domains_condition(card, NOT_READY, now=T0)
    assert first is not None
    card = with_condition(card, first)

    same = compute_domains_condition(
        card, ChannelStanding(reason="the cards are in different cliques"), now=T1
    )
    flipped = compute_domains_condition(card, OFFERED, now=T1)

    assert same is not None
    assert flipped is not None
    assert (same.last_transition_time, same.message) == (
        T0,
        "no IMEX channels are offered: the cards are in different cliques",
    )
    assert flipped.last_transition_time == T1


def test_subscribers_hear_of_changes_only(mocker: MockerFixture) -> None:
    channels = NodeChannels()
    broken, heard = mocker.Mock(side_effect=RuntimeError("boom")), mocker.Mock()
    channels.subscribe(broken)
    channels.subscribe(heard)

    channels.tell(OFFERED)
    channels.tell(ChannelStanding(clique=CLIQUE, reason="offered"))  # the same decision again
    channels.tell(REFUSED)

    assert heard.call_count == 2  # a broken subscriber does not stop the others
    assert channels.standing() == REFUSED


@pytest.fixture
def writer(mocker: MockerFixture) -> MockType:
    w = mocker.create_autospec(KubeStatusWriter, instance=True)
    w.apply.side_effect = stored
    return w


def test_apply_writes_the_condition_beside_hardware_healthy(writer: MockType) -> None:
    card = gpu()
    state = passed(card, told(REFUSED))

    ApplyHandler(writer=writer).handle(state)

    [(_, owned)] = [call.args for call in writer.apply.call_args_list]
    types = [c["type"] for c in owned.apply_status()["conditions"]]
    assert types == ["HardwareHealthy", "ComputeDomainsReady"]


def test_an_unchanged_condition_costs_no_write_and_a_card_that_left_its_fabric_loses_it(
    writer: MockType,
) -> None:
    state = passed(gpu(), told(OFFERED))
    ApplyHandler(writer=writer).handle(state)
    card = writer.apply.side_effect(state.gpu, writer.apply.call_args.args[1])
    writer.apply.reset_mock()

    ApplyHandler(writer=writer).handle(passed(card, told(OFFERED)))
    assert writer.apply.call_count == 0

    ApplyHandler(writer=writer).handle(passed(card, told(OFFERED), read=NO_FABRIC))
    [(_, owned)] = [call.args for call in writer.apply.call_args_list]
    assert owned.compute_domains is None
    assert [c["type"] for c in owned.apply_status()["conditions"]] == ["HardwareHealthy"]
    assert owned_of(card).compute_domains is not None  # it was there, and the apply drops it
