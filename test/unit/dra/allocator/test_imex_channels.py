"""A pool holding IMEX channels beside a card: channels are on no card (no pciAddress, no
counters) and allow multiple allocations, so every Pod of a domain on the node gets the domain's
channel while the card is allocated as before."""

from __future__ import annotations

from kubernetes.client import V1AllocationResult
from testutil.unit.dra.allocator.alloc_builders import (
    Cluster,
    a30_pool,
    claim,
    device_class,
    devices_of,
    exact,
    physical_class,
)

from pkg.domain.names import DRIVER
from pkg.dra.publisher.channels import channel_slices, imex_channel_devices

CLIQUE = "7d3c8f4e-1a2b-4c5d-8e9f-0a1b2c3d4e5f.3"
CLASS = "imex-channel.gpu.deckhouse.io"
CHANNEL_CLASS = device_class(
    CLASS,
    f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].deviceType == "ImexChannel"',
)


def _cluster() -> Cluster:
    slices = a30_pool()
    count = len(slices) + 1
    for rs in slices:
        rs.spec.pool.resource_slice_count = count
    [channels] = channel_slices(
        node="node-a", channels=imex_channel_devices(4, CLIQUE), generation=1, count=count, inline=False
    )
    channels.spec.pool.name = slices[0].spec.pool.name
    return Cluster([*slices, channels], [CHANNEL_CLASS, physical_class()])


def _channel_request(channel: int) -> str:
    return (
        f'device.attributes["{DRIVER}"].imexChannel == {channel} && '
        f'device.attributes["{DRIVER}"].nvlinkDomain == "{CLIQUE}"'
    )


def test_every_pod_of_a_domain_gets_the_same_channel() -> None:
    cluster = _cluster()
    request = exact("channel", CLASS, selectors=(_channel_request(2),))

    first = cluster.allocate(claim("worker-0", request))
    second = cluster.allocate(claim("worker-1", request))

    assert isinstance(first, V1AllocationResult)
    assert isinstance(second, V1AllocationResult)
    assert devices_of(first) == devices_of(second) == ["imex-channel-2"]


def test_the_card_is_allocated_as_before_next_to_the_channels() -> None:
    cluster = _cluster()
    cluster.allocate(claim("worker-0", exact("channel", CLASS)))

    assert cluster.take("physical-exclusive") == ["gpu-0000-02-00-0-physical"]


def test_a_channel_of_another_clique_is_not_found() -> None:
    cluster = _cluster()
    other = exact(
        "channel",
        CLASS,
        selectors=(f'device.attributes["{DRIVER}"].nvlinkDomain == "elsewhere.1"',),
    )

    assert not isinstance(cluster.allocate(claim("worker-0", other)), V1AllocationResult)
