"""IMEX channels in a node's pool: their own slices after the cards', counted in the pool's slice
count, and gone (with a new generation) when the node stops offering them."""

from __future__ import annotations

from typing import cast

import pytest
from testutil.unit.dra.offers.fake_slice_server import FakeSliceServer
from testutil.unit.dra.offers.offer_models import card

from pkg.dra.model.offers import build_offers
from pkg.dra.model.slices import Layout
from pkg.dra.publisher import SlicePublisher
from pkg.dra.publisher.channels import imex_channel_devices
from pkg.framework.client import KubeClient

NODE = "node-ch"
CLIQUE = "7d3c8f4e-1a2b-4c5d-8e9f-0a1b2c3d4e5f.3"


@pytest.mark.parametrize("layout", [Layout.SEPARATE, Layout.INLINE])
def test_channels_go_in_slices_of_their_own_counted_in_the_pool(layout: Layout) -> None:
    server = FakeSliceServer()
    pub = SlicePublisher(kube=cast(KubeClient, server), reader=server, layout=layout)

    result = pub.publish(
        NODE, [build_offers(card("H100", "0000:18:00.0"))], channels=imex_channel_devices(200, CLIQUE)
    )

    channel_slices = [n for n in result.applied if "-channels-" in n]
    assert channel_slices == ["gpu-node-ch-channels-00", "gpu-node-ch-channels-01"]  # 128 + 72
    counts = {rs.spec.pool.resource_slice_count for rs in server.slices.values()}
    assert counts == {len(server.slices)}
    devices = [d for n in channel_slices for d in server.slices[n].spec.devices or []]
    assert [d.name for d in devices] == [f"imex-channel-{n}" for n in range(1, 201)]


def test_withdrawn_channels_delete_their_slices_at_a_new_generation() -> None:
    server = FakeSliceServer()
    pub = SlicePublisher(kube=cast(KubeClient, server), reader=server, layout=Layout.SEPARATE)
    cards = [build_offers(card("H100", "0000:18:00.0"))]
    pub.publish(NODE, cards, channels=imex_channel_devices(4, CLIQUE))

    result = pub.publish(NODE, cards)

    assert result.deleted == ("gpu-node-ch-channels-00",)
    assert result.generation == 2
    assert {rs.spec.pool.resource_slice_count for rs in server.slices.values()} == {len(server.slices)}


def test_a_count_beyond_the_drivers_channels_is_refused() -> None:
    with pytest.raises(ValueError, match="not between 0 and 2047"):
        imex_channel_devices(2048, CLIQUE)
