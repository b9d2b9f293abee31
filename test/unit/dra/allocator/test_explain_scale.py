"""explain on many devices: every device still gets its verdict, with CEL run once per distinct
set of the values a selector reads, and the verdicts are those of a selector evaluated per device."""

from __future__ import annotations

from collections import Counter

import pytest
from alloc_builders import (
    DRIVER,
    a30_pool,
    allocated,
    claim,
    device_class,
    exact,
    explained,
    mig_class,
    with_allocation,
)
from kubernetes.client import ResourceV1ResourceClaim, V1DeviceClass, V1ResourceSlice

from pkg.dra.allocator import AllocationInputs, Allocator, CelEnvironment
from pkg.dra.allocator.cel_env import CompiledSelector, DeviceInput

# The same condition as mig_class("1g"), written so it has no footprint (it reads the domain map
# with "in"): evaluated per device, the reference the shared verdicts are compared with.
PER_DEVICE = (
    f'device.driver == "{DRIVER}" && "migProfile" in device.attributes["{DRIVER}"] && '
    f'device.attributes["{DRIVER}"].deviceType == "MIG" && device.attributes["{DRIVER}"].migProfile == "1g"'
)


def cluster(nodes: int) -> list[V1ResourceSlice]:
    return [rs for n in range(nodes) for rs in a30_pool(f"node-{n:03d}")]


def verdicts(
    slices: list[V1ResourceSlice], cls: V1DeviceClass, taken: list[ResourceV1ResourceClaim]
) -> list[tuple[str, str]]:
    c = claim("asked", exact("gpu", str(cls.metadata.name if cls.metadata else "")))
    trace = explained(c, slices=slices, classes=[cls], allocated_claims=taken)
    return [(v.device, v.reason) for r in trace.requests for v in r.devices]


def test_every_device_gets_the_verdict_it_gets_per_device(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = CelEnvironment.matches

    def counting(self: CelEnvironment, selector: CompiledSelector, device: DeviceInput) -> bool:
        calls.append(selector.expression)
        return original(self, selector, device)

    monkeypatch.setattr(CelEnvironment, "matches", counting)
    slices = cluster(60)  # 840 devices
    shared_class, per_device_class = mig_class("1g"), device_class("mig-1g", PER_DEVICE)
    # Some devices held by other claims, so more verdicts than "fits" and "selector false" appear.
    taken: list[ResourceV1ResourceClaim] = []
    for n in range(5):
        held = claim(f"t{n}", exact("gpu", "mig-1g", count=4))
        inputs = AllocationInputs.of(slices=slices, classes=[shared_class], allocated_claims=taken)
        taken.append(with_allocation(held, allocated(Allocator().attempt(held, inputs).outcome)))
    calls.clear()
    shared = verdicts(slices, shared_class, taken)
    shared_calls = Counter(calls)
    per_device = verdicts(slices, per_device_class, taken)
    devices = sum(len(rs.spec.devices or ()) for rs in slices)
    assert len(shared) == len(per_device) == devices
    assert shared == per_device  # same devices, same order, same reasons
    assert {reason for _, reason in shared} >= {"fits", "selector false", "already allocated"}
    expression = mig_class("1g").spec.selectors[0].cel.expression  # type: ignore[index,union-attr]
    kinds = {
        tuple(
            sorted(
                (k, str(v.string))
                for k, v in (d.attributes or {}).items()
                if k in ("deviceType", "migProfile")
            )
        )
        for rs in slices
        for d in rs.spec.devices or ()
    }
    assert shared_calls[expression] <= len(kinds) < devices / 100  # once per distinct kind, not per device
    assert Counter(calls)[PER_DEVICE] >= devices  # the reference really ran per device
