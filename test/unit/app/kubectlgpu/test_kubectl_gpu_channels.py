"""kubectl gpu over a pool that holds IMEX channels: devices on no card (no pciAddress, no memory,
several claims of one compute domain on one channel). ``who`` shows a held channel on no
PhysicalGPU, ``--node``/``--free`` sum a node's channels up in one row (held by no claim / offered)
instead of one row per channel, the cards beside them keep their rows, and ``top`` lists a claim
of a channel without a usage sample.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubernetes.client import V1ResourceSlice
from testutil.unit.app.kubectlgpu.kubectl_gpu_objects import claim

from pkg.app.kubectlgpu.catalogue import Catalogue
from pkg.app.kubectlgpu.top import NO_SAMPLE, top_view
from pkg.app.kubectlgpu.who import FREE, NOT_SHARED, who_view
from pkg.dra.publisher.channels import imex_channel_devices

DRIVER = "gpu.deckhouse.io"
POOL = "gpus/w1"
CLIQUE = "7d3c8f4e-1a2b-4c5d-8e9f-0a1b2c3d4e5f.3"


def pool_with_channels(count: int) -> V1ResourceSlice:
    card: dict[str, Any] = {
        "name": "gpu-a",
        "attributes": {
            f"{DRIVER}/deviceType": {"string": "Physical"},
            f"{DRIVER}/pciAddress": {"string": "0000:02:00.0"},
        },
    }
    channels = [d.model_dump(by_alias=True, exclude_none=True) for d in imex_channel_devices(count, CLIQUE)]
    return V1ResourceSlice.model_validate(
        {
            "metadata": {"name": "w1-slice"},
            "spec": {
                "driver": DRIVER,
                "nodeName": "w1",
                "pool": {"name": POOL, "generation": 1, "resourceSliceCount": 1},
                "devices": [card, *channels],
            },
        }
    )


CATALOGUE = Catalogue([pool_with_channels(4)], [])
# Two Pods of one domain on the node hold channel 2 through two claims; another domain holds 3.
CLAIMS = [
    claim("ml", "job-a-0", devices=[(POOL, "imex-channel-2", None)], pods=("a-0",)),
    claim("ml", "job-a-1", devices=[(POOL, "imex-channel-2", None)], pods=("a-1",)),
    claim("ml", "job-b-0", devices=[(POOL, "imex-channel-3", None)], pods=("b-0",)),
]


def cells(rows: list[Any], *headers: str) -> list[tuple[str, ...]]:
    return [tuple(r.cells[h] for h in headers) for r in rows]


def test_held_channels_are_on_no_physical_gpu() -> None:
    rows = who_view(CLAIMS, CATALOGUE)

    assert cells(rows, "CLAIM", "DEVICE", "TYPE", "SHARE", "PHYSICALGPU") == [
        ("job-a-0", "imex-channel-2", "ImexChannel", NOT_SHARED, NOT_SHARED),
        ("job-a-1", "imex-channel-2", "ImexChannel", NOT_SHARED, NOT_SHARED),
        ("job-b-0", "imex-channel-3", "ImexChannel", NOT_SHARED, NOT_SHARED),
    ]
    assert rows[0].item["pciAddress"] is None


def test_a_nodes_free_channels_are_one_row_beside_its_free_cards() -> None:
    rows = who_view(CLAIMS, CATALOGUE, free=True)

    assert cells(rows, "CLAIM", "DEVICE", "TYPE", "SHARE", "PHYSICALGPU") == [
        (FREE, "gpu-a", "Physical", NOT_SHARED, "gpu-a"),
        (FREE, "imex-channel-*", "ImexChannel", "2/4", NOT_SHARED),  # 1 and 4 are held by no claim
    ]
    assert rows[1].item["imexChannels"] == {"free": 2, "offered": 4}


def test_a_node_with_every_channel_held_has_no_free_channel_row() -> None:
    held = [claim("ml", f"c{n}", devices=[(POOL, f"imex-channel-{n}", None)]) for n in (1, 2, 3, 4)]

    rows = who_view(held, CATALOGUE, node="w1")

    assert [r.cells["DEVICE"] for r in rows if r.cells["CLAIM"] == FREE] == ["gpu-a"]


def test_top_lists_a_channel_claim_without_a_sample() -> None:
    view = top_view(CLAIMS[:1], now=datetime(2026, 11, 21, tzinfo=UTC))

    assert cells(view.rows, "CLAIM", "POD", "GPU-MEMORY") == [("job-a-0", "a-0", NO_SAMPLE)]
