"""explain on many devices: every device still gets its verdict, with CEL run once per distinct
set of the values a selector reads, and the verdicts are those of a selector evaluated per device."""

from __future__ import annotations

from collections import Counter

import pytest
from kubernetes.client import ResourceV1ResourceClaim, V1DeviceClass, V1ResourceSlice
from testutil.unit.dra.allocator.alloc_builders import (
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

from pkg.dra.allocator import AllocationInputs, Allocator, explain
from pkg.dra.allocator.explain import diagnose
from pkg.dra.allocator.requests import ADMIN_ACCESS_LABEL

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


def test_every_device_gets_the_verdict_it_gets_per_device(cel_evaluations: list[str]) -> None:
    calls = cel_evaluations
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


# A claim selector after the class's: the vendor holds everywhere (devices the class rejects are
# rejected by the class's selector), or nowhere (the class's devices by the claim's).
VENDOR = f'device.attributes["{DRIVER}"].vendor == "nvidia"'
NOT_VENDOR = f'device.attributes["{DRIVER}"].vendor == "amd"'


@pytest.mark.parametrize(
    ("admin", "selectors"), [(None, ()), (True, ()), (None, (VENDOR,)), (None, (NOT_VENDOR,))]
)
def test_the_selector_pass_verdicts_are_diagnoses_own(admin: bool | None, selectors: tuple[str, ...]) -> None:
    """explain gives the devices the selector pass rejected their verdict without calling
    ``diagnose`` (docs/performance.md): each is still the verdict ``diagnose`` gives the device on
    its own, held devices ("already allocated" first) and admin access included."""
    slices = cluster(12)
    classes = [mig_class("1g"), mig_class("2g")]
    taken: list[ResourceV1ResourceClaim] = []
    for n, cls in enumerate(("mig-1g", "mig-2g", "mig-1g", "mig-2g")):
        held = claim(f"t{n}", exact("gpu", cls, count=2))
        inputs = AllocationInputs.of(slices=slices, classes=classes, allocated_claims=taken)
        taken.append(with_allocation(held, allocated(Allocator().attempt(held, inputs).outcome)))
    asked = claim("asked", exact("gpu", "mig-1g", admin=admin, selectors=selectors))
    allocator = Allocator()
    labels = {ADMIN_ACCESS_LABEL: "true"}
    inputs = AllocationInputs.of(
        slices=slices, classes=classes, allocated_claims=taken, namespace_labels=labels
    )
    trace = explain(allocator.attempt(asked, inputs), allocator=allocator)
    got = list(trace.requests[0].devices)
    ctx = allocator.context(asked, inputs)  # a fresh context: diagnose evaluates every selector itself
    alt = ctx.plans[0].alternatives[0]
    by_name = {str(c.id): c for c in ctx.usable_candidates()}
    assert sorted(v.device for v in got) == sorted(by_name)
    assert got == [diagnose(ctx, alt, by_name[v.device]) for v in got]
    reasons = Counter(v.reason for v in got)
    assert reasons["selector false"] > 0
    assert (reasons["fits"] > 0) is (NOT_VENDOR not in selectors)
    owners = {v.detail.split(":")[0] for v in got if v.reason == "selector false"}
    assert owners == (
        {"class mig-1g", "claim default/asked"} if NOT_VENDOR in selectors else {"class mig-1g"}
    )
    held_rejected = any(
        v.reason == "already allocated" and ctx.matcher.first_mismatch(alt, by_name[v.device]) is not None
        for v in got
    )
    assert held_rejected is (admin is None)  # a held device the selectors reject: held comes first
