"""Whether a node offers IMEX channels (the three conditions), and the devices it then offers."""

from __future__ import annotations

import pytest
from kubernetes.client import V1Device, V1DeviceAttribute

from pkg.backends.nvidia.imex_host import ImexHost
from pkg.gpuhandler.enrichment.compute_domains import TURNED_OFF, ChannelStanding, NodeChannels
from pkg.gpuhandler.publishing.channels import ChannelOffers, decide_channels, is_fabric_domain, offer_domains
from pkg.gpuhandler.publishing.setup import PublishSettings, new_channel_offers

CLIQUE = "7d3c8f4e-1a2b-4c5d-8e9f-0a1b2c3d4e5f.3"
OTHER = "7d3c8f4e-1a2b-4c5d-8e9f-0a1b2c3d4e5f.4"
SWITCHES = "nvswitch-0123456789abcdef"
READY = ImexHost(channel_major=242)


def test_cards_in_one_clique_with_the_channel_device_offer_channels_there() -> None:
    decision = decide_channels(READY, [CLIQUE, CLIQUE, None])

    assert decision.domain == CLIQUE
    [first, *_, last] = decision.devices(128)
    assert (first.name, last.name) == ("imex-channel-1", "imex-channel-128")  # never channel 0
    attributes = first.attributes or {}
    assert attributes["gpu.deckhouse.io/deviceType"].string == "ImexChannel"
    assert attributes["gpu.deckhouse.io/imexChannel"].int == 1
    assert attributes["gpu.deckhouse.io/nvlinkDomain"].string == CLIQUE
    assert "gpu.deckhouse.io/pciAddress" not in attributes
    assert first.allow_multiple_allocations is True


@pytest.mark.parametrize(
    ("host", "domains", "why"),
    [
        (ImexHost(channel_major=None), [CLIQUE], "lists no nvidia-caps-imex-channels"),
        (READY, [SWITCHES, None], "no card is in a multi-node NVLink fabric"),
        (READY, [], "no card is in a multi-node NVLink fabric"),
        (READY, [CLIQUE, OTHER], "different NVLink cliques"),
        (
            ImexHost(channel_major=242, host_service="a running nvidia-imex process (pid 9)"),
            [CLIQUE],
            "pid 9",
        ),
    ],
)
def test_any_missing_condition_offers_no_channel(host: ImexHost, domains: list[str | None], why: str) -> None:
    decision = decide_channels(host, domains)

    assert decision.domain is None
    assert why in decision.reason
    assert decision.devices(128) == []


def test_a_host_service_on_a_fabric_node_is_the_reason_for_its_cards() -> None:
    decision = decide_channels(ImexHost(channel_major=242, host_service="unit"), [CLIQUE])

    assert (decision.host_service, decision.in_fabric) == ("unit", True)


def test_only_a_uuid_and_clique_names_a_fabric() -> None:
    assert is_fabric_domain(CLIQUE)
    assert not is_fabric_domain(SWITCHES)
    assert not is_fabric_domain("00000000-0000-0000-0000-000000000000")  # no clique
    assert not is_fabric_domain(None)


def test_the_pass_reads_the_host_each_time_and_the_offers_domains() -> None:
    hosts = iter([READY, ImexHost(channel_major=242, host_service="unit")])
    offers = ChannelOffers(host=lambda: next(hosts), count=4)
    card = V1Device(
        name="gpu-0", attributes={"gpu.deckhouse.io/nvlinkDomain": V1DeviceAttribute(string=CLIQUE)}
    )

    first = offers.decide([card])
    second = offers.decide([card])

    assert [d.name for d in offers.devices(first)] == [f"imex-channel-{n}" for n in (1, 2, 3, 4)]
    assert offers.devices(second) == []
    assert offer_domains([card, V1Device(name="x")]) == [CLIQUE, None]


def test_a_count_beyond_the_drivers_channels_is_refused() -> None:
    with pytest.raises(ValueError, match="2048"):
        ChannelOffers(host=lambda: READY, count=2048)


def test_each_decision_is_told_to_the_enrichments_node_channels() -> None:
    hosts = iter([READY, ImexHost(channel_major=242, host_service="unit")])
    told = NodeChannels()
    offers = ChannelOffers(host=lambda: next(hosts), count=4, node_channels=told)
    card = V1Device(
        name="gpu-0", attributes={"gpu.deckhouse.io/nvlinkDomain": V1DeviceAttribute(string=CLIQUE)}
    )

    offers.decide([card])
    assert told.standing() == ChannelStanding(clique=CLIQUE, reason="offered")
    offers.decide([card])
    standing = told.standing()
    assert standing is not None
    assert (standing.clique, standing.host_service) == (None, "unit")


def test_channels_turned_off_are_told_as_such() -> None:
    told = NodeChannels()
    settings = PublishSettings(node_name="node-1", node_label="node-1", resync_period=300.0, imex_channels=0)

    assert new_channel_offers(settings=settings, node_channels=told) is None
    assert told.standing() == TURNED_OFF
