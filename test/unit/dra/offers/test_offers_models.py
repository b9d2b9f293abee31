"""Offers of every MIG model in test/fixtures/facts/mig-profiles.yaml, and of an L4: names, counters,
consumption.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from kubernetes.client import V1Device
from testutil.k8s_fields import attributes_of, capacity_of, consumption_of, present
from testutil.unit.dra.offers.offer_checks import by_name, mig
from testutil.unit.dra.offers.offer_models import MIG_MODELS, MODELS, card

from api.gpu.v1alpha1 import DeviceType, SharingStrategy
from pkg.dra.allocator.quantity import parse_quantity
from pkg.dra.model.attributes import mib_quantity
from pkg.dra.model.offers import build_offers

BASE = "gpu-0000-02-00-0"
ENGINE_COUNTERS = ("multiprocessors", "copy-engines", "decoders", "encoders", "jpeg-engines", "ofa-engines")


def counters_of(offer_device: V1Device) -> dict[str, str]:
    uses = consumption_of(offer_device)
    assert len(uses) == 1
    assert uses[0].counter_set == BASE
    return {k: v.value for k, v in uses[0].counters.items()}


def test_a30_offers_by_name_smallest_first() -> None:
    offers = build_offers(card("A30"))
    names = [o.name.removeprefix(BASE) for o in offers.offers]
    assert names == [
        *(f"-mig-14-{s}" for s in (3, 2, 1, 0)),  # 1g.6gb
        *(f"-mig-21-{s}" for s in (3, 2, 1, 0)),  # 1g.6gb+me
        "-mig-5-2",
        "-mig-5-0",  # 2g.12gb
        "-mig-6-2",
        "-mig-6-0",  # 2g.12gb+me
        "-mig-0-0",  # 4g.24gb
        "-ts",
        "-mps",
        "",  # Physical last
    ]


@pytest.mark.parametrize("model", MIG_MODELS)
def test_one_mig_offer_per_profile_and_placement(model: str) -> None:
    offers = build_offers(card(model))
    rows = MODELS[model][5]
    expected = {f"{BASE}-mig-{r[1]}-{start}" for r in rows for start, _ in r[6]}
    assert {o.name for o in mig(offers)} == expected
    assert len(offers.offers) == len(expected) + 3


@pytest.mark.parametrize("model", MIG_MODELS)
def test_counter_set_holds_the_whole_card(model: str) -> None:
    offers = build_offers(card(model))
    _, memory, *_, rows = MODELS[model]
    full = max(rows, key=lambda r: r[3])  # the profile with every compute slice
    slices = max(s + n for r in rows for s, n in r[6])
    counters = {k: v.value for k, v in offers.counter_set.counters.items()}
    assert offers.counter_set.name == BASE
    assert counters["memory"] == mib_quantity(memory)
    assert parse_quantity(counters["memory"]).value() == memory * 2**20
    assert [k for k in counters if k.startswith("memory-slice-")] == [
        f"memory-slice-{i}" for i in range(slices)
    ]
    engines = dict(zip(ENGINE_COUNTERS, full[5], strict=True))
    assert {k: int(v) for k, v in counters.items() if k in ENGINE_COUNTERS} == {
        k: n for k, n in engines.items() if n > 0
    }
    assert all(counters[k] == "1" for k in counters if k.startswith("memory-slice-"))


@pytest.mark.parametrize("model", MIG_MODELS)
def test_mig_offer_consumes_its_memory_placement_slices_and_engines(model: str) -> None:
    offers = build_offers(card(model))
    rows = {r[1]: r for r in MODELS[model][5]}
    for offer in mig(offers):
        assert offer.profile is not None
        assert offer.placement is not None
        row = rows[offer.profile.profile_id]
        uses = counters_of(offer.device)
        start, size = offer.placement.start, offer.placement.size
        assert uses["memory"] == mib_quantity(row[2])
        assert sorted(k for k in uses if k.startswith("memory-slice-")) == sorted(
            f"memory-slice-{i}" for i in range(start, start + size)
        )
        engines = {k: n for k, n in zip(ENGINE_COUNTERS, row[5], strict=True) if n > 0}
        assert {k: int(v) for k, v in uses.items() if k in ENGINE_COUNTERS} == engines
        attrs = attributes_of(offer.device)
        assert attrs["gpu.deckhouse.io/deviceType"].string == "MIG"
        assert attrs["gpu.deckhouse.io/migProfile"].string == row[0]
        assert attrs["gpu.deckhouse.io/profileID"].int == row[1]
        assert attrs["gpu.deckhouse.io/placementStart"].int == start
        assert attrs["gpu.deckhouse.io/placementSize"].int == size
        assert capacity_of(offer.device)["memory"].value == mib_quantity(row[2])
        assert offer.device.allow_multiple_allocations is None


@pytest.mark.parametrize("model", [*MIG_MODELS, "L4"])
def test_whole_card_offers_consume_every_counter(model: str) -> None:
    offers = build_offers(card(model))
    everything = {k: v.value for k, v in offers.counter_set.counters.items()}
    names = by_name(offers)
    for suffix in ("", "-ts", "-mps"):
        assert counters_of(names[BASE + suffix].device) == everything


@pytest.mark.parametrize("model", MIG_MODELS)
def test_mig_offers_are_ordered_smallest_first_and_top_down(model: str) -> None:
    offers = mig(build_offers(card(model)))
    keys = [
        (
            present(o.placement, "placement").size,
            present(o.profile, "profile").slice_count,
            present(o.profile, "profile").memory_mib,
            present(o.profile, "profile").engines.media(),
            present(o.profile, "profile").profile_id,
        )
        for o in offers
    ]
    assert keys == sorted(keys)
    for a, b in itertools.pairwise(offers):
        if a.profile == b.profile:
            assert present(a.placement, "placement").start > present(b.placement, "placement").start


def test_physical_offer_attributes() -> None:
    physical = by_name(build_offers(card("H100", "0000:9a:00.0")))["gpu-0000-9a-00-0"]
    attrs = attributes_of(physical.device)
    assert physical.device_type is DeviceType.PHYSICAL
    assert physical.sharing is SharingStrategy.EXCLUSIVE
    assert {k: (a.string, a.int, a.version) for k, a in attrs.items()} == {
        "gpu.deckhouse.io/vendor": ("nvidia", None, None),
        "gpu.deckhouse.io/deviceType": ("Physical", None, None),
        "gpu.deckhouse.io/sharingStrategy": ("Exclusive", None, None),
        "gpu.deckhouse.io/device": ("h100-80gb-hbm3", None, None),
        "gpu.deckhouse.io/pciAddress": ("0000:9a:00.0", None, None),
        "gpu.deckhouse.io/uuid": ("GPU-00009a000-0000-0000-0000-000000000000", None, None),
        "gpu.deckhouse.io/productName": ("NVIDIA H100 80GB HBM3", None, None),
        "gpu.deckhouse.io/architecture": ("Hopper", None, None),
        "gpu.deckhouse.io/driverVersion": (None, None, "580.76.5"),
        "gpu.deckhouse.io/ccMajor": (None, 9, None),
        "gpu.deckhouse.io/ccMinor": (None, 0, None),
        "resource.kubernetes.io/pciBusID": ("0000:9a:00.0", None, None),
    }
    capacity = capacity_of(physical.device)
    assert capacity == {"memory": capacity["memory"]}
    assert capacity["memory"].value == "81559Mi"
    assert capacity["memory"].request_policy is None


def test_shared_offers_policies() -> None:
    names = by_name(build_offers(card("A30")))
    for suffix, strategy in (("-ts", "TimeSlicing"), ("-mps", "MPS")):
        device = names[BASE + suffix].device
        assert device.allow_multiple_allocations is True
        assert attributes_of(device)["gpu.deckhouse.io/sharingStrategy"].string == strategy
        assert attributes_of(device)["gpu.deckhouse.io/deviceType"].string == "Physical"
        assert "resource.kubernetes.io/pciBusID" not in attributes_of(device)
        share = capacity_of(device)["sharePercent"]
        assert share.value == "100"
        share_policy = present(share.request_policy, "sharePercent.requestPolicy")
        share_range = present(share_policy.valid_range, "sharePercent.requestPolicy.validRange")
        assert share_policy.default == "100"
        assert (share_range.min, share_range.max) == ("1", "100")
        assert share_range.step == "1"
        memory = capacity_of(device)["memory"]
        assert memory.value == "24Gi"
        memory_policy = present(memory.request_policy, "memory.requestPolicy")
        memory_range = present(memory_policy.valid_range, "memory.requestPolicy.validRange")
        assert memory_policy.default == "0"
        assert memory_range.min == "0"
        assert memory_range.max is None


def test_l4_has_no_mig_and_only_a_memory_counter() -> None:
    offers = build_offers(card("L4"))
    assert [o.name for o in offers.offers] == [f"{BASE}-ts", f"{BASE}-mps", BASE]
    assert {k: v.value for k, v in offers.counter_set.counters.items()} == {"memory": "23034Mi"}


def test_mig_not_allowed_keeps_counters_but_offers_no_mig() -> None:
    allowed, denied = build_offers(card("A100-80GB")), build_offers(card("A100-80GB", mig_allowed=False))
    assert mig(denied) == []
    assert [o.name for o in denied.offers] == [f"{BASE}-ts", f"{BASE}-mps", BASE]
    assert denied.counter_set == allowed.counter_set


def test_optional_identity_is_left_out_and_odd_versions_are_not_published() -> None:
    bare = card("A30", uuid=None, architecture=None, compute_capability=None, driver_version="r580-beta")
    attrs = attributes_of(by_name(build_offers(bare))[BASE].device)
    for name in ("uuid", "architecture", "ccMajor", "ccMinor", "driverVersion"):
        assert f"gpu.deckhouse.io/{name}" not in attrs
    short = attributes_of(by_name(build_offers(replace(bare, driver_version="565.77")))[BASE].device)
    assert short["gpu.deckhouse.io/driverVersion"].version == "565.77.0"


def test_long_product_name_is_clipped_to_64_bytes() -> None:
    offers = build_offers(card("A30", product_name="NVIDIA " + "Ä" * 60))
    value = present(attributes_of(by_name(offers)[BASE].device)["gpu.deckhouse.io/productName"].string)
    assert len(value.encode()) <= 64
    assert value.startswith("NVIDIA ÄÄ")


@pytest.mark.parametrize("mib", [0, 1, 1023, 1024, 5952, 23034, 24576, 81559, 143360, 2**20, 3 * 2**30])
def test_memory_quantities_are_written_in_canonical_form(mib: int) -> None:
    text = mib_quantity(mib)
    assert parse_quantity(text).value() == mib * 2**20
    assert str(parse_quantity(text)) == text
