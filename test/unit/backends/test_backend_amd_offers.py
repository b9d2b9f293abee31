"""AMD partition offers: the counters keep modes apart whoever allocates, and the fixture nodes
publish valid slices through ``gpu-handler offers``' own code path."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest
from kubernetes.client import V1Device

from pkg.dra.model.card import Card, PartitionMode
from pkg.dra.model.limits import SliceLimitError
from pkg.dra.model.offers import build_offers
from pkg.dra.model.partition_offers import ModeWeights, PartitionCounters, fits, partition_counters
from pkg.gpuhandler.offline import OfflineRequest, compute_offers

SYSFS = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
MI300X_MODES = (("dpx", 2), ("qpx", 4), ("cpx", 8))
MI300A_MODES = (("tpx", 3), ("cpx", 6))


def _card(modes: tuple[tuple[str, int], ...], slots: int) -> Card:
    return Card(
        physical_gpu="n-0",
        pci_address="0000:05:00.0",
        product_name="card",
        device="card",
        memory_mib=192 * 1024,
        vendor="amd",
        partition_modes=tuple(PartitionMode(n, c, slots // c, 192 * 1024 // c) for n, c in modes),
        sharing=(),
    )


def _all_partitions(counters: PartitionCounters) -> list[tuple[ModeWeights, int]]:
    return [(w, i) for w in counters.weights for i in range(w.mode.count)]


@pytest.mark.parametrize(("modes", "slots"), [(MI300X_MODES, 8), (MI300A_MODES, 6), ((("cpx", 8),), 8)])
def test_every_partition_of_one_mode_fits_and_no_two_modes_mix(
    modes: tuple[tuple[str, int], ...], slots: int
) -> None:
    counters = partition_counters(_card(modes, slots))
    assert counters is not None
    for weights in counters.weights:
        assert fits(counters, [(weights, i) for i in range(weights.mode.count)])
    for a, b in itertools.combinations(_all_partitions(counters), 2):
        assert fits(counters, [a, b]) == (a[0].mode == b[0].mode), (
            a[0].mode.name,
            a[1],
            b[0].mode.name,
            b[1],
        )


def test_mi300x_weights_stay_small() -> None:
    counters = partition_counters(_card(MI300X_MODES, 8))
    assert counters is not None
    assert counters.capacity == 50
    assert [(w.mode.name, w.held, w.other) for w in counters.weights] == [
        ("dpx", 49, 1),
        ("qpx", 44, 2),
        ("cpx", 1, 7),
    ]


def test_modes_covering_different_dies_are_refused() -> None:
    bad = dataclasses.replace(
        _card((), 8), partition_modes=(PartitionMode("dpx", 2, 4, 1), PartitionMode("cpx", 6, 1, 1))
    )
    with pytest.raises(SliceLimitError, match="slot totals"):
        partition_counters(bad)


def test_the_whole_card_consumes_every_slot_and_no_share_is_offered() -> None:
    offers = build_offers(_card(MI300X_MODES, 8))
    physical = offers.offers[-1]
    assert physical.name == "gpu-0000-05-00-0"
    uses = (physical.device.consumes_counters or [])[0].counters
    assert {k: v.value for k, v in uses.items() if k.startswith("partition-slot-")} == {
        f"partition-slot-{i}": "50" for i in range(8)
    }
    assert [o.name for o in offers.offers[:2]] == ["gpu-0000-05-00-0-cpx-0", "gpu-0000-05-00-0-cpx-1"]
    assert len(offers.offers) == 8 + 4 + 2 + 1  # partitions of three modes and the whole card


def _devices(scenario: str) -> list[V1Device]:
    result = compute_offers(
        OfflineRequest(node_name="node-1", sysfs_root=SYSFS / scenario, backend="simulated-amd")
    )
    assert not result.failures
    assert not result.not_offered
    return [d for rs in result.slices for d in rs.spec.devices or []]


def _attr(device: V1Device, name: str) -> object:
    value = (device.attributes or {})[name]
    return value.string if value.string is not None else value.int


def _memory(device: V1Device) -> object:
    return (device.capacity or {})["memory"].value


def test_mi300x_node_offers_whole_cards_and_partitions_of_every_mode() -> None:
    devices = _devices("mi300x-x8")
    assert len(devices) == 8 * 15
    first = devices[0]
    assert _attr(first, "gpu.deckhouse.io/vendor") == "amd"
    assert _attr(first, "gpu.deckhouse.io/deviceType") == "Partition"
    assert _attr(first, "gpu.deckhouse.io/partitionMode") == "cpx"
    assert _attr(first, "gpu.deckhouse.io/partitionIndex") == 0
    assert _memory(first) == "24Gi"
    whole = [d for d in devices if _attr(d, "gpu.deckhouse.io/deviceType") == "Physical"]
    assert len(whole) == 8
    assert _attr(whole[0], "resource.kubernetes.io/pciBusID") == "0000:05:00.0"
    assert _memory(whole[0]) == "192Gi"


def test_mi210_node_offers_only_whole_cards() -> None:
    devices = _devices("mi210")
    assert [d.name for d in devices] == ["gpu-0000-63-00-0", "gpu-0000-e3-00-0"]
    assert _attr(devices[0], "gpu.deckhouse.io/productName") == "AMD Instinct MI210"
