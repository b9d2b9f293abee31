"""``kubectl gpu who``: a share's percentage and memory limit, and the free capacity of every node.

The slices here carry the counters the scheduler counts (a card's memory and its memory slices),
so what is free is decided as the allocator would: a MIG device fits beside another only where
their slices do not overlap.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1ResourceSlice
from pytest_mock import MockerFixture

from pkg.app.kubectlgpu import catalogue as catalogue_module
from pkg.app.kubectlgpu.catalogue import Catalogue
from pkg.app.kubectlgpu.who import FREE, NO_LIMIT, who_view

DRIVER = "gpu.deckhouse.io"
GI = "Gi"


def device(name: str, card: str, *, uses: dict[str, str], **attributes: str) -> dict[str, Any]:
    attrs = {"pciAddress": "0000:02:00.0", "uuid": f"GPU-{card}", **attributes}
    return {
        "name": name,
        "attributes": {f"{DRIVER}/{k}": {"string": v} for k, v in attrs.items()},
        "capacity": {"memory": {"value": "40Gi"}},
        "consumesCounters": [{"counterSet": card, "counters": {k: {"value": v} for k, v in uses.items()}}],
    }


def node_slice(node: str, cards: list[str]) -> V1ResourceSlice:
    """Per card: the whole card, two 1g MIG devices (slices 0 and 1), a 2g over both, two shares."""
    every = {"memory": "40Gi", "slice-0": "1", "slice-1": "1"}
    devices = []
    for card in cards:
        devices += [
            device(card, card, uses=every, deviceType="Physical", sharingStrategy="Exclusive"),
            device(
                f"{card}-1g-0",
                card,
                uses={"memory": "20Gi", "slice-0": "1"},
                deviceType="MIG",
                migProfile="1g",
            ),
            device(
                f"{card}-1g-1",
                card,
                uses={"memory": "20Gi", "slice-1": "1"},
                deviceType="MIG",
                migProfile="1g",
            ),
            device(f"{card}-2g-0", card, uses=every, deviceType="MIG", migProfile="2g"),
            device(f"{card}-mps", card, uses=every, deviceType="Physical", sharingStrategy="MPS"),
            device(f"{card}-ts", card, uses=every, deviceType="Physical", sharingStrategy="TimeSlicing"),
        ]
    return V1ResourceSlice.model_validate(
        {
            "metadata": {"name": f"{node}-slice"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": f"gpus/{node}", "generation": 1, "resourceSliceCount": 1},
                "sharedCounters": [
                    {"name": card, "counters": {k: {"value": v} for k, v in every.items()}} for card in cards
                ],
                "devices": devices,
            },
        }
    )


def claim(
    namespace: str,
    name: str,
    node: str,
    dev: str,
    *,
    consumed: dict[str, str] | None = None,
    config: Any = None,
) -> dict[str, Any]:
    result: dict[str, Any] = {"request": "gpu", "driver": DRIVER, "pool": f"gpus/{node}", "device": dev}
    if consumed is not None:
        result["consumedCapacity"] = consumed
        result["shareID"] = f"share-{name}"
    devices: dict[str, Any] = {"results": [result]}
    if config is not None:
        devices["config"] = [{"source": "FromClass", "opaque": {"driver": DRIVER, "parameters": config}}]
    return {
        "metadata": {"namespace": namespace, "name": name},
        "status": {"allocation": {"devices": devices}, "reservedFor": [{"resource": "pods", "name": name}]},
    }


CATALOGUE = Catalogue([node_slice("w1", ["a", "b", "c"]), node_slice("w2", ["d", "e"])], [])
MPS_CONFIG = {
    "apiVersion": "gpu.deckhouse.io/v1alpha1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "MPS", "mps": {"defaultActiveThreadPercentage": 30}},
}


def cells(rows: list[Any], *headers: str) -> list[tuple[str, ...]]:
    return [tuple(r.cells[h] for h in headers) for r in rows]


def test_a_share_shows_its_percentage_and_memory_limit() -> None:
    claims = [
        claim("ml", "mps-asked", "w1", "a-mps", consumed={"sharePercent": "25", "memory": "8Gi"}),
        claim("ml", "mps-percent", "w1", "b-mps", consumed={"sharePercent": "25"}),  # 25 % of 40Gi
        claim("ml", "mps-config", "w2", "d-mps", config=MPS_CONFIG),  # no consumable capacity
        claim("ml", "ts", "w1", "c-ts", consumed={"sharePercent": "50", "memory": "4Gi"}),
        claim("ml", "mig", "w2", "e-1g-0"),
    ]
    rows = who_view(claims, CATALOGUE)
    assert cells(rows, "CLAIM", "TYPE", "SHARE", "MEMORY-LIMIT") == [
        ("mps-asked", "MPS share", "25%", "8Gi"),
        ("mps-percent", "MPS share", "25%", "10Gi"),
        ("ts", "TimeSlicing share", "50%", NO_LIMIT),  # time-slicing enforces no memory limit
        ("mps-config", "MPS share", "30%", "12Gi"),
        ("mig", "MIG 1g", "<none>", "<none>"),
    ]
    assert rows[1].item["sharePercent"] == 25
    assert rows[1].item["memoryLimitBytes"] == 10 * 2**30
    assert "sharePercent" not in rows[4].item


def test_free_lists_what_nobody_holds_on_every_node() -> None:
    claims = [
        claim("ml", "whole", "w1", "a"),
        claim("ml", "mps", "w1", "b-mps", consumed={"sharePercent": "25"}),
        claim("web", "mps2", "w1", "b-mps", consumed={"sharePercent": "15", "memory": "2Gi"}),
        claim("ml", "mig", "w2", "d-1g-0"),
    ]
    rows = who_view([], CATALOGUE, free=True, holders=claims)
    assert cells(rows, "CLAIM", "NODE", "DEVICE", "TYPE", "SHARE", "MEMORY-LIMIT") == [
        # card a is held whole: nothing of it is free
        (FREE, "w1", "b-mps", "MPS share", "60%", "28Gi"),  # 40Gi - 10Gi - 2Gi
        (FREE, "w1", "c", "Physical", "<none>", "<none>"),
        (FREE, "w2", "d-1g-1", "MIG 1g", "<none>", "<none>"),  # slice 1 is left; the 2g needs both
        (FREE, "w2", "e", "Physical", "<none>", "<none>"),
    ]
    assert rows[0].item == {
        "node": "w1",
        "device": "b-mps",
        "free": True,
        "type": "MPS share",
        "physicalGPU": None,
        "uuid": "GPU-b",
        "sharePercent": 60,
        "memoryBytes": 28 * 2**30,
    }


def test_node_view_counts_holders_of_other_namespaces() -> None:
    mine = [claim("ml", "mig", "w2", "d-1g-0")]
    theirs = [claim("web", "whole", "w2", "e")]
    rows = who_view(mine, CATALOGUE, node="w2", holders=mine + theirs)
    assert cells(rows, "CLAIM", "DEVICE") == [("mig", "d-1g-0"), (FREE, "d-1g-1")]  # e is not free
    assert who_view(mine, CATALOGUE) == who_view(mine, CATALOGUE, holders=theirs)  # no node: no free rows


def test_only_held_devices_are_read_without_free_or_node(mocker: MockerFixture) -> None:
    """At 1,000 nodes the held devices are a few of the cluster's: ``who`` reads only theirs."""
    read = mocker.spy(catalogue_module, "_facts")
    catalogue = Catalogue([node_slice("w1", ["a", "b", "c"]), node_slice("w2", ["d", "e"])], [])
    rows = who_view([claim("ml", "whole", "w1", "a"), claim("ml", "mig", "w2", "d-1g-0")], catalogue)
    assert cells(rows, "CLAIM", "TYPE") == [("whole", "Physical"), ("mig", "MIG 1g")]
    assert read.call_count == 2
    assert catalogue.facts("gpus/w1", "nowhere") is None
    who_view([], catalogue, free=True)  # what is free needs every device: 5 cards x 6 devices
    assert read.call_count == 30
