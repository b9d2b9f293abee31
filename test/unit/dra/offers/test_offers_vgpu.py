"""The offers of a card in vGPU mode: vGPU instances and the whole card, kept apart by counters."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kubernetes.client import V1DeviceTaint

from pkg.dra.allocator.quantity import parse_quantity
from pkg.dra.model.attributes import PCI_BUS_ID
from pkg.dra.model.card import Card, VgpuTypeSpec
from pkg.dra.model.limits import SliceLimitError
from pkg.dra.model.offers import Offer, build_offers, with_taints
from pkg.dra.model.slices import Layout, build_slices

D = "gpu.deckhouse.io/"
T4_TYPES = (
    VgpuTypeSpec("nvidia-232", "GRID T4-4Q", 4096, 4),
    VgpuTypeSpec("nvidia-233", "GRID T4-8Q", 8192, 2),
    VgpuTypeSpec("nvidia-234", "GRID T4-16Q", 16384, 1),
)
T4 = Card(
    physical_gpu="node-1-0-10de-1eb8",
    pci_address="0000:3b:00.0",
    product_name="Tesla T4",
    device="tesla-t4",
    memory_mib=15360,
    vgpu_types=T4_TYPES,
)


def _memory(offer: Offer) -> int:
    uses = offer.device.consumes_counters or []
    return parse_quantity(uses[0].counters["memory"].value).value()


def test_one_offer_per_instance_and_type_then_the_whole_card() -> None:
    offers = build_offers(T4).offers
    names = [o.name for o in offers]
    assert names[:4] == [f"gpu-0000-3b-00-0-vgpu-232-{i}" for i in range(4)]
    assert names[4:7] == [
        "gpu-0000-3b-00-0-vgpu-233-0",
        "gpu-0000-3b-00-0-vgpu-233-1",
        "gpu-0000-3b-00-0-vgpu-234-0",
    ]
    assert names[-1] == "gpu-0000-3b-00-0"  # the Physical offer: passthrough of the whole card
    assert len(offers) == 8  # no MIG, no TimeSlicing or MPS share: no CUDA on a vGPU host
    q4 = offers[0].device.attributes or {}
    assert q4[D + "deviceType"].string == "VGPU"
    assert q4[D + "sharingStrategy"].string == "Exclusive"
    assert (q4[D + "vgpuType"].string, q4[D + "mdevType"].string) == ("GRID T4-4Q", "nvidia-232")
    assert q4[D + "pciAddress"].string == "0000:3b:00.0"
    assert PCI_BUS_ID not in q4  # KubeVirt would take the vGPU for a passed-through card
    assert (offers[0].device.capacity or {})["memory"].value == "4Gi"
    assert offers[0].label == "GRID T4-4Q"


def test_counters_fill_the_card_with_one_type_and_keep_the_whole_card_out() -> None:
    built = build_offers(T4)
    card_memory = parse_quantity(built.counter_set.counters["memory"].value).value()
    by_type: dict[str, list[Offer]] = {}
    for offer in built.offers:
        if offer.vgpu is not None:
            by_type.setdefault(offer.vgpu.type_id, []).append(offer)
    for spec in T4_TYPES:
        instances = by_type[spec.type_id]
        assert len(instances) == spec.max_instances
        assert sum(_memory(o) for o in instances) <= card_memory  # all instances of a type fit
        assert _memory(instances[0]) * (spec.max_instances + 1) > card_memory  # one more does not
    physical = built.offers[-1]
    assert _memory(physical) == card_memory  # whole card and any vGPU never fit together


def test_a_card_without_vgpu_types_keeps_its_usual_offers() -> None:
    plain = Card(
        physical_gpu="n-0", pci_address="0000:3b:00.0", product_name="Tesla T4", device="t4", memory_mib=15360
    )
    assert [o.name for o in build_offers(plain).offers] == [
        "gpu-0000-3b-00-0-ts",
        "gpu-0000-3b-00-0-mps",
        "gpu-0000-3b-00-0",
    ]


def test_vgpu_offers_pass_the_slice_limits() -> None:
    for layout in Layout:
        slices = build_slices(node="node-1", cards=[build_offers(T4)], generation=1, layout=layout)
        assert sum(len(s.spec.devices or []) for s in slices) == 8


def test_a_cards_taints_reach_its_vgpu_offers() -> None:
    taint = V1DeviceTaint(key="gpu.deckhouse.io/unhealthy", value="XidError", effect="NoSchedule")
    tainted = with_taints(build_offers(T4), [taint])
    assert all(o.device.taints == [taint] for o in tainted.offers)
    assert sum(o.vgpu is not None for o in tainted.offers) == 7


def test_a_card_with_more_vgpu_instances_than_a_slice_holds_is_refused() -> None:
    many = replace(T4, vgpu_types=(VgpuTypeSpec("nvidia-1", "GRID X-1Q", 256, 64),))
    with pytest.raises(SliceLimitError, match="65 offers"):
        build_offers(many)


def test_every_offer_of_a_card_in_vgpu_mode_says_it_is_for_vms_only() -> None:
    """Classes tell VM cards from container cards by ``vmOnly``: a vGPU host's whole card too,
    and no other card carries the key (a class tests it with ``has``)."""
    for offer in build_offers(T4).offers:
        assert (offer.device.attributes or {})[D + "vmOnly"].bool is True, offer.name
    plain = replace(T4, vgpu_types=())
    for offer in build_offers(plain).offers:
        assert D + "vmOnly" not in (offer.device.attributes or {}), offer.name
