"""API limits are checked before anything is written, and a PhysicalGPU becomes a card input."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kubernetes.client import (
    V1CapacityRequestPolicy,
    V1Counter,
    V1CounterSet,
    V1Device,
    V1DeviceAttribute,
    V1DeviceCapacity,
    V1DeviceCounterConsumption,
    V1DeviceTaint,
    V1ObjectMeta,
    V1ResourcePool,
    V1ResourceSlice,
    V1ResourceSliceSpec,
)
from testutil.unit.dra.offers.offer_models import card

from pkg.dra.model.card import Engines, MigProfileSpec, Placement
from pkg.dra.model.limits import SliceLimitError, validate_counter_set, validate_device, validate_slice
from pkg.dra.model.offers import build_offers, with_taints

POLICY = V1CapacityRequestPolicy(default="0")


def device(name: str = "gpu-0", **fields: object) -> V1Device:
    return V1Device(name=name, **fields)


def use(counter_set: str, **counters: str) -> V1DeviceCounterConsumption:
    return V1DeviceCounterConsumption(
        counter_set=counter_set,
        counters={k.replace("_", "-"): V1Counter(value=v) for k, v in counters.items()},
    )


def rs(
    name: str, *, devices: list[V1Device] | None = None, sets: list[V1CounterSet] | None = None
) -> V1ResourceSlice:
    return V1ResourceSlice(
        metadata=V1ObjectMeta(name=name),
        spec=V1ResourceSliceSpec(
            driver="gpu.deckhouse.io",
            node_name="node-a",
            pool=V1ResourcePool(name="gpus/node-a", generation=1, resource_slice_count=1),
            devices=devices,
            shared_counters=sets,
        ),
    )


@pytest.mark.parametrize(
    ("bad", "limit"),
    [
        (device("gpu-0000-02-00-0-mig-1g.6gb-0"), "DNS label"),
        (device("g" * 64), "DNS label"),
        (device(attributes={"nvidia.com/mig.profile": V1DeviceAttribute(string="x")}), "C identifier"),
        (device(attributes={"gpu.deckhouse.io/" + "a" * 33: V1DeviceAttribute(int=1)}), "C identifier"),
        (device(attributes={"Bad_Domain/x": V1DeviceAttribute(int=1)}), "domain"),
        (device(attributes={"gpu.deckhouse.io/x": V1DeviceAttribute(string="x" * 65)}), "64 bytes"),
        (device(attributes={"gpu.deckhouse.io/v": V1DeviceAttribute(version="580.76.05")}), "semantic"),
        (device(attributes={f"a{i}": V1DeviceAttribute(int=i) for i in range(33)}), "at most 32"),
        (device(capacity={"memory": V1DeviceCapacity(value="1", request_policy=POLICY)}), "allowMultiple"),
        (device(consumes_counters=[use(s, memory="1") for s in ("a", "b", "c")]), "at most 2"),
        (device(consumes_counters=[use("a", memory="1"), use("a", memory="1")]), "twice"),
        (device(consumes_counters=[use("a", memorySlice0="1")]), "DNS label"),
        (device(consumes_counters=[use("a", **{f"c{i}": "1" for i in range(33)})]), "at most 32"),
    ],
)  # fmt: skip
def test_device_violations_name_the_device_and_limit(bad: V1Device, limit: str) -> None:
    with pytest.raises(SliceLimitError, match=limit) as err:
        validate_device(bad)
    assert err.value.obj.startswith(f"device {bad.name}")


def test_counter_set_violations() -> None:
    with pytest.raises(SliceLimitError, match="DNS label"):
        validate_counter_set(
            V1CounterSet(name="pgpu-node-0000:02:00.0", counters={"memory": V1Counter(value="1")})
        )
    with pytest.raises(SliceLimitError, match="at most 32"):
        validate_counter_set(
            V1CounterSet(name="gpu-0", counters={f"c{i}": V1Counter(value="1") for i in range(33)})
        )


def test_slice_device_limits_depend_on_counters() -> None:
    plain = [device(f"d{i}") for i in range(128)]
    validate_slice(rs("s", devices=plain), inline=False)
    with pytest.raises(SliceLimitError, match="129 devices, at most 128"):
        validate_slice(rs("s", devices=[*plain, device("d128")]), inline=False)
    consuming = [device(f"d{i}", consumes_counters=[use("gpu-0", memory="1")]) for i in range(65)]
    with pytest.raises(SliceLimitError, match="65 devices, at most 64") as err:
        validate_slice(rs("s", devices=consuming), inline=False)
    assert err.value.obj == "ResourceSlice s"
    taint = V1DeviceTaint(key="gpu.deckhouse.io/unhealthy", value="Xid79", effect="NoExecute")
    tainted = [*[device(f"d{i}") for i in range(64)], device("d64", taints=[taint])]
    with pytest.raises(SliceLimitError, match="65 devices, at most 64"):  # taints count like counters
        validate_slice(rs("s", devices=tainted), inline=False)


def test_tainting_a_card_taints_every_offer_and_keeps_them_valid() -> None:
    offers = build_offers(card("A30"))
    taint = V1DeviceTaint(
        key="gpu.deckhouse.io/unhealthy", value="Xid48DoubleBitEccError", effect="NoExecute"
    )
    tainted = with_taints(offers, [taint])
    assert [o.name for o in tainted.offers] == [o.name for o in offers.offers]
    assert all(o.device.taints == [taint] for o in tainted.offers)
    assert all(not o.device.taints for o in offers.offers)  # the untainted offers are not changed
    assert with_taints(offers, []) is offers


def test_slice_counter_set_and_layout_limits() -> None:
    sets = [V1CounterSet(name=f"gpu-{i}", counters={"memory": V1Counter(value="1Gi")}) for i in range(9)]
    with pytest.raises(SliceLimitError, match="9 counter sets, at most 8"):
        validate_slice(rs("s", sets=sets), inline=False)
    both = rs("s", sets=sets[:1], devices=[device(consumes_counters=[use("gpu-0", memory="1Gi")])])
    with pytest.raises(SliceLimitError, match=r"rejected since 1\.35"):
        validate_slice(both, inline=False)
    validate_slice(both, inline=True)
    elsewhere = rs("s", sets=sets[:1], devices=[device(consumes_counters=[use("gpu-1", memory="1Gi")])])
    with pytest.raises(SliceLimitError, match="not in this slice"):
        validate_slice(elsewhere, inline=True)
    with pytest.raises(SliceLimitError, match="DNS subdomain"):
        validate_slice(rs("Gpu_Node"), inline=False)


def test_a_synthetic_card_that_breaks_a_limit_raises() -> None:
    huge = MigProfileSpec(1, "1g.1gb", 1024, 1, tuple(Placement(i, 1) for i in range(33)), Engines(1))
    with pytest.raises(SliceLimitError, match="counter set gpu-0000-02-00-0: 35 counters, at most 32"):
        build_offers(card("A30", mig_profiles=(huge,), memory_mib=40000))
    # Card totals without JPEG and OFA engines, although the +me profiles use them.
    with pytest.raises(SliceLimitError, match=r"21-3: consumes \['jpeg-engines', 'ofa-engines'\], absent"):
        build_offers(card("A30", engines=Engines(56, 4, 4)))
    with pytest.raises(SliceLimitError, match="must be a DNS label"):
        build_offers(replace(card("A30"), pci_address="0000:02:00.0" + "0" * 60))
